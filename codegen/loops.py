"""Lowering a re-rolled loop (clustering/reroll.py) to one LLVM function.

ABI: the kernels' (codegen/abi.py): `void k(i64 start, i64 stop, i8*
arrays..., i64 ints..., double floats...)`; [start, stop) are the trips to
run, in order (a loop is never split across threads: each trip reads what
the one before stored).  The first array is the one the loop updates, in
place; the others are the arrays it reads; ints are the symbolic extents and
indices its body names and the integer and bool scalars it reads (exactly,
as int64), floats the float scalars it reads.

A trip computes its body's nodes in order.  Scalars are LLVM values; a 1-D
vector (a basic-index view, or elementwise math on views, a matrix view
times a vector) is computed element by element where it is consumed (a dot
product, a sum, a maximum or a minimum, a store of a run of elements):
nothing is materialized.  Loads and stores go through each
array's data pointer and strides, at indices affine in the trip number.
"""
from __future__ import annotations

import numpy as np
import sympy
from llvmlite import ir

from clustering.reroll import UPDATES, is_scalar_const
from shapes.loop import LoopBody, leaves, symbolic_rest
from codegen.emitters import REDUCERS
from codegen.abi import DATA_OFFSET, F64, I8, I64, LLTYPE, STRIDES_OFFSET, KernelABI, array_field
from codegen.values import REASSOC, cast, const, const_dtype, emitter, identity, operand_dtypes
from codegen.llvm import for_range, smax
from shapes.ir import Node
from shapes.kernelargs import GEMV

_F64 = np.dtype(np.float64)
_I64 = np.dtype(np.int64)
# Rows of a matrix a vector-times-matrix adds into its buffer per pass (see
# _vector_matrix): each element of the buffer is loaded and stored once per
# pass.  Eight ran NPBench's covariance M (a re-rolled loop of 1400 products
# of 1800 x up to 1400, float64) fastest of 1, 4 and 8 on a 2-core AMD EPYC
# znver3 (AVX2, no AVX-512), by a script not kept; still on one core.
ROWS_AT_ONCE = 8
# A float64 vector times a matrix of at least this many elements runs on
# numpy's BLAS (cblas_dgemv, on both cores), whose address the runtime passes
# as the int argument kernelargs.GEMV (0: none to be had, the loop's own code runs).  On
# the AMD EPYC above, `python -m bench --corpus`: covariance M 0.45x and
# correlation M 0.47x numpy before either change, 0.98x and 1.02x after.
GEMV_MIN_ELEMENTS = 1 << 14
_CBLAS_ROW_MAJOR, _CBLAS_TRANS = 101, 112


class _Vec:
    """A 1-D vector: its length (an i64 value) and its element at an index."""

    def __init__(self, length, at, dtype):
        self.length, self.at, self.dtype = length, at, dtype


class _Mat:
    """A 2-D view read by a product: its extents and its element at (row,
    column); `view` (array index, offset of (0, 0), row stride, column
    stride: elements) says where it lies."""

    def __init__(self, rows, cols, at, dtype, view):
        self.rows, self.cols, self.at, self.dtype, self.view = rows, cols, at, dtype, view


def _roles(node: Node, producers: dict) -> list[tuple]:
    """How each of the loop's inputs reaches it: ("array",) its data and
    strides; ("const", value) inline; ("dim", expr) an int argument;
    ("intval",) an integer or bool scalar, an int64 argument (as a kernel
    takes it: codegen/abi.py KernelABI); ("float",) a double argument."""
    out = []
    for k, v in enumerate(node.inputs):
        p = producers.get(v.id)
        if k == 0 or v.ndim:
            out.append(("array",))
        elif p is not None and p.op == "const" and is_scalar_const(p.attr("value")):
            out.append(("const", p.attr("value")))
        elif p is not None and p.op == "dim":
            out.append(("dim", p.attr("expr")))
        else:
            out.append(("intval",) if v.dtype.kind in "ib" else ("float",))
    return out


def loop_abi(node: Node, producers: dict) -> tuple[list, list, list]:
    """(arrays, ints, floats) the loop function takes: ("array", value id),
    ("int", expr) and ("intval", value id), ("float", value id); the updated
    array is passed as the loop's output value."""
    body: LoopBody = node.attr("body")
    roles = _roles(node, producers)
    arrays = [("array", node.out.id if k == 0 else v.id) for k, (v, r) in enumerate(zip(node.inputs, roles))
              if r[0] == "array"]
    floats = [("float", v.id) for v, r in zip(node.inputs, roles) if r[0] == "float"]
    ints: list = []
    for e in [r[1] for r in roles if r[0] == "dim"] + [e for n in body.nodes for e in _symbolic((n.attrs, n.out.shape))]:
        if e not in ints:
            ints.append(e)
    intvals = [("intval", v.id) for v, r in zip(node.inputs, roles) if r[0] == "intval"]
    return arrays, [("int", e) for e in ints] + ([GEMV] if _blas_products(body) else []) + intvals, floats


def _blas_products(body: LoopBody) -> bool:
    """Whether a float64 vector times a matrix stands in the body (or a
    loop's inside it): it may run on numpy's BLAS (see _vector_matrix)."""
    return any(_blas_products(n.attr("body")) if n.op == "loop" else
               n.op == "matmul" and n.out.dtype == _F64 and [v.ndim for v in n.inputs] == [1, 2]
               and all(v.dtype == _F64 for v in n.inputs) for n in body.nodes)


def _symbolic(x) -> list:
    """The symbolic sizes in x, and the symbolic parts of those a trip moves (symbolic_rest)."""
    out = []
    for y in leaves(x):
        if isinstance(y, sympy.Basic) and not y.is_Integer:
            rest = symbolic_rest(y)
            out += [y] + ([rest] if rest is not None and not rest.is_Integer else [])
    return out


def emit_loop(module: ir.Module, node: Node, producers: dict, symbol: str) -> KernelABI:
    arrays, ints, floats = loop_abi(node, producers)
    _LoopEmitter(module, node, producers, symbol, arrays, ints, floats).emit()
    body: LoopBody = node.attr("body")
    return KernelABI(symbol, tuple(arrays + ints + floats), body.trips, len(body.nodes))


class _LoopEmitter:
    def __init__(self, module, node: Node, producers, symbol, arrays, ints, floats):
        self.m, self.node, self.producers, self.symbol = module, node, producers, symbol
        self.body: LoopBody = node.attr("body")
        self.arrays, self.ints, self.floats = arrays, ints, floats
        self.scratch: list = []  # buffers the trip being emitted allocates (freed at its end)

    def emit(self) -> None:
        fnty = ir.FunctionType(ir.VoidType(), [I64, I64] + [I8.as_pointer()] * len(self.arrays)
                               + [I64] * len(self.ints) + [F64] * len(self.floats))
        fn = ir.Function(self.m, fnty, self.symbol)
        b = self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        args = iter(fn.args)
        start, stop = next(args), next(args)
        node = self.node
        # each array the loop reads, by the loop input it is (0: the updated one): data pointer, strides
        by_id = {node.out.id: 0}
        by_id.update({v.id: k for k, v in enumerate(node.inputs) if k and v.ndim})
        self.data, self.strides = {}, {}
        for _, vid in self.arrays:
            obj = next(args)
            k = by_id[vid]
            v = node.inputs[k]
            ty = LLTYPE[v.dtype] if v.dtype != np.bool_ else I8
            self.data[k] = array_field(b, obj, DATA_OFFSET, ty.as_pointer())
            strides = array_field(b, obj, STRIDES_OFFSET, I64.as_pointer())
            self.strides[k] = [b.sdiv(b.load(b.gep(strides, [ir.Constant(I64, a)])),
                                      ir.Constant(I64, v.dtype.itemsize)) for a in range(v.ndim)]
        self.ext = {a[1] if a[0] == "int" else a: next(args) for a in self.ints}
        env = []  # each loop input: ("array", its index) | ("scalar", (LLVM value, dtype))
        for k, r in enumerate(_roles(node, self.producers)):
            if r[0] == "array":
                env.append(("array", k))
            elif r[0] == "const":
                dt = const_dtype(r[1])
                env.append(("scalar", (const(dt, r[1]), dt)))
            elif r[0] == "dim":
                env.append(("scalar", (self.ext[r[1]], _I64)))
            elif r[0] == "intval":
                dt = node.inputs[k].dtype
                env.append(("scalar", (cast(b, self.ext["intval", node.inputs[k].id], _I64, dt), dt)))
            else:  # (a float passed as a double: the floats come last, in input order)
                dt = node.inputs[k].dtype
                env.append(("scalar", (cast(b, next(args), _F64, dt), dt)))
        with for_range(b, start, stop) as t:
            self._body(self.body, t, env, [None] * len(self.body.nodes))
        b.ret_void()

    # ------------------------------------------------------------ a trip
    def _i64(self, x):
        if isinstance(x, ir.Value):
            return x
        if isinstance(x, sympy.Basic) and not x.is_Integer:
            return self.ext[x]
        return ir.Constant(I64, int(x))

    def _body(self, body: LoopBody, t, env, bases) -> None:
        """One trip of `body` (trip t, an IR value): `env` says what each of
        its inputs is, `bases` each node's integers before the trip moves
        them (a nested loop's: as the outer trip moved them; None: as traced)."""
        b = self.b
        vals: dict[int, object] = {}  # body node -> (LLVM value, dtype) | _Vec | _Mat
        outer_scratch, self.scratch = self.scratch, []
        add = lambda x, y: b.add(self._i64(x), self._i64(y))
        mul = lambda s, tt: b.mul(ir.Constant(I64, s), tt)
        for q, n in enumerate(body.nodes):
            refs = body.refs[q]
            if n.op == "loop":
                self._nested(n.attr("body"), body.moved_ints(q, t, add, mul, bases[q]),
                             [self._env_of(body, r, env, vals) for r in refs])
                continue
            attrs, shape = body.attrs_at(q, t, add, mul, bases[q])
            attrs = dict(attrs)
            ops = [self._operand(r, vals, env) for r in refs]
            if n.op == "getitem" and isinstance(ops[0], _Vec):
                vals[q] = self._subvector(ops[0], attrs["items"], n)
            elif n.op == "getitem":
                vals[q] = self._getitem(self._array_of(refs[0], env), attrs["items"], n)
            elif n.op == "setitem":
                self._setitem(env[0][1], attrs["items"], ops[1], n)
            elif n.op == "const":  # (a Python int moving with the trips is an i64 value: `a[i] = i`)
                dt, c = const_dtype(n.attr("value")), attrs["value"]
                vals[q] = (c if isinstance(c, ir.Value) else const(dt, c), dt)
            elif n.op == "matmul":
                vals[q] = self._product(ops[0], ops[1], n.out.dtype)
            elif n.op in ("sum", "max", "min"):
                vals[q] = self._reduce(n.op, ops[0], n.out.dtype)
                if n.out.ndim:  # (keepdims: a vector of one element)
                    x, dt = vals[q]
                    vals[q] = _Vec(ir.Constant(I64, 1), lambda j, x=x: x, dt)
            else:
                vals[q] = self._elementwise(n, self._broadcast(body, q, ops), shape)
        for buf in self.scratch:  # (the trip's materialized products)
            b.call(self._libc("free", ir.VoidType(), [I8.as_pointer()]), [buf])
        self.scratch = outer_scratch

    def _libc(self, name: str, ret, args):
        fn = self.m.globals.get(name)
        return fn if fn is not None else ir.Function(self.m, ir.FunctionType(ret, args), name)

    def _nested(self, inner: LoopBody, ints, env) -> None:
        """A loop inside a trip: its trips and its nodes' integers are the
        loop node's, as the outer trip moved them."""
        trips, bases = inner.split(ints)
        with for_range(self.b, 0, self._i64(trips)) as t:
            self._body(inner, t, env, bases)

    def _env_of(self, body: LoopBody, r, env, vals):
        """What a nested loop's input is, from its ref in the outer body."""
        if r[0] in ("in", "carry"):
            return env[r[1]]
        if body.nodes[r[1]].op in UPDATES:
            return env[0]  # (a version of the updated array)
        return ("scalar", vals[r[1]])

    def _operand(self, r, vals, env):
        if r[0] == "local":
            return vals.get(r[1])  # (a store's output: the updated array, read through getitem)
        e = env[r[1]]
        return e[1] if e[0] == "scalar" else None  # (an array: read through getitem)

    def _array_of(self, r, env) -> int:
        """The loop input (of the outermost loop) an array operand is: the
        updated one (env[0]) for its versions."""
        return (env[r[1]] if r[0] in ("in", "carry") else env[0])[1]

    def _offset(self, k: int, items):
        """(element offset of the items' corner, [(axis, step, length)] of the axes the result keeps)."""
        b = self.b
        off = ir.Constant(I64, 0)
        keep = []
        strides = self.strides[k]
        for axis, it in enumerate(items):
            if it[0] == "int":
                off = b.add(off, b.mul(self._i64(it[1]), strides[axis]))
            else:
                _, start, step, length = it
                off = b.add(off, b.mul(self._i64(start), strides[axis]))
                keep.append((axis, step, length))
        v = self.node.inputs[k]
        keep += [(axis, 1, v.shape[axis]) for axis in range(len(items), v.ndim)]
        return off, keep

    def _getitem(self, k: int, items, n: Node):
        b = self.b
        off, keep = self._offset(k, items)
        dt = n.out.dtype
        if n.out.ndim == 0:
            return self._load(k, off, dt), dt
        lengths = [self._i64(length) for _, _, length in keep]
        strides = [b.mul(self._i64(step), self.strides[k][axis]) for axis, step, _ in keep]
        if n.out.ndim == 1:
            return _Vec(lengths[0], lambda j: self._load(k, b.add(off, b.mul(j, strides[0])), dt), dt)
        return _Mat(*lengths, lambda i, j: self._load(
            k, b.add(off, b.add(b.mul(i, strides[0]), b.mul(j, strides[1]))), dt), dt, (k, off, *strides))

    def _subvector(self, x: _Vec, items, n: Node):
        """A basic index of a vector: an element, or a vector of its elements."""
        (it,) = items
        if it[0] == "int":
            return x.at(self._i64(it[1])), x.dtype
        _, start, step, length = it
        b = self.b
        return _Vec(self._i64(length), lambda j: x.at(b.add(self._i64(start), b.mul(j, self._i64(step)))), x.dtype)

    def _load(self, k, off, dt):
        x = self.b.load(self.b.gep(self.data[k], [off]))
        return self.b.icmp_unsigned("!=", x, ir.Constant(I8, 0)) if dt == np.bool_ else x

    def _setitem(self, k: int, items, value, n: Node) -> None:
        """A store of one element, or of a run along the one sliced axis
        (from a vector, element by element as it is computed, or a scalar)."""
        b = self.b
        off, keep = self._offset(k, items)

        def store(x, dt, at):
            x = cast(b, x, dt, n.out.dtype)
            if n.out.dtype == np.bool_:
                x = b.zext(x, I8)
            b.store(x, b.gep(self.data[k], [at]))
        if not keep:
            store(*value, off)
            return
        (axis, step, length), = keep
        stride = b.mul(self._i64(step), self.strides[k][axis])
        with for_range(b, 0, self._i64(length)) as j:
            at = b.add(off, b.mul(j, stride))
            if isinstance(value, _Vec):
                store(value.at(j), value.dtype, at)
            else:
                store(*value, at)

    def _broadcast(self, body: LoopBody, q: int, ops):
        """The operands of node q's elementwise math, a vector of one element
        repeated (numpy's broadcasting) as that element."""
        out = []
        for r, x in zip(body.refs[q], ops):
            if isinstance(x, _Vec) and body.broadcast(r[1], q):
                x = (x.at(ir.Constant(I64, 0)), x.dtype)
            out.append(x)
        return out

    def _elementwise(self, n: Node, ops, shape):
        b = self.b
        types = operand_dtypes(n)
        emit = emitter(n, types)
        if not shape:
            return emit(b, self.m, *(cast(b, x, dt, t) for (x, dt), t in zip(ops, types))), n.out.dtype

        def at(j):
            xs = [cast(b, x.at(j), x.dtype, t) if isinstance(x, _Vec) else cast(b, x[0], x[1], t)
                  for x, t in zip(ops, types)]
            return emit(b, self.m, *xs)
        return _Vec(self._i64(shape[0]), at, n.out.dtype)

    def _fold(self, length, init, step):
        """Fold step(acc, element index) over the vector from init (an LLVM
        value), the accumulator a phi (no stack slot in the trip loop)."""
        b = self.b
        fn = b.function
        pre = b.block
        header, body, done = (fn.append_basic_block(x) for x in ("fold", "fold.body", "fold.done"))
        b.branch(header)
        b.position_at_end(header)
        j = b.phi(I64)
        acc = b.phi(init.type)
        j.add_incoming(ir.Constant(I64, 0), pre)
        acc.add_incoming(init, pre)
        b.cbranch(b.icmp_signed("<", j, length), body, done)
        b.position_at_end(body)
        new = step(acc, j)
        nxt = b.add(j, ir.Constant(I64, 1), flags=["nsw"])
        latch = b.block
        b.branch(header)
        j.add_incoming(nxt, latch)
        acc.add_incoming(new, latch)
        b.position_at_end(done)
        return acc

    def _product(self, x, y, dt):
        """x @ y: a dot product of vectors, or a vector (a matrix's rows or
        columns dotted with a vector, each element where it is consumed)."""
        if isinstance(x, _Mat):
            return _Vec(x.rows, lambda i: self._dot(x.cols, lambda k: x.at(i, k), y.at, x.dtype, dt), dt)
        if isinstance(y, _Mat):
            return self._vector_matrix(x, y, dt)
        return self._dot(x.length, x.at, y.at, x.dtype, dt), dt

    def _vector_matrix(self, x: _Vec, y: _Mat, dt) -> _Vec:
        """x @ y computed once, row by row of y into a buffer (each row read
        in order, as its memory runs; a dot product per column would walk
        down the columns, a cache line per element), in float64, then read
        from the buffer where it is consumed.  Where no buffer can be had,
        each element is a dot product down its column."""
        b = self.b
        buf8 = b.call(self._libc("malloc", I8.as_pointer(), [I64]),
                      [b.mul(b.add(y.cols, ir.Constant(I64, 1)), ir.Constant(I64, 8))])
        ok = b.icmp_unsigned("!=", buf8, ir.Constant(I8.as_pointer(), None))
        buf = b.bitcast(buf8, F64.as_pointer())
        self.scratch.append(buf8)  # (freed at the trip's end; free(NULL) does nothing)
        def rows(element):
            # ROWS_AT_ONCE rows of y per pass over the buffer: each element of
            # it is loaded and stored once per block, not once per row (the
            # same additions in the same order: the same result)
            blocked = b.mul(b.sdiv(y.rows, ir.Constant(I64, ROWS_AT_ONCE)), ir.Constant(I64, ROWS_AT_ONCE))
            with for_range(b, 0, blocked, ROWS_AT_ONCE) as k0:
                ks = [b.add(k0, ir.Constant(I64, u)) for u in range(ROWS_AT_ONCE)]
                xs = [cast(b, x.at(k), x.dtype, _F64) for k in ks]
                with for_range(b, 0, y.cols) as j:
                    p = b.gep(buf, [j])
                    acc = b.load(p)
                    for k, xk in zip(ks, xs):
                        acc = b.fadd(acc, b.fmul(xk, cast(b, element(k, j), y.dtype, _F64)))
                    b.store(acc, p)
            with for_range(b, blocked, y.rows) as k:
                xk = cast(b, x.at(k), x.dtype, _F64)
                with for_range(b, 0, y.cols) as j:
                    p = b.gep(buf, [j])
                    b.store(b.fadd(b.load(p), b.fmul(xk, cast(b, element(k, j), y.dtype, _F64))), p)

        if GEMV[1] in self.ext and x.dtype == _F64 and y.dtype == _F64 and dt == _F64:
            self._on_blas(x, y, buf, ok, rows)
        else:
            self._own(buf, ok, rows, y)

        def at(j):
            with b.if_else(ok) as (then, otherwise):
                with then:
                    v1, blk1 = cast(b, b.load(b.gep(buf, [j])), _F64, dt), b.block
                with otherwise:
                    v2, blk2 = self._dot(y.rows, x.at, lambda k: y.at(k, j), x.dtype, dt), b.block
            phi = b.phi(v1.type)
            phi.add_incoming(v1, blk1)
            phi.add_incoming(v2, blk2)
            return phi
        return _Vec(y.cols, at, dt)

    def _own(self, buf, ok, rows, y: _Mat) -> None:
        """The buffer, where there is one, computed by the loop's own code."""
        b = self.b
        with b.if_then(ok):
            with for_range(b, 0, y.cols) as j:
                b.store(ir.Constant(F64, 0.0), b.gep(buf, [j]))
            # (a unit column stride, the common case, in a loop of its own: LLVM may vectorize it)
            a, off, s0, s1 = y.view
            with b.if_else(b.icmp_signed("==", s1, ir.Constant(I64, 1))) as (unit, strided):
                with unit:
                    rows(lambda k, j: self._load(a, b.add(b.add(off, b.mul(k, s0)), j), y.dtype))
                with strided:
                    rows(y.at)

    def _on_blas(self, x: _Vec, y: _Mat, buf, ok, rows) -> None:
        """The buffer computed by numpy's BLAS where the product is large and
        its matrix's rows have unit stride and do not overlap (cblas_dgemv,
        row-major, transposed: buf = y^T x, x first copied to a contiguous
        buffer), else by the loop's own code."""
        b = self.b
        a, off, s0, s1 = y.view
        gemv, one = self.ext[GEMV[1]], ir.Constant(I64, 1)
        null = ir.Constant(I8.as_pointer(), None)
        fits = b.and_(ok, b.icmp_signed("!=", gemv, ir.Constant(I64, 0)))
        fits = b.and_(fits, b.icmp_signed("==", s1, one))
        fits = b.and_(fits, b.icmp_signed(">=", s0, smax(b, y.cols, one)))
        fits = b.and_(fits, b.icmp_signed(">=", b.mul(y.rows, y.cols), ir.Constant(I64, GEMV_MIN_ELEMENTS)))
        before = b.block
        with b.if_then(fits):  # (x's buffer only for a product that goes to BLAS)
            got = b.call(self._libc("malloc", I8.as_pointer(), [I64]), [b.mul(b.add(y.rows, one), ir.Constant(I64, 8))])
            got_in = b.block
        xs8 = b.phi(I8.as_pointer())
        xs8.add_incoming(null, before)
        xs8.add_incoming(got, got_in)
        self.scratch.append(xs8)  # (freed at the trip's end; free(NULL) does nothing)
        use = b.and_(fits, b.icmp_unsigned("!=", xs8, null))
        with b.if_else(use) as (blas, own):
            with blas:
                xs = b.bitcast(xs8, F64.as_pointer())
                with for_range(b, 0, y.rows) as k:
                    b.store(x.at(k), b.gep(xs, [k]))
                i32 = ir.IntType(32)
                fnty = ir.FunctionType(ir.VoidType(), [i32, i32, I64, I64, F64, F64.as_pointer(), I64,
                                                       F64.as_pointer(), I64, F64, F64.as_pointer(), I64])
                b.call(b.inttoptr(gemv, fnty.as_pointer()),
                       [ir.Constant(i32, _CBLAS_ROW_MAJOR), ir.Constant(i32, _CBLAS_TRANS), y.rows, y.cols,
                        ir.Constant(F64, 1.0), b.gep(self.data[a], [off]), s0, xs, one,
                        ir.Constant(F64, 0.0), buf, one])
            with own:
                self._own(buf, ok, rows, y)

    def _dot(self, length, x, y, src, dt):
        """sum of x(k) * y(k) over k < length: float32 products summed in float64, rounded once."""
        b = self.b

        def step(acc, k):
            p = b.fmul(cast(b, x(k), src, _F64), cast(b, y(k), src, _F64))
            return b.fadd(acc, p, flags=REASSOC)
        return cast(b, self._fold(length, ir.Constant(F64, 0.0), step), _F64, dt)

    def _reduce(self, op: str, x: _Vec, dt):
        b = self.b
        if op == "sum" and dt.kind == "f":
            r = self._fold(x.length, ir.Constant(F64, 0.0),
                           lambda acc, j: b.fadd(acc, cast(b, x.at(j), x.dtype, _F64), flags=REASSOC))
            return cast(b, r, _F64, dt), dt
        init = ir.Constant(LLTYPE[dt], identity(op, dt))
        return self._fold(x.length, init, lambda acc, j: REDUCERS[op](b, self.m, acc, cast(b, x.at(j), x.dtype, dt),
                                                               REASSOC)), dt
