"""Reusable memory for large intermediates.

A value that never leaves the executable (not returned, read only by kernels
and numpy ops that make new arrays) gets its storage from a per-thread slot
that keeps the largest buffer it has needed.  Large fresh allocations are
mmap'd and page-faulted on every call; a warm pool has none, and its size is
bounded by the largest shape seen, so memory stays flat under shape variation.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

POOL_MIN_BYTES = 1 << 18  # smaller arrays come from malloc's free lists anyway
_ALIGN = 64

_pools: "weakref.WeakSet[BufferPool]" = weakref.WeakSet()


class BufferPool:
    def __init__(self):
        self._local = threading.local()
        self._held = 0
        self._lock = threading.Lock()
        _pools.add(self)

    def get(self, slot: int, shape: tuple, dtype: np.dtype) -> np.ndarray:
        n = dtype.itemsize
        for d in shape:
            n *= d
        if n < POOL_MIN_BYTES:
            return np.empty(shape, dtype)
        bufs = self._local.__dict__.get("bufs")
        if bufs is None:
            bufs = self._local.bufs = {}
        raw = bufs.get(slot)
        if raw is None or raw.nbytes < n + _ALIGN:
            grow = n + _ALIGN - (0 if raw is None else raw.nbytes)
            raw = np.empty(n + _ALIGN, np.uint8)
            bufs[slot] = raw
            with self._lock:
                self._held += grow
        off = (-raw.ctypes.data) % _ALIGN
        return raw[off:off + n].view(dtype).reshape(shape)

    @property
    def held_bytes(self) -> int:
        return self._held


def pool_bytes() -> int:
    return sum(p.held_bytes for p in list(_pools))
