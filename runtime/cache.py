"""The compile cache: object code by content key, in memory and on disk.

The disk level is a diskcache.Cache shared by every process on the machine:
default under the user's cache directory, moved by SHAPEJIT_CACHE_DIR, off
with SHAPEJIT_CACHE=0, bounded by SHAPEJIT_CACHE_SIZE (bytes, default 1 GiB)
with least-recently-used eviction.  Entries are Artifact bytes with their own
checksum and version header: a corrupt, truncated or foreign entry is
counted, dropped and recompiled, never executed.  An unusable directory
degrades to memory only, with one warning.
"""
from __future__ import annotations

import functools
import hashlib
import os
import threading
import time
import warnings
from dataclasses import dataclass

import diskcache

DEFAULT_SIZE = 1 << 30
SHAPEJIT_VERSION = "0.1.0"
_PACKAGES = ("jit", "shapes", "clustering", "codegen", "runtime")
_SEAL = b"SJSEAL1\0"


class CacheWarning(UserWarning):
    pass


class CorruptEntry(Exception):
    """A cache record whose bytes do not match their checksum."""


@functools.cache
def build_id() -> str:
    """The version plus a digest of shapejit's own sources: keys change with
    the compiler's code, even between releases (editable installs)."""
    h = hashlib.sha256()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for pkg in _PACKAGES:
        d = os.path.join(root, pkg)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else ():
            if name.endswith(".py"):
                h.update(f"{pkg}/{name}\0".encode())
                with open(os.path.join(d, name), "rb") as f:
                    h.update(f.read())
    return f"{SHAPEJIT_VERSION}+{h.hexdigest()[:16]}"


def seal(payload: bytes) -> bytes:
    """Bytes with a header and checksum, for records that are not Artifacts."""
    return _SEAL + hashlib.sha256(payload).digest() + payload


def unseal(blob: bytes) -> bytes:
    n = len(_SEAL)
    if not blob.startswith(_SEAL) or len(blob) < n + 32:
        raise CorruptEntry("not a sealed record")
    digest, payload = blob[n:n + 32], blob[n + 32:]
    if hashlib.sha256(payload).digest() != digest:
        raise CorruptEntry("checksum mismatch")
    return payload


def default_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "shapejit")


def content_key(*parts: str) -> str:
    """sha256 over everything that changes the code."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()


@dataclass
class CacheStats:
    memory_hits: int = 0
    disk_hits: int = 0
    misses: int = 0
    corrupt: int = 0
    writes: int = 0
    write_errors: int = 0


@dataclass
class Entry:
    key: str
    size: int
    age_s: float
    function: str
    signature: str
    kind: str = "artifact"  # "artifact" (a function's object code) | "library" (a shared kernel) | "trace"


class ArtifactCache:
    """get(key) -> (bytes, level) | (None, None); put(key, bytes, info)."""

    def __init__(self, directory: str | None = None, enabled: bool | None = None,
                 size_limit: int | None = None):
        if enabled is None:
            enabled = os.environ.get("SHAPEJIT_CACHE", "1") not in ("0", "false", "off", "")
        self.directory = directory or os.environ.get("SHAPEJIT_CACHE_DIR") or default_dir()
        self.size_limit = size_limit or int(os.environ.get("SHAPEJIT_CACHE_SIZE", DEFAULT_SIZE))
        self.stats = CacheStats()
        self._memory: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self._disk = None
        self.disk_error: str | None = None
        if enabled:
            self._open()

    def _open(self) -> None:
        try:
            os.makedirs(self.directory, exist_ok=True)
            probe = os.path.join(self.directory, f".probe-{os.getpid()}")
            with open(probe, "w") as f:
                f.write("ok")
            os.remove(probe)
            self._disk = diskcache.Cache(self.directory, size_limit=self.size_limit,
                                         eviction_policy="least-recently-used", timeout=60)
        except Exception as e:  # noqa: BLE001 - any failure means: memory only
            self._disk = None
            self.disk_error = f"{type(e).__name__}: {e}"
            warnings.warn(f"shapejit: compile cache directory {self.directory!r} is not usable "
                          f"({self.disk_error}); caching in memory only", CacheWarning, stacklevel=3)

    @property
    def on_disk(self) -> bool:
        return self._disk is not None

    def get(self, key: str, memory: bool = True):
        """`memory=False`: the disk level only (records other processes
        update, such as saved traces)."""
        with self._lock:
            b = self._memory.get(key) if memory else None
        if b is not None:
            self.stats.memory_hits += 1
            return b, "memory"
        if self._disk is not None:
            try:
                rec = self._disk.get(key)
            except Exception:  # noqa: BLE001 - a damaged cache database is a miss
                rec = None
                self.stats.corrupt += 1
            if isinstance(rec, dict) and isinstance(rec.get("artifact"), bytes):
                if memory:
                    with self._lock:
                        self._memory[key] = rec["artifact"]
                self.stats.disk_hits += 1
                return rec["artifact"], "disk"
            if rec is not None:
                self.reject(key)
        self.stats.misses += 1
        return None, None

    def put(self, key: str, artifact: bytes, function: str = "", signature: str = "",
            kind: str = "artifact", memory: bool = True) -> None:
        if memory:
            with self._lock:
                self._memory[key] = artifact
        if self._disk is None:
            return
        rec = {"artifact": artifact, "function": function, "signature": signature, "time": time.time(),
               "version": build_id(), "kind": kind}
        try:
            self._disk.set(key, rec)
            self.stats.writes += 1
        except Exception as e:  # noqa: BLE001 - a full or read-only disk degrades to memory
            self.stats.write_errors += 1
            if self.stats.write_errors == 1:
                warnings.warn(f"shapejit: cannot write the compile cache ({type(e).__name__}: {e})",
                              CacheWarning, stacklevel=3)

    def reject(self, key: str) -> None:
        """A record that failed its checks: counted and dropped (never used)."""
        self.stats.corrupt += 1
        self.drop(key)

    def drop(self, key: str) -> None:
        """Forget a bad entry at both levels."""
        with self._lock:
            self._memory.pop(key, None)
        if self._disk is not None:
            try:
                self._disk.delete(key)
            except Exception:  # noqa: BLE001
                pass

    def entries(self) -> list[Entry]:
        out = []
        if self._disk is None:
            return out
        now = time.time()
        for key in list(self._disk.iterkeys()):
            rec = self._disk.get(key)
            if not isinstance(rec, dict):
                out.append(Entry(key, 0, 0.0, "?", "corrupt"))
                continue
            out.append(Entry(key, len(rec.get("artifact", b"")), now - rec.get("time", now),
                             rec.get("function", "?"), rec.get("signature", ""), rec.get("kind", "artifact")))
        return out

    def volume(self) -> int:
        return int(self._disk.volume()) if self._disk is not None else 0

    def __len__(self) -> int:
        return len(self._disk) if self._disk is not None else len(self._memory)

    def clear(self) -> int:
        with self._lock:
            n = len(self._memory)
            self._memory.clear()
        if self._disk is not None:
            n = self._disk.clear()
        return n


_default: ArtifactCache | None = None
_default_lock = threading.Lock()


def default_cache() -> ArtifactCache:
    """The process-wide cache (configured from the environment on first use)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ArtifactCache()
        return _default


def reset_default_cache() -> None:
    """Forget the process-wide cache (tests change SHAPEJIT_CACHE_DIR)."""
    global _default
    with _default_lock:
        _default = None
