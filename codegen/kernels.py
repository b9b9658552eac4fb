"""Lowering one fused Kernel to an LLVM function over symbolic extents.

ABI (plain C): `void k(i64 start, i64 stop, i8* arrays..., i64 ints..., double floats...)`
where `arrays` are numpy array objects (the kernel reads their data pointer
and, for strided ones, their strides from numpy's public PyArrayObject
layout, checked at import by runtime/), `ints` are the dynamic extents, the
integer scalars folded from dims and the runtime integer and bool scalars
(exactly, as int64), `floats` the runtime float scalars.  [start, stop) ranges over
the flattened rows, so the runtime can split the work across cores.

Loop structure, per row of the domain R + (n,):
    pass 1..L   for j < n: accumulate the reductions of that level
    final pass  for j < n: compute and store the full-size outputs
    then        store per-row outputs
Values are recomputed from the inputs in each pass rather than stored: the
row stays in cache, memory traffic is one read per input and one write per
output.  With strided inputs the whole row loop is emitted twice, a fast
version for unit inner strides chosen at run time (BladeDISC's speculation).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy
from llvmlite import ir

from clustering.partition import ROW_REDUCTIONS, Kernel, compare_dtype, is_column_reduction
from codegen.emitters import EMITTERS, MATH, REDUCERS
from codegen.emitters import intrinsic as _intrinsic
from codegen.llvm import for_range
from shapes.ir import Node, Value
from shapes.ops import OPS

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F32, F64 = ir.FloatType(), ir.DoubleType()
LLTYPE = {np.dtype(np.float32): F32, np.dtype(np.float64): F64, np.dtype(np.bool_): I1,
          np.dtype(np.int32): I32, np.dtype(np.int64): I64}

# numpy's PyArrayObject_fields on 64-bit CPython: data, nd, dimensions, strides
DATA_OFFSET, DIMS_OFFSET, STRIDES_OFFSET = 16, 32, 40

REASSOC = ("reassoc", "nsz")
SUM_BLOCK = 1024  # elements of a row summed in one block (see KernelEmitter.totals)
INT_KINDS = ("int", "intval")  # the ABI's arguments passed as i64 (KernelABI)
COLUMN_BLOCK = 64  # columns a column reduction's work unit covers (a vector loop's worth, several times)


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
        return sum(1 for a in self.args if a[0] == "array")

    @property
    def n_ints(self) -> int:
        return sum(1 for a in self.args if a[0] in INT_KINDS)

    @property
    def n_floats(self) -> int:
        return sum(1 for a in self.args if a[0] == "float")


def _is_one(d) -> bool:
    return isinstance(d, int) and d == 1


def fits_tiles(k: Kernel) -> bool:
    """Whether kernel `k` can run a tile at a time (KernelEmitter `tile`):
    elementwise over a domain of two dims or more, every output of the
    domain's shape."""
    return (not k.has_reduction and not k.column and len(k.domain) >= 2
            and all(tuple(v.shape) == tuple(k.domain) for v in k.outputs))


class KernelEmitter:
    """`tile`: the function computes a rectangle of the domain, rows [start,
    stop) of its flattened leading dims and columns [col0, col1) of its last
    (two more i64 arguments after stop): a GEMM computes an epilogue a tile
    of the product at a time, while the tile is in cache (fits_tiles)."""

    def __init__(self, module: ir.Module, kernel: Kernel, producers: dict[int, Node],
                 contiguous: set[int], symbol: str, checked: bool = False, tile: bool = False):
        self.m, self.k, self.producers, self.symbol = module, kernel, producers, symbol
        self.checked = checked
        self.tile = tile
        assert not tile or fits_tiles(kernel)
        self.dom = tuple(kernel.domain)
        self.rank = len(self.dom)
        self.members = {n.out.id: n for n in kernel.nodes}
        self.flat = not kernel.has_reduction and self.rank == 1
        self.consts: dict[int, object] = {}
        arrays, ints, floats = [], [], []
        for v in kernel.inputs:
            p = producers.get(v.id)
            if p is not None and p.op == "const" and not hasattr(p.attr("value"), "array"):
                self.consts[v.id] = p.attr("value")
            elif p is not None and p.op == "dim":
                ints.append(("int", p.attr("expr"), v.id))
            elif v.ndim == 0 and v.dtype.kind in "iub":
                ints.append(("intval", v.id, v.id))
            elif v.ndim == 0:
                floats.append(("float", v.id))
            else:
                arrays.append(("array", v.id))
        arrays += [("array", v.id) for v in kernel.outputs]
        # distinct dynamic extents, passed as ints: the domain's, then any other
        # the operands' shapes mention (dims equal to a domain dim only under a
        # guard, e.g. floor(s2/2) and floor(s2/2 + 1/2) for even s2)
        self.extents = []
        for d in self.dom + tuple(d for v in kernel.inputs + kernel.outputs for d in v.shape):
            if not isinstance(d, int) and d not in self.extents:
                self.extents.append(d)
        self.arg_list = arrays + [("int", e) for e in self.extents] + [a[:2] for a in ints]
        if checked:
            self.arg_list.append(("int", "errcell"))
        self.arg_list += floats
        self.int_scalars = {a[2]: a for a in ints}
        self.strided = {v.id for v in kernel.inputs if v.ndim > 0 and v.id not in contiguous
                        and v.id not in self.consts}
        self.values = {v.id: v for v in kernel.inputs + kernel.outputs}
        for n in kernel.nodes:
            self.values[n.out.id] = n.out

    # -------------------------------------------------------------- driver
    def emit(self) -> KernelABI:
        n_arr = sum(1 for a in self.arg_list if a[0] == "array")
        n_int = sum(1 for a in self.arg_list if a[0] in INT_KINDS)
        n_flt = sum(1 for a in self.arg_list if a[0] == "float")
        lead = 4 if self.tile else 2  # start, stop (and the tile's col0, col1)
        fnty = ir.FunctionType(ir.VoidType(), [I64] * lead + [I8.as_pointer()] * n_arr + [I64] * n_int
                               + [F64] * n_flt)
        fn = ir.Function(self.m, fnty, self.symbol)
        for a in fn.args[lead:lead + n_arr]:
            a.add_attribute("noalias")
        self.fn = fn
        entry = fn.append_basic_block("entry")
        b = self.b = ir.IRBuilder(entry)
        start, stop = fn.args[0], fn.args[1]
        self.cols = tuple(fn.args[2:4]) if self.tile else None
        args = iter(fn.args[lead:])
        self.obj = {}
        for a in self.arg_list:
            if a[0] == "array":
                self.obj[a[1]] = next(args)
        self.ext_val = {}
        for e in self.extents:
            self.ext_val[e] = next(args)
        self.int_val = {}
        for vid in self.int_scalars:
            self.int_val[vid] = next(args)
        if self.checked:
            self.errcell = b.inttoptr(next(args), I64.as_pointer(), name="errcell")
        self.flt_val = {}
        for a in self.arg_list:
            if a[0] == "float":
                self.flt_val[a[1]] = next(args)
        self.data = {vid: self._data_ptr(vid) for vid in self.obj}
        self.extent = {vid: self._byte_extent(vid) for vid in self.obj} if self.checked else {}
        self.inner_stride_arg = {vid: self._stride_arg(vid, self.values[vid].ndim - 1)
                                 for vid in self.strided}
        self.accs = {n.out.id: b.alloca(LLTYPE[n.out.dtype], name=f"acc{n.out.id}")
                     for n in self.k.nodes if n.op in ROW_REDUCTIONS}
        # a sum adds SUM_BLOCK-element block sums into a float64 total (with a
        # compensation term for float64 sums): long rows stay as accurate as
        # numpy's pairwise sum; a row of one block is summed exactly as before
        self.totals = {n.out.id: (b.alloca(F64, name=f"total{n.out.id}"), b.alloca(F64, name=f"comp{n.out.id}"))
                       for n in self.k.nodes if _float_sum(n)}
        body = self._columns if self.k.column else self._rows
        runtime_strided = [vid for vid in self.strided if not self._static_inner_zero(vid)]
        if runtime_strided:
            fast = ir.Constant(I1, 1)
            for v in runtime_strided:
                fast = b.and_(fast, b.icmp_signed("==", self.inner_stride_arg[v], ir.Constant(I64, 1)))
            with b.if_else(fast) as (then, other):
                with then:
                    body(start, stop, unit_inner=True)
                with other:
                    body(start, stop, unit_inner=False)
        else:
            body(start, stop, unit_inner=True)
        b.ret_void()
        if self.k.column:  # split over (batch index, block of columns) units
            p = next(n for n in self.k.nodes if is_column_reduction(n)).attr("axis")[0]
            blocks = sympy.floor((sympy.sympify(self.dom[-1]) + COLUMN_BLOCK - 1) / COLUMN_BLOCK)
            units = sympy.sympify(_prod(self.dom[:p])) * blocks
            units = int(units) if units.is_Integer else units
            return KernelABI(self.symbol, tuple(a[:2] for a in self.arg_list), units,
                             COLUMN_BLOCK * _prod(self.dom[p:-1]))
        rows = self.dom[-1] if self.flat else _prod(self.dom[:-1])
        inner = 1 if self.flat else self.dom[-1]
        return KernelABI(self.symbol, tuple(a[:2] for a in self.arg_list), rows, inner)

    def whole_domain(self, symbol: str) -> ir.Function:
        """After emit() with `tile`: `symbol`, the kernel's usual function
        (the ABI without the tile's columns), calling the tile function on
        rows [start, stop) and every column."""
        tile = self.fn
        n_arr = sum(1 for a in self.arg_list if a[0] == "array")
        types = [tile.args[0].type, tile.args[1].type] + [a.type for a in tile.args[4:]]
        fn = ir.Function(self.m, ir.FunctionType(ir.VoidType(), types), symbol)
        tile.attributes.add("noinline")  # (one copy of the loops, called from here and from a GEMM)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        n = self.dom[-1]
        width = ir.Constant(I64, n) if isinstance(n, int) else fn.args[2 + n_arr + self.extents.index(n)]
        b.call(tile, [fn.args[0], fn.args[1], ir.Constant(I64, 0), width] + list(fn.args[2:]))
        b.ret_void()
        return fn

    # ------------------------------------------------------------- helpers
    def _ext(self, d) -> ir.Value:
        return ir.Constant(I64, d) if isinstance(d, int) else self.ext_val[d]

    def _data_ptr(self, vid):
        v = self.values[vid]
        ty = LLTYPE[v.dtype] if v.dtype != np.bool_ else I8
        return self._field(vid, DATA_OFFSET, ty.as_pointer())

    def _field(self, vid, offset: int, ty):
        return array_field(self.b, self.obj[vid], offset, ty)

    def _byte_extent(self, vid):
        """[lo, hi]: the byte offsets from the data pointer that the array owns
        (bounds-checked mode); empty arrays get lo > hi."""
        b = self.b
        v = self.values[vid]
        lo = hi = ir.Constant(I64, 0)
        empty = ir.Constant(I1, 0)
        dims = self._field(vid, DIMS_OFFSET, I64.as_pointer())
        strides = self._field(vid, STRIDES_OFFSET, I64.as_pointer())
        for k in range(v.ndim):
            d = b.load(b.gep(dims, [ir.Constant(I64, k)]))
            st = b.load(b.gep(strides, [ir.Constant(I64, k)]))
            empty = b.or_(empty, b.icmp_signed("<=", d, ir.Constant(I64, 0)))
            ext = b.mul(b.sub(d, ir.Constant(I64, 1)), st)
            neg = b.icmp_signed("<", ext, ir.Constant(I64, 0))
            lo = b.add(lo, b.select(neg, ext, ir.Constant(I64, 0)))
            hi = b.add(hi, b.select(neg, ir.Constant(I64, 0), ext))
        hi = b.select(empty, ir.Constant(I64, -1), hi)
        return lo, hi

    def _addr(self, vid, off):
        """The element address; in checked mode an out-of-bounds offset sets
        the error cell and is redirected to element 0 (never touched: the
        runtime raises before using any result)."""
        b = self.b
        if self.checked:
            v = self.values[vid]
            lo, hi = self.extent[vid]
            byte = b.mul(off, ir.Constant(I64, v.dtype.itemsize))
            ok = b.and_(b.icmp_signed(">=", byte, lo), b.icmp_signed("<=", byte, hi))
            with b.if_then(b.not_(ok), likely=False):
                b.store(ir.Constant(I64, 1), self.errcell)
            off = b.select(ok, off, ir.Constant(I64, 0))
            ok_nonempty = b.icmp_signed("<=", lo, hi)
            with b.if_then(b.not_(ok_nonempty), likely=False):
                b.store(ir.Constant(I64, 1), self.errcell)
        return b.gep(self.data[vid], [off])

    def _stride_arg(self, vid, axis):
        """Element stride of `vid` along its own axis, read from the array."""
        b = self.b
        v = self.values[vid]
        strides = self._field(vid, STRIDES_OFFSET, I64.as_pointer())
        s = b.load(b.gep(strides, [ir.Constant(I64, axis)]))
        return b.sdiv(s, ir.Constant(I64, v.dtype.itemsize), name=f"stride{vid}_{axis}")

    def _static_inner_zero(self, vid) -> bool:
        v = self.values[vid]
        return v.ndim == 0 or _is_one(v.shape[-1]) and not _is_one(self.dom[-1])

    def _dom_axis_stride(self, vid, k, unit_inner):
        """Element stride of input `vid` along domain axis k (0 when broadcast)."""
        v = self.values[vid]
        off = self.rank - v.ndim
        a = k - off
        if a < 0 or (_is_one(v.shape[a]) and not _is_one(self.dom[k])):
            return ir.Constant(I64, 0)
        if vid in self.strided and vid not in self.consts:
            if k == self.rank - 1:
                return ir.Constant(I64, 1) if unit_inner else self.inner_stride_arg[vid]
            return self._stride_arg(vid, a)
        s = ir.Constant(I64, 1)
        for d in v.shape[a + 1:]:
            if not _is_one(d):
                s = self.b.mul(s, self._ext(d))
        return s

    # ---------------------------------------------------------------- rows
    def _rows(self, start, stop, unit_inner: bool):
        b = self.b
        strides = {vid: [self._dom_axis_stride(vid, k, unit_inner) for k in range(self.rank)]
                   for vid in self.data if vid in {v.id for v in self.k.inputs}}
        if self.flat:
            self.base = {vid: ir.Constant(I64, 0) for vid in strides}
            self.inner_strides = {vid: s[-1] for vid, s in strides.items()}
            self.row = ir.Constant(I64, 0)
            self._passes(start, stop)
            return
        with for_range(b, start, stop) as row:
            self._at_row(row, strides)
            self._passes(*(self.cols or (ir.Constant(I64, 0), self._ext(self.dom[-1]))))

    def _at_row(self, row, strides) -> None:
        """Point every operand at row `row` of the domain (its leading dims flattened)."""
        b = self.b
        self.row = row
        idx, rem = [], row
        for d in reversed(self.dom[:-1]):
            if _is_one(d):
                idx.append(ir.Constant(I64, 0))
                continue
            e = self._ext(d)
            idx.append(b.srem(rem, e))
            rem = b.sdiv(rem, e)
        idx.reverse()
        self.base = {}
        for vid, s in strides.items():
            off = ir.Constant(I64, 0)
            for k, i in enumerate(idx):
                if not (isinstance(s[k], ir.Constant) and s[k].constant == 0):
                    off = b.add(off, b.mul(i, s[k]))
            self.base[vid] = off
        self.inner_strides = {vid: s[-1] for vid, s in strides.items()}

    def _columns(self, start, stop, unit_inner: bool):
        """A column reduction over axes p..ndim-2 (the leading p axes kept:
        a batch of column reductions): [start, stop) are work units, a batch
        index and a block of COLUMN_BLOCK columns; each output element starts
        at the identity and takes one row after the other, the columns of a
        row in the inner (vector) loop -- numpy's own order for a C-contiguous
        input."""
        b = self.b
        strides = {vid: [self._dom_axis_stride(vid, k, unit_inner) for k in range(self.rank)]
                   for vid in self.data if vid in {v.id for v in self.k.inputs}}
        reds = [nd for nd in self.k.nodes if is_column_reduction(nd)]
        p = reds[0].attr("axis")[0]
        n = self._ext(self.dom[-1])
        blk = ir.Constant(I64, COLUMN_BLOCK)
        n_blocks = b.sdiv(b.add(n, ir.Constant(I64, COLUMN_BLOCK - 1)), blk)
        rows = self._count(self.dom[p:-1])
        self.known, self.recip = {}, {}
        with for_range(b, start, stop) as unit:
            batch = b.sdiv(unit, n_blocks)
            j0 = b.mul(b.srem(unit, n_blocks), blk)
            j1 = b.add(j0, blk)
            j1 = b.select(b.icmp_signed("<", j1, n), j1, n)
            first = b.mul(batch, n)  # (the batch's first output element)
            with for_range(b, j0, j1) as j:
                for nd in reds:
                    self._store(nd.out, b.add(first, j),
                                ir.Constant(LLTYPE[nd.out.dtype], _identity(nd.op, nd.out.dtype)))
            with for_range(b, ir.Constant(I64, 0), rows) as row:
                self._at_row(b.add(b.mul(batch, rows), row), strides)
                with for_range(b, j0, j1) as j:
                    memo: dict = {}
                    for nd in reds:
                        at = b.add(first, j)
                        acc = b.load(self._addr(nd.out.id, at))
                        self._store(nd.out, at, self._combine(nd, acc, self._val(nd.inputs[0], j, memo), ()))

    def _count(self, dims) -> ir.Value:
        c = ir.Constant(I64, 1)
        for d in dims:
            if not _is_one(d):
                c = self.b.mul(c, self._ext(d))
        return c

    def _passes(self, j0, j1):
        b = self.b
        self.recip = {}  # divide node output id -> the row's reciprocal of its divisor (final pass)
        levels = self._levels()
        self.known: dict[int, ir.Value] = {}
        full = [v for v in self.k.outputs if not self._row_value(v)]
        last = max(levels.values(), default=0)
        stash = self._stash(full, [n for n in self.k.nodes if n.op in ROW_REDUCTIONS and levels[n.out.id] == last])

        def out_offset(j):
            return b.add(b.mul(self.row, self._ext(self.dom[-1])), j) if not self.flat else j

        for lvl in sorted(set(levels.values())):
            reds = [n for n in self.k.nodes if n.op in ROW_REDUCTIONS and levels[n.out.id] == lvl]
            sums = [n for n in reds if _float_sum(n)]  # (integer sums wrap around as numpy's do: no blocks)
            for n in reds:
                b.store(ir.Constant(LLTYPE[n.out.dtype], _identity(n.op, n.out.dtype)), self.accs[n.out.id])
            for n in sums:
                for cell in self.totals[n.out.id]:
                    b.store(ir.Constant(F64, 0.0), cell)

            def reduce_pass(lo, hi):
                with for_range(b, lo, hi) as j:
                    memo: dict = {}
                    for n in reds:
                        acc = b.load(self.accs[n.out.id])
                        b.store(self._combine(n, acc, self._val(n.inputs[0], j, memo), REASSOC), self.accs[n.out.id])
                    if lvl == last:
                        for u, v in stash.items():
                            self._store(v, out_offset(j), memo[u.id])

            if sums:
                with for_range(b, j0, j1, SUM_BLOCK) as jb:
                    block_end = b.add(jb, ir.Constant(I64, SUM_BLOCK))
                    for n in sums:
                        b.store(ir.Constant(LLTYPE[n.out.dtype], 0.0), self.accs[n.out.id])
                    reduce_pass(jb, b.select(b.icmp_signed("<", j1, block_end), j1, block_end))
                    for n in sums:
                        self._add_block(n)
            else:
                reduce_pass(j0, j1)
            for n in reds:
                if _float_sum(n):
                    total = b.load(self.totals[n.out.id][0])
                    self.known[n.out.id] = total if n.out.dtype == np.float64 else b.fptrunc(total, F32)
                else:
                    self.known[n.out.id] = b.load(self.accs[n.out.id])

        def final_pass():
            with for_range(b, j0, j1) as j:
                memo = {}
                for u, v in stash.items():  # read back what the last pass stored
                    memo[u.id] = b.load(self._addr(v.id, out_offset(j)))
                for v in full:
                    self._store(v, out_offset(j), self._val(v, j, memo))

        if full:
            recip, ok = self._row_reciprocals(full)
            if recip:
                # divisions by a row-invariant value (softmax's sum, layernorm's
                # std) multiply by its reciprocal, computed once per row, when
                # the reciprocal is a normal number (then x * (1/d) is within
                # about an ulp of x / d); other rows divide
                with b.if_else(ok, likely=True) as (fast, exact):
                    with fast:
                        self.recip = recip
                        final_pass()
                        self.recip = {}
                    with exact:
                        final_pass()
            else:
                final_pass()
        memo = {}
        for v in self.k.outputs:
            if self._row_value(v):
                self._store(v, self.row, self._val(v, None, memo))

    def _combine(self, n: Node, acc, x, flags):
        """acc op x for reduction n (codegen/emitters.py REDUCERS): ints and
        bools cast to the result's dtype first."""
        if n.out.dtype.kind != "f":
            x = self._cast(x, self._in_type(n.inputs[0]), n.out.dtype)
        return REDUCERS[n.op](self.b, self.m, acc, x, flags)

    def _add_block(self, n: Node) -> None:
        """total += the block's sum: exact enough in float64 for float32 sums;
        for float64 sums with a compensation term (Kahan's), left out once the
        total is not finite (inf - inf would turn an overflow into NaN)."""
        b = self.b
        block = b.load(self.accs[n.out.id])
        total_cell, comp_cell = self.totals[n.out.id]
        total = b.load(total_cell)
        if n.out.dtype != np.float64:
            b.store(b.fadd(total, b.fpext(block, F64)), total_cell)
            return
        y = b.fsub(block, b.load(comp_cell))
        t = b.fadd(total, y)
        comp = b.fsub(b.fsub(t, total), y)
        finite = b.fcmp_ordered("<", b.call(_intrinsic(self.m, "llvm.fabs", F64, 1), [t]), ir.Constant(F64, float("inf")))
        b.store(b.select(finite, comp, ir.Constant(F64, 0.0)), comp_cell)
        b.store(t, total_cell)

    def _row_reciprocals(self, full: list[Value]):
        """({divide node output id: 1/d}, all reciprocals normal) for the
        divisions by a row value in the final pass."""
        b = self.b
        divides = {}
        for v in full:
            for x in self._cone(v.id):
                n = self.members[x]
                if (n.op == "divide" and self._static_inner_zero(n.inputs[1].id) and not self._row_value(n.out)
                        and n.out.dtype in (np.float32, np.float64)):
                    divides[n.out.id] = n
        recip, ok = {}, ir.Constant(I1, 1)
        memo: dict = {}
        for vid, n in divides.items():
            t = LLTYPE[n.out.dtype]
            d = self._cast(self._val(n.inputs[1], None, memo), self._in_type(n.inputs[1]), n.out.dtype)
            r = b.fdiv(ir.Constant(t, 1.0), d)
            info = np.finfo(n.out.dtype)
            mag = b.call(_intrinsic(self.m, "llvm.fabs", t, 1), [r])
            ok = b.and_(ok, b.and_(b.fcmp_ordered(">=", mag, ir.Constant(t, float(info.tiny))),
                                   b.fcmp_ordered("<=", mag, ir.Constant(t, float(info.max)))))
            recip[vid] = r
        return recip, ok

    def _stash(self, full: list[Value], last_reds: list[Node]) -> dict:
        """Expensive values the last reduction pass computes anyway and an
        output needs again (softmax's exp): stored into that output's buffer
        in the reduction pass and read back from cache in the final pass."""
        if not last_reds:
            return {}
        cone: set[int] = set()
        for n in last_reds:
            cone |= self._cone(n.inputs[0].id)
        stash = {}
        for v in full:
            n = self.members.get(v.id)
            if n is None:
                continue
            for u in n.inputs:
                if (u.id in cone and u.id in self.members and tuple(u.shape) == self.dom
                        and u.dtype == v.dtype and v.dtype != np.bool_
                        and any(self.members[c].op in MATH for c in self._cone(u.id) if c in self.members)
                        and u not in stash):
                    stash[u] = v
                    break
        return stash

    def _cone(self, vid) -> set[int]:
        """Member values `vid` is computed from, itself included, stopping at reductions."""
        out, stack = set(), [vid]
        while stack:
            x = stack.pop()
            if x in out or x not in self.members:
                continue
            out.add(x)
            n = self.members[x]
            if n.op not in ROW_REDUCTIONS:
                stack += [i.id for i in n.inputs]
        return out

    def _row_value(self, v: Value) -> bool:
        if self.flat:
            return False
        return tuple(v.shape) != self.dom or (_is_one(self.dom[-1]))

    def _levels(self) -> dict[int, int]:
        level: dict[int, int] = {}

        def lv(vid) -> int:
            if vid in level:
                return level[vid]
            n = self.members.get(vid)
            if n is None:
                return 0
            m = max((lv(v.id) for v in n.inputs), default=0)
            level[vid] = m + 1 if n.op in ROW_REDUCTIONS else m
            return level[vid]

        for n in self.k.nodes:
            lv(n.out.id)
        return {n.out.id: level[n.out.id] for n in self.k.nodes if n.op in ROW_REDUCTIONS}

    def _store(self, v: Value, off, x):
        b = self.b
        if v.dtype == np.bool_:
            x = b.zext(x, I8)
        b.store(x, self._addr(v.id, off))

    # -------------------------------------------------------------- values
    def _val(self, v: Value, j, memo) -> ir.Value:
        if v.id in self.known:
            return self.known[v.id]
        if v.id in memo:
            return memo[v.id]
        if v.id in self.consts:
            c = self.consts[v.id]
            r = _const(_const_dtype(c), c)
        elif v.id in self.int_val:
            r = self.int_val[v.id]
        elif v.id in self.flt_val:
            r = self.flt_val[v.id]
        elif v.id in self.members:
            r = self._node(self.members[v.id], j, memo)
        else:
            b = self.b
            off = self.base[v.id]
            inner = self.inner_strides[v.id]
            if j is not None and not (isinstance(inner, ir.Constant) and inner.constant == 0):
                off = b.add(off, j if (isinstance(inner, ir.Constant) and inner.constant == 1) else b.mul(j, inner))
            r = b.load(self._addr(v.id, off))
            if v.dtype == np.bool_:
                r = b.icmp_unsigned("!=", r, ir.Constant(I8, 0))
        memo[v.id] = r
        return r

    def _in_type(self, v: Value):
        """The numpy dtype of the LLVM value `_val(v)` produces."""
        if v.id in self.consts:
            return _const_dtype(self.consts[v.id])
        if v.id in self.int_val:
            return np.dtype(np.int64)
        if v.id in self.flt_val:
            return np.dtype(np.float64)
        return v.dtype

    def _cast(self, x, src: np.dtype, dst: np.dtype):
        return cast(self.b, x, src, dst)

    def _node(self, n: Node, j, memo) -> ir.Value:
        """n's value: its operands cast to the dtype it computes in
        (shapes/ops.py COMPUTE), then codegen/emitters.py's emitter."""
        op, out = n.op, n.out.dtype
        types = operand_dtypes(n)
        if op == "divide" and n.out.id in self.recip:
            return self.b.fmul(self._operand(n.inputs[0], types[0], j, memo), self.recip[n.out.id])
        if op == "power":  # (the exponent: the constant the partition checked)
            return EMITTERS[op](self.b, self.m, self._operand(n.inputs[0], out, j, memo),
                                self.consts.get(n.inputs[1].id))
        return EMITTERS[op](self.b, self.m, *(self._operand(v, t, j, memo) for v, t in zip(n.inputs, types)))

    def _operand(self, v: Value, dtype: np.dtype, j, memo) -> ir.Value:
        return self._cast(self._val(v, j, memo), self._in_type(v), dtype)


def operand_dtypes(n: Node) -> list:
    """The dtype each operand of elementwise node n is cast to before its
    emitter runs: the one the op computes in (shapes/ops.py COMPUTE)."""
    how, out = OPS[n.op].compute, n.out.dtype
    if how == "select":
        return [np.dtype(np.bool_), out, out]
    ctype = (compare_dtype(n.inputs) if how == "promoted" else np.dtype(np.bool_) if how == "bool"
             else n.inputs[0].dtype if how == "operand" else out)
    return [ctype] * len(n.inputs)


def cast(b: ir.IRBuilder, x, src: np.dtype, dst: np.dtype):
    """x (an LLVM value of dtype src) as dtype dst, as numpy's astype (float to int is not compiled)."""
    if src == dst:
        return x
    t = LLTYPE[dst]
    if dst == np.bool_:
        if src.kind == "f":
            return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0.0))
        return b.icmp_unsigned("!=", x, ir.Constant(x.type, 0))
    if dst.kind == "i":  # (from bool or a narrower/wider int: float to int is not compiled)
        if src == np.bool_:
            return b.zext(x, t)
        return x if src.itemsize == dst.itemsize else (
            b.sext(x, t) if src.itemsize < dst.itemsize else b.trunc(x, t))
    if src == np.bool_:
        return b.uitofp(x, t)
    if src.kind in "iu":
        return b.sitofp(x, t)
    return b.fpext(x, t) if src.itemsize < dst.itemsize else b.fptrunc(x, t)


def _const_dtype(c) -> np.dtype:
    """The dtype a folded constant is emitted in: its own for numpy scalars,
    int64/float64/bool for Python scalars (cast at use, as NEP 50 does)."""
    if isinstance(c, np.generic):
        return c.dtype
    if isinstance(c, bool):
        return np.dtype(np.bool_)
    return np.dtype(np.int64) if isinstance(c, int) else np.dtype(np.float64)


def _const(dt: np.dtype, c):
    if dt == np.bool_:
        return ir.Constant(I1, int(bool(c)))
    if dt.kind in "iu":
        return ir.Constant(LLTYPE.get(dt, I64), int(c))
    return ir.Constant(LLTYPE.get(dt, F64), float(c))


def _identity(op, dtype):
    if dtype.kind == "f":
        return {"sum": 0.0, "prod": 1.0, "max": float("-inf"), "min": float("inf")}[op]
    return {"sum": 0, "prod": 1, "max": int(np.iinfo(dtype).min), "min": int(np.iinfo(dtype).max)}[op]


def _float_sum(n: Node) -> bool:
    return n.op == "sum" and n.out.dtype.kind == "f"


def _prod(dims):
    p = sympy.Integer(1)
    for d in dims:
        p *= d
    return int(p) if p.is_Integer else p
