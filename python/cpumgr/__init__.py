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
    """Disconnects (unregistering the program when this process registered it), even while
    references to the Client remain: they read as unmanaged from then on."""
    global _client
    with _lock:
        if _client is not None:
            _client.close()
        _client = None


def allocation():
    """``(count, cpus, epoch)`` of the manager's allocation, or None when unmanaged."""
    return client().allocation()


def team(cap=0):
    """The thread count for the next parallel section, at most ``cap`` (0: the program's max)."""
    return client().team(cap)


def request(wanted=None, min=1, max=None, *, now=None):
    """Asks for ``wanted`` CPUs (at least ``min``, at most ``max``: default the program's max).
    ``now=`` is read as ``wanted``, for callers that name it so."""
    if wanted is None:
        wanted = now
    if wanted is None:
        raise TypeError("request() needs the count of CPUs wanted")
    c = client()
    c.request(wanted, min, c.max if max is None else max)


def idle():
    """Gives every CPU back until the next request or section."""
    client().idle()


def should_yield(team):
    """The thread count the manager asks a section running ``team`` threads to shrink to, or
    None: a safe-point check for code that can shrink mid-section."""
    return client().should_yield(team)


# The sections open in this process, from every thread: BLAS and OpenMP pool sizes are
# process-wide, and so is the program's parallel region in its slot.
_sections_lock = threading.Lock()
_sections = []        # (count, user_api) of each open section, in opening order
_original = None      # threadpoolctl's record of every pool's size before the first section


def _apply(sections):
    """Sizes the pools for the open sections: the largest count, for the APIs they name (every
    API when one names none), and tells the manager a region of that many threads runs."""
    n = max(count for count, _ in sections)
    apis = {api for _, api in sections}
    threadpool_limits(limits=n, user_api=apis.pop() if len(apis) == 1 else None)
    client().begin_region(n)


class threads(contextlib.ContextDecorator):
    """Runs a section with the BLAS/OpenMP pools sized to the allocation read at its start.

    ``with cpumgr.threads() as t:`` (``t.count`` is the size) or ``@cpumgr.threads()``. ``cap``
    bounds the size (0: the program's max); ``user_api`` is threadpoolctl's (``"blas"``,
    ``"openmp"``, or None for both). While the section runs the manager keeps the program's
    CPUs (it is a parallel region of ``count`` threads); after it the program counts as serial.

    Pool sizes are the process's, so sections that overlap (in several threads, or nested) share
    them: while any is open the pools have the largest open section's size and the program is in
    a region of that many threads; when the last one ends every pool gets back the size it had
    before the first one began.
    """

    def __init__(self, cap=0, user_api=None):
        self.cap = cap
        self.user_api = user_api
        self.count = None
        self._open = threading.local()

    def __enter__(self):
        global _original
        n = client().team(self.cap)
        section = (n, self.user_api)
        with _sections_lock:
            if not _sections:
                _original = threadpool_limits(limits=None)
            _sections.append(section)
            _apply(_sections)
        stack = getattr(self._open, "stack", None)
        if stack is None:
            stack = self._open.stack = []
        stack.append(section)
        self.count = n
        return self

    def __exit__(self, *exc):
        global _original
        section = self._open.stack.pop()
        with _sections_lock:
            _sections.remove(section)
            if _sections:
                _apply(_sections)
            else:
                _original.restore_original_limits()
                _original = None
                client().end_region()
        return False
