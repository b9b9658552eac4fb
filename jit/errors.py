"""The warning shapejit gives its users, in a module of its own: the modules
that warn (jit/miss.py, jit/eager.py, jit/lift.py, ...) import it without
importing each other; `warn` attributes a warning to the user's line."""
from __future__ import annotations

import os
import sys
import warnings

_PACKAGE = os.path.dirname(__file__) + os.sep


class JitWarning(UserWarning):
    """shapejit ran something eagerly or gave up specializing."""


def warn(message: str) -> None:
    """Warn with a JitWarning at the user's line that called into shapejit
    (the first frame outside jit/, however deep the call went)."""
    frame, level = sys._getframe(), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, JitWarning, stacklevel=level)
