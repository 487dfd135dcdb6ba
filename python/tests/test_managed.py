"""A numpy matmul loop in two processes under a real manager (equipartition on 2 CPUs): each runs
every BLAS call with the one CPU it is allocated, as threadpoolctl reports."""

import json
import subprocess
import sys

from conftest import wait_for

WORKER = r"""
import sys
import numpy as np
from threadpoolctl import threadpool_info
import cpumgr

cpumgr.init(name=sys.argv[1], max=2)
a = np.random.default_rng(0).random((200, 200))
while True:
    with cpumgr.threads() as t:
        blas = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
        a = a @ a
        a /= np.abs(a).max()
    alloc = cpumgr.allocation()
    print(f"section team={t.count} blas={min(blas)}-{max(blas)} alloc={alloc[0] if alloc else 0}", flush=True)
"""


def sections(path):
    out = []
    # Whole lines only: the worker may be writing the last one.
    for line in path.read_text().split("\n")[:-1]:
        if line.startswith("section "):
            out.append(dict(f.split("=", 1) for f in line.split()[1:]))
    return out


def test_two_numpy_processes_each_run_blas_with_their_one_cpu(daemon, cpumgr_bin, tmp_path):
    logs = {name: tmp_path / f"{name}.out" for name in ("a", "b")}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, name], env=daemon,
                              stdout=log.open("w"), stderr=subprocess.DEVNULL)
             for name, log in logs.items()]
    try:
        for name, log in logs.items():
            wait_for(f"{name} to run sections of 1 thread on 1 CPU", lambda: (
                len(s := sections(log)) > 3
                and all(x == {"team": "1", "blas": "1-1", "alloc": "1"} for x in s[-3:])))
        def counts():
            status = json.loads(subprocess.run([str(cpumgr_bin), "status", "--json"], env=daemon,
                                               capture_output=True, check=True, text=True).stdout)
            return {p["name"]: p["count"] for p in status["programs"]}
        # One CPU each, equipartition's split. Not at every instant: a quantum in which a
        # program's idle BLAS threads spin makes the team guard give it both CPUs and stop the
        # other (docs/LIVE.md), which one status read may catch.
        wait_for("one CPU each", lambda: counts() == {"a": 1, "b": 1})
        for log in logs.values():
            # BLAS always ran with the team the section was given.
            assert all(x["blas"] == f"{x['team']}-{x['team']}" for x in sections(log))
    finally:
        for p in procs:
            p.kill()
            p.wait()


HOLDER = r"""
import sys, time
import cpumgr

c = cpumgr.init(name="holder", max=2)
print("registered", c.mode, flush=True)
sys.stdin.readline()
cpumgr.finalize()
print("finalized", c.mode, flush=True)
sys.stdin.readline()
"""


def test_finalize_unregisters_even_while_the_program_holds_its_client(daemon, cpumgr_bin):
    def names():
        out = subprocess.run([str(cpumgr_bin), "status", "--json"], env=daemon, capture_output=True, check=True, text=True).stdout
        return [p["name"] for p in json.loads(out)["programs"]]

    p = subprocess.Popen([sys.executable, "-c", HOLDER], env=daemon, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().split() == ["registered", "managed"]
        wait_for("the program in status", lambda: names() == ["holder"])
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.stdout.readline().split() == ["finalized", "unmanaged"], "the held client reads as unmanaged"
        wait_for("the program gone from status while it still runs", lambda: names() == [])
        assert p.poll() is None
    finally:
        p.kill()
        p.wait()


REQUESTER = r"""
import sys
import time
import cpumgr

cpumgr.init(name=sys.argv[1], max=2)
cpumgr.request(**{sys.argv[1]: 1})
time.sleep(60)
"""


def test_a_request_named_wanted_or_now_reaches_the_manager(daemon, cpumgr_bin):
    procs = [subprocess.Popen([sys.executable, "-c", REQUESTER, key], env=daemon,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for key in ("wanted", "now")]
    try:
        def requests():
            status = json.loads(subprocess.run([str(cpumgr_bin), "status", "--json"], env=daemon,
                                               capture_output=True, check=True, text=True).stdout)
            return {p["name"]: p["request"] for p in status["programs"]}
        wait_for("both programs to ask for 1 CPU", lambda: requests() == {"wanted": 1, "now": 1})
    finally:
        for p in procs:
            p.kill()
            p.wait()
