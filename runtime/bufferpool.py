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
from collections import OrderedDict

import numpy as np

POOL_MIN_BYTES = 1 << 18  # smaller arrays come from malloc's free lists anyway
_ALIGN = 64

_pools: "weakref.WeakSet[BufferPool]" = weakref.WeakSet()


MAX_THREADS = 8  # threads whose buffers a pool keeps; the least recently seen is dropped


class BufferPool:
    """Buffers per calling thread (concurrent calls never share one), for the
    MAX_THREADS most recent threads: a server that starts a thread per request
    does not accumulate buffers of threads that are gone."""

    def __init__(self):
        self._threads: "OrderedDict[int, dict]" = OrderedDict()
        self._lock = threading.Lock()
        _pools.add(self)

    def get(self, slot: int, shape: tuple, dtype: np.dtype) -> np.ndarray:
        me = threading.get_ident()
        with self._lock:
            bufs = self._threads.get(me)
            if bufs is None:
                bufs = self._threads[me] = {}
                while len(self._threads) > MAX_THREADS:
                    self._threads.popitem(last=False)  # a caller using them keeps its arrays alive
            else:
                self._threads.move_to_end(me)
            entry = bufs.get(slot)  # (raw bytes, aligned offset, shape, the view last handed out)
        if entry is not None and entry[2] == shape:
            return entry[3]  # the same shape again (the common case); a slot's dtype never changes
        n = dtype.itemsize
        for d in shape:
            n *= d
        if n < POOL_MIN_BYTES:
            return np.empty(shape, dtype)
        raw = entry[0] if entry is not None else None
        if raw is None or raw.nbytes < n + _ALIGN:
            raw = np.empty(n + _ALIGN, np.uint8)
            off = (-raw.__array_interface__["data"][0]) % _ALIGN
        else:
            off = entry[1]
        view = raw[off:off + n].view(dtype).reshape(shape)
        with self._lock:  # (held_bytes iterates these dicts from a metrics thread)
            bufs[slot] = (raw, off, shape, view)
        return view

    @property
    def held_bytes(self) -> int:
        with self._lock:
            return sum(e[0].nbytes for bufs in self._threads.values() for e in bufs.values())


def pool_bytes() -> int:
    return sum(p.held_bytes for p in list(_pools))
