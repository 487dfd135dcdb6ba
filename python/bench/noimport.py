"""Benchmark: unmodified numpy programs on a shared machine, with and without cpumgr (prints
figures, asserts nothing).

Two numpy scripts (400x400 products in a loop, OpenBLAS's own thread count) started 20 ms apart
(`--gap` seconds), and one beside the OpenMP stencil kernel, under: plain Linux (every pool as wide as the machine),
static halves (each pinned to one CPU, one thread) and cpumgr (each under `cpumgr run`, the
hook sizing the BLAS pool, the adapter the OpenMP teams); and each script alone on both CPUs.
The makespan is from the first start to the last end.

    target/py/bin/python python/bench/noimport.py [--iters 600] [--gap 0.02] [--cpumgr target/debug/cpumgr]

Needs numpy and threadpoolctl in the interpreter that runs it, gcc with OpenMP for the kernel,
and 2 CPUs (0 and 1).
"""

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]

# The numpy program: it never imports cpumgr; it prints how many products ran at each pool size.
NUMPY = r"""
import collections, sys
import numpy as np
from threadpoolctl import ThreadpoolController
blas = ThreadpoolController().select(user_api="blas")
a = np.random.default_rng(0).random((400, 400))
b, c = a.copy(), np.empty_like(a)
sizes = collections.Counter()
for _ in range(int(sys.argv[1])):
    np.dot(a, b, out=c)
    sizes[blas.info()[0]["num_threads"]] += 1
print("pool sizes (threads: products):", dict(sorted(sizes.items())), flush=True)
"""


def run_together(commands, env, gap=0.02):
    """Starts every command `gap` seconds after the one before; the makespan, each one's time and
    its output."""
    t0 = time.monotonic()
    procs = []
    for cmd, extra in commands:
        procs.append((subprocess.Popen(cmd, env={**env, **extra}, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                       text=True), time.monotonic()))
        time.sleep(gap)
    times, outs = [], []
    pending = list(range(len(procs)))
    ends = [None] * len(procs)
    while pending:
        for i in list(pending):
            if procs[i][0].poll() is not None:
                ends[i] = time.monotonic()
                pending.remove(i)
        time.sleep(0.005)
    for (p, start), end in zip(procs, ends):
        out = p.stdout.read().strip()
        if p.returncode != 0:
            sys.exit(f"{p.args} failed with status {p.returncode}")
        times.append(end - start)
        outs.append(out)
    return max(ends) - t0, times, outs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=600, help="products per numpy program")
    ap.add_argument("--cpumgr", default=os.environ.get("CPUMGR_BIN", str(REPO / "target/debug/cpumgr")))
    ap.add_argument("--stencil", default="-n 512 -iters 3000 -regions 300", help="the stencil's options")
    ap.add_argument("--gap", type=float, default=0.02, help="seconds between the two programs' starts")
    args = ap.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="cpumgr-noimport-"))
    script = tmp / "numpy_loop.py"
    script.write_text(NUMPY)
    subprocess.run(["make", "-s", "-C", str(REPO / "kernels"), f"OUT={tmp}/k", f"{tmp}/k/stencil"], check=True)
    stencil = [str(tmp / "k" / "stencil"), *args.stencil.split()]
    numpy = [sys.executable, str(script), str(args.iters)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    env["CPUMGR_SOCKET"] = str(tmp / "cpumgr.sock")
    managed = [args.cpumgr, "run", "--cpus", "0-1", "--policy", "equipartition", "--"]
    one = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    pin = lambda cpu, cmd: (["taskset", "-c", str(cpu), *cmd], one)
    setups = {
        "two numpy": (numpy, numpy),
        "numpy + OpenMP stencil": (numpy, stencil),
    }
    print(f"load average before: {os.getloadavg()}; {args.iters} products of 400x400 per numpy program; "
          f"stencil {args.stencil}")
    for name, (first, second) in setups.items():
        alone = [run_together([(cmd, {})], env)[0] for cmd in (first, second)]
        rows = {
            "plain Linux": [(first, {}), (second, {})],
            "static halves": [pin(0, first), pin(1, second)],
            "cpumgr run": [(managed + first, {}), (managed + second, {})],
        }
        print(f"\n{name}: alone on both CPUs {alone[0]:.2f} s and {alone[1]:.2f} s")
        for row, commands in rows.items():
            makespan, times, outs = run_together(commands, env, args.gap)
            pools = "; ".join(o.splitlines()[-1] for o in outs if o.startswith("pool sizes"))
            print(f"  {row:14} makespan {makespan:6.2f} s  (each {', '.join(f'{t:.2f}' for t in times)} s)  {pools}")
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
