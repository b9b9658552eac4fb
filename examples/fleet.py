"""A fleet of service replicas sharing one compile cache on Redis: the
first replica to meet the model traces and compiles it, the others load
its signed records and compile nothing.

    apt-get install redis-server      # (or any Redis 5+ you run yourself)
    python examples/fleet.py --replicas 3

starts a redis-server on a free loopback port (no persistence), then the
replicas of examples/service.py, each with an empty disk cache of its own,
SHAPEJIT_REMOTE_CACHE pointing at the server and one SHAPEJIT_CACHE_SECRET
(the remote tier is used only under a secret: README, "Fleet cache on
Redis").  It prints their URLs and stops them all on Ctrl-C.
`python -m bench.replicas` times the first request of each.
"""
from __future__ import annotations

import argparse
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A redis-server process on a free loopback port, no persistence; its
    working files in `directory`.  `start(*flags)` passes more flags
    (a password, a memory limit); `stop()` kills it."""

    def __init__(self, directory: str):
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server is not installed (Debian: apt-get install redis-server)")
        self.port = free_port()
        self.dir = str(directory)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = None

    def start(self, *flags: str) -> "RedisServer":
        from runtime.remote import Client, RedisError
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", self.dir, *flags],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(400):
            try:
                Client(self.url, 5.0).command("PING")
                return self
            except RedisError as e:
                if "NOAUTH" in str(e):  # (up, with a password)
                    return self
            except OSError:
                pass
            time.sleep(0.025)
        self.stop()
        raise RuntimeError("redis-server did not start")

    def client(self):
        from runtime.remote import Client
        return Client(self.url, 5.0)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def replica_env(redis_url: str, secret: str, cache_dir: str) -> dict:
    """The environment of a replica: this one's, with its own disk cache and
    the fleet's Redis and secret (any other SHAPEJIT_ setting dropped)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHAPEJIT_")}
    env.update(SHAPEJIT_CACHE_DIR=cache_dir, SHAPEJIT_REMOTE_CACHE=redis_url, SHAPEJIT_CACHE_SECRET=secret)
    return env


def start_replica(redis_url: str, secret: str, *args: str):
    """(process, url) of a service replica with an empty disk cache of its
    own; `process.log` names its log file."""
    from examples.service import spawn
    env = replica_env(redis_url, secret, tempfile.mkdtemp(prefix="shapejit-replica-"))
    log = tempfile.mktemp(prefix="replica-", suffix=".log")
    proc, url = spawn(*args, env=env, log=log)
    proc.log = log
    return proc, url


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, default=3)
    args = ap.parse_args(argv)
    redis = RedisServer(tempfile.mkdtemp(prefix="shapejit-redis-")).start()
    secret = secrets.token_hex(16)
    procs = []
    try:
        print(f"redis on {redis.url}", flush=True)
        for k in range(args.replicas):
            proc, url = start_replica(redis.url, secret)
            procs.append(proc)
            print(f"replica {k + 1} on {url} (log {proc.log})", flush=True)
        while all(p.poll() is None for p in procs):
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=60)
        redis.stop()
    return 0


if __name__ == "__main__":
    import sys
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    raise SystemExit(main())
