"""The public API and tracing front end: `@jit` traces a numpy function
into a symbolic-shape Graph and runs it from one trace for every shape."""
import os as _os
import sys as _sys

from shapes import config as _config

# OpenBLAS's own threads wait 2^28 cycles (~0.1 s) for work before they sleep.
# With numpy's BLAS on shapejit's pool (SHAPEJIT_SHARE_BLAS) they still run the
# async parts of its LU factorizations, then spin beside the pool: numpy's
# solve and inv of order 200 ran 1.5-1.8x slower once the pool started, and
# 0.6-1.0x with the wait at 2^12 (`python -m bench.mixed`).  OpenBLAS reads
# the variable when numpy loads it: here, when shapejit is imported first.
if "numpy" not in _sys.modules and _config.get("SHAPEJIT_SHARE_BLAS"):
    _os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "12")

from jit.api import JitFunction, jit  # noqa: E402 - after the variable above
from jit.errors import JitWarning  # noqa: E402

__all__ = ["jit", "JitFunction", "JitWarning"]
