"""Calling kernels from Python.  A kernel's Python entry (a CPython
METH_FASTCALL function in its object code) becomes a builtin function, as a
C extension's would: a call costs ~0.1 us, against ~2.6 us through a ctypes
prototype.  The kernels read numpy arrays' data pointers and strides from the
array objects themselves (~50 ns per array instead of ~1 us for
`arr.ctypes.data`)."""
from __future__ import annotations

import ctypes
import functools

import numpy as np

METH_FASTCALL = 0x80


class NativeABIError(RuntimeError):
    pass


@functools.cache
def check_array_layout(data_offset: int, strides_offset: int) -> None:
    """Verify, once, the PyArrayObject offsets the kernels were compiled to read."""
    a = np.zeros((3, 5), np.float32)[:, ::2]
    base = id(a)
    data = ctypes.c_void_p.from_address(base + data_offset).value
    strides_ptr = ctypes.c_void_p.from_address(base + strides_offset).value
    strides = (ctypes.c_int64 * 2).from_address(strides_ptr)
    if ctypes.sizeof(ctypes.c_void_p) != 8 or data != a.ctypes.data or tuple(strides) != a.strides:
        raise NativeABIError("numpy's array object layout is not the one the kernels read")


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p), ("ml_flags", ctypes.c_int),
                ("ml_doc", ctypes.c_char_p)]


class KernelOwner:
    """The `self` of a kernel's builtin function (`fn.__self__`): it owns the
    PyMethodDef the builtin points to and `keepalive`, what keeps the machine
    code mapped; the builtin holds it for as long as it lives."""
    __slots__ = ("method", "keepalive")

    def __init__(self, method: _MethodDef, keepalive):
        self.method, self.keepalive = method, keepalive


# PyObject *PyCFunction_NewEx(PyMethodDef *, PyObject *self, PyObject *module)
_new_builtin = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p)(
    ("PyCFunction_NewEx", ctypes.pythonapi))


def kernel_function(address: int, name: str, keepalive):
    """The builtin function `name` whose code is the Python entry at
    `address` (codegen/pycall.py); `keepalive` (the loaded object code) lives
    as long as the function does."""
    owner = KernelOwner(_MethodDef(name.encode(), address, METH_FASTCALL, None), keepalive)
    return _new_builtin(ctypes.addressof(owner.method), owner, None)
