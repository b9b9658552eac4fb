"""The warning shapejit gives its users, in a module of its own: the modules
that warn (jit/miss.py, jit/eager.py, jit/lift.py, ...) import it without
importing each other; `warn` attributes a warning to the user's line."""
from __future__ import annotations

import os
import sys
import warnings

# shapejit's packages: a user's line is the first frame outside them (and numpy)
PKG_DIRS = tuple(os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep + p + os.sep
                 for p in ("jit", "shapes", "clustering", "codegen", "runtime"))


def internal(filename: str) -> bool:
    """Whether code in `filename` is shapejit's or numpy's, not the user's."""
    return filename.startswith(PKG_DIRS) or os.sep + "numpy" + os.sep in filename or filename.startswith("<__array")


QUIET = ("ignore", "warn", "print", None)  # (numpy's error modes whose values compiled code matches)


def raises(modes) -> bool:
    """Whether any of numpy's error modes (np.errstate's, np.seterr's
    values) does more than warn or ignore: raise, call or log."""
    return any(v not in QUIET for v in modes)


class JitWarning(UserWarning):
    """shapejit ran something eagerly or gave up specializing."""


def warn(message: str) -> None:
    """Warn with a JitWarning at the user's line that called into shapejit
    (the first frame outside shapejit and numpy, however deep the call went)."""
    frame, level = sys._getframe(), 1
    while frame is not None and internal(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, JitWarning, stacklevel=level)
