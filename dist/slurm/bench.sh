#!/bin/bash
# Two srun jobs of a barrier-heavy OpenMP program (the test kernels' one-region stencil) sharing
# a node's CPUs, through real Slurm: one after the other, at once under Slurm's plain
# oversubscription, and at once with --cpumgr. Prints each makespan and the load average.
#
# Needs root, Slurm (slurm-wlm, munge, libslurm-dev), gcc, and a built workspace:
#   cargo build --release -p cpumgr -p cpumgr-omp && dist/slurm/bench.sh [target/release]
# Starts its own one-node cluster (munged, slurmctld, slurmd) and manager in a temporary
# directory, as crates/cpumgr/tests/slurm.rs does, and ends them on exit.
# KERNEL_ARGS overrides the stencil's arguments; REPEAT the runs of each configuration.
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
  --log-file="$D/munged.log" --seed-file="$D/munge.seed" & PIDS+=($!)
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
slurmctld -D -i & PIDS+=($!)
slurmd -D & PIDS+=($!)
"$BIN/cpumgr" daemon --backend affinity --socket "$D/cpumgr.sock" 2> "$D/cpumgr.log" & PIDS+=($!)
for _ in $(seq 200); do [ "$(sinfo -h -o %T)" = idle ] && break; sleep 0.1; done
[ "$(sinfo -h -o %T)" = idle ] || { echo "bench.sh: the node did not come up" >&2; tail "$D"/*.log >&2; exit 1; }

JOB=("$D/kernels/stencil" "${KARGS[@]}")
now() { date +%s.%N; }
# Makespan of: sequential, plain (both at once), cpumgr (both at once with --cpumgr).
run() {
  local how=$1 t0; t0=$(now)
  case $how in
    sequential) srun -c "$CPUS" "${JOB[@]}" > /dev/null; srun -c "$CPUS" "${JOB[@]}" > /dev/null ;;
    plain) srun -c "$CPUS" "${JOB[@]}" > /dev/null & srun -c "$CPUS" "${JOB[@]}" > /dev/null; wait %1 ;;
    cpumgr) srun --cpumgr -c "$CPUS" "${JOB[@]}" > /dev/null & srun --cpumgr -c "$CPUS" "${JOB[@]}" > /dev/null; wait %1 ;;
  esac
  echo "$(now) - $t0" | bc
}
echo "two srun -c $CPUS jobs of: stencil ${KARGS[*]} (OpenMP, one region, barrier per sweep)"
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $CPUS CPUs; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A BEST
for how in sequential plain cpumgr; do
  for ((r=0; r<REPEAT; r++)); do
    t=$(run "$how")
    printf '%-11s %8.2f s\n' "$how" "$t"
    if [ -z "${BEST[$how]:-}" ] || (( $(echo "$t < ${BEST[$how]}" | bc) )); then BEST[$how]=$t; fi
  done
done
printf 'plain / cpumgr: %.2fx   cpumgr / sequential: %.2fx\n' \
  "$(echo "${BEST[plain]} / ${BEST[cpumgr]}" | bc -l)" "$(echo "${BEST[cpumgr]} / ${BEST[sequential]}" | bc -l)"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
