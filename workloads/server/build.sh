#!/bin/sh
# Builds what the shared-server workload (workloads/server.toml) runs besides the project's
# kernels: its oneTBB program, target/server/tbbwork (crates/cpumgr-tcm/tests/programs/work.cpp,
# one parallel_for over compute-bound chunks), against oneTBB at $CPUMGR_TBB_PREFIX or
# target/tbbenv. Run from the repository's root. Without oneTBB or g++ it says so and exits 0:
# the workload leaves the TBB job out (with a note).
#
#   python3 -m venv target/tbbenv && target/tbbenv/bin/pip install tbb tbb-devel   # oneTBB
#   python3 -m venv target/py && target/py/bin/pip install numpy threadpoolctl      # numpy job
#   sh workloads/server/build.sh
set -eu
prefix=${CPUMGR_TBB_PREFIX:-target/tbbenv}
out=target/server
mkdir -p "$out"
if ! command -v g++ >/dev/null 2>&1; then
    echo "build.sh: no g++: the TBB job is left out" >&2
    exit 0
fi
if [ ! -f "$prefix/include/oneapi/tbb.h" ] || [ ! -e "$prefix/lib/libtbb.so.12" ]; then
    echo "build.sh: no oneTBB at $prefix (set CPUMGR_TBB_PREFIX, or install it as the header says): the TBB job is left out" >&2
    exit 0
fi
lib=$(cd "$prefix/lib" && pwd)
g++ -O2 -std=c++17 -pthread crates/cpumgr-tcm/tests/programs/work.cpp -I"$prefix/include" -L"$lib" \
    -Wl,-rpath,"$lib" -ltbb -o "$out/tbbwork"
echo "built $out/tbbwork"
