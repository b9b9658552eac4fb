"""Matmul as a compiled kernel: C = A @ B for float32/float64 operands,
either A [..., M, K] with B [K, N] (A's leading dims fold into M) or a batch
of products, A [b..., M, K] with B [b..., K, N] (the same batch dims).

Register tiling (BLIS's micro-kernel): an MR x NR tile of C lives in MR * NV
vector registers (NR = NV vector lanes wide); each step of k broadcasts MR
elements of A's column k and multiplies them with NV vectors of B's row k
(fma).  A KC-deep block of one NR-column strip of B (DEEP_KC-deep for a
tall product) is packed into a
contiguous panel (KC * NR elements, L1/L2 sized, on the stack; the
group's full strips packed row after row, each row's part one contiguous
read) and reused by every MR-row tile of A before the next block; A is
read in place, each of its tiles once for up to GROUP strips of the unit
range (their panels packed side by side), so a tall A is streamed from
memory fewer times.  Rows left over at the bottom (M mod MR) run on
narrower tiles; columns past the right edge are masked in every load and
store, so no access leaves the arrays.  K = 0 stores zeros.

A product of few rows (M <= SMALL_M) with unit-stride columns of B skips
the panels (unless B's row stride makes its rows alias in L1, ALIAS_BYTES,
or K is deep, STREAM_K, and A has more rows than one row tile): packing
would cost as much as the product, and a tile of one or two rows would
keep few accumulators busy.  Each row tile runs a block of STREAM_KB rows of
B (all of K for a single row tile whose strips span ONE_TILE_BYTES) in
registers reading B in place (prefetching the rows ahead), over as many
strips at once as the accumulators allow; the block's lines stay in L1 for
the next row tile.
A GEMV (M <= ROW_STREAM_M) reads B row after row instead, each row's part
in one contiguous run, and accumulates C's row in L1.  The strip at the
right edge, whose vectors would reach past B, goes through a panel as
before.

Operands: C-contiguous ones as they are; any other is passed by the runtime
as an (outer batch, inner batch, rows, columns) view with unit-stride columns
— for B, unit-stride rows will also do (attention's k.T; packing transposes
it) — a copy only when numpy has no such view, and the kernel reads its
strides and inner batch count (`*_strided` = 1).  Two batch levels let
attention's per-(sequence, head) products read q, k and v in place for any
number of sequences.

ABI (as every kernel): `void k(i64 start, i64 stop, i8* A, i8* B, i8* C,
i64 M, i64 N, i64 K, i64 a_strided, i64 b_strided, i64 epilogue, i64
epilogue_args)`, [start, stop) ranging over the (batch, NR-column strip)
pairs, so the runtime splits a product across cores like any other kernel.

Epilogue in the store: `epilogue`, when not 0, is the address of a fused
kernel's tile entry (codegen/schedule.py `tile`, codegen/parallel.py
`packed_entry`: `void e(row0, row1, col0, col1, args)`, `epilogue_args`
the address of its packed arguments), called on each block of C as soon as
the block is final: the columns a unit computes, EPILOGUE_ROWS rows at a
time (the rows of a product of few rows at once), still in L1 or L2.  Bias,
activation, residual, scale -- whatever elementwise kernel reads the
product -- are applied while C is in cache, and the product makes one trip
to memory instead of a store, a load and a store.  Summation order: k ascending within
each KC block, blocks added in order (as a BLAS does), so results match
numpy's to rounding, and exactly for exact inputs.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import sympy
from llvmlite import ir

from codegen import parallel
from codegen.abi import DATA_OFFSET, DIMS_OFFSET, STRIDES_OFFSET, array_field
from codegen.llvm import for_range, smax, smin
from codegen.schedule import fits_tiles
from shapes import host
from shapes.kernelargs import ALIAS_BYTES

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
LLTYPE = {np.dtype(np.float32): ir.FloatType(), np.dtype(np.float64): ir.DoubleType()}
DTYPES = frozenset(LLTYPE)


@dataclass(frozen=True)
class Tile:
    mr: int      # rows of the register tile
    nv: int      # vectors per row: NR = nv * lanes columns
    lanes: int   # elements per vector register
    kc: int      # depth of a block of B kept in cache

    @property
    def nr(self) -> int:
        return self.nv * self.lanes


def tile_for(dtype: np.dtype) -> Tile:
    """The tile for this CPU: 6 x 4 zmm accumulators with AVX-512 (the best of
    the tiles tried on znver4, ~100-110 GFLOP/s per core in float32), 6 x 2
    ymm with AVX2 (16 registers)."""
    return _tile(np.dtype(dtype), host.has_avx512())


@functools.cache
def _tile(dtype: np.dtype, wide: bool) -> Tile:
    width = 64 if wide else 32
    return Tile(mr=6, nv=4 if wide else 2, lanes=width // dtype.itemsize, kc=256)


def variant(dtype) -> str:
    """What the library kernel of `dtype` is built with (part of its cache key)."""
    return repr((tile_for(dtype), SMALL_M, ALIAS_BYTES, STREAM_PREFETCH_BYTES, STREAM_K, STREAM_KB, WHOLE_K,
                 STREAM_DEEP_M, ONE_TILE_BYTES, ROW_STREAM_M, ROW_STREAM_K, STREAM_BLOCK, EPILOGUE_ROWS, MC, K_UNROLL,
                 DEEP_KC, DEEP_ROWS, accumulators()))


ARGS = (3, 7, 0)  # arrays (A, B, C), ints (M, N, K, a_strided, b_strided, epilogue, epilogue_args), floats
TINY_WORK = 1 << 15  # multiply-adds: a fully static product this small stays in numpy
TAIL_ROWS = (4, 2, 1)  # tiles for the M mod MR rows left (MR = 6: any of 1..5 in at most three)
GROUP = 4  # column strips whose panels share each A tile (units of one product taken together)
PREFETCH = 16  # rows of B fetched ahead: its rows are N apart, beyond the hardware prefetchers' page
SMALL_M = 16  # products of at most this many rows stream B in place (no packed panels) ...
# ... unless the rows are more than one row tile and B's rows lie a multiple
# of ALIAS_BYTES apart: a tile reading B in place takes a line from each of
# K rows, and with such a stride they all fall in one or two of the L1's
# sets (64 of them, a line each per 4 KiB), which hold 8 lines each: the
# lines evict one another before the next row tile's use.  One thread, both
# builds interleaved (python -m bench.gemm_ab --a ALIAS_BYTES=1073741824 --b
# ALIAS_BYTES=2048 --ms 4,8,12,16 --pairs ...), AMD EPYC znver3, float32:
# packed instead, 1.1-2.3x faster at M = 8..16 for N = 1024, 1536, 2048,
# 3072 and 4096, while N = 768 and 2304 (rows in four sets) streamed
# 1.1-1.3x faster than packed.  (ALIAS_BYTES: shapes/kernelargs.py, which
# the product dispatch reads too.)
# ... and unless K > STREAM_K with more than STREAM_DEEP_M rows: packed
# then (its panels read from L1/L2 by every row tile).
STREAM_K = 1024
STREAM_DEEP_M = 12
# Rows that are a single row tile (MR, or one of TAIL_ROWS: 1, 2, 4) stream
# B in place whatever its stride and depth: B's lines are not read again,
# so their aliasing costs nothing.  One thread, B from memory, by python -m
# bench.gemm_ab --cold with switches since removed (AMD EPYC znver3, no
# AVX-512, float32): M = 6 streamed ran 0.99-1.53x the packed panels' speed
# for (K, N) = (768, 2048), (768, 3072), (768, 8192), (2048, 768), (3072,
# 768), M = 5 (two row tiles) 0.75-1.14x; M = 3 (tiles of 2 and 1) streamed
# all of K twice, and in blocks of STREAM_KB rows, or packed where B's rows
# alias, ran 1.63-1.91x faster for K = 2048, 3072 (N = 768) and 0.97-1.11x
# for K = 768 (2.1-3.1x and 0.98-1.14x with B in cache).
# With several row tiles, the streamed strips go STREAM_KB rows of B at a
# time: every row tile takes the block while its lines are in L1 (a whole
# strip of K rows, a line a row, outgrew L1, and with K past STREAM_K also
# what L2 kept for the next row tile).  One thread (python -m bench.gemm_ab
# --a STREAM_KB=1099511627776 STREAM_DEEP_M=0 --b, AMD EPYC znver3, no
# AVX-512, float32, M = 5, 8, 12, 16): B from memory (--cold) 1.2-1.4x
# faster for (K, N) = (768, 768), (768, 256), 1.08-1.33x for (1024, 1280),
# and for (3072, 768), (2048, 768), which were packed before, 1.35-1.58x at
# M <= 12 and 1.0x at 16; B in cache 1.05-1.57x, but 0.88-0.96x for the deep
# pairs at M = 12.  Blocks of 8 rows ran 0.93-1.06x of 16, of 32 0.8-1.0x.
# Aliasing rows still pack: their blocks conflict in L1 (0.6-0.9x at M =
# 8..16, --b STREAM_KB=4..32).
STREAM_KB = 16
# ... and so does a single row tile, unless its micro-kernel's strips span at
# least this many bytes of B's row: then it streams all of K at once.  One
# thread, B from memory (python -m bench.gemm_ab --cold --a ONE_TILE_BYTES=0
# --b ONE_TILE_BYTES=512 --ms 2,4,6), AMD EPYC znver4, float32: with AVX2
# forced (strips of 64-192 bytes) 1.15-1.37x faster at M = 2, 4, 6 for (K,
# N) = (3072, 768), 1.19x at M = 4 for (768, 768), 0.96-1.05x elsewhere, and
# 1.14-1.43x for (3072, 768) with B in cache; with AVX-512 1.05-1.07x at M =
# 4, 6 (256 bytes), while all of K stays up to 1.07x faster at M = 2 (768 bytes).
ONE_TILE_BYTES = 512
# "All of K" for such a tile is at most this many rows of B a block: each
# block is summed from zero and added to C, as a BLAS's blocks of K are (one
# sequential sum of K = 100000 products was 20-50x numpy's error).
WHOLE_K = 256
# A streamed micro-kernel prefetches at least this many bytes of B's row
# PREFETCH ahead (from its strip's first column): with B from memory, a
# strip's one line a row (AVX2, float32), a page apart, left the DRAM's
# open rows and the L2's streamer idle; the block's next strips' lines,
# fetched with it, come from L2 when their turn comes.  One thread, B from
# memory (python -m bench.gemm_ab --cold --a STREAM_PREFETCH_BYTES=64 --b
# STREAM_PREFETCH_BYTES=256, AMD EPYC znver3, no AVX-512, float32): 256
# bytes ran 1.4-1.9x faster at M = 4..16 for (K, N) = (768, 768) and (768,
# 256), 1.24-1.65x at M = 4 for (768, 2048) and (2048, 768); 512 bytes was
# 0.77-0.93x of 256.
STREAM_PREFETCH_BYTES = 256
ROW_STREAM_M = 1  # products of at most this many rows read B row after row (C accumulated in memory)
ROW_STREAM_K = 4  # rows of B added to C's row between a load and a store of it
MC = 96  # rows of A whose KC-deep block (96 KiB of float32) stays in L2 while the group's strips pass
# A product of at least DEEP_ROWS rows takes blocks of K DEEP_KC deep (panels
# of twice the KC): C's part under a group (M x GROUP strips) then outgrows L2,
# and each block of K loads and stores it again, from L3 or memory; deeper
# blocks halve those trips.  One thread (python -m bench.gemm_ab --dtype
# float64 --a DEEP_ROWS=1073741824 --b DEEP_ROWS=1024 --ms 512,2048 --pairs
# 3000x2750,2000x2000 --repeats 5), AMD EPYC znver4: at M = 2048 float64
# 1.04-1.06x faster than 256 deep with AVX-512, 1.01-1.02x with AVX2 forced,
# float32 1.01x and 0.97-1.02x; two threads (the runtime's 8 chunks, a
# script timing the library kernel) float64 1.05-1.06x, float32 1.05-1.08x
# at M = 2000-2500 with AVX-512.
DEEP_KC = 512
DEEP_ROWS = 1024
EPILOGUE_ROWS = 64  # rows of C an epilogue call covers (with the columns of a unit: a call's cost spread)
# Steps of k a packed micro-kernel's loop takes a trip (a power of 2; the
# rest one a trip): the loop's index, compare and A's row addresses, 9-11
# integer instructions a trip beside 12 FMAs (AVX2), are spread over four
# steps.  One thread (python -m bench.gemm_ab --a K_UNROLL=1 --b K_UNROLL=4
# --ms 6,16,64,256,1024 --repeats 11), Intel Xeon (emeraldrapids, AVX-512), float32:
# 1.02-1.19x faster from 64 rows up with AVX2 forced, 1.03-1.12x with
# AVX-512 (0.97x once); 6 and 16 rows 0.94-1.07x.  A streamed kernel's
# loop (its prefetches a step) stays one step a trip: unrolled, 0.81-0.83x
# at 6 rows.
K_UNROLL = 4
STREAM_BLOCK = 1 << 18  # bytes of B a block of streamed strips reads (half an L2 of Zen 3, a quarter of Zen 4's)


def accumulators() -> int:
    """Vector registers a streamed micro-kernel may keep accumulating: 12 of
    AVX2's 16, 24 of AVX-512's 32 (the rest hold B's vectors and A's
    broadcast)."""
    return 24 if host.has_avx512() else 12


# the ABI's last two ints without an epilogue (runtime KernelCall.with_epilogue
# makes them its tile entry's address and its packed arguments)
NO_EPILOGUE = (("int", sympy.Integer(0)), ("int", sympy.Integer(0)))


def fuses(n, k) -> bool:
    """Whether kernel `k` can run in the store of matmul node `n`'s GEMM: it
    reads the product and is elementwise over the product's shape
    (codegen.schedule.fits_tiles).  (codegen/lower.py also asks that the
    steps between them can run before the product.)"""
    return (compiles(n) and any(v.id == n.out.id for v in k.inputs) and fits_tiles(k)
            and tuple(k.domain) == tuple(n.out.shape))


def compiles(n) -> bool:
    """Whether matmul node `n` runs as a GEMM kernel: float32/float64
    throughout, B two-dimensional or a batch with A's batch dims, and not a
    tiny fully static product."""
    if n.op != "matmul" or len(n.inputs) != 2:
        return False
    a, b = n.inputs
    if n.out.dtype not in DTYPES or a.dtype != n.out.dtype or b.dtype != n.out.dtype:
        return False
    if a.ndim < 2 or not (b.ndim == 2 or (b.ndim == a.ndim and tuple(a.shape[:-2]) == tuple(b.shape[:-2]))):
        return False
    work = sympy.Mul(*a.shape, b.shape[-1])
    return not (work.is_Integer and int(work) < TINY_WORK)


def symbol_for(dtype) -> str:
    return f"sj_gemm_{np.dtype(dtype).name}"


def dtype_of(symbol: str) -> np.dtype:
    return np.dtype(symbol.rpartition("_")[2])


def library(dtype) -> str:
    """The module text of the GEMM kernel for `dtype`: one kernel serves every
    matmul of that dtype in the process (runtime dims), so it is compiled
    once per machine and kept in the compile cache like any artifact."""
    module = ir.Module(name=f"shapejit_gemm_{np.dtype(dtype).name}")
    GemmEmitter(module, symbol_for(dtype), dtype).emit()
    parallel.parallel_entries(module, module.globals[symbol_for(dtype)], *ARGS, python=True)
    return str(module)


def abi_of(n, contiguous: set[int]):
    """-> ((args, rows, inner), prepare) of the kernel for matmul node `n`:
    rows are the (batch, NR-column strip) pairs, inner a unit's work;
    `prepare` lists the operands not known to be C-contiguous with the
    (batch, rows, columns) shape the runtime makes a 4-D view of (runtime/kernelcall.py
    `rows4`; a copy when no view has unit-stride columns, or for B
    unit-stride rows); the kernel then reads their strides (the a_strided /
    b_strided flags)."""
    a, b = n.inputs
    if b.ndim == 2:
        batch, M = sympy.Integer(1), sympy.Mul(*a.shape[:-1])
    else:
        batch, M = sympy.Mul(*a.shape[:-2]), a.shape[-2]
    K, N = b.shape[-2], b.shape[-1]
    nr = tile_for(n.out.dtype).nr
    prepare = []
    if a.id not in contiguous:
        prepare.append((a.id, (batch, M, K), False))
    if b.id not in contiguous:
        prepare.append((b.id, (batch if b.ndim > 2 else sympy.Integer(1), K, N), True))
    args = (("array", a.id), ("array", b.id), ("array", n.out.id), ("int", M), ("int", N), ("int", K),
            ("int", sympy.Integer(int(a.id not in contiguous))), ("int", sympy.Integer(int(b.id not in contiguous))),
            *NO_EPILOGUE)
    # inner: a unit's work in the runtime's currency (elements of a loop
    # kernel): M * K multiply-adds of NR lanes, ~ NR / 16 elements' worth each
    return (args, batch * sympy.floor((N + nr - 1) / nr), M * K * max(1, nr // 16)), tuple(prepare)


class GemmEmitter:
    def __init__(self, module: ir.Module, symbol: str, dtype):
        self.m = module
        self.symbol = symbol
        self.dtype = np.dtype(dtype)
        self.ety = LLTYPE[self.dtype]
        self.tile = tile_for(self.dtype)
        self.vty = ir.VectorType(self.ety, self.tile.lanes)
        self.mty = ir.VectorType(I1, self.tile.lanes)
        suffix = f"v{self.tile.lanes}{'f32' if self.dtype.itemsize == 4 else 'f64'}"
        vptr = self.vty.as_pointer()
        self.fma = self._declare(f"llvm.fma.{suffix}", self.vty, [self.vty] * 3)
        self.mload = self._declare(f"llvm.masked.load.{suffix}.p0", self.vty, [vptr, I32, self.mty, self.vty])
        self.mstore = self._declare(f"llvm.masked.store.{suffix}.p0", ir.VoidType(), [self.vty, vptr, I32, self.mty])
        self.prefetch = self._declare("llvm.prefetch.p0", ir.VoidType(), [I8.as_pointer(), I32, I32, I32])
        self.micros: dict = {}

    def _declare(self, name, ret, args):
        if name in self.m.globals:
            return self.m.globals[name]
        return ir.Function(self.m, ir.FunctionType(ret, args), name)

    # ------------------------------------------------------------ driver
    def emit(self) -> None:
        t = self.tile
        n_arrays, n_ints, _ = ARGS
        fnty = ir.FunctionType(ir.VoidType(), [I64, I64] + [I8.as_pointer()] * n_arrays + [I64] * n_ints)
        fn = ir.Function(self.m, fnty, self.symbol)
        start, stop, a_obj, b_obj, c_obj, M, N, K, a_strided, b_strided, epilogue, epilogue_args = fn.args
        for x in (a_obj, b_obj, c_obj):
            x.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        eptr = self.ety.as_pointer()
        A, B, C = (array_field(b, o, DATA_OFFSET, eptr) for o in (a_obj, b_obj, c_obj))
        c = lambda v: ir.Constant(I64, v)  # noqa: E731
        self.has_epilogue = b.icmp_signed("!=", epilogue, c(0))
        self.epilogue = b.inttoptr(epilogue, ir.FunctionType(ir.VoidType(), [I64] * 5).as_pointer())
        self.epilogue_args = epilogue_args
        # strides in elements: C-contiguous, or read from the 4-D (outer
        # batch, inner batch, rows, unit-stride columns) operand the runtime prepared
        a_lay = self._strides(b, a_obj, a_strided, b.mul(M, K), K)
        b_lay = self._strides(b, b_obj, b_strided, b.mul(K, N), N)
        lda, (ldb, ldbn) = a_lay[3], b_lay[3:]
        G = GROUP
        # packed blocks of B (KC, or DEEP_KC, x NR), one per strip of a group
        panels = b.alloca(self.vty, size=c(G * self._panel_rows() * t.nv))
        panels.align = 64
        ctile = b.alloca(self.vty, size=c(t.mr * t.nv))  # a C tile at the right edge
        ctile.align = 64
        nstrips = b.sdiv(b.add(N, c(t.nr - 1)), c(t.nr))

        # units u = product * nstrips + strip, taken in groups of up to G
        # strips of one product: each A tile is read once for the group's G
        # panels (a tall A does not stay in L2 from one strip to the next)
        pre = b.block
        head = b.append_basic_block("group")
        body = b.append_basic_block("group.body")
        done = b.append_basic_block("groups.done")
        b.branch(head)
        b.position_at_end(head)
        u = b.phi(I64, "u")
        u.add_incoming(start, pre)
        b.cbranch(b.icmp_signed("<", u, stop), body, done)
        b.position_at_end(body)
        bi = b.sdiv(u, nstrips)
        s0 = b.sub(u, b.mul(bi, nstrips))
        # (a product of ROW_STREAM_M rows or fewer takes every strip of the call at once: rows_few)
        rows_few = b.and_(b.icmp_signed("<=", M, c(ROW_STREAM_M)), b.icmp_signed("==", ldbn, c(1)))
        g = self._min(b, self._min(b, b.select(rows_few, b.sub(stop, u), c(G)), b.sub(stop, u)),
                      b.sub(nstrips, s0))
        Ab = b.gep(A, [self._batch_offset(b, bi, a_lay)])
        Bb = b.gep(B, [self._batch_offset(b, bi, b_lay)])
        Cb = b.gep(C, [b.mul(bi, b.mul(M, N))])
        self.first_row = b.mul(bi, M)  # (the product's first row in the epilogue's domain)

        # with few rows, the group's full strips stream B in place (no panel:
        # packing would cost as much as the product); the rest packs panels
        f = b.select(b.icmp_signed("<=", b.mul(b.add(s0, g), c(t.nr)), N), g, b.sub(g, c(1)))
        small = b.and_(b.icmp_signed("<=", M, c(SMALL_M)), b.icmp_signed("==", ldbn, c(1)))
        unaliased = b.icmp_signed("!=", b.and_(b.mul(ldb, c(self.dtype.itemsize)), c(ALIAS_BYTES - 1)), c(0))
        deep_ok = b.or_(b.icmp_signed("<=", K, c(STREAM_K)), b.icmp_signed("<=", M, c(STREAM_DEEP_M)))
        one_tile = functools.reduce(b.or_, [b.icmp_signed("==", M, c(rows)) for rows in (t.mr,) + TAIL_ROWS])
        small = b.and_(small, b.or_(one_tile, b.and_(unaliased, deep_ok)))
        # (several row tiles read each block of STREAM_KB rows of B while it is in L1; a single
        # tile whose strips span ONE_TILE_BYTES of B's row streams all of K at once)
        whole_k = [b.icmp_signed("==", M, c(rows)) for rows in (t.mr,) + TAIL_ROWS
                   if self._strips_at_once(rows) * t.nr * self.dtype.itemsize >= ONE_TILE_BYTES]
        kb = b.select(functools.reduce(b.or_, whole_k, ir.Constant(I1, 0)), self._min(b, K, c(WHOLE_K)),
                      c(STREAM_KB))
        f = b.select(small, f, c(0))
        with b.if_then(b.icmp_signed(">", f, c(0))):
            col0 = b.mul(s0, c(t.nr))
            Bs, Cs = b.gep(Bb, [col0]), b.gep(Cb, [col0])
            with b.if_else(rows_few) as (few, other):
                with few:
                    self._row_streamed(b, Ab, Bs, Cs, f, M, N, K, lda, ldb, col0)
                with other:
                    self._streamed(b, Ab, Bs, Cs, f, M, N, K, kb, lda, ldb, col0)
        with b.if_then(b.icmp_signed("<", f, g)):
            self._packed(b, Ab, Bb, Cb, b.add(s0, f), b.sub(g, f), M, N, K, lda, ldb, ldbn, panels, ctile)
        u.add_incoming(b.add(u, g), b.block)
        b.branch(head)
        b.position_at_end(done)
        b.ret_void()

    def _packed(self, b, Ab, Bb, Cb, s0, g, M, N, K, lda, ldb, ldbn, panels, ctile):
        """Strips s0 .. s0 + g of one product through packed panels: KC-deep
        blocks of K, each block's panels packed once and read by every row
        tile of A."""
        t = self.tile
        c = lambda v: ir.Constant(I64, v)  # noqa: E731
        eptr = self.ety.as_pointer()

        def strip(j):  # (full, masks, columns left, B strip, C strip, panel) of strip j of the group
            col = b.mul(b.add(s0, j), c(t.nr))
            ncols = b.sub(N, col)
            return (b.icmp_signed(">=", ncols, c(t.nr)), [self._lane_mask(b, ncols, v) for v in range(t.nv)], ncols,
                    b.gep(Bb, [b.mul(col, ldbn)]), b.gep(Cb, [col]),
                    b.gep(panels, [b.mul(j, c(self._panel_rows() * t.nv))]))

        # KC-deep blocks of K (DEEP_KC for DEEP_ROWS rows or more), at least
        # one (with K = 0 it stores zeros)
        k_end = b.select(b.icmp_signed(">", K, c(0)), K, c(1))
        depth = b.select(b.icmp_signed(">=", M, c(DEEP_ROWS)), c(self._panel_rows()), c(t.kc))
        with for_range(b, c(0), k_end, depth) as k0:
            rem = b.sub(K, k0)
            kc = self._min(b, rem, depth)
            accumulate = b.icmp_signed(">", k0, c(0))
            last = b.icmp_signed(">=", b.add(k0, kc), K)  # (the block that makes C final)
            Ak = b.gep(Ab, [k0])
            whole = b.and_(b.icmp_signed("==", ldbn, c(1)), b.icmp_signed("<=", b.mul(b.add(s0, g), c(t.nr)), N))
            with b.if_else(whole) as (rows, strips):
                with rows:  # (every strip full, unit-stride columns: the group's part of each row at once)
                    self._pack_rows(b, panels, b.gep(Bb, [b.add(b.mul(k0, ldb), b.mul(s0, c(t.nr)))]), kc, ldb, g)
                with strips:
                    with for_range(b, c(0), g) as j:
                        full, masks, ncols, Bs, Cs, panel = strip(j)
                        self._pack(b, panel, b.gep(Bs, [b.mul(k0, ldb)]), kc, ldb, ldbn, ncols, masks)

            # MC rows of A at a time (their KC-deep block in L2), each strip's
            # panel in L1 while every row tile of them passes over it
            with for_range(b, c(0), M, MC) as m0:
                with for_range(b, c(0), g) as j:
                    full, masks, ncols, Bs, Cs, panel = strip(j)

                    def tile_row(mr, row):
                        self._call_micro(b, mr, full, Ak, b.bitcast(panel, eptr), Cs, b.add(m0, row), kc, lda, N,
                                         accumulate, masks, ctile)

                    self._row_tiles(b, self._min(b, c(MC), b.sub(M, m0)), tile_row)
            with b.if_then(last):  # (the group's columns of C, EPILOGUE_ROWS rows at a time: in L2)
                with for_range(b, c(0), M, EPILOGUE_ROWS) as r0:
                    self._epilogue(b, r0, self._min(b, c(EPILOGUE_ROWS), b.sub(M, r0)), b.mul(s0, c(t.nr)),
                                   self._min(b, b.mul(b.add(s0, g), c(t.nr)), N))

    def _panel_rows(self) -> int:
        """Rows of B a panel holds: the deepest block of K."""
        return max(self.tile.kc, DEEP_KC)

    def _row_tiles(self, b, M, tile_row) -> None:
        """tile_row(mr, first row) over M rows: tiles of MR rows, then the M mod
        MR rows left in tiles of 4, 2 and 1 (each used at most once)."""
        t = self.tile
        c = lambda v: ir.Constant(I64, v)  # noqa: E731
        tiles = b.sdiv(M, c(t.mr))
        with for_range(b, c(0), tiles) as tile:
            tile_row(t.mr, b.mul(tile, c(t.mr)))
        row = b.mul(tiles, c(t.mr))
        for size in TAIL_ROWS:
            before = b.block
            with b.if_then(b.icmp_signed(">=", b.sub(M, row), c(size))):
                tile_row(size, row)
                row_taken = b.add(row, c(size))
                took = b.block
            phi = b.phi(I64)
            phi.add_incoming(row, before)
            phi.add_incoming(row_taken, took)
            row = phi

    def _epilogue(self, b, row, rows, col0, col1) -> None:
        """The call's epilogue (a kernel's tile entry, codegen/schedule.py),
        when it has one, over rows [row, row + rows) and columns [col0, col1)
        of this product's C, which are final and in cache: the product is
        written to memory once, with its epilogue applied."""
        with b.if_then(self.has_epilogue):
            first = b.add(self.first_row, row)
            b.call(self.epilogue, [first, b.add(first, rows), col0, col1, self.epilogue_args])

    def _streamed(self, b, Ab, Bs, Cs, f, M, N, K, kb, lda, ldb, col0) -> None:
        """f full strips from Bs/Cs (B with unit-stride columns) for a product
        of few rows, a block of strips at a time, kb rows of B at a time
        (STREAM_KB, or all of K for a single row tile of wide strips:
        ONE_TILE_BYTES): every row tile runs
        the kb rows in registers, reading B in place, over as many strips at
        once as accumulators() allows (a tile of one row keeps 8 ymm in
        flight, not NV = 2), and adds them to C after the first rows.  The
        block's kb rows come from memory for the first row tile (prefetched
        PREFETCH rows ahead, STREAM_PREFETCH_BYTES of each) and from L1 for
        the others: B is read from memory once, not once per row tile."""
        t = self.tile
        c = lambda v: ir.Constant(I64, v)  # noqa: E731
        kb = self._max(b, kb, c(1))  # (a positive step: K may be 0)
        fits = b.sdiv(c(STREAM_BLOCK), b.mul(kb, c(t.nr * self.dtype.itemsize)))
        block = self._max(b, self._min(b, fits, c(GROUP)), c(1))  # strips a block takes
        with for_range(b, c(0), f, block) as s_lo:
            s_hi = self._min(b, b.add(s_lo, block), f)

            k_end = b.select(b.icmp_signed(">", K, c(0)), K, c(1))  # (one block at least: K = 0 stores zeros)
            with for_range(b, c(0), k_end, kb) as k0:
                kc = self._min(b, kb, b.sub(K, k0))
                Ak, Bk = b.gep(Ab, [k0]), b.gep(Bs, [b.mul(k0, ldb)])
                accumulate = b.icmp_signed(">", k0, c(0))

                def tile_row(mr, row):
                    a_tile, c_row = b.gep(Ak, [b.mul(row, lda)]), b.gep(Cs, [b.mul(row, N)])
                    w = self._strips_at_once(mr)
                    wide = b.add(s_lo, b.mul(b.sdiv(b.sub(s_hi, s_lo), c(w)), c(w)))
                    for lo, hi, step in ((s_lo, wide, w),) + (((wide, s_hi, 1),) if w > 1 else ()):
                        micro = self._micro(mr, step * t.nv, streamed=True)
                        with for_range(b, lo, hi, step) as j:
                            col = b.mul(j, c(t.nr))
                            b.call(micro, [a_tile, b.gep(Bk, [col]), b.gep(c_row, [col]), kc, lda, ldb, N,
                                           accumulate])

                self._row_tiles(b, M, tile_row)
            self._epilogue(b, c(0), M, b.add(col0, b.mul(s_lo, c(t.nr))), b.add(col0, b.mul(s_hi, c(t.nr))))

    def _strips_at_once(self, mr: int) -> int:
        """Strips a streamed micro-kernel of mr rows takes at once."""
        return max(1, min(GROUP, accumulators() // (mr * self.tile.nv)))

    def _row_streamed(self, b, Ab, Bs, Cs, f, M, N, K, lda, ldb, col0) -> None:
        """f full strips of a product of ROW_STREAM_M rows or fewer (a GEMV at
        M = 1): C's rows (f * NR elements, in L1) accumulate in memory while
        B is read row after row, each row's f * NR elements contiguous, so
        the hardware prefetchers stream it as numpy's BLAS does (register
        accumulators would read a few lines of every row, one page apart).
        Each element sums k ascending, as the other paths do."""
        t = self.tile
        c = lambda v: ir.Constant(I64, v)  # noqa: E731
        width = b.mul(f, c(t.nr))
        zero = ir.Constant(self.vty, None)
        align = self.dtype.itemsize
        with for_range(b, c(0), M) as r:
            crow, arow = b.gep(Cs, [b.mul(r, N)]), b.gep(Ab, [b.mul(r, lda)])
            with for_range(b, c(0), width, t.nr) as j:
                for v in range(t.nv):
                    b.store(zero, self._vec(b, b.gep(crow, [j]), v), align=align)

            def rows_of_b(k, n):  # C's row += A[r, k + i] * B[k + i] for i < n, in order of i
                avs = [self._broadcast(b, b.load(b.gep(arow, [b.add(k, c(i))]), align=align)) for i in range(n)]
                brows = [b.gep(Bs, [b.mul(b.add(k, c(i)), ldb)]) for i in range(n)]
                with for_range(b, c(0), width, t.nr) as j:
                    cj = b.gep(crow, [j])
                    for v in range(t.nv):
                        acc = b.load(self._vec(b, cj, v), align=align)
                        for av, brow in zip(avs, brows):
                            acc = b.call(self.fma, [av, b.load(self._vec(b, b.gep(brow, [j]), v), align=align), acc])
                        b.store(acc, self._vec(b, cj, v), align=align)

            whole = b.mul(b.sdiv(K, c(ROW_STREAM_K)), c(ROW_STREAM_K))
            with for_range(b, c(0), whole, ROW_STREAM_K) as k:  # (C read and written once per ROW_STREAM_K rows)
                rows_of_b(k, ROW_STREAM_K)
            with for_range(b, whole, K) as k:
                rows_of_b(k, 1)
            self._epilogue(b, r, c(1), col0, b.add(col0, width))

    def _broadcast(self, b, x):
        """A vector of `x` in every lane."""
        lanes = self.tile.lanes
        return b.shuffle_vector(b.insert_element(ir.Constant(self.vty, ir.Undefined), x, ir.Constant(I32, 0)),
                                ir.Constant(self.vty, ir.Undefined), ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))

    _min, _max = staticmethod(smin), staticmethod(smax)

    def _lane_mask(self, b, ncols, v: int):
        """Lanes of vector v inside the matrix: col + v * lanes + lane < N."""
        t = self.tile
        lanes = ir.Constant(ir.VectorType(I64, t.lanes), [v * t.lanes + j for j in range(t.lanes)])
        room = b.insert_element(ir.Constant(ir.VectorType(I64, t.lanes), ir.Undefined), ncols, ir.Constant(I32, 0))
        room = b.shuffle_vector(room, ir.Constant(ir.VectorType(I64, t.lanes), ir.Undefined),
                                ir.Constant(ir.VectorType(I32, t.lanes), [0] * t.lanes))
        return b.icmp_signed("<", lanes, room)

    def _pack_rows(self, b, panels, src, kc, ldb, g):
        """Rows [0, kc) of g full strips of B (unit-stride columns) from `src`
        into their g panels side by side, row after row: each row's g * NR
        elements are one contiguous run (g cache lines of float32 with
        AVX2), where packing strip after strip read one line per row, each
        a page away from the last (B's rows are N apart), and the
        prefetchers saw a new page at every line."""
        t = self.tile
        c = lambda v: ir.Constant(I64, v)  # noqa: E731
        size = self.dtype.itemsize
        with for_range(b, c(0), kc) as r:
            row = b.gep(src, [b.mul(r, ldb)])
            ahead = b.bitcast(b.gep(src, [b.mul(b.add(r, c(PREFETCH)), ldb)]), I8.as_pointer())
            with for_range(b, c(0), g) as j:
                strip = b.gep(row, [b.mul(j, c(t.nr))])
                panel = b.gep(panels, [b.add(b.mul(j, c(self._panel_rows() * t.nv)), b.mul(r, c(t.nv)))])
                for v in range(t.nv):
                    b.store(b.load(self._vec(b, strip, v), align=size), b.gep(panel, [c(v)]), align=64)
                for line in range(0, t.nr * size, 64):  # (a prefetch is a hint: past the end of B it never faults)
                    b.call(self.prefetch, [b.gep(ahead, [b.add(b.mul(j, c(t.nr * size)), c(line))]),
                                           ir.Constant(I32, 0), ir.Constant(I32, 3), ir.Constant(I32, 1)])

    def _pack(self, b, panel, src, kc, ldb, ldbn, ncols, masks):
        """Copy rows [0, kc) of the B block at `src` (rows ldb apart, columns
        ldbn apart) into the contiguous panel, columns past the edge as zeros.
        Unit-stride columns are copied a vector at a time, prefetching the
        rows PREFETCH ahead (the block's rows lie one per page, beyond the
        hardware prefetchers); a B with strided columns a column at a time
        (with unit stride along k, as attention's k.T, a vector of k at a
        time, its lanes stored down the panel's column).  The micro-kernels
        then stream the packed copy (a few pages, in L1/L2) with unit stride
        for every row tile."""
        t = self.tile
        c = lambda v: ir.Constant(I64, v)  # noqa: E731
        align = ir.Constant(I32, self.dtype.itemsize)
        with b.if_else(b.icmp_signed("==", ldbn, c(1))) as (unit, strided):
            with unit:  # row r of the block: NV vector loads (masked at the right edge)
                def rows(masked: bool):
                    with for_range(b, c(0), kc) as r:
                        row = b.gep(src, [b.mul(r, ldb)])
                        # (a prefetch is a hint: past the end of B it never faults)
                        ahead = b.bitcast(b.gep(src, [b.mul(b.add(r, c(PREFETCH)), ldb)]), I8.as_pointer())
                        for v in range(t.nv):
                            ptr = self._vec(b, row, v)
                            x = (b.call(self.mload, [ptr, align, masks[v], ir.Constant(self.vty, None)]) if masked
                                 else b.load(ptr, align=self.dtype.itemsize))
                            b.store(x, b.gep(panel, [b.add(b.mul(r, c(t.nv)), c(v))]), align=64)
                            b.call(self.prefetch, [b.gep(ahead, [c(v * t.lanes * self.dtype.itemsize)]),
                                                   ir.Constant(I32, 0), ir.Constant(I32, 3), ir.Constant(I32, 1)])
                with b.if_else(b.icmp_signed(">=", ncols, c(t.nr))) as (whole, edge):
                    with whole:  # (plain loads: on a Zen 3, 1.04-1.26x faster products with N = 3072 than masked)
                        rows(False)
                    with edge:
                        rows(True)
            with strided:  # column n of the block: kc elements ldb apart
                flat = b.bitcast(panel, self.ety.as_pointer())
                inside = b.select(b.icmp_signed("<", ncols, c(t.nr)), ncols, c(t.nr))
                whole = b.mul(b.sdiv(kc, c(t.lanes)), c(t.lanes))
                with for_range(b, c(0), inside) as n:
                    column = b.gep(src, [b.mul(n, ldbn)])
                    rest = b.select(b.icmp_signed("==", ldb, c(1)), whole, c(0))
                    # unit stride along k (attention's k.T): a vector of k at a
                    # time, its lanes stored down the panel's column
                    with for_range(b, c(0), rest, t.lanes) as k0:
                        x = b.load(b.bitcast(b.gep(column, [k0]), self.vty.as_pointer()), align=self.dtype.itemsize)
                        for j in range(t.lanes):
                            dst = b.gep(flat, [b.add(b.mul(b.add(k0, c(j)), c(t.nr)), n)])
                            b.store(b.extract_element(x, ir.Constant(I32, j)), dst)
                    with for_range(b, rest, kc) as k:  # the rest element by element
                        b.store(b.load(b.gep(column, [b.mul(k, ldb)])), b.gep(flat, [b.add(b.mul(k, c(t.nr)), n)]))
                with for_range(b, inside, c(t.nr)) as n:  # columns past the edge: zeros
                    with for_range(b, c(0), kc) as k:
                        b.store(ir.Constant(self.ety, 0.0), b.gep(flat, [b.add(b.mul(k, c(t.nr)), n)]))

    def _vec(self, b, ptr, v: int):
        """Pointer to vector v of a row starting at `ptr`."""
        return b.bitcast(b.gep(ptr, [ir.Constant(I64, v * self.tile.lanes)]), self.vty.as_pointer())

    def _strides(self, b, obj, strided, batch_default, row_default):
        """(outer batch stride, inner batch stride, inner batch count, row
        stride, column stride) of an operand, in elements: read from the
        runtime's 4-D view when `strided`, else those of a C-contiguous one
        (one level of batches)."""
        on = b.icmp_signed("!=", strided, ir.Constant(I64, 0))
        pre = b.block
        with b.if_then(on):  # (only then is the operand the 4-D view: its strides and inner count to read)
            sptr = array_field(b, obj, STRIDES_OFFSET, I64.as_pointer())
            dptr = array_field(b, obj, DIMS_OFFSET, I64.as_pointer())
            size = ir.Constant(I64, self.dtype.itemsize)
            s = [b.sdiv(b.load(b.gep(sptr, [ir.Constant(I64, d)])), size) for d in range(4)]
            read = [s[0], s[1], b.load(b.gep(dptr, [ir.Constant(I64, 1)])), s[2], s[3]]
            got = b.block
        out = []
        one = ir.Constant(I64, 1)
        for x, default in zip(read, (batch_default, ir.Constant(I64, 0), one, row_default, one)):
            p = b.phi(I64)
            p.add_incoming(x, got)
            p.add_incoming(default, pre)
            out.append(p)
        return tuple(out)

    def _batch_offset(self, b, bi, layout):
        """Elements from an operand's start to product bi's matrix."""
        outer, inner, count = layout[:3]
        count = b.select(b.icmp_signed(">", count, ir.Constant(I64, 0)), count, ir.Constant(I64, 1))
        hi = b.sdiv(bi, count)
        return b.add(b.mul(hi, outer), b.mul(b.sub(bi, b.mul(hi, count)), inner))

    def _call_micro(self, b, mr, full, Ak, Bk, Cs, i, kc, lda, ldc, accumulate, masks, ctile):
        """A tile of a full strip is computed in place; at the right edge the
        tile goes through `ctile` (the columns inside copied in and out with
        masked loads and stores), so one micro-kernel serves both.  B is the
        packed panel: its rows are NR apart."""
        t = self.tile
        nr = ir.Constant(I64, t.nr)
        a_tile = b.gep(Ak, [b.mul(i, lda)])
        c_tile = b.gep(Cs, [b.mul(i, ldc)])
        micro = self._micro(mr)
        align = ir.Constant(I32, self.dtype.itemsize)

        def edge_tile(copy_in: bool):
            for r in range(mr):
                row = b.gep(c_tile, [b.mul(ldc, ir.Constant(I64, r))])
                for v in range(t.nv):
                    slot = b.gep(ctile, [ir.Constant(I64, r * t.nv + v)])
                    if copy_in:
                        x = b.call(self.mload, [self._vec(b, row, v), align, masks[v], ir.Constant(self.vty, None)])
                        b.store(x, slot, align=64)
                    else:
                        b.call(self.mstore, [b.load(slot, align=64), self._vec(b, row, v), align, masks[v]])

        with b.if_else(full) as (then, otherwise):
            with then:
                b.call(micro, [a_tile, Bk, c_tile, kc, lda, nr, ldc, accumulate])
            with otherwise:
                with b.if_then(accumulate):
                    edge_tile(copy_in=True)
                b.call(micro, [a_tile, Bk, b.bitcast(ctile, self.ety.as_pointer()), kc, lda, nr, nr, accumulate])
                edge_tile(copy_in=False)

    # ------------------------------------------------------------ micro-kernel
    def _micro(self, mr: int, nv: int | None = None, streamed: bool = False) -> ir.Function:
        """C[mr x nv vectors] (+)= A[mr x kc] B[kc x nv vectors] (nv: NV unless
        given); rows lda, ldb, ldc apart; `acc`: add to C (else overwrite).
        `streamed`: B is read in place (its rows a page or more apart, beyond
        the hardware prefetchers): each step prefetches the row PREFETCH ahead."""
        nv = nv or self.tile.nv
        if (mr, nv, streamed) in self.micros:
            return self.micros[mr, nv, streamed]
        t, vty = Tile(self.tile.mr, nv, self.tile.lanes, self.tile.kc), self.vty
        eptr = self.ety.as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [eptr, eptr, eptr, I64, I64, I64, I64, I1])
        fn = ir.Function(self.m, fnty, f"{self.symbol}_micro{mr}x{nv}{'s' if streamed else ''}")
        fn.linkage = "internal"
        fn.attributes.add("noinline")  # called from the full and the edge path: compiled once
        A, B, C, kc, lda, ldb, ldc, acc = fn.args
        for x in (A, B, C):
            x.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        zero = ir.Constant(vty, None)

        def vload(ptr, v):
            return b.load(self._vec(b, ptr, v), align=self.dtype.itemsize)

        def vstore(x, ptr, v):
            b.store(x, self._vec(b, ptr, v), align=self.dtype.itemsize)

        c_rows = [b.gep(C, [b.mul(ldc, ir.Constant(I64, r))]) for r in range(mr)]
        a_rows = [b.gep(A, [b.mul(lda, ir.Constant(I64, r))]) for r in range(mr)]
        # (the block's products are summed from zero and then added to C, as a BLAS's blocks of K are: summed
        # on from C's value, a product of K = 100000 rows was one sequential sum, 20-50x numpy's error)
        start = [[zero] * t.nv for _ in range(mr)]

        def step(k, accs):  # accs + A[:, k] x B[k]
            brow = b.gep(B, [b.mul(k, ldb)])
            bv = [vload(brow, v) for v in range(t.nv)]
            if streamed:  # (a prefetch is a hint: past the end of B it never faults)
                ahead = b.bitcast(b.gep(brow, [b.mul(ir.Constant(I64, PREFETCH), ldb)]), I8.as_pointer())
                for line in range(0, max(t.nv * t.lanes * self.dtype.itemsize, STREAM_PREFETCH_BYTES), 64):
                    b.call(self.prefetch, [b.gep(ahead, [ir.Constant(I64, line)]), ir.Constant(I32, 0),
                                           ir.Constant(I32, 3), ir.Constant(I32, 1)])
            return [[b.call(self.fma, [av, bv[v], accs[r][v]]) for v in range(t.nv)]
                    for r, av in ((r, self._broadcast(b, b.load(b.gep(a_rows[r], [k]), align=self.dtype.itemsize)))
                                  for r in range(mr))]

        def loop(lo, hi, accs, by):  # (accs after k = lo..hi-1, by steps of `by` (hi - lo a multiple), its block)
            before = b.block
            body, after = fn.append_basic_block("loop"), fn.append_basic_block("after")
            b.cbranch(b.icmp_signed("<", lo, hi), body, after)
            b.position_at_end(body)
            k = b.phi(I64, "k")
            k.add_incoming(lo, before)
            phis = self._phis(b, mr, (accs, before))
            new = phis
            for u in range(by):
                new = step(b.add(k, ir.Constant(I64, u)) if u else k, new)
            k_next = b.add(k, ir.Constant(I64, by))
            k.add_incoming(k_next, body)
            for r in range(mr):
                for v in range(t.nv):
                    phis[r][v].add_incoming(new[r][v], body)
            b.cbranch(b.icmp_signed("<", k_next, hi), body, after)
            b.position_at_end(after)
            return self._phis(b, mr, (accs, before), (new, body))

        # K_UNROLL steps of k a trip (the loop's own additions and compare spread over them), the rest one a trip
        by = 1 if streamed else K_UNROLL
        whole = b.and_(kc, ir.Constant(I64, -by))
        final = loop(ir.Constant(I64, 0), whole, start, by)
        final = loop(whole, kc, final, 1)
        add_bb, store_bb = fn.append_basic_block("add"), fn.append_basic_block("store")
        summed_bb = b.block
        b.cbranch(acc, add_bb, store_bb)
        b.position_at_end(add_bb)
        added = [[b.fadd(vload(c_rows[r], v), final[r][v]) for v in range(t.nv)] for r in range(mr)]
        b.branch(store_bb)
        b.position_at_end(store_bb)
        out = self._phis(b, mr, (added, add_bb), (final, summed_bb))
        for r in range(mr):
            for v in range(t.nv):
                vstore(out[r][v], c_rows[r], v)
        b.ret_void()
        self.micros[mr, nv, streamed] = fn
        return fn

    def _phis(self, b, mr: int, *incoming) -> list:
        """An mr x nv grid of vector phis (nv: the width of the first grid
        given), each with its element of every (grid of values, predecessor
        block) given."""
        nv = len(incoming[0][0][0])
        grid = [[b.phi(self.vty) for _ in range(nv)] for _ in range(mr)]
        for values, block in incoming:
            for row, vals in zip(grid, values):
                for p, x in zip(row, vals):
                    p.add_incoming(x, block)
        return grid
