"""The fleet tier of the compile cache: a Redis server shared by the
replicas of a service, behind each process's memory and disk tiers
(`SHAPEJIT_REMOTE_CACHE=redis://host:port/db`).

It holds the same records as the disk tier (runtime/cache.py: header,
payload and a digest over both and the key), object code and saved traces
alike, under `shapejit:<record key>`.  A local miss reads it; a hit is
checked like a disk record and written to the local disk; every local write
goes to it too.

Trust: anyone who can write to the Redis could otherwise run code in every
replica, so the tier is used only with `SHAPEJIT_CACHE_SECRET` set: every
record is signed (HMAC-SHA256 over key, header and payload), and one
without a valid signature is never loaded (counted, warned once, compiled
again).  Without a secret the tier is off, with one warning.

Faults: one operation waits at most `SHAPEJIT_REMOTE_TIMEOUT` (40 ms by
default: records are a few KB to a few hundred KB, a GET on a LAN takes a
few ms, and the failure path after the wait (the warning, the probe thread)
fits in the 10 ms left of a 50 ms budget: `python -m bench.replicas
--stalled 9`); a failure (refused, timed out, Redis full) warns once per outage,
is counted by kind, and turns the tier off: calls go on with the local
tiers at once, and a background thread pings the server every few seconds
until it answers, then turns the tier back on.

The client is the few commands of Redis's protocol (RESP2) the tier needs,
over one socket with a deadline per command: redis-py would add a
dependency and 175 ms of imports to the first call of every replica (measured
on a 2-core AMD EPYC without AVX-512).
"""
from __future__ import annotations

import os
import socket
import threading
import time
import warnings
from urllib.parse import unquote, urlsplit

from shapes import config, forksafe

PREFIX = "shapejit:"
PROBE_SECONDS = 2.0  # how often an unreachable server is tried again, in the background


class RemoteWarning(UserWarning):
    """The remote cache tier is unusable (for now); the local tiers go on."""


class RedisError(Exception):
    """An error reply of the server."""


class Client:
    """GET, SET, PING, KEYS and the rest of RESP2 over one TCP connection
    (reconnected after an error, or in a forked child), one command at a
    time; each command waits at most `timeout` seconds in all."""

    MAX_REPLY = 1 << 30  # the largest bulk reply read (a record is a few MB at most)

    def __init__(self, url: str, timeout: float):
        parts = urlsplit(url)
        if parts.scheme != "redis" or not parts.hostname:
            raise ValueError(f"SHAPEJIT_REMOTE_CACHE={url!r}: not a redis://[user:password@]host[:port][/db] URL"
                             + (" (TLS, rediss://, is not supported)" if parts.scheme == "rediss" else ""))
        path = parts.path.strip("/")
        if path and not path.isdigit():
            raise ValueError(f"SHAPEJIT_REMOTE_CACHE={url!r}: the database is a number")
        self.address = (parts.hostname, parts.port or 6379)
        self.db = int(path or 0)
        self.auth = tuple(unquote(x) for x in (parts.username, parts.password) if x)
        self.timeout = timeout
        self._sock = None
        self._pid = 0
        self._buf = b""
        self._lock = forksafe.lock()

    def command(self, *args):
        with self._lock:
            deadline = time.monotonic() + self.timeout
            try:
                if self._sock is None or self._pid != os.getpid():
                    self._connect(deadline)
                return self._call(args, deadline)
            except BaseException:
                self._close()
                raise

    def _connect(self, deadline) -> None:
        self._close()
        self._sock = socket.create_connection(self.address, timeout=max(deadline - time.monotonic(), 1e-3))
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._pid = os.getpid()
        if self.auth:
            self._call(("AUTH", *self.auth), deadline)
        if self.db:
            self._call(("SELECT", self.db), deadline)

    def _close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        self._sock, self._buf = None, b""

    def _call(self, args, deadline):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self._sock.settimeout(max(deadline - time.monotonic(), 1e-3))
        self._sock.sendall(b"".join(out))
        reply = self._reply(deadline)
        if isinstance(reply, RedisError):
            raise reply
        return reply

    def _reply(self, deadline):
        line = self._line(deadline)
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RedisError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            if n > self.MAX_REPLY:
                raise RedisError(f"a reply of {n} bytes")
            data = self._exactly(n + 2, deadline)
            return data[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply(deadline) for _ in range(n)]
        raise RedisError(f"not a RESP reply: {line[:40]!r}")

    def _line(self, deadline) -> bytes:
        while b"\r\n" not in self._buf:
            self._fill(deadline)
        line, self._buf = self._buf.split(b"\r\n", 1)
        return line

    def _exactly(self, n: int, deadline) -> bytes:
        while len(self._buf) < n:
            self._fill(deadline)
        data, self._buf = self._buf[:n], self._buf[n:]
        return data

    def _fill(self, deadline) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no answer from {self.address[0]}:{self.address[1]} within {self.timeout:g} s")
        self._sock.settimeout(left)
        chunk = self._sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self._buf += chunk


class RemoteTier:
    def __init__(self, url: str, timeout: float):
        parts = urlsplit(url)
        self.url = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()  # (shown: no password)
        self.timeout = timeout
        self._client = Client(url, timeout)
        self._lock = forksafe.lock()
        self._up = True
        self._probe: threading.Thread | None = None
        self.hits = self.misses = self.writes = 0
        self.errors: dict[str, int] = {}  # failures by kind: unreachable, timeout, full, error

    @property
    def up(self) -> bool:
        return self._up

    def get(self, key: str) -> bytes | None:
        if not self._up:
            return None
        try:
            blob = self._client.command("GET", PREFIX + key)
        except Exception as e:  # noqa: BLE001 - any failure of the tier: the local tiers go on
            self._failed(e)
            return None
        if blob is None:
            self.misses += 1
        return blob

    def put(self, key: str, record: bytes) -> None:
        if not self._up:
            return
        try:
            self._client.command("SET", PREFIX + key, record)
            self.writes += 1
        except Exception as e:  # noqa: BLE001
            self._failed(e)

    def _failed(self, e: Exception) -> None:
        kind = _kind(e)
        with self._lock:
            self.errors[kind] = self.errors.get(kind, 0) + 1
            if not self._up:
                return
            self._up = False
            if kind == "full":  # (writes refused; reads would still work, but one rule keeps it simple)
                why = "Redis is full (maxmemory) and refuses writes"
            else:
                why = f"{type(e).__name__}: {e}"
            warnings.warn(f"shapejit: remote compile cache {self.url} unusable ({why}); going on with the "
                          f"local tiers and trying it again every {PROBE_SECONDS:.0f} s", RemoteWarning,
                          stacklevel=4)
            if self._probe is None or not self._probe.is_alive():
                self._probe = threading.Thread(target=self._reconnect, name="shapejit-remote-probe", daemon=True)
                self._probe.start()

    def _reconnect(self) -> None:
        while True:
            time.sleep(PROBE_SECONDS)
            try:
                self._client.command("PING")
                if _full(self._client):
                    continue
            except Exception:  # noqa: BLE001 - still down
                continue
            with self._lock:
                self._up = True
            return


def _kind(e: Exception) -> str:
    if isinstance(e, RedisError) and str(e).startswith("OOM"):
        return "full"
    if isinstance(e, (TimeoutError, socket.timeout)):
        return "timeout"
    if isinstance(e, OSError):  # (refused, reset, closed, no route)
        return "unreachable"
    return "error"


def _full(client) -> bool:
    """Whether the server refuses writes for lack of memory now."""
    try:
        client.command("SET", "shapejit-probe", b"1")
        return False
    except Exception as e:  # noqa: BLE001
        return _kind(e) == "full"


_tier: RemoteTier | None = None
_tier_url: str | None = None
_tier_lock = forksafe.lock()
_warned_secret = False


def current_tier() -> RemoteTier | None:
    """The tier in use, without configuring one (for the metrics)."""
    return _tier


def remote_tier() -> RemoteTier | None:
    """The process's remote tier as SHAPEJIT_REMOTE_CACHE configures it now
    (None: not configured, no secret, or no client library)."""
    global _tier, _tier_url, _warned_secret
    url = config.get("SHAPEJIT_REMOTE_CACHE")
    if not url:
        return None
    with _tier_lock:
        if _tier_url == url:
            return _tier
        if not config.get("SHAPEJIT_CACHE_SECRET"):
            if not _warned_secret:
                _warned_secret = True
                warnings.warn("shapejit: SHAPEJIT_REMOTE_CACHE is set without SHAPEJIT_CACHE_SECRET; the remote "
                              "tier is off (its records must be signed: anyone who can write to the server "
                              "could otherwise run code in this process)", RemoteWarning, stacklevel=3)
            return None
        try:
            _tier = RemoteTier(url, config.get("SHAPEJIT_REMOTE_TIMEOUT"))
        except ValueError as e:
            warnings.warn(f"shapejit: remote compile cache off: {e}", RemoteWarning, stacklevel=3)
            _tier = None
        _tier_url = url
        return _tier
