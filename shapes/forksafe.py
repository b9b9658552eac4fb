"""Locks that survive fork().

A forked child has only the thread that called fork; a lock another thread
held at that moment stays held in the child for ever, and the child's first
call that needs it hangs.  shapejit's locks come from here:

* `lock()` / `rlock()`: reinitialized (released) in the child.  What such a
  lock guards is Python state the child may then see mid-update (a miss
  half done on another thread): at worst the child misses again.
* `waited()`, and a library's own lock given to `wait_for()`: a lock
  around native state a child must never see mid-update (a SQLite
  transaction, whose lock bookkeeping is per process; llvmlite's lock, held
  inside every call into LLVM).  fork() waits for them: they are acquired
  before the fork and released after, in both processes.  Each must be a
  leaf: never held while waiting for another lock (so the order fork takes
  them in cannot deadlock).
"""
from __future__ import annotations

import os
import threading
import weakref

_reinit: "weakref.WeakSet" = weakref.WeakSet()
_waited: "weakref.WeakSet" = weakref.WeakSet()
_libraries: list = []
_taken: list = []  # what the fork handler holds, in the order it took them


def lock() -> threading.Lock:
    lk = threading.Lock()
    _reinit.add(lk)
    return lk


def rlock() -> threading.RLock:
    lk = threading.RLock()
    _reinit.add(lk)
    return lk


def waited() -> threading.RLock:
    lk = threading.RLock()
    _waited.add(lk)
    return lk


def wait_for(library_lock) -> None:
    if not any(x is library_lock for x in _libraries):
        _libraries.append(library_lock)


def _before() -> None:
    for lk in list(_waited) + _libraries:
        lk.acquire()
        _taken.append(lk)


def _release() -> None:
    while _taken:
        _taken.pop().release()


def _after_in_child() -> None:
    _release()
    for lk in list(_reinit):
        lk._at_fork_reinit()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before, after_in_parent=_release, after_in_child=_after_in_child)
