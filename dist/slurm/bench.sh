#!/bin/bash
# Two srun jobs of a barrier-heavy OpenMP program (the test kernels' one-region stencil), then of
# an MPI halo exchange (when mpicc is here), sharing a node's CPUs through real Slurm: one after
# the other, at once under Slurm's plain oversubscription, and at once with --cpumgr. Prints each
# makespan and the load average.
#
# Needs root, Slurm (slurm-wlm, munge, libslurm-dev), gcc, and a built workspace:
#   cargo build --release -p cpumgr -p cpumgr-omp && dist/slurm/bench.sh [target/release]
# Starts its own one-node cluster (munged, slurmctld, slurmd) and manager in a temporary
# directory, as crates/cpumgr/tests/slurm.rs does, and ends them on exit.
# KERNEL_ARGS and MPI_ARGS override the kernels' arguments; REPEAT the runs of each configuration.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$(cd "${1:-$ROOT/target/release}" && pwd)
REPEAT=${REPEAT:-1}
[ "$(id -u)" = 0 ] || { echo "bench.sh: needs root (slurmd runs the jobs as root here)" >&2; exit 2; }
for f in "$BIN/cpumgr" "$BIN/libcpumgr_omp.so"; do
  [ -e "$f" ] || { echo "bench.sh: $f missing: cargo build --release -p cpumgr -p cpumgr-omp" >&2; exit 2; }
done

D=$(mktemp -d /tmp/cpumgr-slurm-bench.XXXXXX)
PIDS=()
cleanup() {
  SLURM_CONF=$D/slurm.conf scancel --user=root 2>/dev/null || true
  sleep 1
  for ((i=${#PIDS[@]}-1; i>=0; i--)); do kill "${PIDS[i]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$D"
}
trap cleanup EXIT

make -s -C "$ROOT/dist/slurm" OUT="$D"
make -s -C "$ROOT/kernels" OUT="$D/kernels" "$D/kernels/stencil"
CPUS=$(nproc)
# One region around the whole time loop, ~45 us of work per thread between barriers.
read -r -a KARGS <<< "${KERNEL_ARGS:--n 256 -rows $((CPUS * 256)) -iters 20000 -regions 1}"

head -c 1024 /dev/urandom > "$D/munge.key"; chmod 400 "$D/munge.key"
munged -F --force --key-file="$D/munge.key" --socket="$D/munge.sock" --pid-file="$D/munged.pid" \
  --log-file="$D/munged.log" --seed-file="$D/munge.seed" > "$D/munged.out" 2>&1 & PIDS+=($!)
for _ in $(seq 100); do [ -S "$D/munge.sock" ] && break; sleep 0.05; done
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
NODE=$(slurmd -C | head -1)
HOST=$(echo "$NODE" | sed 's/^NodeName=\([^ ]*\).*/\1/')
mkdir -p "$D/state" "$D/spool"
cat > "$D/slurm.conf" <<EOF
ClusterName=cpumgrbench
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(port)
SlurmdPort=$(port)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge.sock
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
PlugStackConfig=$D/plugstack.conf
$NODE NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=shared Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:2
EOF
echo "required $D/cpumgr_spank.so socket=$D/cpumgr.sock cpumgr=$BIN/cpumgr omp_lib=$BIN/libcpumgr_omp.so on_missing=fail" > "$D/plugstack.conf"
export SLURM_CONF=$D/slurm.conf
slurmctld -D -i > "$D/slurmctld.out" 2>&1 & PIDS+=($!)
slurmd -D > "$D/slurmd.out" 2>&1 & PIDS+=($!)
"$BIN/cpumgr" daemon --backend affinity --socket "$D/cpumgr.sock" 2> "$D/cpumgr.log" & PIDS+=($!)
for _ in $(seq 200); do [ "$(sinfo -h -o %T)" = idle ] && break; sleep 0.1; done
[ "$(sinfo -h -o %T)" = idle ] || { echo "bench.sh: the node did not come up" >&2; tail "$D"/*.log >&2; exit 1; }

now() { date +%s.%N; }
# Makespan of two `srun SRUN_ARGS...` jobs: one after the other (sequential; sequential-cpumgr,
# each with --cpumgr: alone under the manager, with the adapter), at once (plain), at once with
# --cpumgr (cpumgr).
run() {
  local how=$1 t0; shift; t0=$(now)
  case $how in
    sequential) srun -Q "$@" > /dev/null; srun -Q "$@" > /dev/null ;;
    sequential-cpumgr) srun -Q --cpumgr "$@" > /dev/null; srun -Q --cpumgr "$@" > /dev/null ;;
    plain) srun -Q "$@" > /dev/null & srun -Q "$@" > /dev/null; wait ;;
    cpumgr) srun -Q --cpumgr "$@" > /dev/null & srun -Q --cpumgr "$@" > /dev/null; wait ;;
  esac
  echo "$(now) - $t0" | bc
}
# Prints the three makespans (the fastest of REPEAT) for `srun SRUN_ARGS...` and their ratios.
bench() {
  echo "== two srun $*"
  local -A best=()
  for how in sequential sequential-cpumgr plain cpumgr; do
    for ((r=0; r<REPEAT; r++)); do
      t=$(run "$how" "$@")
      printf '%-18s %8.2f s\n' "$how" "$t"
      if [ -z "${best[$how]:-}" ] || (( $(echo "$t < ${best[$how]}" | bc) )); then best[$how]=$t; fi
    done
  done
  printf 'plain / cpumgr: %.2fx   cpumgr / sequential: %.2fx   cpumgr / sequential-cpumgr: %.2fx\n' \
    "$(echo "${best[plain]} / ${best[cpumgr]}" | bc -l)" "$(echo "${best[cpumgr]} / ${best[sequential]}" | bc -l)" \
    "$(echo "${best[cpumgr]} / ${best[sequential-cpumgr]}" | bc -l)"
}
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $CPUS CPUs; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
# OpenMP: one region around the time loop, a barrier per sweep (one task: malleable).
bench -c "$CPUS" "$D/kernels/stencil" "${KARGS[@]}"
# MPI: CPUS ranks through Slurm's PMI2 (several tasks: a rigid team), when mpicc is here.
if make -s -C "$ROOT/kernels" OUT="$D/kernels" mpi 2> /dev/null; then
  read -r -a MARGS <<< "${MPI_ARGS:--n $((CPUS * 32768)) -steps 10000}"
  bench --mpi=pmi2 -n "$CPUS" "$D/kernels/halo" "${MARGS[@]}"
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
