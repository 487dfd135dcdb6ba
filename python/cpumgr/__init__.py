"""cpumgr for Python programs: follow the CPU manager's allocation.

- ``init()`` connects the process to the manager (``CPUMGR_SOCKET`` or the default socket); without
  one it says so once on stderr and the program keeps its own thread count.
- ``allocation()``, ``team()``, ``request()``, ``idle()``, ``should_yield()``: the client API, each
  an atomic read or write of the program's shared-memory slot.
- ``threads()``: a context manager and decorator that sizes the BLAS and OpenMP pools of numpy,
  scipy, torch and friends (through threadpoolctl) to the allocation at the start of each section.
- ``cpumgr.sim``: the simulator, with results as records that pandas reads, and policies written
  in Python.
"""

import contextlib
import threading

from threadpoolctl import threadpool_limits

from ._cpumgr import Client
from . import sim

__all__ = ["Client", "init", "client", "finalize", "allocation", "team", "request", "idle",
           "should_yield", "threads", "sim"]

_lock = threading.Lock()
_client = None


def init(name=None, min=None, max=None, mode=None, socket=None):
    """Connects this process to cpumgr once and returns its Client; later calls return the same
    one (their arguments are ignored until ``finalize()``)."""
    global _client
    with _lock:
        if _client is None:
            _client = Client(name=name, min=min, max=max, mode=mode, socket=socket)
        return _client


def client():
    """The process's Client, connected with defaults on first use."""
    return _client if _client is not None else init()


def finalize():
    """Disconnects (unregistering the program when this process registered it)."""
    global _client
    with _lock:
        _client = None


def allocation():
    """``(count, cpus, epoch)`` of the manager's allocation, or None when unmanaged."""
    return client().allocation()


def team(cap=0):
    """The thread count for the next parallel section, at most ``cap`` (0: the program's max)."""
    return client().team(cap)


def request(now, min=1, max=None):
    """Asks for ``now`` CPUs (at least ``min``, at most ``max``: default the program's max)."""
    c = client()
    c.request(now, min, c.max if max is None else max)


def idle():
    """Gives every CPU back until the next request or section."""
    client().idle()


def should_yield(team):
    """The thread count the manager asks a section running ``team`` threads to shrink to, or
    None: a safe-point check for code that can shrink mid-section."""
    return client().should_yield(team)


class threads(contextlib.ContextDecorator):
    """Runs a section with the BLAS/OpenMP pools sized to the allocation read at its start.

    ``with cpumgr.threads() as t:`` (``t.count`` is the size) or ``@cpumgr.threads()``. ``cap``
    bounds the size (0: the program's max); ``user_api`` is threadpoolctl's (``"blas"``,
    ``"openmp"``, or None for both). While the section runs the manager keeps the program's
    CPUs (it is a parallel region of ``count`` threads); after it the program counts as serial.
    """

    def __init__(self, cap=0, user_api=None):
        self.cap = cap
        self.user_api = user_api
        self.count = None
        self._open = threading.local()

    def __enter__(self):
        c = client()
        n = c.team(self.cap)
        stack = getattr(self._open, "stack", None)
        if stack is None:
            stack = self._open.stack = []
        stack.append(threadpool_limits(limits=n, user_api=self.user_api))
        c.begin_region(n)
        self.count = n
        return self

    def __exit__(self, *exc):
        self._open.stack.pop().restore_original_limits()
        client().end_region()
        return False
