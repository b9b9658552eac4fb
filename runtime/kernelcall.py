"""A native kernel call in an executable: its plain data (KernelCall, from
codegen's ABI), the Python lines that run it (on this thread, split over the
cores, or as a product's choice between our GEMM and numpy's matmul), and
the functions those lines call at run time."""
from __future__ import annotations

import ctypes
import dataclasses
import struct
import threading
from dataclasses import dataclass

import numpy as np
import sympy

from shapes.kernelargs import CHUNKS_PER_THREAD, EPILOGUE, EPILOGUE_ARGS, ERRCELL, GEMV, INT_KINDS
from shapes.pyloop import ABORTS
from shapes.pyexpr import to_python
from runtime import gemmchoice, threadpool
from runtime.runeagerly import LoopAbort
from runtime.threadpool import dgemv_address, native_pool, parallel_for


@dataclass(frozen=True)
class KernelCall:
    """One native kernel call: plain data from codegen's ABI."""
    symbol: str
    inputs: tuple          # value ids read
    outputs: tuple         # (value id, shape, dtype) of each array it writes
    args: tuple            # ("array", value id) | ("int", expr) | ("float", value id)
    rows: object           # the [0, rows) range split across threads
    inner: object          # elements per row
    prepare: tuple = ()    # (value id, (batch, rows, cols) exprs, unit_rows_ok): passed as a 4-D
                           # view with unit-stride columns (or rows), or a copy when there is none
    parallel: str | None = None  # the kernel's parallel entry: its arguments with (chunk, native
                                 # pool address) after the ints, run on the native pool
    blas: tuple = ()       # a product's (A value id, B value id, (M, N, K) exprs): numpy's matmul of
                           # A and B computes the same output; runtime/gemmchoice.py picks one per host
    pointwise: bool = False  # an operand of the output's shape is read only where the output is written
                             # (a fused loop kernel; not a product, whose C[i, j] reads all of A's row i)
    target: bool = False   # a re-rolled loop: it updates its first input (in place when that is dead,
                           # else a copy) into its one output, its trips [0, rows) in order on this thread
    lifted: tuple = ()     # a lifted Python loop: (input ids of the arrays it stores into, whose
                           # copies are its first outputs; (value id, type) of each scalar input;
                           # (value id, type) of each scalar output) (run_lifted)
    tile: str = ""         # a kernel's tile entry, when a product's GEMM runs it in its store
    epilogue: "KernelCall | None" = None  # a product's: that kernel (its inputs and outputs are the
                                          # step's too; the GEMM's last two ints address it)

    def with_epilogue(self, k: "KernelCall") -> "KernelCall":
        """This product with kernel `k` run in its store (k.tile): its last two
        ints, 0 without an epilogue, become the tile entry's address and its
        packed arguments (codegen/gemm.py ABI)."""
        # (the product stays among the inputs: the epilogue reads it within the step, which is its last use:
        # a pooled buffer, freed after the step)
        ins = self.inputs + tuple(i for i in k.inputs if i not in self.inputs)
        return dataclasses.replace(self, inputs=ins, outputs=self.outputs + k.outputs, epilogue=k,
                                   args=self.args[:-2] + (EPILOGUE, EPILOGUE_ARGS))


# Work (elements) below which a kernel runs on the calling thread, and the
# least work per chunk when it is split: a fork/join costs ~0.5 us on the
# native pool, ~30 us on the Python one.
PARALLEL_MIN_WORK, CHUNK_MIN_WORK = 1 << 14, 1 << 12          # native pool
PY_PARALLEL_MIN_WORK, PY_CHUNK_MIN_WORK = 1 << 17, 1 << 15    # Python pool


def product_chunk(units: int, least: int, threads: int | None = None) -> int:
    """Units (a product's column strips) per chunk of a GEMM split over the
    native pool: `least` (the work rule) or more; two or more wherever the
    units make `threads` * 1..CHUNKS_PER_THREAD such chunks, as many a
    thread (the pool makes min(threads * CHUNKS_PER_THREAD, units // chunk)).  A chunk of one
    strip is a group of one for the kernel (codegen/gemm.py GROUP): its A
    tiles are read for that strip alone, and its panel is packed from 64
    bytes a row of B.  Two threads (a script timing a jitted x @ w + b, the
    chunk set per build), AMD EPYC znver5, AVX-512, float32: 12 strips (N =
    768) in chunks of 2 or 3 ran 1.12-1.16x faster than the 8 chunks of 1
    and 2 the work rule gave, at M = 128 (K = 768, 3072) and M = 1024; 3
    chunks (of 4) 0.8x (one thread takes two)."""
    t = threads or max(1, threadpool.native_threads())
    for per in range(CHUNKS_PER_THREAD, 0, -1):
        chunk = units // (t * per)
        if chunk >= 2 and min(t * CHUNKS_PER_THREAD, units // chunk) % t == 0:
            return max(chunk, least)
    return least


def kernel_lines(kc: KernelCall, names, const, functions, pooled, into=None) -> list[str]:
    """`into`: output id -> the source of a slot the output may be written
    straight into (bufferplan.BufferPlan.direct), when that slot is C-contiguous and
    writeable."""
    lines = []
    for vid, shape, dtype in kc.outputs:
        names[vid] = f"v{vid}"
        shp = "(" + "".join(to_python(d) + ", " for d in shape) + ")"
        if into and vid in into:
            lines.append(f"    _t{vid} = {into[vid]}")
            # (a read-only slot too gets its own array: the assignment then raises numpy's error)
            lines.append(f"    v{vid} = _t{vid} if _t{vid}.flags.c_contiguous and _t{vid}.flags.writeable "
                         f"else _empty({shp}, {const(np.dtype(dtype))})")
        elif vid in pooled:
            lines.append(f"    v{vid} = _pool.get(_b, {vid}, {shp}, {const(np.dtype(dtype))})")
        else:
            lines.append(f"    v{vid} = _empty({shp}, {const(np.dtype(dtype))})")
    n_alloc = len(lines)
    lines += _call_lines(kc, names, const, functions)
    return lines if not kc.blas else _or_blas(kc, lines, n_alloc, names, const, functions)


def _call_lines(kc: KernelCall, names, const, functions) -> list[str]:
    """The lines that run kernel `kc` into its allocated outputs: on the
    calling thread, or split over the cores when its work is large enough
    (a product with an epilogue first packs the epilogue's arguments)."""
    lines = []
    checked = ERRCELL in kc.args
    local = {}
    for vid, dims, unit_rows_ok in kc.prepare:
        local[vid] = f"_c{vid}"
        lines.append(f"    _c{vid} = _rows4({names[vid]}, {', '.join(to_python(d) for d in dims)}, {unit_rows_ok})")
    epilogue = None
    if kc.epilogue is not None:
        e = kc.epilogue
        srcs = _arg_sources(e, names, const)
        n_arr = sum(1 for a in e.args if a[0] == "array")
        n_int = sum(1 for a in e.args if a[0] in INT_KINDS)
        groups = (srcs[:n_arr], srcs[n_arr:n_arr + n_int], srcs[n_arr + n_int:])  # arrays, ints, floats
        lines.append(f"    _ea = _epilogue_args({', '.join('(' + ''.join(x + ', ' for x in g) + ')' for g in groups)})")
        epilogue = const(address(functions[e.tile]), ("address", e.tile)), "_addressof(_ea)"
    args = _arg_sources(kc, names, const, local, epilogue)
    fn = const(functions[kc.symbol], ("kernel", kc.symbol))
    rows, inner = to_python(kc.rows), to_python(kc.inner)
    static = isinstance(kc.rows, (int, sympy.Integer)) and isinstance(kc.inner, (int, sympy.Integer))
    if kc.parallel in functions and native_pool() is not None:  # one native call, split over the cores
        fpar = const(functions[kc.parallel], ("kernel", kc.parallel))
        pool = const(native_pool(), ("pool",))
        chunk = f"max(1, {CHUNK_MIN_WORK} // max(1, {inner}))"
        if kc.blas:  # (a product: its units are column strips)
            chunk = f"_product_chunk({rows}, {chunk})"
        n_front = sum(1 for a in kc.args if a[0] != "float")  # (arrays and ints come before the floats)
        par_args = args[:n_front] + [chunk, pool] + args[n_front:]
        par = lambda n: f"{fpar}(0, {n}, {', '.join(par_args)})"
        min_work = PARALLEL_MIN_WORK
        rows_of_one = _gemv_split_lines(kc, names, const, functions, fpar, pool)
    else:
        chunk = f"max(1, {PY_CHUNK_MIN_WORK} // max(1, {inner}))"
        argt = "(" + "".join(x + ", " for x in args) + ")"
        par = lambda n: f"_par({fn}, 0, {n}, {argt}, {chunk})"
        min_work = PY_PARALLEL_MIN_WORK
        rows_of_one = None
    serial = lambda n: f"{fn}(0, {n}, {', '.join(args)})"
    if rows_of_one is not None:  # (a product that may have one row: B's rows split over the cores)
        lines.append(f"    _n = {rows}")
        lines += rows_of_one
        lines.append(f"    elif _n * {inner} >= {min_work}: {par('_n')}")
        lines.append(f"    elif _n > 0: {serial('_n')}")
    elif static:  # (an unrolled loop's steps: the choice is made here, not at every call)
        n_rows, work = int(kc.rows), int(kc.rows) * int(kc.inner)
        if n_rows > 0:
            lines.append("    " + (par if work >= min_work else serial)(n_rows))
    else:
        lines.append(f"    _n = {rows}")
        lines.append(f"    if _n * {inner} >= {min_work}: {par('_n')}")
        lines.append(f"    elif _n > 0: {serial('_n')}")
    if checked:
        lines.append(f"    _check_bounds({kc.symbol!r})")
    if local:  # a prepared operand may be a copy: free it now, as any intermediate
        lines.append("    del " + ", ".join(local.values()))
    return lines


def _gemv_split_lines(kc: KernelCall, names, const, functions, fpar: str, pool: str) -> list[str] | None:
    """The lines that run a product of one row split over B's rows
    (runtime/gemv.py) when it has one at run time, `_n` holding its units
    (its column strips then): an `if` the kernel's other lines follow as
    `elif`s.  A product with an epilogue in its store then runs that
    epilogue as a pass of its own, as after numpy's matmul.  None for a
    product that never has one row, or whose operands the kernel reads
    through strided views."""
    if not kc.blas or kc.prepare:
        return None
    a, b, (m, n, k) = kc.blas
    if isinstance(m, (int, sympy.Integer)) and int(m) != 1:
        return None
    m, n, k = (to_python(d) for d in (m, n, k))
    split = f"_gemv_split({fpar}, {pool}, {names[a]}, {names[b]}, {names[kc.outputs[0][0]]}, {n}, {k}, _n, _gt)"
    if kc.epilogue is None:
        return [f"    _gt = _gemv_parts({m}, {k}, {n})", f"    if _gt: {split}"]
    then = _call_lines(kc.epilogue, names, const, functions)
    return [f"    _gt = _gemv_parts({m}, {k}, {n})", "    if _gt:", f"        {split}"] + ["    " + x for x in then]


def run_split(fn, par, rows: int, inner: int, args: tuple) -> None:
    """Run a product's GEMM kernel `fn` (its parallel entry `par`) over
    [0, rows) as the lines _call_lines generates do: split over the cores when the work is large
    enough (on the native pool where it runs, else the Python pool), else
    on this thread.  For callers outside an executable (calibration)."""
    pool = native_pool()
    if rows * inner >= (PARALLEL_MIN_WORK if pool is not None else PY_PARALLEL_MIN_WORK):
        if pool is not None:
            par(0, rows, *args, product_chunk(rows, max(1, CHUNK_MIN_WORK // max(1, inner))), pool)
        else:
            parallel_for(fn, 0, rows, args, max(1, PY_CHUNK_MIN_WORK // max(1, inner)))
    elif rows > 0:
        fn(0, rows, *args)


def loop_lines(kc: KernelCall, names, const, functions, in_place: bool) -> list[str]:
    """A re-rolled loop's call: into its first input's buffer when
    `in_place` (nothing reads that value later) and the buffer is writeable
    and shares no memory with another operand (which reads the value before
    the loop), else into a copy."""
    vid = kc.outputs[0][0]
    names[vid] = f"v{vid}"
    t = names[kc.inputs[0]]
    arrays = {a[1] for a in kc.args if a[0] == "array"} - {vid}
    others = "".join(names[i] + ", " for i in kc.inputs[1:] if i in arrays)
    if in_place:
        alias = f" and not _aliased({t}, ({others}))" if others else ""
        lines = [f"    v{vid} = {t} if {t}.flags.writeable{alias} else _copy({t})"]
    else:
        lines = [f"    v{vid} = _copy({t})"]
    fn = const(functions[kc.symbol], ("kernel", kc.symbol))
    return lines + [f"    {fn}(0, {to_python(kc.rows)}, {', '.join(_arg_sources(kc, names, const))})"]


def lifted_lines(kc: KernelCall, names, const, functions) -> list[str]:
    """A lifted loop's call (run_lifted): into copies of the arrays
    it stores into (the loop may abort: the caller's arrays stay as they
    were); its scalars through an int64 buffer."""
    written, scalars_in, scalars_out = kc.lifted
    lines = []
    for (vid, _, _), src in zip(kc.outputs, written):
        names[vid] = f"v{vid}"
        lines.append(f"    v{vid} = _copy({names[src]})")
    for vid, _ in scalars_out:
        names[vid] = f"v{vid}"
    fn = const(functions[kc.symbol], ("kernel", kc.symbol))
    arrays = "(" + "".join(names[a[1]] + ", " for a in kc.args if a[0] == "array" and type(a[1]) is int) + ")"
    ins = "(" + "".join(names[vid] + ", " for vid, _ in scalars_in) + ")"
    spec = const((tuple(t for _, t in scalars_in), tuple(t for _, t in scalars_out)))
    call = f"_run_lifted({fn}, {arrays}, {ins}, {spec})"
    outs = "".join(names[vid] + ", " for vid, _ in scalars_out)
    lines.append(f"    {outs} = {call}" if outs else f"    {call}")
    return lines


def run_lifted(fn, arrays: tuple, scalars: tuple, spec: tuple) -> tuple:
    """Run a lifted loop's function (codegen/pyloop.py ABI): one int64
    buffer holds its status, its scalar inputs packed by type
    (shapes/pyloop.py types) and its scalar outputs, unpacked as Python or
    numpy scalars of their types."""
    in_types, out_types = spec
    io = np.zeros(1 + len(in_types) + len(out_types), np.int64)
    f64 = io.view(np.float64)
    for k, (x, t) in enumerate(zip(scalars, in_types), 1):
        if t in _FLOATS:
            f64[k] = x
        else:
            v = int(x)
            if not -(1 << 63) <= v < (1 << 64 if t == "np.uint64" else 1 << 63):
                raise LoopAbort("a Python int past 64 bits")
            io[k] = v - (1 << 64) if v >= 1 << 63 else v  # (a uint64 past 2**63: its bits)
    fn(0, 1, *arrays, io)
    if io[0]:
        raise LoopAbort(ABORTS.get(int(io[0]), "an abort"))
    base = 1 + len(in_types)
    return tuple(_UNPACK[t](io, f64, base + k) for k, t in enumerate(out_types))


_FLOATS = ("float", "np.float64", "np.float32", "np.float16")  # (float16 held in a float32: codegen/pyloop.py)
_UNPACK = {"int": lambda i, f, k: int(i[k]), "bool": lambda i, f, k: bool(i[k]),
           "float": lambda i, f, k: float(f[k]), "np.bool": lambda i, f, k: np.bool_(i[k]),
           "np.float64": lambda i, f, k: f[k], "np.float32": lambda i, f, k: np.float32(f[k]),
           "np.float16": lambda i, f, k: np.float16(f[k]),
           "np.uint64": lambda i, f, k: np.uint64(int(i[k]) & ((1 << 64) - 1)),
           **{"np." + d: (lambda d: lambda i, f, k: np.dtype(d).type(i[k]))(d)
              for d in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")}}


def _arg_sources(kc: KernelCall, names, const, local=None, epilogue=None) -> list[str]:
    """The source of each argument of a kernel's ABI (codegen/abi.py
    KernelABI): an array's name (`local`: a prepared copy's), an int's
    expression or the error cell's address, an integer or bool scalar as an
    int, a float scalar as a double (a complex one as two: its parts); a
    product's epilogue's (address, packed arguments) as `epilogue` gives them."""
    out = []
    for a in kc.args:
        if a[0] == "array":
            out.append((local or {}).get(a[1], names[a[1]]))
        elif a == ERRCELL:
            out.append("_errcell()")
        elif a == GEMV:
            out.append(const(dgemv_address(), ("gemv",)))
        elif a == EPILOGUE:
            out.append(epilogue[0])
        elif a == EPILOGUE_ARGS:
            out.append(epilogue[1])
        elif a[0] == "int":
            out.append(to_python(a[1]))
        elif a[0] == "intval":  # (a runtime integer or bool scalar, exactly)
            out.append(f"int({names[a[1]]})")
        elif isinstance(a[1], tuple):  # (a complex scalar's part: ("re" or "im", value id))
            out.append(f"float({names[a[1][1]]}.{'real' if a[1][0] == 're' else 'imag'})")
        else:
            out.append(f"float({names[a[1]]})")
    return out


_DOUBLE, _INT64 = struct.Struct("=d"), struct.Struct("=q")


def epilogue_args(arrays: tuple, ints: tuple, floats: tuple):
    """A fused epilogue's arguments packed as its tile entry reads them
    (codegen/parallel.py packed_entry): int64 words, an array as its object's
    address (the kernel reads numpy's array struct), a float as its bits.
    The caller holds the arrays, and this buffer, until the product returns."""
    words = [id(a) for a in arrays] + [int(i) for i in ints] + [_INT64.unpack(_DOUBLE.pack(x))[0] for x in floats]
    return (ctypes.c_int64 * max(1, len(words)))(*words)


def address(fn) -> int:
    """The address of a loaded entry (a ctypes function)."""
    return ctypes.cast(fn, ctypes.c_void_p).value


def _or_blas(kc: KernelCall, lines: list[str], n_alloc: int, names, const, functions) -> list[str]:
    """A product's lines (after the output's `n_alloc` allocation lines) as
    the choice of runtime/gemmchoice.py: numpy's matmul into the output (and
    then its epilogue's kernel, when it has one), or the kernel; both in
    turns, timed, when the product's shape class is undecided (the kernel
    last: its output is the call's)."""
    a, b, sizes = kc.blas
    out = names[kc.outputs[0][0]]
    char = np.dtype(kc.outputs[0][2]).char
    fused = kc.epilogue is not None
    # (B through a view the runtime makes, or a copy; or a batch of products, whose rows per product, the
    # kernel's M, are fewer than the sizes' (numpy's matmul then loops over the batch): neither is what the
    # dispatch tree was calibrated on, two-dimensional C-contiguous operands)
    strided = any(vid == b for vid, _, _ in kc.prepare) or sympy.sympify(kc.args[3][1]) != sympy.sympify(sizes[0])
    if all(isinstance(d, (int, sympy.Integer)) for d in sizes):
        key = const(gemmchoice.shape_class(char, *(int(d) for d in sizes), fused, strided))
        head = []
    else:  # (dims are Python ints at run time)
        key = "_gk"
        head = [f"    _gk = _gemm_class({char!r}, {', '.join(to_python(d) for d in sizes)}, {fused}, {strided})"]
    blas = [f"    _matmul({names[a]}, {names[b]}, out={out})"]
    if fused:
        blas += _call_lines(kc.epilogue, names, const, functions)
    kernel = lines[n_alloc:]
    race = ["        _tk, _tb = [], []", "        for _ in _ROUNDS:", "            _t0 = _clock()"]
    race += ["        " + x for x in blas] + ["            _t1 = _clock()"]
    race += ["        " + x for x in kernel]
    race += ["            _tb.append(_t1 - _t0); _tk.append(_clock() - _t1)", f"        _gemm_decide({key}, _tk, _tb)"]
    return (lines[:n_alloc] + head + [f"    _g = _last[{kc.outputs[0][0]}] = _gemm_best.get({key})", "    if _g:"]
            + ["    " + x for x in blas]
            + ["    elif _g is not None:"] + ["    " + x for x in kernel] + ["    else:"] + race)


# bounds-checked kernels (SHAPEJIT_BOUNDS_CHECK=1) flag an out-of-bounds access here
_errcells = threading.local()


def errcell() -> ctypes.c_int64:
    """The calling thread's bounds-check error cell: a checked kernel (its
    chunks on any thread of the pool) stores a nonzero into the cell of the
    call that runs it, so two threads' calls never see each other's errors."""
    cell = getattr(_errcells, "cell", None)
    if cell is None:
        cell = _errcells.cell = ctypes.c_int64(0)
    return cell


def errcell_address() -> int:
    return ctypes.addressof(errcell())


def check_bounds(symbol: str) -> None:
    cell = errcell()
    if cell.value:
        cell.value = 0
        raise IndexError(f"shapejit: kernel {symbol} accessed memory out of bounds (a compiler bug)")



def rows4(x, batch, rows, cols, unit_rows_ok=False):
    """x as an (outer, inner, rows, cols) array, outer * inner = batch, whose
    strides are non-negative multiples of the item size and whose columns
    have unit stride (or, with `unit_rows_ok`, whose rows have): a view when
    numpy can make one — x's leading (batch) dims merged into one or, failing
    that, two groups — else a C-contiguous copy."""
    lead = x.shape[:-2] if x.ndim >= 2 and x.shape[-2:] == (rows, cols) else None
    y = _view(x, (1, batch, rows, cols))
    if y is None and lead and len(lead) > 1:
        for p in range(1, len(lead)):  # (batch dims b0..bn: [b0..bp) and [bp..bn) each merged)
            outer = int(np.prod(lead[:p]))
            y = _view(x, (outer, batch // max(1, outer), rows, cols))
            if y is not None:
                break
    if y is None:
        y = np.ascontiguousarray(x).reshape(1, batch, rows, cols)
    s, size = y.strides, y.itemsize
    unit = cols <= 1 or s[3] == size or (unit_rows_ok and (rows <= 1 or s[2] == size))
    if not unit or min(s) < 0 or any(v % size for v in s):
        y = np.ascontiguousarray(y)
    return y


def _view(x, shape):
    """x reshaped to `shape` without a copy, or None."""
    try:
        return x.reshape(shape, copy=False)
    except ValueError:
        return None

