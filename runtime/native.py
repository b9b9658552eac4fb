"""Calling kernels from Python: ctypes prototypes that pass numpy arrays as
object pointers (the kernel reads the data pointer and strides itself, which
costs ~50 ns per array instead of ~1 us for `arr.ctypes.data`)."""
from __future__ import annotations

import ctypes
import functools

import numpy as np

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


@functools.cache
def _prototype(n_arrays: int, n_ints: int, n_floats: int):
    return ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, *([ctypes.py_object] * n_arrays),
                            *([ctypes.c_int64] * n_ints), *([ctypes.c_double] * n_floats))


def kernel_function(address: int, n_arrays: int, n_ints: int, n_floats: int):
    return _prototype(n_arrays, n_ints, n_floats)(address)
