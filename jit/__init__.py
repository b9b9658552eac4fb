"""The public API and tracing front end: `@jit` traces a numpy function
into a symbolic-shape Graph and runs it from one trace for every shape."""
from jit.api import JitFunction, jit
from jit.errors import JitWarning

__all__ = ["jit", "JitFunction", "JitWarning"]
