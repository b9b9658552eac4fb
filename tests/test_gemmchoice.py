"""The per-host choice between the GEMM kernel and numpy's matmul for a
compiled product (runtime/gemmchoice.py): the first call of a shape class
runs both and returns the kernel's result, later calls run the one chosen,
either one gives numpy's result, and each shape class is decided once for
every function of the process."""
import numpy as np
import pytest

from codegen import lower
from jit import jit
from runtime import gemmchoice


STRIDED = 5  # (where a shape class says its B is read through a strided view)


@pytest.fixture
def matmuls(monkeypatch):
    """Decide classes by time again, and count numpy's matmul calls (the
    executables built during the test call this one)."""
    calls = []
    real = np.matmul

    def spy(*args, **kwargs):
        calls.append(args[0].shape)
        return real(*args, **kwargs)

    monkeypatch.setattr(np, "matmul", spy)
    monkeypatch.setattr(gemmchoice, "PREFER", None)
    gemmchoice.forget()
    yield calls
    gemmchoice.forget()


def linear(x, w, b):
    return np.maximum(x @ w + b, 0.0)


def inputs(rng, m, k=64, n=48, dtype=np.float32):
    return (rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype),
            rng.standard_normal(n).astype(dtype))


def check(got, x, w, b):
    want = np.maximum(x @ w + b, 0.0)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5 if want.dtype == np.float32 else 1e-12, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_first_call_of_a_class_runs_both_and_decides(matmuls, dtype):
    rng = np.random.default_rng(0)
    f = jit(linear)
    x, w, b = inputs(rng, 40, dtype=dtype)
    check(f(x, w, b), x, w, b)  # (the trace: numpy's own matmul runs once)
    matmuls.clear()
    check(f(x, w, b), x, w, b)
    # (relu(x @ w + b): in the store when epilogues go there, SHAPEJIT_EPILOGUE_IN_STORE)
    key = gemmchoice.shape_class(np.dtype(dtype).char, 40, 48, 64, lower.fuse_epilogues())
    assert key in gemmchoice.BEST
    assert len(matmuls) == gemmchoice.ROUNDS  # numpy's matmul raced the kernel
    for _ in range(3):
        matmuls.clear()
        check(f(x, w, b), x, w, b)
        assert len(matmuls) == int(gemmchoice.BEST[key])


@pytest.mark.parametrize("prefer", ["kernel", "blas"])
def test_either_choice_gives_numpys_result_for_every_shape(matmuls, monkeypatch, prefer):
    monkeypatch.setattr(gemmchoice, "PREFER", prefer)
    rng = np.random.default_rng(1)
    f = jit(linear)
    for m in (2, 3, 17, 200, 3, 2):
        x, w, b = inputs(rng, m)
        for _ in range(2):
            check(f(x, w, b), x, w, b)
    assert f.stats()["compiles"] == 1
    # one class per row count below EXACT_ROWS, then per bit length of M; each decided as preferred
    assert {k[1] for k in gemmchoice.BEST} == {2, 3, gemmchoice.EXACT_ROWS + 5, gemmchoice.EXACT_ROWS + 8}
    assert set(gemmchoice.BEST.values()) == {prefer == "blas"}
    matmuls.clear()
    x, w, b = inputs(rng, 17)
    check(f(x, w, b), x, w, b)
    assert len(matmuls) == (prefer == "blas")


@pytest.mark.parametrize("prefer", ["kernel", "blas"])
def test_batched_and_strided_operands_on_either_choice(matmuls, monkeypatch, prefer):
    monkeypatch.setattr(gemmchoice, "PREFER", prefer)
    rng = np.random.default_rng(2)

    def attention_scores(q, k):
        return (q @ k.transpose(0, 2, 1)) * 0.125

    f = jit(attention_scores)
    for s in (5, 9, 70):
        q = rng.standard_normal((3, s, 32)).astype(np.float32)
        k = rng.standard_normal((3, s, 32)).astype(np.float32)
        want = attention_scores(q, k)
        for _ in range(3):
            np.testing.assert_allclose(f(q, k), want, rtol=1e-5, atol=1e-5)
    x = rng.standard_normal((64, 80)).astype(np.float32)
    g = jit(lambda a, b: a.T @ b)
    for _ in range(3):
        np.testing.assert_allclose(g(x, x[:, :16]), x.T @ x[:, :16], rtol=1e-5, atol=1e-4)


def test_a_class_is_decided_once_for_every_function(matmuls, monkeypatch):
    monkeypatch.setattr(lower, "FUSE_EPILOGUES", True)  # (the epilogues in the store: SHAPEJIT_EPILOGUE_IN_STORE)
    rng = np.random.default_rng(3)
    x, w, b = inputs(rng, 40)
    # (another function, another epilogue in the kernel's store: the same class)
    f, g = jit(linear), jit(lambda x, w, b: np.tanh(x @ w + b))
    f(x, w, b), f(x, w, b)
    decided = dict(gemmchoice.BEST)
    g(x, w, b)
    matmuls.clear()
    np.testing.assert_allclose(g(x, w, b), np.tanh(x @ w + b), rtol=1e-5, atol=1e-5)  # no race: the class is known
    assert gemmchoice.BEST == decided
    assert len(matmuls) == int(next(iter(decided.values())))
    h = jit(lambda x, w: x @ w)  # a product alone is a class of its own (no epilogue pass after numpy's)
    h(x, w), h(x, w)
    assert len(gemmchoice.BEST) == 2


def test_a_transposed_weight_of_few_rows_is_raced_not_decided_by_the_tree(matmuls, monkeypatch):
    """The tree is calibrated on C-contiguous operands, where a product of
    few rows streams B; `x @ w.T` makes the kernel pack B instead, so its
    class is raced at its first product (both run, the faster stays), while
    a C-contiguous B of the same shape takes the tree's variant on sight."""
    from runtime import dispatch
    monkeypatch.setattr(gemmchoice, "TREES", {})
    gemmchoice.install("f", dispatch.Tree(leaf=False))  # (the kernel for every shape)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 64)).astype(np.float32)
    w = rng.standard_normal((64, dispatch.FEWEST_N)).astype(np.float32)  # (as many columns as the tree saw)
    wt = np.ascontiguousarray(w.T)
    f, g = jit(lambda x, w: x @ w), jit(lambda x, wt: x @ wt.T)
    for fn, arg in ((f, w), (g, wt)):
        fn(x, arg)  # (the trace)
        matmuls.clear()
        np.testing.assert_allclose(fn(x, arg), x @ w, rtol=1e-5, atol=1e-5)
        raced = len(matmuls)
        assert raced == (gemmchoice.ROUNDS if fn is g else 0)
    keys = [k for k in gemmchoice.BEST if k[1] == 1]
    assert sorted(k[STRIDED] for k in keys) == [False, True]
    assert gemmchoice.BEST[next(k for k in keys if not k[STRIDED])] is False  # (the tree's kernel)


def test_a_transposed_b_of_many_rows_is_raced_whatever_the_tree(matmuls, monkeypatch):
    """Attention's `q @ k.T`: B is read through a strided view, a batch of
    products the two-dimensional calibration never timed: its class is
    raced on its real operands (the tree sent it to numpy's BLAS, 1.2x
    slower there), not decided where the tree says (here: numpy's BLAS for
    every shape)."""
    from runtime import dispatch
    monkeypatch.setattr(gemmchoice, "TREES", {})
    gemmchoice.install("f", dispatch.Tree(leaf=True))  # (numpy's matmul for every shape)
    rng = np.random.default_rng(6)
    q, k = (rng.standard_normal((3, 128, 64)).astype(np.float32) for _ in range(2))
    f = jit(lambda q, k: q @ np.swapaxes(k, -1, -2))
    f(q, k)  # (the trace)
    matmuls.clear()
    np.testing.assert_allclose(f(q, k), q @ np.swapaxes(k, -1, -2), rtol=1e-5, atol=1e-4)
    assert len(matmuls) == gemmchoice.ROUNDS
    assert len([key for key in gemmchoice.BEST if key[STRIDED]]) == 1


def test_a_batch_of_products_is_raced_whatever_the_tree(matmuls, monkeypatch):
    """Attention's `p @ v`: a batch of products with C-contiguous operands,
    which numpy's matmul loops over; the tree, calibrated on one product,
    does not decide its class (it sent p @ v to numpy's BLAS, 1.4x slower at
    S=512): raced on its real operands."""
    from runtime import dispatch
    monkeypatch.setattr(gemmchoice, "TREES", {})
    gemmchoice.install("f", dispatch.Tree(leaf=True))  # (numpy's matmul for every shape)
    rng = np.random.default_rng(7)
    p, v = rng.standard_normal((3, 128, 128)).astype(np.float32), rng.standard_normal((3, 128, 64)).astype(np.float32)
    f = jit(lambda p, v: p @ v)
    f(p, v)  # (the trace)
    matmuls.clear()
    np.testing.assert_allclose(f(p, v), p @ v, rtol=1e-5, atol=1e-4)
    assert len(matmuls) == gemmchoice.ROUNDS


@pytest.mark.parametrize("m", [4, 300])
def test_a_product_of_fewer_columns_than_the_tree_saw_is_raced(matmuls, monkeypatch, m):
    """N below the class of dispatch.FEWEST_N (the fewest columns the
    calibration measured): raced on its real operands, of few rows or many,
    not decided by the tree (here: the kernel for every shape).  With no
    race, 20000 x 200 @ 200 x N ran 10-15x slower on the kernel than on
    numpy's matmul at N = 1, 2-4x at N = 2..32 (probe 22)."""
    from runtime import dispatch
    monkeypatch.setattr(gemmchoice, "TREES", {})
    gemmchoice.install("f", dispatch.Tree(leaf=False))
    rng = np.random.default_rng(8)
    f = jit(lambda x, w: x @ w)
    f(np.ones((m, 64), np.float32), np.ones((64, dispatch.FEWEST_N), np.float32))  # (the trace)
    fewest = 2 ** (dispatch.FEWEST_N.bit_length() - 1)  # (the fewest N of the class the grid reaches)
    for n, raced in ((fewest, 0), (fewest - 1, gemmchoice.ROUNDS), (1, gemmchoice.ROUNDS)):
        x, w = rng.standard_normal((m, 64)).astype(np.float32), rng.standard_normal((64, n)).astype(np.float32)
        matmuls.clear()
        got = f(x, w)  # (the class's first product: decided on sight, or raced)
        assert len(matmuls) == raced, n
        np.testing.assert_allclose(got, x @ w, rtol=1e-4, atol=1e-3)


def test_a_product_deeper_than_the_tree_was_voted_on_is_raced(matmuls, monkeypatch):
    """K past the class of dispatch.DEEPEST_K (the deepest the calibration measured): the
    class of few rows is raced on its real operands, not decided by the
    tree (here: the kernel for every shape)."""
    from runtime import dispatch
    monkeypatch.setattr(gemmchoice, "TREES", {})
    monkeypatch.setattr(gemmchoice, "PREFER", None)
    gemmchoice.install("f", dispatch.Tree(leaf=False))
    rng = np.random.default_rng(7)
    f = jit(lambda x, w: x @ w)
    n = dispatch.FEWEST_N
    f(np.ones((4, 64), np.float32), np.ones((64, n), np.float32))  # (the trace, at a depth the tree decides)
    deepest = 2 ** dispatch.DEEPEST_K.bit_length() - 1  # (the deepest K of the class the grid reaches)
    for k, raced in ((deepest, 0), (deepest + 1, gemmchoice.ROUNDS)):
        x, w = rng.standard_normal((4, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
        matmuls.clear()
        got = f(x, w)  # (the class's first product: decided on sight, or raced)
        assert len(matmuls) == raced
        np.testing.assert_allclose(got, x @ w, rtol=1e-4, atol=1e-3)
