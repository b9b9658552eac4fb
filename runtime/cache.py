"""The compile cache: object code (and saved traces) by content key, in
memory, on disk and, for a fleet, on Redis.

The disk level is a diskcache.Cache shared by every process of the user on
the machine: under the user's cache directory by default (SHAPEJIT_CACHE_DIR
moves it, SHAPEJIT_CACHE=0 turns it off, SHAPEJIT_CACHE_SIZE bounds it, least
recently used entries evicted).

What it trusts (README, "Compile cache"):

* Records are plain bytes: a header our code parses (JSON: function,
  signature, kind, time, build) and the payload.  diskcache stores bytes as
  they are; its pickled rows (which shapejit never writes) are refused by
  `_BytesOnly`, never unpickled, also when `python -m jit cache` lists.
* Every record is bound to its key: its digest covers the key, the header
  and the payload, so a record copied under another key (two functions'
  object code swapped) is a mismatch: dropped, counted, recompiled.
* The directory is created private (0700); an existing one owned by another
  user, or writable by group or others, is refused with a warning (the
  cache runs in memory only): whoever can write the directory could make
  this process run their code.
* With SHAPEJIT_CACHE_SECRET set, the digest is an HMAC-SHA256 under that
  secret: a record without a valid one is never loaded (counted, warned
  once, recompiled).  Without a secret the digest is a sha256 that detects
  damage, not forgery: the directory's permissions are the protection.
* Behind the disk, the process-wide cache may have a fleet tier on Redis
  (runtime/remote.py): the same records, used only under a secret; a remote
  hit is checked like a disk record and written to the local disk.
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import stat
import struct
import time
import warnings
from dataclasses import dataclass

import diskcache

from runtime.remote import remote_tier
from shapes import config, forksafe

SHAPEJIT_VERSION = "0.1.0"
_PACKAGES = ("jit", "shapes", "clustering", "codegen", "runtime")
_RECORD = b"SJREC2\0\0"
_HEAD = struct.Struct("<8sB32sI")  # magic, scheme (0 sha256, 1 hmac-sha256), digest, header length
_SHA, _HMAC = 0, 1
_MAX_HEADER = 1 << 16


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


def key_symbol(key: str) -> str:
    """The symbol object code compiled for `key` exports (codegen/llvm.py
    compile_ir): an entry found under another key lacks it and is never run."""
    return "sj_key_" + hashlib.sha256(key.encode()).hexdigest()[:32]


@dataclass
class CacheStats:
    """What the cache counts itself (hits and misses are the metrics',
    counted where a call looks its entry up: runtime/metrics.py)."""
    write_errors: int = 0

    def __post_init__(self):
        self.rejected: dict[str, int] = {}  # records not loaded, by reason

    def reject(self, reason: str) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1


@dataclass
class Listing:
    """One record as `entries()` lists it (`python -m jit cache`)."""
    key: str
    size: int
    age_s: float
    function: str
    signature: str
    kind: str = "artifact"  # "artifact" (a function's object code) | "library" (a shared kernel) | "trace"
    # | "calibration" (the products' dispatch calibrated on this CPU: runtime/dispatch.py)


class Rejected(Exception):
    """A disk record that is not loaded; `reason` says why."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


class _BytesOnly(diskcache.Disk):
    """diskcache's storage, keys as text and values as bytes only: a row
    stored pickled (shapejit writes none) is refused, never unpickled."""

    def put(self, key):
        if type(key) is not str:
            raise TypeError("cache keys are str")
        return super().put(key)

    def get(self, key, raw):
        if not raw:
            raise Rejected("pickled", "a pickled key")
        return super().get(key, raw)

    def store(self, value, read, key=diskcache.core.UNKNOWN):
        if type(value) is not bytes:
            raise TypeError("cache values are bytes")
        return super().store(value, read, key=key)

    def fetch(self, mode, filename, value, read):
        if mode not in (diskcache.core.MODE_RAW, diskcache.core.MODE_BINARY):  # (bytes in the row, or a file)
            raise Rejected("pickled" if mode == diskcache.core.MODE_PICKLE else "damaged", "not a bytes record")
        return super().fetch(mode, filename, value, read)


def _secret() -> bytes | None:
    text = config.get("SHAPEJIT_CACHE_SECRET")
    return text.encode() if text else None


def _digest(scheme: int, secret: bytes | None, key: str, header: bytes, payload: bytes) -> bytes:
    parts = (key.encode(), b"\0", struct.pack("<I", len(header)), header, payload)
    h = hmac.new(secret, digestmod=hashlib.sha256) if scheme == _HMAC else hashlib.sha256()
    for part in parts:
        h.update(part)
    return h.digest()


def pack_record(key: str, payload: bytes, info: dict, secret: bytes | None) -> bytes:
    """The disk record of `payload` under `key`: header, digest over both
    and the key (an HMAC under `secret` when there is one)."""
    header = json.dumps(info, sort_keys=True).encode()
    scheme = _HMAC if secret else _SHA
    return _HEAD.pack(_RECORD, scheme, _digest(scheme, secret, key, header, payload), len(header)) + header + payload


def record_header(blob) -> dict:
    """A record's header, without checking it (for listings)."""
    if type(blob) is not bytes or len(blob) < _HEAD.size or not blob.startswith(_RECORD):
        raise Rejected("damaged", "not a shapejit record")
    n = _HEAD.unpack_from(blob)[3]
    if n > _MAX_HEADER or _HEAD.size + n > len(blob):
        raise Rejected("damaged", "header length")
    try:
        info = json.loads(blob[_HEAD.size:_HEAD.size + n])
    except ValueError:
        raise Rejected("damaged", "header") from None
    if not isinstance(info, dict):
        raise Rejected("damaged", "header")
    return info


def unpack_record(key: str, blob, secret: bytes | None) -> tuple[dict, bytes]:
    """(header, payload) of a record read under `key`, or Rejected: damaged,
    bound to another key, or (with a secret) without a valid signature."""
    info = record_header(blob)
    _, scheme, digest, n = _HEAD.unpack_from(blob)
    header, payload = blob[_HEAD.size:_HEAD.size + n], blob[_HEAD.size + n:]
    if secret is not None and scheme != _HMAC:
        raise Rejected("unsigned", "a record without a signature (SHAPEJIT_CACHE_SECRET is set)")
    if scheme == _HMAC and secret is None:
        raise Rejected("unverifiable", "a signed record (SHAPEJIT_CACHE_SECRET is not set)")
    if scheme not in (_SHA, _HMAC):
        raise Rejected("damaged", "digest scheme")
    if not hmac.compare_digest(digest, _digest(scheme, secret, key, header, payload)):
        raise Rejected("bad_signature" if scheme == _HMAC else "damaged",
                       "its digest does not match its key and contents")
    return info, payload


def private_directory(path: str) -> None:
    """Create `path` private to this user (0700), or check that an existing
    one is this user's and writable by no one else; OSError otherwise."""
    try:
        os.makedirs(path, mode=0o700)
    except FileExistsError:
        pass
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(path)
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise PermissionError(f"owned by uid {st.st_uid}, not by this user (uid {os.getuid()})")
    if st.st_mode & 0o022:
        raise PermissionError(f"writable by {'group and others' if st.st_mode & 0o002 else 'its group'} "
                              f"(mode {stat.S_IMODE(st.st_mode):o})")


class ArtifactCache:
    """get(key) -> (bytes, level) | (None, None); put(key, bytes, info)."""

    def __init__(self, directory: str | None = None, enabled: bool | None = None,
                 size_limit: int | None = None, remote: bool = False):
        if enabled is None:
            enabled = config.get("SHAPEJIT_CACHE")
        self.directory = directory or config.get("SHAPEJIT_CACHE_DIR") or default_dir()
        self.size_limit = size_limit or config.get("SHAPEJIT_CACHE_SIZE")
        self.stats = CacheStats()
        self.remote = remote  # whether the fleet tier (SHAPEJIT_REMOTE_CACHE, runtime/remote.py) stands behind it
        self._memory: dict[str, bytes] = {}
        self._lock = forksafe.lock()
        self._disk = None
        self._warned: set[str] = set()
        self.disk_error: str | None = None
        if enabled:
            self._open()

    def _open(self) -> None:
        try:
            private_directory(self.directory)
            probe = os.path.join(self.directory, f".probe-{os.getpid()}")
            with open(probe, "w") as f:
                f.write("ok")
            os.remove(probe)
            self._disk = _Disk(diskcache.Cache(self.directory, size_limit=self.size_limit, disk=_BytesOnly,
                                               eviction_policy="least-recently-used", timeout=60))
        except Exception as e:  # noqa: BLE001 - any failure means: memory only
            self._disk = None
            self.disk_error = f"{type(e).__name__}: {e}"
            warnings.warn(f"shapejit: compile cache directory {self.directory!r} is not usable "
                          f"({self.disk_error}); caching in memory only", CacheWarning, stacklevel=3)

    @property
    def on_disk(self) -> bool:
        return self._disk is not None

    def get(self, key: str, memory: bool = True):
        """`memory=False`: the disk and remote levels only (records other
        processes update, such as saved traces)."""
        with self._lock:
            b = self._memory.get(key) if memory else None
        if b is not None:
            return b, "memory"
        if self._disk is not None:
            try:
                blob = self._disk.get(key)
                if blob is not None:
                    _, payload = unpack_record(key, blob, _secret())
                    self._keep(key, payload, memory)
                    return payload, "disk"
            except Rejected as e:
                self.reject(key, e.reason, str(e), drop=e.reason != "unverifiable")
            except Exception as e:  # noqa: BLE001 - a damaged cache database is a miss
                self.reject(key, "damaged", f"{type(e).__name__}: {e}")
        remote = remote_tier() if self.remote else None
        blob = remote.get(key) if remote is not None else None
        if blob is not None:
            try:
                _, payload = unpack_record(key, blob, _secret())
            except Rejected as e:  # (left on the server: it is the fleet's, and a replica writes it again)
                self.reject(key, e.reason, f"from {remote.url}: {e}", drop=False)
            else:
                remote.hits += 1  # (a record that passed its checks)
                self._keep(key, payload, memory)
                self._write_disk(key, blob)
                return payload, "remote"
        return None, None

    def _keep(self, key: str, payload: bytes, memory: bool) -> None:
        if memory:
            with self._lock:
                self._memory[key] = payload

    def put(self, key: str, artifact: bytes, function: str = "", signature: str = "",
            kind: str = "artifact", memory: bool = True) -> None:
        self._keep(key, artifact, memory)
        remote = remote_tier() if self.remote else None
        if self._disk is None and remote is None:
            return
        info = {"function": function, "signature": signature, "time": time.time(), "version": build_id(),
                "kind": kind}
        record = pack_record(key, artifact, info, _secret())
        self._write_disk(key, record)
        if remote is not None:
            remote.put(key, record)

    def claim(self, key: str, seconds: float, what: str = "") -> bool:
        """Whether this process is the first on the machine to claim `key`
        in the last `seconds` (a job one process does for all of them); no
        disk, no claim."""
        if self._disk is None:
            return False
        record = pack_record(key, b"", {"function": what, "signature": f"pid {os.getpid()}", "time": time.time(),
                                        "version": build_id(), "kind": "claim"}, _secret())
        try:
            return self._disk.add(key, record, seconds)
        except Exception:  # noqa: BLE001 - a full or read-only disk: nobody can keep the result either
            return False

    def _write_disk(self, key: str, record: bytes) -> None:
        if self._disk is None:
            return
        try:
            self._disk.set(key, record)
        except Exception as e:  # noqa: BLE001 - a full or read-only disk degrades to memory
            self.stats.write_errors += 1
            if self.stats.write_errors == 1:
                warnings.warn(f"shapejit: cannot write the compile cache ({type(e).__name__}: {e})",
                              CacheWarning, stacklevel=4)

    def reject(self, key: str, reason: str = "damaged", detail: str = "", drop: bool = True) -> None:
        """A record that failed its checks: counted and (unless another
        process's secret may verify it) dropped; never used.  Warned once
        per reason."""
        self.stats.reject(reason)
        if reason not in self._warned and reason != "damaged":
            self._warned.add(reason)
            warnings.warn(f"shapejit: a compile cache record was not loaded ({detail or reason}); "
                          f"it is compiled again", CacheWarning, stacklevel=3)
        if drop:
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

    def entries(self) -> list[Listing]:
        out = []
        if self._disk is None:
            return out
        now = time.time()
        try:
            keys = self._disk.keys()
        except Exception:  # noqa: BLE001 - a pickled key (never ours): listed as corrupt, never loaded
            keys = [None]
        for key in keys:
            try:
                blob = self._disk.get(key)
                info = record_header(blob)
                out.append(Listing(key, len(blob) - _HEAD.size, now - float(info.get("time", now)),
                                 str(info.get("function", "?")), str(info.get("signature", "")),
                                 str(info.get("kind", "artifact"))))
            except Exception:  # noqa: BLE001 - listed, never loaded
                out.append(Listing(str(key), 0, 0.0, "?", "", "corrupt"))
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


class _Disk:
    """The diskcache database, one call at a time per process, and fork()
    waits for the call in progress: SQLite keeps the state of its file
    locks per process, and a child forked while another thread was inside a
    transaction finds the database locked for ever."""

    def __init__(self, cache: diskcache.Cache):
        self._cache = cache
        self._lock = forksafe.waited()

    def get(self, key):
        with self._lock:
            return self._cache.get(key)

    def set(self, key, value) -> None:
        with self._lock:
            self._cache.set(key, value)

    def add(self, key, value, expire: float) -> bool:
        with self._lock:
            return self._cache.add(key, value, expire=expire)

    def delete(self, key) -> None:
        with self._lock:
            self._cache.delete(key)

    def keys(self) -> list:
        with self._lock:
            return list(self._cache.iterkeys())

    def volume(self) -> int:
        with self._lock:
            return self._cache.volume()

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)

    def clear(self) -> int:
        with self._lock:
            return self._cache.clear()


_default: ArtifactCache | None = None
_default_lock = forksafe.lock()


def default_cache() -> ArtifactCache:
    """The process-wide cache (configured from the environment on first use)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ArtifactCache(remote=True)
        return _default


def reset_default_cache() -> None:
    """Forget the process-wide cache (tests change SHAPEJIT_CACHE_DIR)."""
    global _default
    with _default_lock:
        _default = None
