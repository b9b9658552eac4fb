"""One fused Kernel as an LLVM function over symbolic extents: its loops.

In: a clustering Kernel, the producers of its inputs, which inputs are
C-contiguous, the function's symbol.  Out: the function, added to the
module, and its KernelABI (codegen/abi.py).  The values inside the loops
come from codegen/values.py, the memory accesses from codegen/access.py.

Loop structure, per row of the domain R + (n,):
    pass 1..L   for j < n: accumulate the reductions of that level
    final pass  for j < n: compute and store the full-size outputs
    then        store per-row outputs
Values are recomputed from the inputs in each pass rather than stored: the
row stays in cache, memory traffic is one read per input and one write per
output.  With strided inputs the whole row loop is emitted twice, a fast
version for unit inner strides chosen at run time (BladeDISC's speculation).
A column reduction (over the leading axes) runs over blocks of columns
instead, each output element taking one row after the other.
"""
from __future__ import annotations

import numpy as np
import sympy
from llvmlite import ir

from clustering.partition import ARG_REDUCTIONS, ROW_REDUCTIONS, Kernel, is_column_reduction, reduced_axes
from codegen.abi import F64, HALF, I1, I8, I64, LLTYPE, KernelABI, KernelArgs
from codegen.access import Arrays
from codegen.emitters import MATH, REDUCERS
from codegen.llvm import for_range, smin
from codegen.values import REASSOC, ValueEmitter, add_block, arg_dtype, cast, identity, is_float_sum, pairwise_sum, \
    round_half
from shapes.ir import Node, Value

SUM_BLOCK = 1024  # elements of a row summed in one block (see KernelEmitter.totals)
ARG_BLOCK = 256  # elements of a row whose extreme argmax and argmin take at once (KernelEmitter._arg_pass)
# Columns a column reduction's work unit covers: a unit walks every row of its
# block (the block's accumulators, 16 KiB at most, stay in L1), and wider
# blocks spend less on the walk.  numpy's time over the kernel's for
# x.sum(axis=0), float32, blocks of 64 / 1024 / 2048 / 4096 columns (python -m
# bench.reductions --column-blocks 64,1024,2048,4096, AMD EPYC znver4,
# AVX-512, 2 cores): (1000, 4000) 0.95 / 1.38 / 1.79 / 1.10 (one unit: one
# core), (20000, 2000) 0.64 / 0.93 / 1.19 / 1.19, (100000, 400) 0.38 / 1.05 /
# 1.02 / 1.05, (100, 768) 0.52 / 1.13 / 1.12 / 1.12, (16, 250000) 1.16 /
# 2.58 / 2.55 / 2.47.
COLUMN_BLOCK = 2048


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
        self.tile = tile
        assert not tile or fits_tiles(kernel)
        self.members = {n.out.id: n for n in kernel.nodes}
        self.args = KernelArgs.of(kernel, producers, checked)
        self.consts = self.args.consts
        self.strided = {v.id for v in kernel.inputs if v.ndim > 0 and v.id not in contiguous
                        and v.id not in self.consts}
        # the domain's loops; `full` the domain itself.  An elementwise kernel
        # of contiguous operands drops the domain's trailing dims of size 1
        # (every index along them is 0): over [n, 1] it would run n rows of
        # one element (0.42x numpy's speed for x * 2 + 1), over [n] one loop
        self.dom = self.full = tuple(kernel.domain)
        # (and one whose array operands all have the domain's shape, or one element, runs one loop over all
        # its elements: over (512, 512, 3) the rows were 3 long, 0.25x numpy's speed for an RGB image's clip)
        self.collapsed = False
        if (not kernel.has_reduction and not kernel.column and not tile and not self.strided
                and all(tuple(v.shape) == self.full for v in kernel.outputs)):
            if len(self.dom) > 1 and all(self._one_element(v) or tuple(v.shape) == self.full
                                         for v in kernel.inputs if v.id not in self.consts):
                self.dom, self.collapsed = (_prod(self.full),), True
            while len(self.dom) > 1 and _is_one(self.dom[-1]):
                self.dom = self.dom[:-1]
        self.rank = len(self.dom)
        self.flat = not kernel.has_reduction and self.rank == 1
        self.values = {v.id: v for v in kernel.inputs + kernel.outputs}
        for n in kernel.nodes:
            self.values[n.out.id] = n.out

    # -------------------------------------------------------------- driver
    def emit(self) -> KernelABI:
        """The kernel's function, added to the module, and its ABI."""
        lead = 4 if self.tile else 2  # start, stop (and the tile's col0, col1)
        fn = self.fn = self.args.function(self.m, self.symbol, lead)
        b = self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        start, stop = fn.args[0], fn.args[1]
        self.cols = tuple(fn.args[2:4]) if self.tile else None
        bound = self.args.bind(b, fn, lead)
        self.ext_val = bound.extents
        self.arrays = Arrays(b, bound.arrays, self.values, bound.errcell)
        self.vals = ValueEmitter(b, self.m, self.members, self.consts, bound.ints, bound.floats, self.arrays)
        self.inner_stride_arg = {vid: self.arrays.stride(vid, self.values[vid].ndim - 1)
                                 for vid in self.strided}
        self.accs = {n.out.id: b.alloca(LLTYPE[self._acc_dtype(n)], name=f"acc{n.out.id}")
                     for n in self.k.nodes if n.op in ROW_REDUCTIONS}
        # argmax and argmin keep the best value (accs), where it stood, and a block's extreme
        self.places = {n.out.id: (b.alloca(I64, name=f"at{n.out.id}"),
                                  b.alloca(LLTYPE[self._acc_dtype(n)], name=f"block{n.out.id}"))
                       for n in self.k.nodes if n.op in ARG_REDUCTIONS}
        # a column argmax or argmin keeps the best value of each column of its block
        self.column_best = {n.out.id: b.alloca(LLTYPE[self._acc_dtype(n)], size=ir.Constant(I64, COLUMN_BLOCK),
                                               name=f"best{n.out.id}")
                            for n in self.k.nodes if n.op in ARG_REDUCTIONS and is_column_reduction(n)}
        # a sum adds SUM_BLOCK-element block sums into a float64 total (with a
        # compensation term for float64 sums): long rows stay as accurate as
        # numpy's pairwise sum; a row of one block is summed exactly as before
        self.totals = {n.out.id: (b.alloca(F64, name=f"total{n.out.id}"), b.alloca(F64, name=f"comp{n.out.id}"))
                       for n in self.k.nodes if is_float_sum(n)}
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
        return self._abi()

    def _abi(self) -> KernelABI:
        """The ABI, with the units [start, stop) ranges over and the work of one."""
        if self.k.column:  # split over (batch index, kept index, block of columns) units
            p, q = self._column_axes()
            blocks = sympy.floor((sympy.sympify(self.dom[-1]) + COLUMN_BLOCK - 1) / COLUMN_BLOCK)
            units = sympy.sympify(_prod(self.dom[:p])) * sympy.sympify(_prod(self.dom[q + 1:-1])) * blocks
            units = int(units) if units.is_Integer else units
            return self.args.abi(self.symbol, units, COLUMN_BLOCK * _prod(self.dom[p:q + 1]))
        rows = self.dom[-1] if self.flat else _prod(self.dom[:-1])
        inner = 1 if self.flat else self.dom[-1]
        return self.args.abi(self.symbol, rows, inner)

    def whole_domain(self, symbol: str) -> ir.Function:
        """After emit() with `tile`: `symbol`, the kernel's usual function
        (the ABI without the tile's columns), calling the tile function on
        rows [start, stop) and every column."""
        tile = self.fn
        n_arr = self.args.n_arrays
        types = [tile.args[0].type, tile.args[1].type] + [a.type for a in tile.args[4:]]
        fn = ir.Function(self.m, ir.FunctionType(ir.VoidType(), types), symbol)
        tile.attributes.add("noinline")  # (one copy of the loops, called from here and from a GEMM)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        n = self.dom[-1]
        width = ir.Constant(I64, n) if isinstance(n, int) else fn.args[2 + n_arr + self.args.extents.index(n)]
        b.call(tile, [fn.args[0], fn.args[1], ir.Constant(I64, 0), width] + list(fn.args[2:]))
        b.ret_void()
        return fn

    # ----------------------------------------------------- strides and rows
    def _ext(self, d) -> ir.Value:
        return ir.Constant(I64, d) if isinstance(d, int) else self.ext_val[d]

    def _static_inner_zero(self, vid) -> bool:
        v = self.values[vid]
        return v.ndim == 0 or _is_one(v.shape[-1]) and not _is_one(self.full[-1])

    def _dom_axis_stride(self, vid, k, unit_inner):
        """Element stride of input `vid` along domain axis k (0 when broadcast)."""
        v = self.values[vid]
        off = len(self.full) - v.ndim
        a = k - off
        if a < 0 or (_is_one(v.shape[a]) and not _is_one(self.full[k])):
            return ir.Constant(I64, 0)
        if vid in self.strided and vid not in self.consts:
            if k == len(self.full) - 1:
                return ir.Constant(I64, 1) if unit_inner else self.inner_stride_arg[vid]
            return self.arrays.stride(vid, a)
        s = ir.Constant(I64, 1)
        for d in v.shape[a + 1:]:
            if not _is_one(d):
                s = self.b.mul(s, self._ext(d))
        return s

    def _input_strides(self, unit_inner: bool) -> dict:
        """{input array id: its element stride along each axis of the domain}."""
        inputs = {v.id for v in self.k.inputs}
        if self.collapsed:  # (the domain's shape, contiguous: 1; one element: 0)
            return {vid: [ir.Constant(I64, 0 if self._one_element(self.values[vid]) else 1)]
                    for vid in self.arrays.data if vid in inputs}
        return {vid: [self._dom_axis_stride(vid, k, unit_inner) for k in range(self.rank)]
                for vid in self.arrays.data if vid in inputs}

    @staticmethod
    def _one_element(v: Value) -> bool:
        return all(_is_one(d) for d in v.shape)

    def _rows(self, start, stop, unit_inner: bool):
        b = self.b
        strides = self._input_strides(unit_inner)
        if self.flat:
            self.vals.base = {vid: ir.Constant(I64, 0) for vid in strides}
            self.vals.inner = {vid: s[-1] for vid, s in strides.items()}
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
        base = {}
        for vid, s in strides.items():
            off = ir.Constant(I64, 0)
            for k, i in enumerate(idx):
                if not (isinstance(s[k], ir.Constant) and s[k].constant == 0):
                    off = b.add(off, b.mul(i, s[k]))
            base[vid] = off
        self.vals.base = base
        self.vals.inner = {vid: s[-1] for vid, s in strides.items()}

    # ------------------------------------------------------------- columns
    def _column_axes(self) -> tuple[int, int]:
        """The first and the last axis (p, q) the kernel's column reductions reduce."""
        axis = reduced_axes(next(n for n in self.k.nodes if is_column_reduction(n)))
        return axis[0], axis[-1]

    def _columns(self, start, stop, unit_inner: bool):
        """A column reduction over axes p..q (the leading p axes kept: a batch
        of column reductions; the axes between q and the last kept too):
        [start, stop) are work units, a batch index, an index of the kept
        axes before the last and a block of COLUMN_BLOCK columns; each
        output element starts at the identity and takes one row after the
        other, the columns of a row in the inner (vector) loop -- numpy's own
        order for a C-contiguous input."""
        b = self.b
        strides = self._input_strides(unit_inner)
        reds = [nd for nd in self.k.nodes if is_column_reduction(nd)]
        p, q = self._column_axes()
        n = self._ext(self.dom[-1])
        blk = ir.Constant(I64, COLUMN_BLOCK)
        n_blocks = b.sdiv(b.add(n, ir.Constant(I64, COLUMN_BLOCK - 1)), blk)
        rows = self._count(self.dom[p:q + 1])
        kept = self._count(self.dom[q + 1:-1])
        self.vals.known, self.vals.recip = {}, {}
        with for_range(b, start, stop) as unit:
            rest = b.sdiv(unit, n_blocks)
            batch, at = b.sdiv(rest, kept), b.srem(rest, kept)
            j0 = b.mul(b.srem(unit, n_blocks), blk)
            j1 = b.add(j0, blk)
            j1 = b.select(b.icmp_signed("<", j1, n), j1, n)
            first = b.mul(rest, n)  # (the unit's first output element: batch * kept + at rows of n)
            with for_range(b, j0, j1) as j:
                for nd in reds:
                    t = self._acc_dtype(nd)
                    start_value = ir.Constant(LLTYPE[t], identity(nd.op, t))
                    if nd.op in ARG_REDUCTIONS:  # (the best value in the block's buffer, its row in the output)
                        b.store(start_value, b.gep(self.column_best[nd.out.id], [b.sub(j, j0)]))
                        start_value = ir.Constant(I64, 0)
                    self.arrays.store(nd.out, b.add(first, j), start_value)
            pairwise = self._pairwise_inputs(reds, p, q, strides)
            if pairwise is not None:  # (each float sum's input contiguous along the reduced axis: numpy's
                # pairwise sum down each column, as its reduction walks such an input -- a Fortran-ordered one)
                with b.if_else(pairwise) as (then, other):
                    with then:
                        self._pairwise_columns(reds, strides, b.add(b.mul(b.mul(batch, rows), kept), at), rows, first,
                                               j0, j1)
                    with other:
                        self._column_rows(reds, strides, batch, rows, kept, at, first, j0, j1)
            else:
                self._column_rows(reds, strides, batch, rows, kept, at, first, j0, j1)
            post = [v for v in self.k.outputs if v.id not in {nd.out.id for nd in reds}]
            if post:  # the column values (clustering/partition.py), from the block's results, at its first row
                self._at_row(b.add(b.mul(b.mul(batch, rows), kept), at), strides)
                with for_range(b, j0, j1) as j:
                    at_j = b.add(first, j)
                    memo = {nd.out.id: self._load_out(nd.out, at_j) for nd in reds}
                    for v in post:
                        self.arrays.store(v, at_j, self.vals.value(v, j, memo))

    def _pairwise_inputs(self, reds: list, p: int, q: int, strides: dict):
        """Whether (an i1, at run time) every column reduction is a float sum
        of an input array one element apart along the one reduced axis p
        (numpy's reduction then runs down each column, its pairwise sum);
        None where the kernel's reductions are not all such sums."""
        b = self.b
        if p != q or not all(nd.op == "sum" and nd.out.dtype in (np.float32, np.float64)
                             and nd.inputs[0].id in strides and nd.inputs[0].dtype == nd.out.dtype for nd in reds):
            return None
        ok = ir.Constant(I1, 1)
        for nd in reds:
            ok = b.and_(ok, b.icmp_signed("==", strides[nd.inputs[0].id][p], ir.Constant(I64, 1)))
        return ok

    def _pairwise_columns(self, reds: list, strides: dict, row0, rows, first, j0, j1) -> None:
        """Columns [j0, j1) of the unit at domain row `row0`: each float sum
        numpy's pairwise sum of its input's `rows` elements down the column."""
        b = self.b
        self._at_row(row0, strides)
        with for_range(b, j0, j1) as j:
            for nd in reds:
                x = nd.inputs[0]
                off = b.add(self.vals.base[x.id], b.mul(j, self.vals.inner[x.id]))
                with b.if_then(b.icmp_signed(">", rows, ir.Constant(I64, 0))):  # (bounds-checked: the column's
                    self.arrays.addr(x.id, off)  # first and last elements are the array's; no element, no check)
                    self.arrays.addr(x.id, b.add(off, b.sub(rows, ir.Constant(I64, 1))))
                ptr = b.bitcast(b.gep(self.arrays.data[x.id], [off]), I8.as_pointer())
                step = ir.Constant(I64, x.dtype.itemsize)
                t = nd.out.dtype
                total = b.call(pairwise_sum(self.m, t), [ptr, rows, step])
                self.arrays.store(nd.out, b.add(first, j), b.fadd(ir.Constant(LLTYPE[t], 0.0), total))

    def _column_rows(self, reds: list, strides: dict, batch, rows, kept, at, first, j0, j1) -> None:
        """Columns [j0, j1) of the unit: each output element takes one row
        after the other, the columns of a row in the inner (vector) loop."""
        b = self.b
        with for_range(b, ir.Constant(I64, 0), rows) as row:
            self._at_row(b.add(b.mul(b.add(b.mul(batch, rows), row), kept), at), strides)
            with for_range(b, j0, j1) as j:
                memo: dict = {}
                for nd in reds:
                    at_j = b.add(first, j)
                    acc = self._load_out(nd.out, at_j)
                    x = self.vals.value(nd.inputs[0], j, memo)
                    if nd.op in ARG_REDUCTIONS:
                        # (a select, not a branch: the loop over the block's columns stays vectors;
                        # strictly beyond the best or the first NaN: numpy's first extreme)
                        x = cast(b, x, self.vals.dtype(nd.inputs[0]), self._acc_dtype(nd))
                        slot = b.gep(self.column_best[nd.out.id], [b.sub(j, j0)])
                        best = b.load(slot)
                        wins = REDUCERS[nd.op](b, self.m, best, x, ())
                        b.store(b.select(wins, x, best), slot)
                        self.arrays.store(nd.out, at_j, b.select(wins, row, acc))
                    else:
                        self.arrays.store(nd.out, at_j, self.vals.combine(nd, acc, x, ()))

    def _count(self, dims) -> ir.Value:
        c = ir.Constant(I64, 1)
        for d in dims:
            if not _is_one(d):
                c = self.b.mul(c, self._ext(d))
        return c

    # -------------------------------------------------------------- passes
    def _passes(self, j0, j1):
        """Columns [j0, j1) of the current row: a pass per level of
        reductions, the final pass, then the per-row outputs."""
        vals = self.vals
        vals.recip = {}  # divide node output id -> the row's reciprocal of its divisor (final pass)
        levels = self._levels()
        vals.known = {}
        full = [v for v in self.k.outputs if not self._row_value(v)]
        last = max(levels.values(), default=0)
        last_reds = [n for n in self.k.nodes if n.op in ROW_REDUCTIONS and levels[n.out.id] == last]
        # (values stored on the way need a pass over every element: an argmax's blocks skip most)
        stash = self._stash(full, last_reds) if not any(n.op in ARG_REDUCTIONS for n in last_reds) else {}
        for lvl in sorted(set(levels.values())):
            reds = [n for n in self.k.nodes if n.op in ROW_REDUCTIONS and levels[n.out.id] == lvl]
            self._reduction_pass(reds, j0, j1, stash if lvl == last else {})
        if full:
            self._final_pass(full, stash, j0, j1)
        memo = {}
        for v in self.k.outputs:
            if self._row_value(v):
                self.arrays.store(v, self.row, vals.value(v, None, memo))

    def _out_offset(self, j):
        """The element offset of column j of the current row in a full-size output."""
        b = self.b
        return b.add(b.mul(self.row, self._ext(self.dom[-1])), j) if not self.flat else j

    def _reduction_pass(self, reds: list[Node], j0, j1, stash: dict) -> None:
        """Reductions `reds` (one level) over columns [j0, j1), their results
        then known for the row; float sums a block of SUM_BLOCK columns at a
        time.  `stash` (the last level's): values stored on the way."""
        b, vals = self.b, self.vals
        for n in reds:
            if n.op in ARG_REDUCTIONS:
                self._arg_pass(n, j0, j1)
        reds = [n for n in reds if n.op not in ARG_REDUCTIONS]
        if not reds:
            return
        sums = [n for n in reds if is_float_sum(n)]  # (integer sums wrap around as numpy's do: no blocks)
        for n in reds:
            b.store(ir.Constant(LLTYPE[n.out.dtype], identity(n.op, n.out.dtype)), self.accs[n.out.id])
        for n in sums:
            for cell in self.totals[n.out.id]:
                b.store(ir.Constant(F64, 0.0), cell)

        def reduce_pass(lo, hi):
            with for_range(b, lo, hi) as j:
                memo: dict = {}
                for n in reds:
                    acc = b.load(self.accs[n.out.id])
                    b.store(vals.combine(n, acc, vals.value(n.inputs[0], j, memo), REASSOC), self.accs[n.out.id])
                for u, v in stash.items():
                    self.arrays.store(v, self._out_offset(j), memo[u.id])

        if sums:
            with for_range(b, j0, j1, SUM_BLOCK) as jb:
                block_end = b.add(jb, ir.Constant(I64, SUM_BLOCK))
                for n in sums:
                    b.store(ir.Constant(LLTYPE[n.out.dtype], 0.0), self.accs[n.out.id])
                reduce_pass(jb, smin(b, j1, block_end))
                for n in sums:
                    add_block(b, self.m, n, self.accs[n.out.id], *self.totals[n.out.id])
        else:
            reduce_pass(j0, j1)
        for n in reds:
            if is_float_sum(n):
                total = b.load(self.totals[n.out.id][0])
                vals.known[n.out.id] = cast(b, total, np.dtype(np.float64), n.out.dtype)
            else:
                acc = b.load(self.accs[n.out.id])
                vals.known[n.out.id] = round_half(b, acc) if n.out.dtype == HALF else acc

    def _arg_pass(self, n: Node, j0, j1) -> None:
        """argmax or argmin `n` over columns [j0, j1) of the row, ARG_BLOCK
        columns at a time: the block's extreme (a max or min reduction, in
        vectors), and only when it beats the best so far a scan of the block
        for its first place (a loop carrying the best value and its index
        through every element ran at 0.03x numpy's speed)."""
        b, vals, m = self.b, self.vals, self.m
        t = self._acc_dtype(n)
        start = ir.Constant(LLTYPE[t], identity(n.op, t))
        best, (at, block) = self.accs[n.out.id], self.places[n.out.id]
        extreme = REDUCERS["max" if n.op == "argmax" else "min"]
        b.store(start, best)
        b.store(ir.Constant(I64, 0), at)

        def x_at(j):
            return cast(b, vals.value(n.inputs[0], j, {}), vals.dtype(n.inputs[0]), t)

        with for_range(b, j0, j1, ARG_BLOCK) as jb:
            je = smin(b, j1, b.add(jb, ir.Constant(I64, ARG_BLOCK)))
            b.store(start, block)
            with for_range(b, jb, je) as j:
                b.store(extreme(b, m, b.load(block), x_at(j), ()), block)
            top = b.load(block)
            with b.if_then(REDUCERS[n.op](b, m, b.load(best), top, ())):
                # the block's first element equal to its extreme (a NaN: its first NaN)
                pre = b.block
                head, test, found = (b.append_basic_block(f"arg.{s}") for s in ("head", "test", "found"))
                b.branch(head)
                b.position_at_end(head)
                j = b.phi(I64)
                j.add_incoming(jb, pre)
                b.cbranch(b.icmp_signed("<", j, je), test, found)
                b.position_at_end(test)
                x = x_at(j)
                if t.kind == "f":
                    hit = b.or_(b.fcmp_ordered("==", x, top),
                                b.and_(b.fcmp_unordered("uno", x, x), b.fcmp_unordered("uno", top, top)))
                else:
                    hit = b.icmp_signed("==", x, top)
                tested = b.block  # (x's loads may have branched: a checked kernel's bounds)
                j.add_incoming(b.add(j, ir.Constant(I64, 1)), tested)
                b.cbranch(hit, found, head)
                b.position_at_end(found)
                place = b.phi(I64)
                place.add_incoming(je, head)  # (never: the extreme is one of the block's elements)
                place.add_incoming(j, tested)
                b.store(top, best)
                b.store(place, at)
        vals.known[n.out.id] = b.load(at)

    def _load_out(self, v: Value, at):
        """A value the kernel stored into output v, read back (a float16 as
        the float32 it is computed in: codegen/abi.py LLTYPE; numpy's float16
        column sum rounds after each row too)."""
        return self.arrays.load(v, at) if v.dtype == HALF else self.b.load(self.arrays.addr(v.id, at))

    def _acc_dtype(self, n: Node) -> np.dtype:
        """The dtype reduction n accumulates in."""
        return arg_dtype(n.inputs[0].dtype) if n.op in ARG_REDUCTIONS else n.out.dtype

    def _final_pass(self, full: list[Value], stash: dict, j0, j1) -> None:
        """The full-size outputs `full` over columns [j0, j1), reading back
        the values `stash` names."""
        b, vals = self.b, self.vals

        def one_pass():
            with for_range(b, j0, j1) as j:
                memo = {}
                for u, v in stash.items():  # read back what the last pass stored
                    memo[u.id] = self._load_out(v, self._out_offset(j))
                for v in full:
                    self.arrays.store(v, self._out_offset(j), vals.value(v, j, memo))

        recip, ok = vals.reciprocals(self._row_divides(full))
        if recip:
            # divisions by a row-invariant value (softmax's sum, layernorm's
            # std) multiply by its reciprocal, computed once per row, when
            # the reciprocal is a normal number (then x * (1/d) is within
            # about an ulp of x / d); other rows divide
            with b.if_else(ok, likely=True) as (fast, exact):
                with fast:
                    vals.recip = recip
                    one_pass()
                    vals.recip = {}
                with exact:
                    one_pass()
        else:
            one_pass()

    def _row_divides(self, full: list[Value]) -> dict[int, Node]:
        """{output id: node} of the float divisions by a row value in the
        final pass (which multiply by the row's reciprocal instead), but for
        a 0-d divisor, the same in every row: x / 100 stays numpy's division
        (np.round's rint(x * 100) / 100 is then numpy's, bit for bit)."""
        divides = {}
        for v in full:
            for x in self._cone(v.id):
                n = self.members[x]
                if (n.op == "divide" and self._static_inner_zero(n.inputs[1].id) and n.inputs[1].ndim > 0
                        and not self._row_value(n.out) and n.out.dtype in (np.float32, np.float64)):
                    divides[n.out.id] = n
        return divides

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
                        and u.dtype == v.dtype and v.dtype.kind not in "bc"
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
        if self.flat or self.dom != self.full:  # (dims dropped: every output is of the domain's shape)
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


def _prod(dims):
    p = sympy.Integer(1)
    for d in dims:
        p *= d
    return int(p) if p.is_Integer else p
