"""The public API and tracing front end: `@jit` traces a numpy function
into a symbolic-shape Graph and runs it from one trace for every shape."""
import os as _os
import sys as _sys

from runtime import threadpool as _threadpool
from shapes import config as _config

# OpenBLAS reads its threads' wait when numpy loads it: when shapejit is
# imported first, the wait its threads keep beside the pool
# (runtime/threadpool.py BLAS_THREAD_TIMEOUT) is set now; otherwise the pool
# restarts them with it when it takes numpy's BLAS.
if "numpy" not in _sys.modules and _config.get("SHAPEJIT_SHARE_BLAS"):
    _os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", _threadpool.BLAS_THREAD_TIMEOUT)

from jit.api import JitFunction, jit  # noqa: E402 - after the variable above
from jit.errors import JitWarning  # noqa: E402

__all__ = ["jit", "JitFunction", "JitWarning"]
