"""Epilogues in the GEMM's store (codegen/gemm.py, codegen/schedule.py
`tile`): the elementwise kernel that reads a product runs on each final
block of C inside the GEMM.  Differential against numpy for each kind of
epilogue, float32 and float64, sizes on and off every tile edge (0 and 1
among them), strided operands and batches; and against the other variant,
numpy's matmul followed by the epilogue's own pass.  Each call gets new
values: an output buffer that a rows' epilogue missed could otherwise hold
the previous call's answer (numpy's allocator hands the same block back)."""
import numpy as np
import pytest

from codegen import gemm, lower
from jit import jit
from runtime import gemmchoice
from tests.conftest import assert_like_numpy

DTYPES = [np.float32, np.float64]


@pytest.fixture(autouse=True)
def in_the_store(monkeypatch):
    """The store variant (off by default: SHAPEJIT_EPILOGUE_IN_STORE): every
    test here compiles its epilogues into the GEMM unless it says otherwise."""
    monkeypatch.setattr(lower, "FUSE_EPILOGUES", True)


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


EPILOGUES = {
    "bias": lambda x, w, b, r: x @ w + b,
    "gelu": lambda x, w, b, r: gelu(x @ w + b),
    "silu": lambda x, w, b, r: (lambda y: y / (1.0 + np.exp(-y)))(x @ w + b),
    "relu": lambda x, w, b, r: np.maximum(x @ w + b, 0.0),
    "tanh": lambda x, w, b, r: np.tanh(x @ w),
    "residual": lambda x, w, b, r: r + (x @ w + b),
    "scale": lambda x, w, b, r: (x @ w) * 0.125,
}


def exact(rng, shape, dtype, scale=1.0):
    """Small integers (times a power of two): every product and sum is
    exact, so the GEMM's C equals numpy's whatever the order of the sums,
    and the epilogue alone decides the ulps."""
    return (rng.integers(-4, 5, shape) * scale).astype(dtype)


def operands(rng, M, K, N, dtype):
    # (scaled so the activations see values around their bend, not only saturated ones)
    s = 1.0 / 16 if K < 64 else 1.0 / 256
    return (exact(rng, (M, K), dtype, s), exact(rng, (K, N), dtype), exact(rng, N, dtype, 1 / 4),
            exact(rng, (M, N), dtype, 1 / 8))


def close(got, want):
    """numpy's result to 8 ulp, or to 16 ulp of its largest element: GELU
    and SiLU of a negative input cancel (1 + tanh(z) with tanh(z) near -1),
    so a tanh an ulp from numpy's moves a small result by more of its own
    ulps (the unfused kernel's as much: tests/test_fusion.py)."""
    for g, w in zip(got, want) if isinstance(want, tuple) else ((got, want),):
        scale = float(np.abs(w).max()) if w.size else 0.0
        assert_like_numpy(g, w, ulps=8, atol=16 * np.finfo(w.dtype).eps * max(1.0, scale))


def fused(f) -> bool:
    return "matmul epilogue in the GEMM store" in f.explain()


@pytest.fixture
def kernel_only(monkeypatch):
    monkeypatch.setattr(gemmchoice, "PREFER", "kernel")


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kind", list(EPILOGUES))
def test_each_epilogue_in_the_store_matches_numpy(kind, dtype, kernel_only):
    rng = np.random.default_rng(len(kind))
    fn = EPILOGUES[kind]
    f = jit(fn)
    nr, kc = gemm.tile_for(np.dtype(dtype)).nr, gemm.tile_for(np.dtype(dtype)).kc
    shapes = [(M, K, N) for M in (1, 2, 5, 7, 13, 17, 40) for K in (0, 1, 7, kc + 1) for N in (1, nr - 1, 3 * nr + 5)]
    shapes = [shapes[i] for i in rng.choice(len(shapes), 24, replace=False)] + [(40, 33, 130), (0, 5, 7), (6, 9, 0)]
    for M, K, N in shapes:
        for _ in range(2):  # (the first call of an entry returns the trace's numpy result)
            args = operands(rng, M, K, N, dtype)
            close(f(*args), fn(*args))
    assert fused(f), f.explain()
    assert f.stats()["fallbacks"] == 0


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_strided_operands_and_batches(dtype, kernel_only):
    rng = np.random.default_rng(5)

    def transposed(a, w, b):  # A and B as transposed views: read through the runtime's 4-D views
        return gelu(a.T @ w.T + b)

    def batched(q, k):  # attention's scores, a batch of products with k.T, and a scale and tanh
        return np.tanh((q @ k.transpose(0, 2, 1)) * 0.125)

    ft, fb = jit(transposed), jit(batched)
    for M, K, N in ((1, 8, 30), (5, 40, 17), (37, 300, 70)):
        for _ in range(2):
            a, w = exact(rng, (K, M), dtype, 1 / 64), exact(rng, (N, K), dtype)
            b = exact(rng, N, dtype, 1 / 4)
            q, k = exact(rng, (3, M, K), dtype, 1 / 64), exact(rng, (3, N, K), dtype)
            close(ft(a, w, b), transposed(a, w, b))
            close(fb(q, k), batched(q, k))
    assert fused(ft) and fused(fb)


@pytest.mark.parametrize("kind", ["gelu", "residual"])
def test_a_product_of_one_row_splits_and_runs_its_epilogue_as_a_pass(kind, kernel_only, monkeypatch):
    """At one row (a decode step) the product splits B's rows over the
    threads (runtime/gemv.py), which the store cannot follow: its epilogue
    then runs as a pass of its own, as after numpy's matmul.  More rows keep
    the epilogue in the store."""
    from runtime import gemv, threadpool
    splits = []
    real = gemv.split
    monkeypatch.setattr(gemv, "split", lambda *a: (splits.append(a[-1]), real(*a))[1])
    rng = np.random.default_rng(3)
    fn = EPILOGUES[kind]
    f = jit(fn)
    f(*operands(rng, 2, 8, 8, np.float32))  # (the first jitted call starts the native pool)
    if threadpool.native_threads() < 2:
        pytest.skip("one thread: nothing to split over")
    K = 4 * threadpool.native_threads() * 128
    for M in (1, 3, 1):
        for _ in range(2):
            args = operands(rng, M, K, 200, np.float32)
            before = len(splits)
            close(f(*args), fn(*args))
        assert (len(splits) > before) == (M == 1), M
    assert fused(f), f.explain()


@pytest.mark.parametrize("prefer", ["kernel", "blas"])
def test_both_variants_give_numpys_result(monkeypatch, prefer):
    """numpy's matmul and then the epilogue's pass (the BLAS variant), or
    the kernel with the epilogue in its store: the same answer."""
    monkeypatch.setattr(gemmchoice, "PREFER", prefer)
    gemmchoice.forget()
    rng = np.random.default_rng(11)
    f = jit(EPILOGUES["gelu"])
    for M in (1, 3, 64, 3):
        for _ in range(2):
            args = operands(rng, M, 48, 40, np.float32)
            close(f(*args), EPILOGUES["gelu"](*args))
    gemmchoice.forget()


def test_the_product_read_again_after_its_epilogue(kernel_only):
    """C is still written whole: a later step (here the caller) reads it."""
    def f(x, w, b):
        y = x @ w
        return y, np.tanh(y + b), y.sum(axis=0)

    rng = np.random.default_rng(2)
    jf = jit(f)
    for M in (3, 20, 3):
        for _ in range(2):
            x, w, b, _ = operands(rng, M, 24, 50, np.float64)
            close(jf(x, w, b), f(x, w, b))
    assert fused(jf)


def test_an_epilogue_written_into_an_operand(kernel_only):
    """The result is stored into the array the product reads: the epilogue
    writes its own buffer while the GEMM still reads A, and the slot gets it
    after the product."""
    def f(x, w):
        x[:, :8] = np.tanh(x[:, :8] @ w)
        return x

    rng = np.random.default_rng(4)
    jf = jit(f)
    for M in (5, 33, 5):
        for _ in range(2):
            x, w = exact(rng, (M, 12), np.float32, 1 / 8), exact(rng, (8, 8), np.float32)
            got, want = x.copy(), x.copy()
            jf(got, w)
            f(want, w)
            close(got, want)
    assert fused(jf)


def test_steps_between_the_product_and_its_epilogue():
    """A product moves past steps that do not need it (constants, other
    kernels) to run where its epilogue's kernel stands; past a step that
    reads it, it does not."""
    def f(x, w, v):
        y = x @ w
        z = np.exp(v).sum(axis=0)  # (a column reduction kernel of its own, between the product and its epilogue)
        return np.tanh(y * 0.5) + z

    def g(x, w):
        y = x @ w
        s = y.sum(axis=1, keepdims=True)  # reads the product: the epilogue below stays a pass of its own
        return np.tanh(y) - s

    rng = np.random.default_rng(8)
    jf, jg = jit(f), jit(g)
    for M in (4, 9, 4):
        for _ in range(2):
            x, w = exact(rng, (M, 16), np.float64, 1 / 16), exact(rng, (16, 20), np.float64)
            v = exact(rng, (7, 20), np.float64, 1 / 8)
            close(jf(x, w, v), f(x, w, v))
            close(jg(x, w), g(x, w))
    assert fused(jf)
    plan = jf.explain()
    assert plan.index("column reduction") < plan.index("matmul epilogue in the GEMM store")  # (it moved past k0)


def test_the_product_of_a_fused_step_is_a_pooled_intermediate(kernel_only):
    """C is read by the epilogue inside the step and by nothing after: a
    buffer of the executable's pool, not a new array every call (only the
    result is allocated)."""
    f = jit(EPILOGUES["tanh"])
    rng = np.random.default_rng(6)
    args = operands(rng, 40, 32, 70, np.float32)
    f(*args), f(*args)
    before = f.stats()["bytes_allocated"]
    out = f(*args)
    assert f.stats()["bytes_allocated"] - before == out.nbytes
    assert fused(f)


def test_fusion_is_a_keyed_switch_never_a_saved_trace_of_the_other(monkeypatch):
    """codegen.lower.FUSE_EPILOGUES off: the epilogue runs as its own pass.
    It is part of a saved trace's key: a function compiled with it on never
    loads the trace another function of the same code saved with it off (a
    bench compared the unfused plan with itself that way)."""
    from codegen import lower
    monkeypatch.setattr(gemmchoice, "PREFER", "kernel")
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((16, 64), (64, 256), (256,)))
    program = EPILOGUES["gelu"]
    monkeypatch.setattr(lower, "FUSE_EPILOGUES", False)
    unfused = jit(lambda x, w, b: program(x, w, b, None))
    for _ in range(2):
        assert_like_numpy(unfused(x, w, b), program(x, w, b, None), ulps=64, atol=1e-5)
    monkeypatch.setattr(lower, "FUSE_EPILOGUES", True)
    fused = jit(lambda x, w, b: program(x, w, b, None))
    for _ in range(2):
        assert_like_numpy(fused(x, w, b), program(x, w, b, None), ulps=64, atol=1e-5)
    assert "in the GEMM store" not in unfused.explain()
    assert "in the GEMM store" in fused.explain() and fused.stats()["traces"] == 1


def test_the_store_is_off_unless_the_variable_asks(monkeypatch):
    """With no override, SHAPEJIT_EPILOGUE_IN_STORE decides at each compile:
    unset, the epilogue is a pass of its own (measured faster); 1, it runs
    in the GEMM's store."""
    monkeypatch.setattr(lower, "FUSE_EPILOGUES", None)
    monkeypatch.setattr(gemmchoice, "PREFER", "kernel")
    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((16, 64), (64, 256), (256,)))
    program = EPILOGUES["relu"]
    seen = {}
    for value in (None, "1"):
        if value is None:
            monkeypatch.delenv("SHAPEJIT_EPILOGUE_IN_STORE", raising=False)
        else:
            monkeypatch.setenv("SHAPEJIT_EPILOGUE_IN_STORE", value)
        f = jit(lambda x, w, b: program(x, w, b, None))
        for _ in range(2):
            assert_like_numpy(f(x, w, b), program(x, w, b, None), ulps=64, atol=1e-5)
        seen[value] = "in the GEMM store" in f.explain()
    assert seen == {None: False, "1": True}
