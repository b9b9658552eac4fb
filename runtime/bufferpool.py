"""Reusable memory for large intermediates.

A value that never leaves the executable (not returned, read only by kernels
and numpy ops that make new arrays) gets its storage from a slot of the
call's buffer set that keeps the largest buffer it has needed.  Large fresh
allocations are mmap'd and page-faulted on every call; a warm pool has none,
and its size is bounded by the largest shape seen (times the calls that ran
at once), so memory stays flat under shape variation.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

POOL_MIN_BYTES = 1 << 18  # smaller arrays come from malloc's free lists anyway
_ALIGN = 64

_pools: "weakref.WeakSet[BufferPool]" = weakref.WeakSet()


MAX_SETS = 8  # free buffer sets a pool keeps (one per call that ran at once with others)


class BufferPool:
    """Sets of buffers, one per call under way: a call takes a free set (or
    a new one) and gives it back when it returns.  Concurrent calls never
    share a set, and a server that starts a thread per request reuses the
    same one (sets were per thread before: each new thread's calls built a
    set of their own, up to eight, and memory grew with thread churn)."""

    def __init__(self):
        self._free: list[dict] = []
        self._held: "weakref.WeakSet[_Set]" = weakref.WeakSet()  # every live set, for held_bytes
        self._lock = threading.Lock()
        _pools.add(self)

    # (list.pop and list.append are atomic: a call's hit takes no lock)
    def acquire(self) -> "_Set":
        try:
            return self._free.pop()
        except IndexError:
            bufs = _Set()
            with self._lock:
                self._held.add(bufs)
            return bufs

    def release(self, bufs: "_Set") -> None:
        if len(self._free) < MAX_SETS:
            self._free.append(bufs)

    def get(self, bufs: "_Set", slot: int, shape: tuple, dtype: np.dtype) -> np.ndarray:
        entry = bufs.slots.get(slot)
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
        with self._lock:  # (held_bytes iterates the sets from a metrics thread)
            bufs.slots[slot] = (raw, off, shape, view)
        return view

    @property
    def held_bytes(self) -> int:
        with self._lock:
            return sum(e[0].nbytes for bufs in list(self._held) for e in bufs.slots.values())


class _Set:
    """One call's buffers: slot -> (raw bytes, aligned offset, shape, the view last handed out)."""
    __slots__ = ("slots", "__weakref__")

    def __init__(self):
        self.slots: dict = {}


def pool_bytes() -> int:
    return sum(p.held_bytes for p in list(_pools))
