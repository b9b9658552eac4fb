"""Lowering a lifted Python loop (shapes/pyloop.py) to one LLVM function.

ABI: `void k(i64 start, i64 stop, i8* arrays...)` (the kernels' ABI with
no ints and no floats; start and stop are not read): the arrays are numpy
array objects, in order the written arrays (copies the loop stores into),
the arrays it reads, then one int64 buffer: the status (0 or an abort code,
shapes/pyloop.py ABORTS), the scalar inputs, the scalar outputs (ints sign-
or zero-extended, floats as doubles' bits, bools 0/1).

Variables live in stack slots, one per name and type (LLVM promotes them to
registers).  Every index is wrapped and bounds-checked against the array's
extent; every operation Python or numpy would refuse or report (an integer
overflow, a division by zero, an inexact conversion, a math domain error)
branches to an abort that sets the status and returns, before anything the
caller can see is written."""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from codegen.abi import DATA_OFFSET, DIMS_OFFSET, F64, HALF, I8, I64, LLTYPE, MEMTYPE, STRIDES_OFFSET, KernelABI, \
    array_field, from_memory, to_memory
from codegen.values import pairwise_sum, round_half
from codegen.llvm import for_range
from shapes import host
from shapes.ir import Node
from shapes.pyloop import COMPARISONS, PyLoop, dtype_of, is_weak

I1 = ir.IntType(1)
F32 = ir.FloatType()
# expressions whose float16 result numpy rounds (npy_float_to_half after computing in float32)
_ROUNDED = frozenset(("bin", "call", "cvt"))
_ICMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_LIBM = ("tan", "tanh")  # (no LLVM intrinsic: libm's, f-suffixed for float32)


def lltype(t: str):
    return LLTYPE[dtype_of(t)]  # (float16 in float32, as kernels compute it)


def kind(t: str) -> str:
    """b | i | u | f of a type (a weak int is signed 64-bit)."""
    return dtype_of(t).kind


def pyloop_abi(node: Node, symbol: str) -> KernelABI:
    prog: PyLoop = node.attr("program")
    args = [("array", o.id) for o in node.outputs[:len(prog.written)]]
    args += [("array", v.id) for v, p in zip(node.inputs, prog.inputs) if p[1] == "array"]
    args.append(("array", "#io"))  # (not a graph value: runtime/kernelcall.py run_lifted makes it)
    return KernelABI(symbol, tuple(args), 1, 1)


def emit_pyloop(module: ir.Module, node: Node, symbol: str) -> None:
    prog = node.attr("program")
    ndims = {p[0]: v.ndim for p, v in zip(prog.inputs, node.inputs)}
    _Emitter(module, prog, symbol, pyloop_abi(node, symbol).n_arrays, ndims).emit()


class _Emitter:
    def __init__(self, module, prog: PyLoop, symbol: str, n_arrays: int, ndims: dict):
        self.m, self.prog, self.ndims = module, prog, ndims
        fnty = ir.FunctionType(ir.VoidType(), [I64, I64] + [I8.as_pointer()] * n_arrays)
        self.fn = ir.Function(module, fnty, symbol)
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.slots: dict = {}
        self.loops: list = []  # (continue block, break block) of the loops being emitted
        self.aborts: dict = {}
        self.n_loops = 0  # (names the trip counters: the module text is the compile cache's key)
        self.fixed_axes: dict = {}  # (a 2-D array's view -> the axis its setview fixes)

    # ------------------------------------------------------------ driver
    def emit(self) -> None:
        b, prog = self.b, self.prog
        objs = list(self.fn.args[2:])
        written = [p for p in prog.params if p[1] == "written"]
        read = [p for p in prog.params if p[1] == "array"]
        self.arrays = {}
        for p, obj in zip(written + read, objs):
            self.arrays[p[0]] = self._array(obj, p[2], self.ndims[p[0]])
        self.status = b.bitcast(array_field(b, objs[-1], DATA_OFFSET, I8.as_pointer()), I64.as_pointer())
        io = lambda k: b.gep(self.status, [ir.Constant(I64, k)])
        scalars = [(name, t) for name, kind_, t, _ in prog.params if kind_ == "scalar"]
        for k, (name, t) in enumerate(scalars):
            b.store(self._decode(b.load(io(1 + k)), t), self.slot(name, t))
        self.block(prog.body)
        for k, (name, t) in enumerate(prog.outputs):
            b.store(self._encode(b.load(self.slot(name, t)), t), io(1 + len(scalars) + k))
        b.ret_void()

    def _array(self, obj, t: str, ndim: int):
        """(data pointer, dims, strides, dtype) of an array argument, its
        dims and strides loaded once where the loop starts: a store into the
        data may alias them as LLVM sees it, which then loaded them again at
        every element (a sieve's strided stores ran at 0.7x numpy's speed);
        no array's shape or strides change in the loop."""
        b = self.b
        nd_dt = dtype_of(t)
        data = array_field(b, obj, DATA_OFFSET, I8.as_pointer())
        dims_p = array_field(b, obj, DIMS_OFFSET, I64.as_pointer())
        strides_p = array_field(b, obj, STRIDES_OFFSET, I64.as_pointer())
        dims = tuple(b.load(b.gep(dims_p, [ir.Constant(I64, k)])) for k in range(ndim))
        strides = tuple(b.load(b.gep(strides_p, [ir.Constant(I64, k)])) for k in range(ndim))
        return data, dims, strides, nd_dt

    def slot(self, name: str, t: str):
        key = (name, t)
        if key not in self.slots:
            with self.b.goto_entry_block():
                self.slots[key] = self.b.alloca(lltype(t), name=f"{name}.{t}")
        return self.slots[key]

    def abort(self, cond, code: int) -> None:
        """Branch to the abort of `code` when cond (i1) holds."""
        if code not in self.aborts:
            blk = self.fn.append_basic_block(f"abort{code}")
            with self.b.goto_block(blk):
                self.b.store(ir.Constant(I64, code), self.status)
                self.b.ret_void()
            self.aborts[code] = blk
        ok = self.fn.append_basic_block("ok")
        self.b.cbranch(cond, self.aborts[code], ok)
        self.b.position_at_end(ok)

    def _decode(self, raw, t: str):
        b, k = self.b, kind(t)
        if k == "b":
            return b.icmp_unsigned("!=", raw, ir.Constant(I64, 0))
        if k == "f":
            d = b.bitcast(raw, F64)
            return d if lltype(t) == F64 else b.fptrunc(d, F32)
        ty = lltype(t)
        return raw if ty == I64 else b.trunc(raw, ty)

    def _encode(self, v, t: str):
        b, k = self.b, kind(t)
        if k == "b":
            return b.zext(v, I64)
        if k == "f":
            return b.bitcast(v if v.type == F64 else b.fpext(v, F64), I64)
        if v.type == I64:
            return v
        return b.sext(v, I64) if k == "i" else b.zext(v, I64)

    # --------------------------------------------------------- statements
    def block(self, stmts) -> None:
        for s in stmts:
            if self.b.block.is_terminated:
                return
            getattr(self, "s_" + s[0])(*s[1:])

    def s_set(self, name, e):
        self.b.store(self.expr(e), self.slot(name, e[1]))

    def s_store(self, arr, idx, e, in_range=None):
        v = self.expr(e)
        ptr = self._address(arr, [self.expr(ie) for ie in idx], checked=in_range is None)
        self.b.store(to_memory(self.b, v, self.arrays[arr][3]), ptr)  # (the typer cast v to the array's dtype)

    def s_if(self, c, then, orelse):
        b = self.b
        cond = self.expr(c)
        t_blk, e_blk, end = (self.fn.append_basic_block(n) for n in ("then", "else", "endif"))
        b.cbranch(cond, t_blk, e_blk)
        for blk, stmts in ((t_blk, then), (e_blk, orelse)):
            b.position_at_end(blk)
            self.block(stmts)
            if not b.block.is_terminated:
                b.branch(end)
        b.position_at_end(end)

    def s_break(self):
        self.b.branch(self.loops[-1][1])

    def s_continue(self):
        self.b.branch(self.loops[-1][0])

    def s_for(self, counter, bounds, bodies, settle=None):
        b = self.b
        start, stop, step = (self.expr(x) for x in bounds)
        zero, one = ir.Constant(I64, 0), ir.Constant(I64, 1)
        self.abort(b.icmp_signed("==", step, zero), 6)
        # trips: (|stop - start| - 1) // |step| + 1 where the range goes the step's way, else 0, in unsigned
        # 64-bit arithmetic (the distance fits; no 128-bit division, which needs a runtime library's __divti3)
        up = b.icmp_signed(">", step, zero)
        ahead = b.select(up, b.icmp_signed(">", stop, start), b.icmp_signed("<", stop, start))
        span = b.select(up, b.sub(stop, start), b.sub(start, stop))
        n = b.add(b.udiv(b.sub(span, one), b.select(up, step, b.neg(step))), one)
        n = b.select(ahead, n, zero)
        k = len(bodies) - 1
        settle = k if settle is None else settle
        if settle:
            self.abort(b.icmp_signed("<", n, ir.Constant(I64, settle)), 5)
        end = self.fn.append_basic_block("for.end")
        var = self.slot(counter, "int")
        for t in range(k):  # (the trips typed apart: peeled; those past `settle` run only where the range has them)
            nxt = self.fn.append_basic_block(f"peel{t}.next")
            if t >= settle:
                trip = self.fn.append_basic_block(f"peel{t}")
                b.cbranch(b.icmp_signed("<", ir.Constant(I64, t), n), trip, end)
                b.position_at_end(trip)
            b.store(b.add(start, b.mul(ir.Constant(I64, t), step)), var)
            self._trip(bodies[t], nxt, end)
            b.position_at_end(nxt)
        head, body, latch = (self.fn.append_basic_block(x) for x in ("for.head", "for.body", "for.latch"))
        self.n_loops += 1
        i_slot = self.slot(f"#trip{self.n_loops}", "int")
        b.store(ir.Constant(I64, k), i_slot)
        b.branch(head)
        b.position_at_end(head)
        i = b.load(i_slot)
        b.cbranch(b.icmp_signed("<", i, n), body, end)
        b.position_at_end(body)
        b.store(b.add(start, b.mul(i, step)), var)
        self._trip(bodies[k], latch, end)
        b.position_at_end(latch)
        b.store(b.add(b.load(i_slot), one), i_slot)
        b.branch(head)
        b.position_at_end(end)

    def s_while(self, tests, bodies):
        """Trip t runs tests[min(t, k)] (the views it slices set, then the
        test) and, while it holds, bodies[min(t, k)] (k = len(bodies) - 1:
        the first k trips typed apart)."""
        b = self.b
        end = self.fn.append_basic_block("while.end")
        k = len(bodies) - 1

        def test(t):
            pre, c = tests[t]
            self.block(pre)
            return self.expr(c)
        for t in range(k):  # (the trips whose types differ: peeled)
            body, nxt = self.fn.append_basic_block(f"wpeel{t}"), self.fn.append_basic_block(f"wpeel{t}.next")
            b.cbranch(test(t), body, end)
            b.position_at_end(body)
            self._trip(bodies[t], nxt, end)
            b.position_at_end(nxt)
        head, body = self.fn.append_basic_block("while.head"), self.fn.append_basic_block("while.body")
        b.branch(head)
        b.position_at_end(head)
        b.cbranch(test(k), body, end)
        b.position_at_end(body)
        self._trip(bodies[k], head, end)
        b.position_at_end(end)

    def _trip(self, body, cont, brk) -> None:
        """A trip's statements, `continue` going to block `cont` (and the
        trip's end, falling through), `break` to `brk`."""
        self.loops.append((cont, brk))
        self.block(body)
        self.loops.pop()
        if not self.b.block.is_terminated:
            self.b.branch(cont)

    # -------------------------------------------------------- expressions
    def expr(self, e):
        v = getattr(self, "e_" + e[0])(*e[1:])
        if e[0] in _ROUNDED and dtype_of(e[1]) == HALF:  # (computed in float32: rounded as numpy rounds)
            v = round_half(self.b, v)
        return v

    def e_const(self, t, value):
        ty = lltype(t)
        if kind(t) == "f":
            if dtype_of(t) == HALF:
                with np.errstate(over="ignore"):  # (a float beyond float16's range is inf, as numpy's cast)
                    value = np.float16(value)
            return ir.Constant(ty, float(value))
        if kind(t) == "b":
            return ir.Constant(I1, int(bool(value)))
        v = int(value)
        bits = ty.width
        return ir.Constant(ty, v & ((1 << bits) - 1))

    def e_var(self, t, name):
        return self.b.load(self.slot(name, t))

    def e_dim(self, t, arr, axis):
        _, dims, _, _ = self.arrays[arr]
        return dims[axis]

    def _element(self, arr, idx):
        return self._address(arr, [self.expr(ie) for ie in idx])

    def _address(self, arr, idx, checked=True):
        """The address of arr[idx] (i64 indices: negative ones wrap; out of
        range aborts, as numpy raises IndexError)."""
        b = self.b
        data, dims, strides, dt = self.arrays[arr]
        off = ir.Constant(I64, 0)
        for axis, i in enumerate(idx):
            if checked:
                d = dims[axis]
                i = b.select(b.icmp_signed("<", i, ir.Constant(I64, 0)), b.add(i, d), i)
                self.abort(b.or_(b.icmp_signed("<", i, ir.Constant(I64, 0)), b.icmp_signed(">=", i, d)), 1)
            s = strides[axis]
            off = b.add(off, b.mul(i, s))
        ty = MEMTYPE[dt]
        return b.bitcast(b.gep(data, [off]), ty.as_pointer())

    def _loaded(self, ptr, dt):
        return from_memory(self.b, self.b.load(ptr), dt)

    # ------------------------------------------------------------ vectors
    def s_setview(self, hidden, arr, lo, hi, step, fixed=None):
        """A 1-D slice's start, length and step, as Python's slice.indices;
        of a 2-D array's axis, its index along the other (`fixed`: (that
        axis, the index), wrapped and checked as an element's)."""
        b = self.b
        _, dims, _, _ = self.arrays[arr]
        zero, one, m1 = ir.Constant(I64, 0), ir.Constant(I64, 1), ir.Constant(I64, -1)
        if fixed is not None:
            axis, ix = fixed
            d = dims[axis]
            i = self.expr(ix)
            i = b.select(b.icmp_signed("<", i, zero), b.add(i, d), i)
            self.abort(b.or_(b.icmp_signed("<", i, zero), b.icmp_signed(">=", i, d)), 1)
            b.store(i, self.slot(f"{hidden}#fixed", "int"))
            self.fixed_axes[hidden] = axis
        n = dims[0 if fixed is None else 1 - fixed[0]]
        st = one if step is None else self.expr(step)
        self.abort(b.icmp_signed("==", st, zero), 6)
        neg = b.icmp_signed("<", st, zero)

        def bound(x, default_up, default_down):
            if x is None:
                return b.select(neg, default_down, default_up)
            v = self.expr(x)
            v = b.select(b.icmp_signed("<", v, zero), b.add(v, n), v)
            low = b.select(neg, m1, zero)
            high = b.select(neg, b.sub(n, one), n)
            v = b.select(b.icmp_signed("<", v, zero), low, v)
            return b.select(b.icmp_signed(">=", v, n), high, v)
        start = bound(lo, zero, b.sub(n, one))
        stop = bound(hi, n, m1)
        up_len = b.add(b.sdiv(b.sub(b.sub(stop, start), one), st), one)
        down_len = b.add(b.sdiv(b.sub(b.sub(start, stop), one), b.sub(zero, st)), one)
        length = b.select(neg, b.select(b.icmp_signed("<", stop, start), down_len, zero),
                          b.select(b.icmp_signed("<", start, stop), up_len, zero))
        for part, v in (("start", start), ("len", length), ("step", st)):
            b.store(v, self.slot(f"{hidden}#{part}", "int"))

    def _vlen(self, v):
        if v[0] == "view":
            return self.b.load(self.slot(f"{v[2]}#len", "int"))
        return self._vlen(v[3])  # (a gather: as long as its index vector)

    def _velem(self, v, k):
        """(element k of vector v, its dtype); k is in range."""
        b = self.b
        if v[0] == "view":
            start, step = (b.load(self.slot(f"{v[2]}#{p}", "int")) for p in ("start", "step"))
            data, dims, strides, dt = self.arrays[v[3]]
            idx = [b.add(start, b.mul(k, step))]
            if self.ndims[v[3]] == 2:  # (a row's or a column's segment: the other axis at its index)
                fixed = b.load(self.slot(f"{v[2]}#fixed", "int"))
                idx = [fixed] + idx if self.fixed_axes[v[2]] == 0 else idx + [fixed]
            return self._loaded(self._address(v[3], idx, checked=False), dt), dt
        i, idt = self._velem(v[3], k)
        i = self._convert(i, "np." + idt.name, "int", "value")
        dt = self.arrays[v[2]][3]
        return self._loaded(self._address(v[2], [i]), dt), dt

    def _view_base(self, v):
        """(the address of a view's first element as an i8*, the bytes from
        one element to the next)."""
        b = self.b
        start, step = (b.load(self.slot(f"{v[2]}#{p}", "int")) for p in ("start", "step"))
        _, _, strides, _ = self.arrays[v[3]]
        idx = [start]
        axis = 0
        if self.ndims[v[3]] == 2:
            fixed = b.load(self.slot(f"{v[2]}#fixed", "int"))
            axis = 1 - self.fixed_axes[v[2]]
            idx = [fixed, start] if axis == 1 else [start, fixed]
        stride = b.mul(step, strides[axis])
        return b.bitcast(self._address(v[3], idx, checked=False), I8.as_pointer()), stride

    def _accumulate(self, t, n, step, init):
        """step(acc, k) folded over k in [0, n), in order, from init."""
        b = self.b
        with b.goto_entry_block():
            acc = b.alloca(lltype(t))
        b.store(init, acc)
        with for_range(b, 0, n) as k:
            b.store(step(b.load(acc), k), acc)
        return b.load(acc)

    def e_search(self, t, v, key, side):
        """numpy's binary search for one key (its npy_binsearch, whose
        order puts NaN last): the first k where v[k] >= key (left) or
        > key (right), of the k in [0, n) it halves to."""
        b = self.b
        kt = key[1]
        x = self.expr(key)
        with b.goto_entry_block():
            lo, hi = b.alloca(I64), b.alloca(I64)
        b.store(ir.Constant(I64, 0), lo)
        b.store(self._vlen(v), hi)
        head, body, done = (self.fn.append_basic_block(n) for n in ("search.head", "search.body", "search.end"))
        b.branch(head)
        b.position_at_end(head)
        low, high = b.load(lo), b.load(hi)
        b.cbranch(b.icmp_signed("<", low, high), body, done)
        b.position_at_end(body)
        mid = b.add(low, b.ashr(b.sub(high, low), ir.Constant(I64, 1)))
        u, du = self._velem(v, mid)
        u = self._convert(u, "np." + du.name, kt, "value")
        up = self._less(u, x, kt) if side == "left" else b.xor(self._less(x, u, kt), ir.Constant(I1, 1))
        b.store(b.select(up, b.add(mid, ir.Constant(I64, 1)), low), lo)
        b.store(b.select(up, high, mid), hi)
        b.branch(head)
        b.position_at_end(done)
        return b.load(lo)

    def _less(self, x, y, t):
        """numpy's sort order: x < y, where NaN is above every number."""
        b = self.b
        if kind(t) == "f":
            return b.or_(b.fcmp_ordered("<", x, y), b.and_(b.fcmp_unordered("uno", y, y),
                                                          b.fcmp_ordered("ord", x, x)))
        return (b.icmp_signed if kind(t) == "i" else b.icmp_unsigned)("<", x, y)

    def e_veclen(self, t, v):
        return self._vlen(v)

    def e_size(self, t, arr):
        b = self.b
        _, dims, _, dt = self.arrays[arr]
        n = ir.Constant(I64, 1)
        for axis in range(self.ndims[arr]):
            n = b.mul(n, dims[axis])
        return n

    def e_dot(self, t, x, y):
        b = self.b
        n = self._vlen(x)
        self.abort(b.icmp_signed("!=", n, self._vlen(y)), 7)

        def step(acc, k):
            (u, du), (w, dw) = self._velem(x, k), self._velem(y, k)
            u, w = self._convert(u, "np." + du.name, t, "value"), self._convert(w, "np." + dw.name, t, "value")
            if kind(t) != "f":
                return b.add(acc, b.mul(u, w))
            if fused:  # (as numpy's BLAS dot adds a short vector's products: to the bit below 16 elements)
                fma = self.m.declare_intrinsic("llvm.fma", [u.type], ir.FunctionType(u.type, [u.type] * 3))
                return b.call(fma, [u, w, acc])
            return b.fadd(acc, b.fmul(u, w))
        fused = host.has_fma()
        return self._accumulate(t, n, step, self.e_const(t, 0))

    def e_reduce(self, t, op, v):
        b = self.b
        n = self._vlen(v)
        f = kind(t) == "f"

        def elem(k):
            u, du = self._velem(v, k)
            return self._convert(u, "np." + du.name, t, "value")
        if op == "sum" and f and v[0] == "view" and dtype_of(t) == self.arrays[v[3]][3]:
            # (numpy's order: its identity plus the pairwise sum of the elements, to the bit)
            base, stride = self._view_base(v)
            return b.fadd(self.e_const(t, 0), b.call(pairwise_sum(self.m, dtype_of(t)), [base, n, stride]))
        if op == "sum":  # (integers: any order gives numpy's sum; a float64 gather's: in order, a few ulp)
            return self._accumulate(t, n, lambda acc, k: b.fadd(acc, elem(k)) if f else b.add(acc, elem(k)),
                                    self.e_const(t, 0))
        self.abort(b.icmp_signed("==", n, ir.Constant(I64, 0)), 7)  # (numpy: no identity)
        cmp = ">" if op == "max" else "<"

        def step(acc, k):
            x = elem(k)
            if f:
                m = b.select(b.fcmp_ordered(cmp, x, acc), x, acc)
                return b.select(b.fcmp_unordered("uno", x, x), x, m)  # (nan propagates, as numpy's)
            better = (b.icmp_signed if kind(t) == "i" else b.icmp_unsigned)(cmp, x, acc)
            return b.select(better, x, acc)
        return self._accumulate(t, n, step, elem(ir.Constant(I64, 0)))

    def e_load(self, t, arr, idx):
        return self._loaded(self._element(arr, idx), dtype_of(t))

    def e_truth(self, t, e):
        v = self.expr(e)
        if kind(e[1]) == "f":
            return self.b.fcmp_unordered("!=", v, ir.Constant(v.type, 0.0))
        return self.b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))

    def e_not(self, t, c):
        return self.b.xor(self.expr(c), ir.Constant(I1, 1))

    def _either(self, cond, then, otherwise, ty):
        """then() where cond (i1) holds, else otherwise(): only one of them runs."""
        b = self.b
        blocks = [self.fn.append_basic_block(n) for n in ("if.a", "if.b", "if.end")]
        b.cbranch(cond, blocks[0], blocks[1])
        phi_in = []
        for blk, make in zip(blocks[:2], (then, otherwise)):
            b.position_at_end(blk)
            phi_in.append((make(), b.block))
            b.branch(blocks[2])
        b.position_at_end(blocks[2])
        phi = b.phi(ty)
        for v, blk in phi_in:
            phi.add_incoming(v, blk)
        return phi

    def e_and(self, t, a, c):
        return self._either(self.expr(a), lambda: self.expr(c), lambda: ir.Constant(I1, 0), I1)

    def e_or(self, t, a, c):
        return self._either(self.expr(a), lambda: ir.Constant(I1, 1), lambda: self.expr(c), I1)

    def e_select(self, t, c, x, y):
        return self._either(self.expr(c), lambda: self.expr(x), lambda: self.expr(y), lltype(t))

    def e_cvt(self, t, e, mode):
        return self._convert(self.expr(e), e[1], t, mode)

    def _convert(self, v, s, t, mode):
        """v (of type s) as a t (the module docstring of shapes/pyloop.py)."""
        b = self.b
        if s == t:
            return v
        ks, kt = kind(s), kind(t)
        ty = lltype(t)
        if ks == "b":
            return v if kt == "b" else b.uitofp(v, ty) if kt == "f" else b.zext(v, ty)
        if kt == "b":
            return (b.fcmp_unordered("!=", v, ir.Constant(v.type, 0.0)) if ks == "f"
                    else b.icmp_unsigned("!=", v, ir.Constant(v.type, 0)))
        if ks == "f" and kt == "f":
            return v if v.type == ty else b.fpext(v, ty) if ty == F64 else b.fptrunc(v, ty)
        if ks == "f":  # to an integer, truncated: nan, inf and out of range abort
            bits = ty.width
            lo, hi = (-(2.0 ** (bits - 1)), 2.0 ** (bits - 1)) if kt == "i" else (-1.0, 2.0 ** bits)
            x = v if v.type == F64 else b.fpext(v, F64)
            low_ok = (b.fcmp_ordered(">=", x, ir.Constant(F64, lo)) if kt == "i"
                      else b.fcmp_ordered(">", x, ir.Constant(F64, lo)))
            self.abort(b.not_(b.and_(low_ok, b.fcmp_ordered("<", x, ir.Constant(F64, hi)))), 2)
            return b.fptosi(x, ty) if kt == "i" else b.fptoui(x, ty)
        if kt == "f":  # an integer to a float
            if mode == "exact":
                lim = 1 << 53
                big = (b.icmp_unsigned(">", v if ks == "u" else b.select(b.icmp_signed("<", v, ir.Constant(v.type, 0)),
                                                                          b.neg(v), v), ir.Constant(v.type, lim))
                       if v.type.width > 53 else ir.Constant(I1, 0))
                self.abort(big, 2)
            return b.sitofp(v, ty) if ks == "i" else b.uitofp(v, ty)
        # integer to integer: a cast, except where Python's int (or numpy's store into a signed
        # array, which goes through one) must hold the value exactly
        sw, tw = v.type.width, ty.width
        if is_weak(s) != is_weak(t) or mode == "exact" or mode == "store" and kt == "i":
            self.abort(self._out_of_range(v, ks, kt, tw), 2)
        if sw == tw:
            return v
        if sw > tw:
            return b.trunc(v, ty)
        return b.sext(v, ty) if ks == "i" else b.zext(v, ty)

    def _out_of_range(self, v, ks, kt, tw):
        """Whether integer v (kind ks) does not fit a kt integer of tw bits."""
        b = self.b
        w = ir.IntType(max(v.type.width, tw) + 1)
        x = b.sext(v, w) if ks == "i" else b.zext(v, w)
        lo, hi = (-(1 << (tw - 1)), (1 << (tw - 1)) - 1) if kt == "i" else (0, (1 << tw) - 1)
        return b.or_(b.icmp_signed("<", x, ir.Constant(w, lo)), b.icmp_signed(">", x, ir.Constant(w, hi)))

    def e_un(self, t, op, a):
        b = self.b
        v = self.expr(a)
        k = kind(t)
        if op == "invert":
            return b.xor(v, ir.Constant(v.type, -1 if k != "b" else 1))
        if k == "f":
            return b.fneg(v) if op == "neg" else b.call(self.m.declare_intrinsic("llvm.fabs", [v.type]), [v])
        zero = ir.Constant(v.type, 0)
        if k == "u":
            if op == "neg":
                self.abort(b.icmp_unsigned("!=", v, zero), 2)
                return zero
            return v
        self.abort(b.icmp_signed("==", v, ir.Constant(v.type, -(1 << (v.type.width - 1)))), 2)
        neg = b.sub(zero, v)
        return neg if op == "neg" else b.select(b.icmp_signed("<", v, zero), neg, v)

    def e_call(self, t, name, args, flavor):
        b = self.b
        x = self.expr(args[0])
        ty = x.type
        f64 = ty == F64
        if flavor == "math":
            if name == "sqrt":
                self.abort(b.fcmp_ordered("<", x, ir.Constant(ty, 0.0)), 4)
            elif name == "log":
                self.abort(b.fcmp_ordered("<=", x, ir.Constant(ty, 0.0)), 4)
            elif name in ("sin", "cos", "tan"):
                self.abort(b.fcmp_ordered("==", b.call(self.m.declare_intrinsic("llvm.fabs", [ty]), [x]),
                                          ir.Constant(ty, float("inf"))), 4)
        if name in _LIBM:
            sym = name + ("" if f64 else "f")
            fn = self.m.globals.get(sym) or ir.Function(self.m, ir.FunctionType(ty, [ty]), sym)
            r = b.call(fn, [x])
        else:
            r = b.call(self.m.declare_intrinsic(f"llvm.{name}", [ty]), [x])
        if flavor == "math" and name == "exp":  # (OverflowError where the result overflows)
            inf = ir.Constant(ty, float("inf"))
            self.abort(b.and_(b.fcmp_ordered("==", r, inf), b.fcmp_ordered("!=", x, inf)), 8)
        return r

    def e_bin(self, t, op, a, c):
        b = self.b
        x, y = self.expr(a), self.expr(c)
        k = kind(a[1])
        if op in COMPARISONS:
            if k == "f":
                return (b.fcmp_unordered("!=", x, y) if op == "ne" else b.fcmp_ordered(_ICMP[op], x, y))
            return (b.icmp_signed if k == "i" else b.icmp_unsigned)(_ICMP[op], x, y)
        if op in ("min", "max"):
            if k == "f":
                better = b.fcmp_ordered("<" if op == "min" else ">", y, x)
            else:
                better = (b.icmp_signed if k == "i" else b.icmp_unsigned)("<" if op == "min" else ">", y, x)
            return b.select(better, y, x)
        if op in ("and", "or", "xor"):
            return getattr(b, {"and": "and_", "or": "or_", "xor": "xor"}[op])(x, y)
        if k == "f":
            return self._float_bin(op, x, y, a[1])
        return self._int_bin(op, x, y, k, is_weak(a[1]))

    def _float_bin(self, op, x, y, t):
        b = self.b
        if op in ("add", "sub", "mul"):
            return getattr(b, "f" + op)(x, y)
        zero = ir.Constant(x.type, 0.0)
        if op == "pow":  # (libm's pow, as Python's float and numpy's scalar powers: where either raises or
            # warns -- a negative base to a fractional power, 0 to a negative one, an overflow -- it aborts)
            sym = "pow" if x.type == F64 else "powf"
            fn = self.m.globals.get(sym) or ir.Function(self.m, ir.FunctionType(x.type, [x.type, x.type]), sym)
            r = b.call(fn, [x, y])
            fabs = self.m.declare_intrinsic("llvm.fabs", [x.type])
            whole = b.fcmp_ordered("==", b.call(self.m.declare_intrinsic("llvm.floor", [x.type]), [y]), y)
            inf = ir.Constant(x.type, float("inf"))
            self.abort(b.and_(b.fcmp_ordered("<", x, zero), b.not_(whole)), 4)
            self.abort(b.and_(b.fcmp_ordered("==", x, zero), b.fcmp_ordered("<", y, zero)), 3)
            self.abort(b.and_(b.fcmp_ordered("==", b.call(fabs, [r]), inf),
                              b.fcmp_ordered("!=", b.call(fabs, [x]), inf)), 8)
            return r
        if op == "truediv":
            if is_weak(t):
                self.abort(b.fcmp_ordered("==", y, zero), 3)
            return b.fdiv(x, y)
        self.abort(b.fcmp_ordered("==", y, zero), 3)
        # floordiv and mod as Python's float divmod (numpy's npy_divmod computes the same)
        mod = b.frem(x, y)
        div = b.fdiv(b.fsub(x, mod), y)
        adjust = b.and_(b.fcmp_unordered("!=", mod, zero),
                        b.xor(b.fcmp_ordered("<", y, zero), b.fcmp_ordered("<", mod, zero)))
        mod = b.select(adjust, b.fadd(mod, y), mod)
        div = b.select(adjust, b.fsub(div, ir.Constant(x.type, 1.0)), div)
        copysign = lambda m, s: b.call(self.m.declare_intrinsic(
            "llvm.copysign", [x.type], ir.FunctionType(x.type, [x.type, x.type])), [m, s])
        if op == "mod":
            return b.select(b.fcmp_unordered("!=", mod, zero), mod, copysign(zero, y))
        fl = b.call(self.m.declare_intrinsic("llvm.floor", [x.type]), [div])
        fl = b.select(b.fcmp_ordered(">", b.fsub(div, fl), ir.Constant(x.type, 0.5)),
                      b.fadd(fl, ir.Constant(x.type, 1.0)), fl)
        return b.select(b.fcmp_unordered("!=", div, zero), fl, copysign(zero, b.fdiv(x, y)))

    def _int_bin(self, op, x, y, k, weak: bool):
        b = self.b
        ty = x.type
        zero, one = ir.Constant(ty, 0), ir.Constant(ty, 1)
        signed = k == "i"
        if op in ("add", "sub", "mul"):
            f = self.m.declare_intrinsic(f"llvm.{'s' if signed else 'u'}{op}.with.overflow", [ty],
                                         ir.FunctionType(ir.LiteralStructType([ty, I1]), [ty, ty]))
            r = b.call(f, [x, y])
            self.abort(b.extract_value(r, 1), 2)
            return b.extract_value(r, 0)
        if op in ("floordiv", "mod"):
            self.abort(b.icmp_unsigned("==", y, zero), 3)
            if not signed:
                return b.udiv(x, y) if op == "floordiv" else b.urem(x, y)
            minus_one = ir.Constant(ty, -1)
            is_m1 = b.icmp_signed("==", y, minus_one)
            if op == "floordiv":
                self.abort(b.and_(is_m1, b.icmp_signed("==", x, ir.Constant(ty, -(1 << (ty.width - 1))))), 2)
            ys = b.select(is_m1, one, y)  # (srem of MIN by -1 is undefined; x % -1 is 0)
            q, r = b.sdiv(x, ys), b.srem(x, ys)
            q = b.select(is_m1, b.sub(zero, x), q)
            r = b.select(is_m1, zero, r)
            adjust = b.and_(b.icmp_signed("!=", r, zero),
                            b.xor(b.icmp_signed("<", r, zero), b.icmp_signed("<", y, zero)))
            return b.select(adjust, b.sub(q, one), q) if op == "floordiv" else b.select(adjust, b.add(r, y), r)
        if op in ("lshift", "rshift"):
            self.abort(b.icmp_signed("<", y, zero) if signed else ir.Constant(I1, 0), 2)
            wide = b.icmp_unsigned(">=", y, ir.Constant(ty, ty.width))
            ys = b.select(wide, zero, y)
            if op == "rshift":
                r = b.ashr(x, ys) if signed else b.lshr(x, ys)
                full = b.select(b.icmp_signed("<", x, zero), ir.Constant(ty, -1), zero) if signed else zero
                return b.select(wide, full, r)
            r = b.shl(x, ys)
            if weak:  # (a Python int: the bits shifted out must not be lost)
                lost = b.or_(b.and_(wide, b.icmp_signed("!=", x, zero)),
                             b.icmp_signed("!=", b.ashr(r, ys), x))
                self.abort(lost, 2)
            return b.select(wide, zero, r)
        raise ValueError(f"integer op {op}")
