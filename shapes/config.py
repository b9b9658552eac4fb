"""Every SHAPEJIT_* environment variable, read here and nowhere else.

One rule per kind: booleans (`1 true yes on` / `0 false no off` and empty,
any case), sizes in bytes with an optional unit (`512MiB`, `1GB`, `1.5G`,
`1e9`), positive integers, durations (`50ms`, `0.2s`), paths, and comma-separated lists.  A value that
cannot be read gives one `ConfigWarning` naming the variable and the value
used instead; it never raises at the first call.  A SHAPEJIT_* variable
that is not one of ours (a typo) is warned about once, too.

Values are read at their use, each distinct text parsed once, so a process
(or a test) that changes a variable sees the change.  This module is at the
bottom of the import graph (in `shapes`) so every package can read it.
"""
from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass


class ConfigWarning(UserWarning):
    """A SHAPEJIT_* variable shapejit could not read (its default is used)."""


@dataclass(frozen=True)
class Var:
    name: str
    kind: str      # "bool" | "size" | "count" | "seconds" | "path" | "list" | "dump" | "text"
    default: object
    doc: str


VARS = {v.name: v for v in [
    Var("SHAPEJIT_CACHE", "bool", True, "the persistent compile cache on disk (off: memory only)"),
    Var("SHAPEJIT_CACHE_DIR", "path", None, "where the disk cache lives (default: ~/.cache/shapejit or "
                                            "$XDG_CACHE_HOME/shapejit)"),
    Var("SHAPEJIT_CACHE_SIZE", "size", 1 << 30, "the disk cache's size limit, least recently used entries "
                                                "evicted beyond it"),
    Var("SHAPEJIT_CACHE_SECRET", "text", "", "sign cache records with HMAC-SHA256 under this secret; "
                                             "records without a valid signature are never loaded"),
    Var("SHAPEJIT_REMOTE_CACHE", "text", "", "the fleet tier: redis://host:port/db shared by replicas (used only "
                                             "with SHAPEJIT_CACHE_SECRET)"),
    Var("SHAPEJIT_REMOTE_TIMEOUT", "seconds", 0.04, "the longest one remote cache operation may wait (`40ms`, "
                                                   "`0.2s`)"),
    Var("SHAPEJIT_ISA", "text", "", "`avx2`: generate no AVX-512 instruction on a host that has it (the AVX2 "
                                   "kernels tested and measured anywhere)"),
    Var("SHAPEJIT_CALIBRATE", "bool", True, "a CPU with no calibrated GEMM dispatch yet is calibrated in a "
                                            "background process (SCHED_IDLE), once for every process on it"),
    Var("SHAPEJIT_CALIBRATE_BUSY", "bool", False, "keep a calibration that other processes kept interrupting "
                                                  "(tests on a loaded machine; else it keeps nothing)"),
    Var("SHAPEJIT_TRACE_CACHE", "bool", True, "saved traces: a new process reuses another's trace"),
    Var("SHAPEJIT_POOL_BYTES", "size", 512 << 20, "the bytes of pooled intermediates kept between calls, in "
                                                   "the whole process"),
    Var("SHAPEJIT_NUM_THREADS", "count", None, "threads of the native pool (default: the CPU count)"),
    Var("SHAPEJIT_COMPILE_JOBS", "count", None, "processes a module of several kernels is compiled in, forked "
                                               "for it (default: the cores this process may run on; 1: never fork)"),
    Var("SHAPEJIT_EPILOGUE_IN_STORE", "bool", False, "a product's elementwise epilogue runs in the GEMM's store "
                                                     "(else a pass of its own after it: faster where measured)"),
    Var("SHAPEJIT_SHARE_BLAS", "bool", True, "numpy's (and scipy's) OpenBLAS runs its threaded calls on the native "
                                             "pool (one set of threads: neither spins on the cores the other needs)"),
    Var("SHAPEJIT_LOG", "list", (), "log topics as they happen: recompiles, fallbacks, compile, all"),
    Var("SHAPEJIT_DUMP_LLVM", "dump", None, "LLVM IR before and after optimization: 1 for stderr, or a "
                                            "directory"),
    Var("SHAPEJIT_BOUNDS_CHECK", "bool", False, "kernels check every memory access (tests)"),
    Var("SHAPEJIT_CHECKS", "bool", False, "verify the IR after every pass (on in tests)"),
    Var("SHAPEJIT_STRESS", "text", "", "`full`: the test suite's stress tests run whole under CI too"),
    Var("SHAPEJIT_MODELS_FACTS", "path", None, "tests/test_models.py writes what it measured there"),
]}

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1 << 10, "m": 1000 ** 2, "mb": 1000 ** 2,
          "mib": 1 << 20, "g": 1000 ** 3, "gb": 1000 ** 3, "gib": 1 << 30, "t": 1000 ** 4, "tb": 1000 ** 4,
          "tib": 1 << 40}
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*\Z")

_parsed: dict[tuple[str, str | None], object] = {}
_checked_names = False


def get(name: str):
    """The value of SHAPEJIT_<...> `name` now (its default when unset or
    unreadable)."""
    raw = os.environ.get(name)
    key = (name, raw)
    try:
        return _parsed[key]
    except KeyError:
        pass
    _check_names()
    var = VARS[name]
    if raw is None:
        value = var.default
    else:
        try:
            value = _PARSE[var.kind](raw)
        except ValueError as e:
            value = var.default
            warnings.warn(f"{name}={raw!r}: {e}; using the default ({_show(var)})", ConfigWarning, stacklevel=3)
    _parsed[key] = value
    return value


def _show(var: Var) -> str:
    return "unset" if var.default is None else repr(var.default)


def _check_names() -> None:
    global _checked_names
    if _checked_names:
        return
    _checked_names = True
    for name in sorted(os.environ):
        if name.startswith("SHAPEJIT_") and name not in VARS:
            warnings.warn(f"{name} is not a shapejit setting (they are: {', '.join(VARS)})", ConfigWarning,
                          stacklevel=4)


def parse_bool(text: str) -> bool:
    t = text.strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    raise ValueError("not a boolean (1/true/yes/on or 0/false/no/off)")


def parse_size(text) -> int:
    """Bytes from an int or a text such as `512MiB`, `1GB`, `1.5G`, `1e9`."""
    if type(text) is int:
        if text < 0:
            raise ValueError("a size is >= 0")
        return text
    m = _SIZE.match(str(text))
    unit = m and _UNITS.get(m.group(2).lower())
    if unit is None:
        raise ValueError("not a size (bytes, or a number with a unit: 512MiB, 1GB, 1.5G)")
    n = float(m.group(1)) * unit
    if n >= 1 << 63:
        raise ValueError("a size beyond int64")
    return int(n)


def _count(text: str) -> int:
    try:
        n = int(text.strip())
    except ValueError:
        raise ValueError("not an integer") from None
    if n < 1:
        raise ValueError("must be 1 or more")
    return n


_SECONDS = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?)\s*(ms|s|)\s*\Z")


def _seconds(text: str) -> float:
    m = _SECONDS.match(text.lower())
    if m is None or float(m.group(1)) <= 0:
        raise ValueError("not a duration (seconds, or a number with ms or s: 50ms, 0.2s)")
    return float(m.group(1)) / (1000.0 if m.group(2) == "ms" else 1.0)


def _dump(text: str):
    """None (off), "stderr", or a directory."""
    t = text.strip()
    if t.lower() in _FALSE:
        return None
    if t.lower() in _TRUE or t in ("stderr", "-"):
        return "stderr"
    return t


_PARSE = {
    "bool": parse_bool,
    "size": parse_size,
    "count": _count,
    "seconds": _seconds,
    "path": lambda t: t.strip() or None,
    "list": lambda t: tuple(p.strip() for p in t.split(",") if p.strip()),
    "dump": _dump,
    "text": str.strip,
}
