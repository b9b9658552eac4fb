"""The plain-C ABI of a fused kernel, and the numpy array objects it reads.

`void k(i64 start, i64 stop, i8* arrays..., i64 ints..., double floats...)`
where `arrays` are numpy array objects (the kernel reads their data pointer
and, for strided ones, their strides from numpy's public PyArrayObject
layout, checked at import by runtime/), `ints` are the dynamic extents, the
integer scalars folded from dims and the runtime integer and bool scalars
(exactly, as int64), `floats` the runtime float scalars.  [start, stop) ranges over
the flattened rows, so the runtime can split the work across cores.

In: a clustering Kernel and the producers of its inputs.  Out: KernelArgs
(which input is an array, an int, a float or a constant folded into the
code; the LLVM function of that signature and its arguments by value),
and the KernelABI the runtime calls it by.  Also the LLVM types of numpy's
dtypes and the array object's field offsets, which every kernel (loops,
lifted loops, the GEMM) shares.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from clustering.partition import Kernel
from shapes.ir import Node
from shapes.kernelargs import ERRCELL, INT_KINDS

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
HALF = np.dtype(np.float16)
# the LLVM type a kernel computes each dtype in: float16 in float32, rounded to
# float16 after every op (codegen/values.py round_half), as numpy's half loops
# compute (npy_half_to_float, the float op, npy_float_to_half); in memory it
# is LLVM's half (MEMTYPE)
LLTYPE = {np.dtype(np.float32): F32, np.dtype(np.float64): F64, np.dtype(np.bool_): I1, HALF: F32,
          **{np.dtype(f"{sign}int{bits}"): ir.IntType(bits) for sign in ("", "u") for bits in (8, 16, 32, 64)}}
MEMTYPE = {**LLTYPE, HALF: F16, np.dtype(np.bool_): I8}  # (a bool is a byte in memory)


def from_memory(b: ir.IRBuilder, r, dtype: np.dtype):
    """An element loaded as MEMTYPE, as the LLTYPE value computed with."""
    if dtype == np.bool_:
        return b.icmp_unsigned("!=", r, ir.Constant(I8, 0))
    return b.fpext(r, F32) if dtype == HALF else r


def to_memory(b: ir.IRBuilder, x, dtype: np.dtype):
    """An LLTYPE value as the MEMTYPE element to store (a float16 exactly:
    every float16 value computed was rounded to one)."""
    if dtype == np.bool_:
        return b.zext(x, I8)
    return b.fptrunc(x, F16) if dtype == HALF else x

# numpy's PyArrayObject_fields on 64-bit CPython: data, nd, dimensions, strides
DATA_OFFSET, DIMS_OFFSET, STRIDES_OFFSET = 16, 32, 40



def _count(args, kinds: tuple) -> int:
    """How many of an ABI's `args` are of one of `kinds`."""
    return sum(1 for a in args if a[0] in kinds)


def array_field(b: ir.IRBuilder, obj, offset: int, ty):
    """A pointer field (of LLVM type `ty`) of numpy's array object: data, dims, strides."""
    return b.load(b.bitcast(b.gep(obj, [ir.Constant(I64, offset)]), ty.as_pointer()))


@dataclass(frozen=True)
class KernelABI:
    """What the runtime passes, in order: ("array", value id), then the ints
    (("int", expr) and ("intval", value id): a runtime integer or bool
    scalar as int64), then ("float", value id)."""
    symbol: str
    args: tuple
    rows: object      # expr: the [start, stop) range the kernel splits over
    inner: object     # expr: elements per row (work per range unit)

    @property
    def n_arrays(self) -> int:
        return _count(self.args, ("array",))

    @property
    def n_ints(self) -> int:
        return _count(self.args, INT_KINDS)

    @property
    def n_floats(self) -> int:
        return _count(self.args, ("float",))


@dataclass
class BoundArgs:
    """A kernel function's arguments by what they carry."""
    arrays: dict    # value id -> the array object (i8*)
    extents: dict   # dynamic extent (expr) -> its i64
    ints: dict      # value id of an integer or bool scalar (runtime or a folded dim) -> its i64
    floats: dict    # value id of a float scalar -> its double (a complex one's: its two parts' doubles)
    errcell: ir.Value | None  # bounds-checked mode: the i64 cell an out-of-bounds access sets


@dataclass
class KernelArgs:
    """How a kernel's inputs and outputs reach its function: `args` (the
    ABI's, in order; an int scalar's entry carries its value id third),
    `extents` (its distinct dynamic extents), `consts` (value id -> the
    Python or numpy scalar folded into the code), `int_scalars` (value id ->
    its entry in `args`), `checked` (the error cell is an int argument)."""
    args: list
    extents: list
    consts: dict
    int_scalars: dict
    checked: bool

    @classmethod
    def of(cls, kernel: Kernel, producers: dict[int, Node], checked: bool) -> KernelArgs:
        """Scalars a const produces are folded, those a dim produces are
        ints, other int and bool scalars ints too, float scalars floats;
        arrays are the inputs', then the outputs'.  `checked`: the error
        cell's address is an int after the others."""
        consts: dict[int, object] = {}
        arrays, ints, floats = [], [], []
        for v in kernel.inputs:
            p = producers.get(v.id)
            if p is not None and p.op == "const" and not hasattr(p.attr("value"), "array"):
                consts[v.id] = p.attr("value")
            elif p is not None and p.op == "dim":
                ints.append(("int", p.attr("expr"), v.id))
            elif v.ndim == 0 and v.dtype.kind in "iub":
                ints.append(("intval", v.id, v.id))
            elif v.ndim == 0 and v.dtype.kind == "c":  # (its parts, as two doubles)
                floats += [("float", ("re", v.id)), ("float", ("im", v.id))]
            elif v.ndim == 0:
                floats.append(("float", v.id))
            else:
                arrays.append(("array", v.id))
        arrays += [("array", v.id) for v in kernel.outputs]
        # distinct dynamic extents, passed as ints: the domain's, then any other
        # the operands' shapes mention (dims equal to a domain dim only under a
        # guard, e.g. floor(s2/2) and floor(s2/2 + 1/2) for even s2)
        extents = []
        for d in tuple(kernel.domain) + tuple(d for v in kernel.inputs + kernel.outputs for d in v.shape):
            if not isinstance(d, int) and d not in extents:
                extents.append(d)
        args = arrays + [("int", e) for e in extents] + [a[:2] for a in ints]
        if checked:
            args.append(ERRCELL)
        args += floats
        return cls(args, extents, consts, {a[2]: a for a in ints}, checked)

    @property
    def n_arrays(self) -> int:
        return _count(self.args, ("array",))

    def abi(self, symbol: str, rows, inner) -> KernelABI:
        """The ABI of the function `symbol` (see KernelABI for rows and inner)."""
        return KernelABI(symbol, tuple(a[:2] for a in self.args), rows, inner)

    def function(self, module: ir.Module, symbol: str, lead: int) -> ir.Function:
        """The kernel's function: `lead` i64s (start, stop and a tile's
        columns), then the ABI's arguments; arrays do not alias."""
        n_arr, n_int, n_flt = self.n_arrays, _count(self.args, INT_KINDS), _count(self.args, ("float",))
        fnty = ir.FunctionType(ir.VoidType(), [I64] * lead + [I8.as_pointer()] * n_arr + [I64] * n_int
                               + [F64] * n_flt)
        fn = ir.Function(module, fnty, symbol)
        for a in fn.args[lead:lead + n_arr]:
            a.add_attribute("noalias")
        return fn

    def bind(self, b: ir.IRBuilder, fn: ir.Function, lead: int) -> BoundArgs:
        """fn's arguments after the `lead` ones, by what they carry."""
        args = iter(fn.args[lead:])
        arrays = {a[1]: next(args) for a in self.args if a[0] == "array"}
        extents = {e: next(args) for e in self.extents}
        ints = {vid: next(args) for vid in self.int_scalars}
        errcell = b.inttoptr(next(args), I64.as_pointer(), name="errcell") if self.checked else None
        floats = {a[1]: next(args) for a in self.args if a[0] == "float"}
        for vid in [k[1] for k in floats if isinstance(k, tuple) and k[0] == "re"]:  # (a complex scalar)
            floats[vid] = (floats.pop(("re", vid)), floats.pop(("im", vid)))
        return BoundArgs(arrays, extents, ints, floats, errcell)
