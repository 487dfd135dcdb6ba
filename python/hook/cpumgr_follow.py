"""Sizes an unmodified Python program's thread pools to its cpumgr allocation, between its calls.

``cpumgr run`` starts a Python command with this directory on PYTHONPATH and the path of the C
ABI library in ``CPUMGR_CAPI_LIB``; ``sitecustomize`` calls :func:`start`. The allocation is
read through ``libcpumgr.so`` (ctypes: no compiled module, so any interpreter of any version
works, with or without the ``cpumgr`` package). The pools are the ones threadpoolctl knows
(OpenBLAS, MKL, BLIS, OpenMP), when the interpreter has threadpoolctl, and PyTorch's intra-op
pool when the program imported torch.

Pools are resized on the main thread between its calls, never from another thread: OpenBLAS
grows its pool and (OpenMP build) frees per-thread buffers inside ``openblas_set_num_threads``
with no guard against a call running meanwhile, and ``omp_set_num_threads`` (hence torch's and
threadpoolctl's OpenMP sizing) sets only the calling thread's value. So a watcher thread polls
the allocation (atomic loads on the slot) and, when it changes, has the main thread run the
resize as a Python signal handler (``_thread.interrupt_main``: no signal is sent, the handler
runs at the main thread's next bytecode, that is after the C call it is in returns). Newly
loaded libraries are sized at once, after each top-level import that loaded shared objects.

Only the process ``cpumgr run`` started acts (the group leader): Python processes it starts and
forked children leave their pools alone.
"""

import _thread
import builtins
import ctypes
import importlib.util
import os
import signal
import sys
import threading
import time

#: How often the watcher reads the allocation, in seconds.
POLL = 0.01
#: The signal whose Python handler resizes the pools; only simulated on Python 3.10 and later.
SIGNAL = signal.SIGRTMAX - 1
#: Names of loaded libraries whose pools need threadpoolctl to be sized.
POOL_LIBRARIES = ("openblas", "mkl_rt", "libblis", "flexiblas", "libgomp", "libomp", "libiomp")


def _say(msg):
    if not os.environ.get("CPUMGR_QUIET"):
        print(f"cpumgr: {msg}", file=sys.stderr, flush=True)


class _PhdrInfo(ctypes.Structure):
    _fields_ = [("addr", ctypes.c_void_p), ("name", ctypes.c_char_p)]


_PHDR_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_PhdrInfo), ctypes.c_size_t, ctypes.c_void_p)
_libc = ctypes.CDLL(None)


def loaded_objects():
    """The file names of the shared objects loaded in this process (``dl_iterate_phdr``)."""
    names = []

    def each(info, _size, _data):
        names.append((info.contents.name or b"").decode(errors="replace"))
        return 0

    _libc.dl_iterate_phdr(_PHDR_CALLBACK(each), None)
    return names


class Follower:
    """The program's link to its allocation and the pools sized to it."""

    def __init__(self, capi):
        self.capi = capi
        self.pid = os.getpid()
        self.applied = None  # the size the pools were last given
        self.asked = None  # the size the watcher last asked the main thread for
        self.objects = 0  # how many shared objects were loaded at the last sizing
        self.busy = False  # a sizing runs (its own imports must not start another)
        self.warned = False
        self.can_size = importlib.util.find_spec("threadpoolctl") is not None
        self._limits = None  # threadpoolctl's threadpool_limits, once imported

    def active(self):
        """Whether this process still follows: the one started, unless it imports cpumgr (then
        the program sizes its own sections with cpumgr.threads())."""
        return os.getpid() == self.pid and "cpumgr" not in sys.modules

    def apply(self, force=False):
        """Sizes every pool to the allocation and reports that team to the manager; on the
        thread that makes the calls, between them. Without ``force``, only when it changed."""
        if self.busy or not self.active():
            return
        n = self.capi.cpumgr_team(0)
        self.asked = None  # read now: a later change asks again, even back to a size once asked
        if n == self.applied and not force:
            return
        self.busy = True
        try:
            objects = loaded_objects()
            self.objects = len(objects)
            sized = self._size(n, objects)
        finally:
            self.busy = False
        self.applied = n
        if sized:
            # The team the manager judges the program by: the pools' size, true once they are sized.
            self.capi.cpumgr_begin_region(n)

    def _size(self, n, objects):
        """Sets every known pool to ``n`` threads. Returns whether the pools follow, so that the
        team may be reported: not without threadpoolctl (the pools it would size are left alone,
        and the manager judges the program by its threads, as an unmodified one)."""
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "set_num_threads"):
            torch.set_num_threads(n)
        pools = [os.path.basename(o) for o in objects if any(p in os.path.basename(o) for p in POOL_LIBRARIES)]
        if not pools:
            return self.can_size  # threadpoolctl is imported only once there is a pool to size
        if not self.can_size:
            if not self.warned:
                self.warned = True
                _say(f"threadpoolctl is not installed in {sys.executable}: BLAS and OpenMP pools "
                     f"({', '.join(pools)}) keep their sizes (pip install threadpoolctl)")
            return False
        if self._limits is None:
            from threadpoolctl import threadpool_limits

            self._limits = threadpool_limits
        self._limits(limits=n)
        return True

    def after_import(self):
        """A top-level import finished: sizes the libraries it loaded, if any."""
        if not self.busy and self.active() and len(loaded_objects()) != self.objects:
            self.apply(force=True)

    def watch(self):
        """The watcher thread: asks the main thread for a resize when the allocation changes."""
        while os.getpid() == self.pid and _follower is self:
            time.sleep(POLL)
            n = self.capi.cpumgr_team(0)
            if n == self.applied or n == self.asked or not self.active():
                continue
            if signal.getsignal(SIGNAL) is not _on_signal:
                _say(f"the program handles signal {SIGNAL} itself: its pools stop following the allocation")
                return
            self.asked = n
            _interrupt_main()


_follower = None


def _guarded(step):
    """Runs a step of the follower in the program's own thread: a failure stops the following,
    said once, and never reaches the program's code."""
    global _follower
    follower = _follower
    if follower is None:
        return
    try:
        step(follower)
    except Exception as e:
        _follower = None
        _say(f"the Python hook stopped ({type(e).__name__}: {e}); pools keep their sizes")


def _on_signal(_signum, _frame):
    _guarded(Follower.apply)


def _interrupt_main():
    """Runs the handler of SIGNAL on the main thread at its next bytecode."""
    if sys.version_info >= (3, 10):
        _thread.interrupt_main(SIGNAL)
    else:
        signal.pthread_kill(threading.main_thread().ident, SIGNAL)


_real_import = builtins.__import__
_importing = threading.local()  # how deep the thread is in first imports of top-level modules


def _import(name, globals=None, locals=None, fromlist=(), level=0):
    """``__import__`` that sizes new pools once the first import of a top-level module has
    finished, with every import it made (numpy's own imports load a dozen extensions)."""
    if level or name.partition(".")[0] in sys.modules:
        return _real_import(name, globals, locals, fromlist, level)
    depth = getattr(_importing, "depth", 0)
    _importing.depth = depth + 1
    try:
        module = _real_import(name, globals, locals, fromlist, level)
    finally:
        _importing.depth = depth
    if depth == 0:
        _guarded(Follower.after_import)
    return module


def start():
    """Follows the allocation when this is the program ``cpumgr run`` started (``CPUMGR_CAPI_LIB``
    set, this process its group's leader, the manager's registration found); else does nothing."""
    global _follower
    lib = os.environ.get("CPUMGR_CAPI_LIB")
    if not lib or os.getpid() != os.getpgrp() or _follower is not None:
        return
    capi = ctypes.CDLL(lib)
    capi.cpumgr_init.argtypes = [ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint]
    capi.cpumgr_team.argtypes = [ctypes.c_uint]
    capi.cpumgr_team.restype = ctypes.c_uint
    capi.cpumgr_begin_region.argtypes = [ctypes.c_uint]
    if capi.cpumgr_init(None, 0, 0) != 0:
        return  # unmanaged: the library said why on stderr
    follower = Follower(capi)
    follower.apply(force=True)
    _follower = follower
    signal.signal(SIGNAL, _on_signal)
    builtins.__import__ = _import
    threading.Thread(target=follower.watch, name="cpumgr-follow", daemon=True).start()
