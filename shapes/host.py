"""The CPU code is generated for: the host's name and features, narrowed by
SHAPEJIT_ISA (`avx2`: no AVX-512 instruction even on a host that has it, so
the AVX2 kernels are tested and measured on any x86 machine).  Everything
that asks which instructions it may use (the target machine, the GEMM's
register tiles, the cache keys and the loader's compatibility check) asks
here, so a forced ISA is one consistent target."""
from __future__ import annotations

import functools

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


def has_avx512() -> bool:
    return "+avx512f" in features().split(",")
