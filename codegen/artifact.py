"""Compiled-kernel artifacts: plain data that can be cached on disk.

An :class:`Artifact` is the output of :func:`codegen.llvm.compile_ir` and the
input of :func:`runtime.loader.load`.  It holds native object code (one
object or more: a module compiled in parts, codegen/llvm.py, is linked
whole at load) plus a description of every kernel in it and of the machine
it was compiled for.

Every kernel follows one C ABI::

    void k(i64 start, i64 stop, ptr args..., i64 ints..., double floats...)

``start``/``stop`` range over the outermost parallel loop; the pointer
arguments are data pointers of arrays (or, for the jit's kernels, the numpy
array objects).  A kernel may also have a Python entry (codegen/pycall.py): a
CPython METH_FASTCALL function taking the same arguments as Python objects.

Serialized layout (all integers little endian)::

    magic     8 bytes   b"SHJITART"
    version   u32       FORMAT_VERSION
    length    u64       length of the payload
    checksum  32 bytes  sha256 of the payload
    payload:
      header_len  u32
      header      JSON (utf-8): kernels, target description, metadata, the
                  byte length of each object
      object code (the rest: the objects one after the other)

``metadata`` round-trips through JSON, so it should contain only JSON-native
values (tuples come back as lists, non-string dict keys as strings).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import struct
from dataclasses import dataclass, field

__all__ = ["Artifact", "ArtifactError", "KernelInfo", "FORMAT_VERSION", "MAGIC"]

MAGIC = b"SHJITART"
FORMAT_VERSION = 4  # 2: kernels have a Python entry symbol; 3: the key symbol; 4: several objects

_PREFIX = struct.Struct("<8sIQ32s")  # magic, version, payload length, sha256
_U32 = struct.Struct("<I")


class ArtifactError(ValueError):
    """Raised for truncated, corrupted, foreign or unusable artifact data."""


@dataclass(frozen=True)
class KernelInfo:
    """Name and argument counts of one kernel, and the symbol of its Python
    entry ("" for none) (see the module docstring)."""

    symbol: str
    n_ptr_args: int
    n_int_args: int = 0
    n_float_args: int = 0
    py_entry: str = ""

    @property
    def n_args(self) -> int:
        """Total number of arguments, including start and stop."""
        return 2 + self.n_ptr_args + self.n_int_args + self.n_float_args


@dataclass(frozen=True)
class Artifact:
    objects: tuple[bytes, ...]  # object files, linked together
    kernels: tuple[KernelInfo, ...]
    triple: str
    cpu: str
    features: str
    llvm_version: str
    llvmlite_version: str
    metadata: dict = field(default_factory=dict, hash=False)
    # an exported symbol named from the cache key the object code was compiled for ("" for none):
    # the loader requires it, so object code stored under another key is never run in its place
    key_symbol: str = ""

    def kernel(self, symbol: str) -> KernelInfo:
        for k in self.kernels:
            if k.symbol == symbol:
                return k
        raise KeyError(symbol)

    # -- serialization ---------------------------------------------------

    def to_bytes(self) -> bytes:
        header = {
            "kernels": [
                [k.symbol, k.n_ptr_args, k.n_int_args, k.n_float_args, k.py_entry]
                for k in self.kernels
            ],
            "triple": self.triple,
            "cpu": self.cpu,
            "features": self.features,
            "llvm_version": self.llvm_version,
            "llvmlite_version": self.llvmlite_version,
            "metadata": self.metadata,
            "key_symbol": self.key_symbol,
            "object_sizes": [len(o) for o in self.objects],
        }
        try:
            header_bytes = json.dumps(header, sort_keys=True).encode("utf-8")
        except (TypeError, ValueError) as e:
            raise ArtifactError(f"artifact metadata is not JSON-serializable: {e}") from e
        payload = b"".join([_U32.pack(len(header_bytes)), header_bytes, *map(bytes, self.objects)])
        prefix = _PREFIX.pack(
            MAGIC, FORMAT_VERSION, len(payload), hashlib.sha256(payload).digest()
        )
        return prefix + payload

    @classmethod
    def from_bytes(cls, data: bytes) -> "Artifact":
        data = bytes(data)
        if len(data) < _PREFIX.size:
            raise ArtifactError("artifact data truncated (no header)")
        magic, version, length, checksum = _PREFIX.unpack_from(data)
        if magic != MAGIC:
            raise ArtifactError("not a shapejit artifact (bad magic)")
        if version != FORMAT_VERSION:
            raise ArtifactError(
                f"unsupported artifact format version {version} "
                f"(expected {FORMAT_VERSION})"
            )
        payload = data[_PREFIX.size:]
        if len(payload) != length:
            raise ArtifactError(
                f"artifact payload has {len(payload)} bytes, header says {length}"
            )
        if hashlib.sha256(payload).digest() != checksum:
            raise ArtifactError("artifact checksum mismatch (corrupted data)")
        try:
            (header_len,) = _U32.unpack_from(payload)
            header_end = _U32.size + header_len
            if header_end > len(payload):
                raise ValueError("header length exceeds payload")
            header = json.loads(payload[_U32.size:header_end].decode("utf-8"))
            kernels = tuple(
                KernelInfo(str(s), int(p), int(i), int(f), str(py))
                for s, p, i, f, py in header["kernels"]
            )
            sizes = [int(n) for n in header["object_sizes"]]
            if min(sizes, default=0) < 0 or header_end + sum(sizes) != len(payload):
                raise ValueError("object sizes do not add up to the payload")
            ends = list(itertools.accumulate(sizes, initial=header_end))
            return cls(
                objects=tuple(payload[a:b] for a, b in zip(ends, ends[1:])),
                kernels=kernels,
                triple=str(header["triple"]),
                cpu=str(header["cpu"]),
                features=str(header["features"]),
                llvm_version=str(header["llvm_version"]),
                llvmlite_version=str(header["llvmlite_version"]),
                metadata=dict(header["metadata"]),
                key_symbol=str(header["key_symbol"]),
            )
        except (ValueError, TypeError, KeyError, struct.error) as e:
            # json.JSONDecodeError and UnicodeDecodeError are ValueErrors.
            raise ArtifactError(f"malformed artifact header: {e}") from e
