"""Kernels' Python entries (codegen/pycall.py) as builtin functions
(runtime/native.py): numpy's results, Python exceptions for bad arguments,
the GIL released while the kernel runs, the machine code kept alive by the
function."""
import gc
import threading
import types
import weakref

import numpy as np
import pytest
from llvmlite import ir

from codegen import parallel
from codegen.artifact import KernelInfo
from codegen.abi import DATA_OFFSET, array_field
from codegen.llvm import I64, compile_ir, for_range
from jit import jit
from jit.compile import _start_pools
from runtime import threadpool
from runtime.loader import load
from tests.conftest import run_in_threads

F64 = ir.DoubleType()
OBJ = ir.IntType(8).as_pointer()


def axpb_module() -> str:
    """k_axpb(start, stop, x, out, b, a): out[i] = a * x[i] + b for i in
    [start, stop), x and out float64 array objects, b an int, a a float."""
    m = ir.Module(name="axpb")
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [I64, I64, OBJ, OBJ, I64, F64]), "k_axpb")
    start, stop, x, out, add, a = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    xs, outs = (array_field(b, v, DATA_OFFSET, F64.as_pointer()) for v in (x, out))
    with for_range(b, start, stop) as i:
        b.store(b.fadd(b.fmul(a, b.load(b.gep(xs, [i]))), b.sitofp(add, F64)), b.gep(outs, [i]))
    b.ret_void()
    parallel.parallel_entries(m, fn, 2, 1, 1, python=True)
    return str(m)


def wait_module() -> str:
    """k_wait(start, stop, cells, rounds): sets cells[1] = 1, then watches
    cells[0] for up to `rounds` loads and stores in cells[2] whether it
    became nonzero (cells an int64 array object)."""
    m = ir.Module(name="wait")
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [I64, I64, OBJ, I64]), "k_wait")
    cells, rounds = fn.args[2], fn.args[3]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    data = array_field(b, cells, DATA_OFFSET, I64.as_pointer())
    cell = lambda k: b.gep(data, [ir.Constant(I64, k)])
    b.store_atomic(ir.Constant(I64, 1), cell(1), "seq_cst", 8)
    with for_range(b, 0, rounds):
        with b.if_then(b.icmp_signed("!=", b.load_atomic(cell(0), "acquire", 8), ir.Constant(I64, 0))):
            b.store_atomic(ir.Constant(I64, 1), cell(2), "seq_cst", 8)
            b.ret_void()
    b.ret_void()
    parallel.parallel_entries(m, fn, 1, 1, 0, python=True)
    return str(m)


def compiled(text: str, kernel: tuple):
    return compile_ir(text, [KernelInfo(*k) for k in parallel.with_parallel([kernel], python=True)])


@pytest.fixture(scope="module")
def axpb_artifact():
    return compiled(axpb_module(), ("k_axpb", 2, 1, 1))


@pytest.fixture(scope="module")
def axpb(axpb_artifact):
    return load(axpb_artifact)


def test_kernels_are_builtin_functions(axpb):
    for sym in ("k_axpb", "k_axpb_par"):
        assert isinstance(axpb[sym], types.BuiltinFunctionType)
        assert axpb[sym].__name__ == sym
    assert axpb.address("k_axpb_py") != axpb.address("k_axpb")


def test_result_like_numpy(axpb):
    x = np.linspace(-1.0, 1.0, 1000)
    out = np.zeros_like(x)
    assert axpb["k_axpb"](0, 1000, x, out, 3, 2.5) is None
    np.testing.assert_array_equal(out, 2.5 * x + 3)
    out[:] = 0
    axpb["k_axpb"](10, 20, x, out, np.int64(-1), 2)  # (numpy ints, ints for floats: as int() and float() take them)
    np.testing.assert_array_equal(out[10:20], 2 * x[10:20] - 1)
    assert not out[:10].any() and not out[20:].any()


@pytest.mark.skipif(not parallel.native_pool_supported(), reason="no native pool on this platform")
def test_parallel_entry_like_numpy(axpb):
    _start_pools()
    x = np.random.default_rng(0).standard_normal(100_000)
    out = np.zeros_like(x)
    axpb["k_axpb_par"](0, x.size, x, out, 7, 64, threadpool.native_pool(), -0.5)  # (chunk, pool after the ints)
    np.testing.assert_array_equal(out, -0.5 * x + 7)


def test_wrong_argument_count_raises(axpb):
    x, out = np.ones(4), np.zeros(4)
    for args in [(), (0, 4, x, out, 1), (0, 4, x, out, 1, 2.0, 3.0)]:
        with pytest.raises(TypeError):
            axpb["k_axpb"](*args)
    with pytest.raises(TypeError):
        axpb["k_axpb_par"](0, 4, x, out, 1, 2.0)  # (no chunk and pool)
    axpb["k_axpb"](0, 4, x, out, 1, 2.0)  # (nothing left behind)
    np.testing.assert_array_equal(out, 3.0)


def test_bad_scalar_raises(axpb):
    x, out = np.ones(4), np.zeros(4)
    for args in [(0.0, 4, x, out, 1, 2.0), (0, "4", x, out, 1, 2.0), (0, 4, x, out, 1.5, 2.0),
                 (0, 4, x, out, None, 2.0), (0, 4, x, out, 1, "2.0"), (0, 4, x, out, 1, None)]:
        with pytest.raises(TypeError):
            axpb["k_axpb"](*args)
    for args in [(0, 4, x, out, 2 ** 64, 2.0), (0, -2 ** 63 - 1, x, out, 1, 2.0), (0, 4, x, out, 1, 10 ** 400)]:
        with pytest.raises(OverflowError):
            axpb["k_axpb"](*args)
    assert not out.any()  # the kernel never ran
    axpb["k_axpb"](0, 4, x, out, -1, 2.0)  # (-1: a valid int, not an error)
    np.testing.assert_array_equal(out, 1.0)


def test_gil_released_while_kernel_runs():
    """A kernel waits for a cell that only another Python thread sets: it
    sees it only if it does not hold the GIL.  (Bounded: with the GIL held it
    gives up after ~2^33 loads, seconds, and the test fails.)"""
    wait = load(compiled(wait_module(), ("k_wait", 1, 1, 0)))["k_wait"]
    cells = np.zeros(3, np.int64)
    t = threading.Thread(target=wait, args=(0, 1, cells, 1 << 33))
    t.start()
    while not cells[1] and t.is_alive():  # until the kernel runs (or returned, failing below)
        threading.Event().wait(0.001)
    cells[0] = 1
    t.join(120)
    assert not t.is_alive()
    assert cells[2] == 1, "the kernel held the GIL"


def test_many_threads(axpb):
    x = np.arange(10_000.0)

    def call(i):
        out = np.empty_like(x)
        for _ in range(200):
            axpb["k_axpb"](0, x.size, x, out, i, 0.5)
            np.testing.assert_array_equal(out, 0.5 * x + i)

    run_in_threads(call, 4)


def test_function_keeps_its_code_alive(axpb_artifact):
    loaded = load(axpb_artifact)
    k = loaded["k_axpb"]
    tracker = weakref.ref(loaded._tracker)  # what maps the machine code
    del loaded
    gc.collect()
    x, out = np.arange(5.0), np.zeros(5)
    k(0, 5, x, out, 1, 2.0)
    np.testing.assert_array_equal(out, 2 * x + 1)
    assert tracker() is not None
    del k
    gc.collect()
    assert tracker() is None  # (nothing else held it: the function let it go)


def test_jit_calls_kernels_through_python_entries():
    @jit
    def f(a, b):
        return a * 2.0 + b

    rng = np.random.default_rng(1)
    for n in (80, 1 << 16):  # (the second runs the parallel entry where there is a native pool)
        a, b = rng.standard_normal(n), rng.standard_normal(n)
        np.testing.assert_array_equal(f(a, b), a * 2.0 + b)
    exe = next(iter(f._keys.values())).entries[0].executable
    kernels = [v for k, v in exe.run.__globals__.items() if k.startswith("_k") and callable(v)]
    assert kernels and all(isinstance(v, types.BuiltinFunctionType) for v in kernels)
