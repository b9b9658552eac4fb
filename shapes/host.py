"""The CPU code is generated for: the host's name and features, narrowed by
SHAPEJIT_ISA (`avx2`: no AVX-512 instruction even on a host that has it, so
the AVX2 kernels are tested and measured on any x86 machine).  Everything
that asks which instructions it may use (the target machine, the GEMM's
register tiles, the cache keys and the loader's compatibility check) asks
here, so a forced ISA is one consistent target."""
from __future__ import annotations

import functools
import os

import llvmlite.binding as llvm

from shapes import config

ISAS = ("", "avx2")  # "" is the host's own
_WIDE = ("avx512", "evex512", "amx")  # the features SHAPEJIT_ISA=avx2 turns off


def forced() -> str:
    isa = config.get("SHAPEJIT_ISA")
    if isa not in ISAS:
        raise ValueError(f"SHAPEJIT_ISA={isa!r}: one of {', '.join(repr(i) for i in ISAS if i)}, or unset")
    return isa


@functools.cache
def _features(isa: str) -> str:
    llvm.initialize_native_target()
    flat = llvm.get_host_cpu_features().flatten()
    if isa == "avx2":
        flat = ",".join("-" + f[1:] if f[1:].startswith(_WIDE) else f for f in flat.split(","))
    return flat


def features() -> str:
    """LLVM's feature string for the target (`+avx2,-avx512f,...`)."""
    return _features(forced())


def cpu_name() -> str:
    return llvm.get_host_cpu_name()


def has_f16c() -> bool:
    """Whether the CPU converts float16 to and from float32 (every x86 with
    AVX2 does): kernels compute float16 only where it does, since LLVM would
    otherwise call compiler-rt's conversions, which the process lacks."""
    return "+f16c" in features().split(",")


def has_fma() -> bool:
    return "+fma" in features().split(",")


def has_avx512() -> bool:
    return "+avx512f" in features().split(",")


DEFAULT_CACHE_BYTES = 32 << 20  # (where the kernel does not say: a Zen 3 or Zen 4 CCD's L3)


@functools.cache
def last_level_cache_bytes() -> int:
    """The size of this CPU's largest data cache (Linux's sysfs view of cpu0),
    or DEFAULT_CACHE_BYTES where it cannot be read."""
    sizes = []
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in os.listdir(root):
            if not entry.startswith("index"):
                continue
            with open(f"{root}/{entry}/type") as f:
                if f.read().strip() == "Instruction":
                    continue
            with open(f"{root}/{entry}/size") as f:
                text = f.read().strip().upper()
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            sizes.append(int(text.rstrip("KMG")) * scale)
    except (OSError, ValueError):
        return DEFAULT_CACHE_BYTES
    return max(sizes, default=DEFAULT_CACHE_BYTES)
