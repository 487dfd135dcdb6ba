"""Run by every Python interpreter that finds this directory on its path: `cpumgr run` puts it
first on PYTHONPATH when the command is a Python program, so a script that never imports cpumgr
has its BLAS, OpenMP and PyTorch pools follow its allocation (``cpumgr_follow``).

Then it runs the ``sitecustomize`` this file shadows (the interpreter's own or the user's), if
any: Python imports only the first one on its path.
"""

import os
import sys


def _follow():
    """Starts following the allocation; a failure is said once and leaves the program alone."""
    try:
        import cpumgr_follow

        cpumgr_follow.start()
    except Exception as e:  # the user's program runs whatever happens here
        print(f"cpumgr: the Python hook did not start ({type(e).__name__}: {e}); pools keep their sizes",
              file=sys.stderr)


def _run_shadowed():
    """Runs the next ``sitecustomize`` on the path after this directory."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.realpath(__file__))
    rest = [p for p in sys.path if os.path.realpath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


_follow()
_run_shadowed()
