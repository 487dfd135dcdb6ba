"""Python programs that never import cpumgr, run by `cpumgr run`: the hook it puts on their path
(python/hook) sizes their BLAS pools (and PyTorch's) to the allocation, on the main thread
between calls, in any interpreter."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, wait_for

MANAGER = ["--cpus", "0-1", "--policy", "equipartition", "--quantum", "50ms"]

# A loop of small matrix products that prints its pool size after each, until `stop` exists.
LOOP = r"""
import os, sys
stop = sys.argv[1]
if sys.argv[2] == "torch":
    import torch
    a = torch.rand(200, 200, dtype=torch.float64)
    size = torch.get_num_threads
else:
    import numpy as np
    from threadpoolctl import threadpool_info
    a = np.random.default_rng(0).random((200, 200))
    size = lambda: min(p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas")
while not os.path.exists(stop):
    a = a @ a
    a /= abs(a).max()
    print(f"size={size()} cpumgr={'cpumgr' in sys.modules}", flush=True)
"""

# Long products on the main thread, a thread beside them sampling the pool size and the CPUs the
# manager allows while each runs: prints `call N SIZE SIZE:CPUS ...` per call (SIZE read just
# before it: a resize may still come between that read and the product).
LONG_CALLS = r"""
import os, sys, threading, time
import numpy as np
from threadpoolctl import ThreadpoolController
stop = sys.argv[1]
pools = ThreadpoolController().select(user_api="blas")
size = lambda: min(p["num_threads"] for p in pools.info())
call = None
samples = []
def sample():
    while True:
        c = call
        if c is not None:
            samples.append((c, size(), len(os.sched_getaffinity(0))))
        time.sleep(0.002)
threading.Thread(target=sample, daemon=True).start()
a = np.random.default_rng(0).random((900, 900))
n = 0
while not os.path.exists(stop):
    start = size()
    call = n
    b = a @ a
    call = None
    seen = " ".join(f"{s}:{c}" for k, s, c in samples if k == n)
    print(f"call {n} {start} {seen}", flush=True)
    n += 1
"""


def needs(what, ok):
    """False, after saying so on stderr, when the test cannot run here."""
    if not ok:
        print(f"skipped: {os.environ.get('PYTEST_CURRENT_TEST', '?').split(' ')[0]}: needs {what}", file=sys.stderr)
    return ok


def lines(path, prefix):
    """The whole lines of `path` that start with `prefix` (the writer may be in the last one)."""
    return [line for line in path.read_text().split("\n")[:-1] if line.startswith(prefix)]


def plain_env(tmp_path):
    """The environment of a user who never heard of the hook: no PYTHONPATH, a private socket."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CPUMGR_CAPI_LIB", "CPUMGR_PYTHON_HOOK")}
    env["CPUMGR_SOCKET"] = str(tmp_path / "cpumgr.sock")
    return env


class Managed:
    """A Python script under `cpumgr run` (its own manager on CPUs 0-1), and a spinning second
    program that arrives and leaves beside it."""

    def __init__(self, cpumgr_bin, tmp_path, python, script, *args, env=None):
        self.bin, self.tmp, self.stop = cpumgr_bin, tmp_path, tmp_path / "stop"
        self.env = env or plain_env(tmp_path)
        self.out, self.err = tmp_path / "out", tmp_path / "err"
        (tmp_path / "script.py").write_text(script)
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen(
                [str(cpumgr_bin), "run", *MANAGER, "--", python, str(tmp_path / "script.py"), str(self.stop), *args],
                env=self.env, stdout=out, stderr=err)
        self.other = None

    def arrive(self):
        self.other = subprocess.Popen([str(self.bin), "run", "--", "sh", "-c", "while :; do :; done"], env=self.env)

    def leave(self):
        self.other.terminate()
        self.other.wait(timeout=20)

    def finish(self):
        """Ends the script; its stderr (and the manager's)."""
        self.stop.touch()
        self.proc.wait(timeout=30)
        err = self.err.read_text()
        assert self.proc.returncode == 0, err
        return err

    def kill(self):
        """Ends whatever still runs: `cpumgr run` passes SIGTERM on to its program's group (a
        SIGKILL would leave the program running without its supervisor)."""
        self.stop.touch()
        for p in (self.other, self.proc):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_a_script_that_never_imports_cpumgr_has_its_pool_follow_the_allocation(cpumgr_bin, tmp_path, library):
    python = str(REPO / "target" / "py" / "bin" / "python")
    has = subprocess.run([python, "-c", f"import {library}"], capture_output=True).returncode == 0
    if not needs(f"{library} in target/py", has):
        return
    run = Managed(cpumgr_bin, tmp_path, python, LOOP, library)
    try:
        sizes = lambda: [line.split()[0] for line in lines(run.out, "size=")]
        wait_for("a few products alone on both CPUs", lambda: sizes().count("size=2") >= 3)
        run.arrive()
        wait_for("the pool shrunk to the one CPU left", lambda: "size=1" in sizes())
        run.leave()
        wait_for("the pool grown back", lambda: "size=2" in sizes()[sizes().index("size=1"):])
        run.finish()
    finally:
        run.kill()
    seen = sizes()
    assert set(seen) == {"size=1", "size=2"}, seen
    assert all(line.endswith("cpumgr=False") for line in lines(run.out, "size=")), "the script imported cpumgr"


def test_a_pool_is_never_resized_while_a_call_runs(cpumgr_bin, tmp_path):
    python = str(REPO / "target" / "py" / "bin" / "python")
    run = Managed(cpumgr_bin, tmp_path, python, LONG_CALLS)
    calls = lambda: [line.split()[2:] for line in lines(run.out, "call ")]
    try:
        wait_for("a product alone on both CPUs", lambda: any(c[0] == "2" for c in calls()))
        # The test means something only once the allocation changed while a product ran: the
        # products take nearly all the time, so one round or two is enough.
        for _ in range(5):
            run.arrive()
            since = len(calls())
            wait_for("a product with one thread", lambda: any(c[0] == "1" for c in calls()[since:]))
            run.leave()
            since = len(calls())
            wait_for("products with two threads again", lambda: [c[0] for c in calls()[since:]][-2:] == ["2", "2"])
            if changed_under_a_call(calls()):
                break
        run.finish()
    finally:
        run.kill()
    assert changed_under_a_call(calls()) > 0, calls()


def changed_under_a_call(calls):
    """How many calls the allocation changed under; asserts that no pool was resized under one."""
    changed = 0
    for _, *seen in calls:
        sizes = [s.split(":")[0] for s in seen]
        assert len(set(sizes)) <= 1, f"a pool resized while its call ran: {seen}"
        changed += any(s.split(":")[1] != sizes[0] for s in seen)
    return changed


def test_an_interpreter_without_threadpoolctl_or_cpumgr_says_once_that_pools_keep_their_sizes(cpumgr_bin, tmp_path):
    python = shutil.which("python3", path="/usr/bin")
    bare = python and subprocess.run([python, "-c", "import threadpoolctl"], capture_output=True).returncode != 0
    if not needs("/usr/bin/python3 without threadpoolctl", bare):
        return
    blas = sorted((REPO / "target" / "py").glob("lib/python3*/site-packages/numpy.libs/*openblas*.so"))
    if not needs("numpy's OpenBLAS in target/py", blas):
        return
    script = f"""
import ctypes, sys
ctypes.CDLL({str(blas[0])!r})
import decimal, fractions
print("ran", "cpumgr" in sys.modules, flush=True)
"""
    run = Managed(cpumgr_bin, tmp_path, python, script)
    try:
        err = run.finish()
    finally:
        run.kill()
    assert lines(run.out, "ran") == ["ran False"]
    said = [line for line in err.splitlines() if "threadpoolctl is not installed" in line]
    assert len(said) == 1 and "openblas" in said[0], err


def test_the_users_sitecustomize_still_runs_and_pythons_the_script_starts_are_left_alone(cpumgr_bin, tmp_path):
    python = str(REPO / "target" / "py" / "bin" / "python")
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import os\nos.environ['OWN_SITECUSTOMIZE'] = 'ran'\n")
    env = plain_env(tmp_path)
    env["PYTHONPATH"] = str(own)
    script = r"""
import os, subprocess, sys
import cpumgr_follow
print("own", os.environ.get("OWN_SITECUSTOMIZE"), flush=True)
print("follows", cpumgr_follow._follower is not None, flush=True)
child = "import cpumgr_follow; print('child follows', cpumgr_follow._follower is not None, flush=True)"
subprocess.run([sys.executable, "-c", child], check=True)
"""
    run = Managed(cpumgr_bin, tmp_path, python, script, env=env)
    try:
        run.finish()
    finally:
        run.kill()
    assert lines(run.out, "own") == ["own ran"]
    assert lines(run.out, "follows") == ["follows True"]
    assert lines(run.out, "child") == ["child follows False"]


def test_a_program_that_handles_the_hooks_signal_keeps_it_and_is_told_once(cpumgr_bin, tmp_path):
    python = str(REPO / "target" / "py" / "bin" / "python")
    script = r"""
import os, signal, sys, time
signal.signal(signal.SIGRTMAX - 1, lambda *_: print("own handler ran", flush=True))
print("ready", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
"""
    run = Managed(cpumgr_bin, tmp_path, python, script)
    said = lambda: [line for line in run.err.read_text().splitlines() if "handles signal" in line]
    try:
        wait_for("the script's start", lambda: lines(run.out, "ready"))
        run.arrive()
        wait_for("the hook saying it stops", said)
        run.leave()
        run.finish()
    finally:
        run.kill()
    assert len(said()) == 1, said()
    assert lines(run.out, "own handler") == [], "the hook called the program's own handler"
