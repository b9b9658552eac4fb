"""The warning shapejit gives its users, in a module of its own: the modules
that warn (jit/api.py, jit/lift.py, ...) import it without importing each
other."""


class JitWarning(UserWarning):
    """shapejit ran something eagerly or gave up specializing."""
