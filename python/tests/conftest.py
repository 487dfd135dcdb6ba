"""What the tests share: the `cpumgr` binary of the Rust build, and a manager on a private socket."""

import os
import pathlib
import subprocess
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def wait_for(what, ok, deadline=20.0):
    """Polls ``ok()`` until it is true; fails naming ``what`` after ``deadline`` seconds."""
    end = time.monotonic() + deadline
    while not ok():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture
def cpumgr_bin():
    """The `cpumgr` binary: $CPUMGR_BIN, else the workspace's debug build."""
    path = pathlib.Path(os.environ.get("CPUMGR_BIN", REPO / "target" / "debug" / "cpumgr"))
    assert path.is_file(), f"{path} is missing: build the workspace first (scripts/test-all does)"
    return path


@pytest.fixture
def daemon(cpumgr_bin, tmp_path):
    """`cpumgr daemon` under equipartition on CPUs 0-1, on a socket of its own; yields the
    environment that points programs at it."""
    socket = tmp_path / "cpumgr.sock"
    env = dict(os.environ, CPUMGR_SOCKET=str(socket))
    proc = subprocess.Popen(
        [str(cpumgr_bin), "daemon", "--policy", "equipartition", "--quantum", "50ms", "--cpus", "0-1"],
        env=env, stderr=subprocess.DEVNULL)
    try:
        wait_for("the manager's socket", socket.exists)
        yield env
    finally:
        proc.terminate()
        proc.wait(timeout=20)
