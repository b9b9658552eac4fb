"""Reusable memory for large intermediates.

A value that never leaves the executable (not returned, read only by kernels
and numpy ops that make new arrays) gets its storage from a slot of the
call's buffer set that keeps the largest buffer it has needed.  Large fresh
allocations are mmap'd and page-faulted on every call; a warm pool has none,
and memory stays flat under shape variation.

Bounded: the sets kept between calls hold at most SHAPEJIT_POOL_BYTES in
the whole process (and a function's `jit(pool_bytes=)` in its own pools).
Calls that run at once each need a set; when one returns while the sets
hold more than the budget, its set is dropped instead of kept, and so is a
set no call took for IDLE_SECONDS.  Buffers are mapped memory, not malloc's:
a dropped one goes back to the system at once (glibc keeps freed blocks in
the arena of the thread that made them, and a service's RSS stayed at
1.7 GB after a burst of 50 concurrent clients).
"""
from __future__ import annotations

import mmap
import time
import weakref

import numpy as np

from shapes import config, forksafe

POOL_MIN_BYTES = 1 << 18  # smaller arrays come from malloc's free lists anyway
# A buffer that must grow is mapped afresh, and every page of it faults on its
# first touch (2-2.6 us a page on a 2-core VM, AMD EPYC znver4: a BERT layer's
# call that grew its buffers by 5 rows took 74 ms instead of 40); growing by a quarter more than
# asked, a stream of random lengths grows a slot a few times, not at every
# new longest length.
GROWTH = 1.25



MAX_SETS = 8  # free buffer sets a pool keeps (one per call that ran at once with others)
IDLE_SECONDS = 10.0  # a free set no call took for this long is dropped
_total = 0  # bytes of every live pool's sets, free or in use
_total_lock = forksafe.lock()


def _count(n: int) -> None:
    global _total
    with _total_lock:
        _total += n


class BufferPool:
    """Sets of buffers, one per call under way: a call takes a free set (or
    a new one) and gives it back when it returns.  Concurrent calls never
    share a set, and a server that starts a thread per request reuses the
    same one (sets were per thread before: each new thread's calls built a
    set of their own, up to eight, and memory grew with thread churn).
    `budget`: the bytes this pool's sets may hold between calls (None: the
    process budget only)."""

    def __init__(self, budget: int | None = None):
        self.budget = budget
        self.limit = config.get("SHAPEJIT_POOL_BYTES")  # (read once: release is on every call's path)
        self._free: list[tuple[float, _Set]] = []  # (when it was given back, the set)
        self._bytes = [0]  # of this pool's sets (a cell: the pool's finalizer takes them off the total)
        weakref.finalize(self, lambda cell: _count(-cell[0]), self._bytes)
        self._lock = forksafe.lock()

    # (list.pop and list.append are atomic: a call's hit takes no lock)
    def acquire(self) -> "_Set":
        try:
            return self._free.pop()[1]
        except IndexError:
            return _Set()

    def release(self, bufs: "_Set") -> None:
        now = time.monotonic()
        if (len(self._free) < MAX_SETS and _total <= self.limit
                and (self.budget is None or self._bytes[0] <= self.budget)):
            self._free.append((now, bufs))
            if now - self._free[0][0] < IDLE_SECONDS:
                return
            bufs = None  # (the oldest free set idled out: drop it below)
        dropped = [bufs] if bufs is not None else []
        with self._lock:
            try:
                while now - self._free[0][0] >= IDLE_SECONDS:
                    dropped.append(self._free.pop(0)[1])
            except IndexError:  # (empty, or a call took the last one meanwhile)
                pass
        for bufs in dropped:  # (no call holds them: their buffers go when the slots do)
            self._grow(-sum(raw.nbytes for raw, _, _ in bufs.slots.values()))
            bufs.slots.clear()

    def get(self, bufs: "_Set", slot: int, shape: tuple, dtype: np.dtype) -> np.ndarray:
        entry = bufs.slots.get(slot)
        if entry is not None and entry[1] == shape:
            return entry[2]  # the same shape again (the common case); a slot's dtype never changes
        n = dtype.itemsize
        for d in shape:
            n *= d
        if n < POOL_MIN_BYTES:
            return np.empty(shape, dtype)
        raw = entry[0] if entry is not None else None
        if raw is None or raw.nbytes < n:
            # a slot that outgrew its buffer serves changing shapes: it takes GROWTH times what it
            # needs, and the next few larger shapes find it ready
            size = n if raw is None else int(n * GROWTH)
            self._grow(size - (raw.nbytes if raw is not None else 0))
            raw = _mapped(size)
        view = raw[:n].view(dtype).reshape(shape)
        bufs.slots[slot] = (raw, shape, view)
        return view

    def _grow(self, n: int) -> None:
        with self._lock:
            self._bytes[0] += n
        _count(n)

    @property
    def held_bytes(self) -> int:
        return self._bytes[0]


def _mapped(n: int) -> np.ndarray:
    """`n` fresh bytes, mapped rather than malloc'd: a dropped buffer goes
    back to the system at once (glibc keeps freed blocks in the arena of
    the thread that made them: 32 threads calling at once left 120 MB
    behind that malloc_trim did not return); page-aligned.  Private: a
    forked child's writes stay its own (a shared mapping, mmap's default,
    gave a child and its parent the same pooled buffers)."""
    return np.frombuffer(mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS), np.uint8)


class _Set:
    """One call's buffers: slot -> (raw bytes, shape, the view last handed out)."""
    __slots__ = ("slots",)

    def __init__(self):
        self.slots: dict = {}


def pool_bytes() -> int:
    """The bytes of every live pool's sets."""
    return _total
