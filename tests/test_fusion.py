"""Fusion and passes, asserted on printed IR and printed clusters."""
import numpy as np
import pytest

from bench import workloads as W
from clustering import partition, run_pipeline
from clustering.partition import MAX_HELD
from clustering.passes import cse, dce, decompose, simplify
from jit import jit
from shapes.ops import OPS, OPAQUE, CREATION, VIEW, MATMUL, CONCAT, UPDATE, GATHER, NUMPY, LOOP, LIFTED
from tests.conftest import assert_like_numpy


def traced_graph(fn, *args):
    jf = jit(fn, backend="reference")
    jf(*args)
    (state,) = jf._keys.values()
    return state.entries[0].trace.graph


def plan_of(fn, *args):
    return partition(run_pipeline(traced_graph(fn, *args), checks=True))


def compiled_ops(plan):
    """Ops of the numpy steps that do real work (constants and views are free)."""
    return [s.op for s in plan.steps if not hasattr(s, "domain")
            and s.op not in ("const", "dim", "reshape", "transpose", "getitem")]


F32 = np.float32


def test_gelu_bias_is_one_kernel_with_no_intermediate_buffer():
    x, b = np.ones((4, 3072), F32), np.ones(3072, F32)
    plan = plan_of(W.gelu_bias, x, b)
    (k,) = plan.kernels()
    assert compiled_ops(plan) == []
    assert len(k.outputs) == 1 and [v.id for v in k.inputs if v.ndim > 0] == [0, 1]
    assert "loop kernel over [s0, 3072]" in plan.describe() or "loop kernel over [s0, s1]" in plan.describe()


@pytest.mark.parametrize("fn,args", [
    (W.layernorm, (np.ones((4, 768), F32), np.ones(768, F32), np.ones(768, F32))),
    (W.softmax, (np.ones((4, 512), F32),)),
    (lambda x, g: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * g,  # RMSNorm
     (np.ones((4, 768), F32), np.ones(768, F32))),
])
def test_row_reductions_are_one_kernel(fn, args):
    plan = plan_of(fn, *args)
    (k,) = plan.kernels()
    assert compiled_ops(plan) == []
    assert k.has_reduction and len(k.outputs) == 1
    assert "row kernel" in plan.describe()


@pytest.mark.parametrize("fn", [
    lambda x, w: (np.exp(x) * w).sum(0),                  # input fusion into a column sum
    lambda x, w: np.abs(x - w).max(axis=0, keepdims=True),
    lambda x, w: (x.reshape(2, -1, x.shape[-1]) * w).min(axis=(0, 1)),
    lambda x, w: (x.reshape(-1, 2, 20) * w[:20]).sum(0),  # (axes kept between the reduced ones and the last)
    lambda x, w: np.sum(np.sqrt(x.reshape(-1, 2, 4, 5)), axis=(0, 1)),
    lambda x, w: (x.reshape(2, -1, 2, 20) + w[20:]).max(axis=1, keepdims=True),
])
def test_column_reductions_are_kernels(fn, backend):
    x, w = np.random.default_rng(0).random((6, 40), F32), np.full(40, 0.5, F32)
    plan = plan_of(fn, x, w)
    (k,) = plan.kernels()
    assert k.column and compiled_ops(plan) == []
    assert "column reduction over" in plan.describe()
    jf = jit(fn, backend=backend)
    for rows in (6, 10, 130):
        x = np.random.default_rng(rows).random((rows, 40), F32)
        assert_like_numpy(jf(x, w), fn(x, w), ulps=16)  # (numpy's own order, but exp is ours: a few ulp)
        assert_like_numpy(jf(x[:, ::-1], w), fn(x[:, ::-1], w), ulps=16)


def test_matmul_bias_gelu_is_one_matmul_cluster_with_epilogue():
    def f(x, w, b):
        return W.gelu(x @ w + b)

    plan = plan_of(f, np.ones((4, 64), F32), np.ones((64, 128), F32), np.ones(128, F32))
    (k,) = plan.kernels()
    assert compiled_ops(plan) == ["matmul"]
    assert k.matmul_inputs and "matmul epilogue" in plan.describe()
    assert {n.op for n in k.nodes} >= {"add", "tanh", "multiply"}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_scaled_operand_of_a_product_scales_its_epilogue(dtype):
    """NPBench's gemm and k2mm, alpha * A @ B [@ C] + beta * C: the scale
    moves from A (a kernel over M x K of its own) into the last product's
    epilogue (clustering/passes.py scale_out); where nothing elementwise
    reads the product, or the scaled operand is read twice, it stays."""
    def gemm(alpha, beta, C, A, B):
        C[:] = alpha * A @ B + beta * C

    def k2mm(alpha, A, B, C, D):
        return alpha * A @ B @ (C * alpha) + D

    def read_twice(alpha, A, B):
        a = alpha * A
        return a @ B + 1.0, a

    def returned(alpha, A, B):
        return (alpha * A) @ B

    rng = np.random.default_rng(0)
    a, c, d = (rng.random(s).astype(dtype) for s in ((5, 7), (9, 4), (5, 4)))
    b = rng.random((7, 9)).astype(dtype)
    for fn, args in ((gemm, (1.5, 1.2, d.copy(), a, b[:, :4])), (k2mm, (dtype(0.5), a, b, c, d))):
        plan = plan_of(fn, *args)
        assert len(plan.kernels()) == 1 and plan.kernels()[0].matmul_inputs, plan.describe()
        assert "multiply" in {n.op for n in plan.kernels()[0].nodes}
        ca = tuple(x.copy() if isinstance(x, np.ndarray) else x for x in args)
        jf, want = jit(fn), fn(*args)
        got = jf(*ca)
        assert_like_numpy(ca[2] if fn is gemm else got, args[2] if fn is gemm else want, ulps=8)
    for fn in (read_twice, returned):
        assert sum(not k.matmul_inputs for k in plan_of(fn, 2.0, a, b).kernels()) == 1  # alpha * A


def test_a_kernel_does_not_hold_step_results_across_later_steps():
    """An unrolled loop's `P += X` after each np.linalg.solve (NPBench's
    contour_integral): one kernel for every `+=` would hold each X until the
    last solve; the adds stay near their solves (clustering/partition.py
    MAX_HELD), and two products a kernel combines still share it."""
    def f(T, Y):
        P = np.zeros_like(Y)
        for i in range(4):
            X = np.linalg.solve(T[i], Y)
            P += 2.0 * X
        return P

    def g(A, B, x):
        return 0.5 * (A @ x) + 2.0 * (B @ x)

    rng = np.random.default_rng(1)
    T, Y = rng.random((4, 5, 5)) + 5 * np.eye(5), rng.random((5, 3))
    plan = plan_of(f, T, Y)
    solves = {s.out.id for s in plan.steps if getattr(s, "op", None) == "solve"}
    assert len(solves) == 4
    held = [len(solves & {v.id for v in k.inputs}) for k in plan.kernels()]
    assert MAX_HELD == 1 and max(held) == 2 and sum(held) == 4, plan.describe()
    assert_like_numpy(jit(f)(T, Y), f(T, Y), ulps=8)
    plan = plan_of(g, rng.random((6, 5)), rng.random((6, 5)), rng.random(5))
    assert len(plan.kernels()) == 1 and len(plan.kernels()[0].inputs) >= 2


def test_bert_layer_clusters():
    args = W.make_bert_layer((1, 16), np.random.default_rng(0))
    plan = plan_of(W.bert_layer, *args)
    text = plan.describe()
    # q, k, v bias; scale + softmax; out-proj + residual + LN; FFN GELU; FFN2 + residual + LN
    assert text.count("matmul epilogue") == 7
    assert sorted(set(compiled_ops(plan))) == ["matmul"]


@pytest.mark.parametrize("backend", ["llvm", "reference"])
def test_integer_and_bool_runtime_scalars_fuse_exactly(backend):
    # NPBench's compute: int64 arrays times int64 scalars.  A runtime integer
    # scalar reaches the kernel as an int64, so values past 2**53 stay exact.
    def f(a1, a2, a, b, c, flag):
        return (np.clip(a1, 2, 10) * a + a2 * b + c) * flag

    rng = np.random.default_rng(0)
    a1, a2 = rng.integers(0, 1000, (7, 9)), rng.integers(0, 1000, (7, 9))
    args = (a1, a2, np.int64(4), np.int64(3), np.int64(9), np.bool_(True))
    plan = plan_of(f, *args)
    (k,) = plan.kernels()
    assert compiled_ops(plan) == [] and not plan.refusals
    jf = jit(f, backend=backend)
    for c, flag in ((np.int64(9), np.bool_(True)), (np.int64(2 ** 53 + 1), np.bool_(True)),
                    (np.int64(-2 ** 62 - 3), np.bool_(False))):
        for x1, x2 in ((a1, a2), (a1[:, ::2], a2[:, ::2])):
            args = (x1, x2, np.int64(4), np.int64(3), c, flag)
            assert_like_numpy(jf(*args), f(*args))
    g = lambda x, s: x * s + s  # noqa: E731  (an int32 scalar with an int32 array)
    jg = jit(g, backend=backend)
    x = rng.integers(-5, 5, (4, 6)).astype(np.int32)
    for s in (np.int32(7), np.int32(-2 ** 31)):
        assert_like_numpy(jg(x, s), g(x, s))
    assert jf.stats()["eager_calls"] == jg.stats()["eager_calls"] == 0


def test_refused_fusion_says_why():
    def f(x):
        y = np.exp(x)
        return np.sort(y, axis=-1) + y  # an eager op between producer and consumer

    plan = plan_of(f, np.ones((4, 8)))
    assert len(plan.kernels()) == 2  # exp before the sort, the add after it
    assert any("cycle through a step outside the kernel" in r for r in plan.refusals)
    assert "cycle through a step outside the kernel" in plan.describe()
    jf = jit(f)
    x = np.random.default_rng(0).standard_normal((5, 8))
    jf(x)
    assert_like_numpy(jf(x), f(x))


def test_passes_on_printed_ir():
    def f(x):
        a = (x * 1.0 + 0.0).T.T
        return a.reshape(-1).reshape(x.shape) + x.var(axis=-1, keepdims=True), np.exp(x) + np.exp(x)

    g = traced_graph(f, np.ones((3, 4), F32))
    before = repr(g)
    assert "transpose" in before and "var" in before
    after = repr(dce(cse(simplify(decompose(g)))))
    assert "var" not in after and "transpose" not in after
    assert after.count("= exp") == 1
    assert "= multiply %0, " not in after  # x * 1 is gone
    assert after.count("= sum") == 2  # var: sum for the mean, sum of squares


def test_every_op_has_an_emitter_or_is_eager_only():
    from codegen.emitters import EMITTERS, REDUCERS
    from shapes.ops import COMPUTE, KERNEL_KINDS, REDUCE, kernel_ops

    # the registry's kernel facts name registered ops, and codegen's tables
    # emit exactly the ops the registry says a kernel computes
    assert set(KERNEL_KINDS) <= set(OPS) and set(COMPUTE) <= set(KERNEL_KINDS)
    assert set(REDUCERS) == kernel_ops(REDUCE)
    # ... but those of complex operands or results only, which complexval.py
    # emits with the other ops of complex results (kind "c") and complex
    # operands (abs, ==, isnan)
    from codegen import complexval
    from shapes.ops import COMPLEX_ONLY
    assert set(EMITTERS) == kernel_ops() - kernel_ops(REDUCE) - COMPLEX_ONLY
    assert {op for op, kinds in KERNEL_KINDS.items() if "c" in kinds} | COMPLEX_ONLY <= set(complexval.EMITTERS)
    assert set(complexval.EMITTERS) <= set(EMITTERS) | COMPLEX_ONLY
    from codegen.emitters import UNSIGNED, UNSIGNED_REDUCERS  # (unsigned variants of ops a kernel computes)
    assert set(UNSIGNED) <= set(EMITTERS) and set(UNSIGNED_REDUCERS) <= set(REDUCERS)
    numpy_steps = {name for name, op in OPS.items()
                   if op.category in (OPAQUE, CREATION, VIEW, MATMUL, CONCAT, UPDATE, GATHER, NUMPY, LOOP, LIFTED)}
    eager_only = set(OPS) - kernel_ops() - numpy_steps
    # documented: these elementwise ops and reductions run as numpy steps
    assert eager_only == {
        "exp2", "log2", "log10", "sinh", "cosh", "tan", "arcsin", "arccos", "arcsinh", "arccosh",
        "arctanh", "cbrt", "float_power", "fmax", "fmin", "copysign",
        "logaddexp", "logaddexp2", "heaviside", "nextafter", "mean", "var", "std", "any", "all"}


@pytest.mark.parametrize("fn", [
    lambda x, m: np.where(m, x, 0).sum(1) / m.sum(1),                       # a masked mean of each row
    lambda x, m: x.max(1) + np.log(np.exp(x - x.max(1)[:, None]).sum(1)),  # logsumexp
    lambda x, m: np.sqrt((x * x).sum(-1)) * 2 + 1,                          # row norms
])
def test_values_of_a_row_fuse_into_its_row_kernel(fn, backend):
    """Elementwise ops on row reductions taken without keepdims (and
    x.max(1)[:, None]) are row values of the row kernel (passes.row_space):
    one kernel, where each was a kernel of its own ("iteration spaces
    differ")."""
    x, m = np.random.default_rng(0).random((6, 40)), np.random.default_rng(1).random((6, 40)) > 0.3
    plan = plan_of(fn, x, m)
    assert len(plan.kernels()) == 1 and "iteration spaces differ" not in plan.describe(), plan.describe()
    jf = jit(fn, backend=backend)
    for rows in (6, 10, 130):
        x, m = np.random.default_rng(rows).random((rows, 40)), np.random.default_rng(rows + 1).random((rows, 40)) > 0.3
        jf(x, m)
        assert_like_numpy(jf(x, m), fn(x, m), ulps=16)


@pytest.mark.parametrize("fn", [
    # a standardization: the mean and the deviation are scalars between kernels
    lambda x, s: (x - x.sum() / x.size) / np.sqrt(((x - x.mean()) ** 2).sum() / (x.size - 1)) * s,
    # a scalar from a scalar argument, and one from a full reduction, feeding a where
    lambda x, s: np.where(x > np.abs(s) * 0.5, x * (s * s + 1.0), -x / (x.max() - x.min() + 1.0)),
    # float32 scalars keep float32 (x.sum() / 3 is float32 in numpy)
    lambda x, s: x.astype(np.float32) * (x.astype(np.float32).sum() / 3) + x.astype(np.float32).max() * 2,
])
def test_scalar_arithmetic_fuses_into_the_kernels_that_read_it(fn, backend):
    """0-d elementwise ops (x.sum() / n, sqrt of a variance, s * s + 1)
    whose results only kernels read are computed in those kernels (they were
    numpy steps of their own: "scalar result"); a scalar that is also
    returned or read by a numpy step stays one numpy step."""
    x = np.random.default_rng(0).random((6, 40))
    plan = plan_of(fn, x, 1.5)
    scalar_steps = [s for s in plan.steps if not hasattr(s, "domain") and s.out.ndim == 0
                    and s.op not in ("const", "dim", "getitem")]
    assert scalar_steps == [] and "scalar result" not in plan.describe(), plan.describe()
    jf = jit(fn, backend=backend)
    for rows, s in ((6, 1.5), (10, -0.25), (131, 3.0)):
        x = np.random.default_rng(rows).random((rows, 40))
        jf(x, s)
        assert_like_numpy(jf(x, s), fn(x, s), ulps=64, atol=1e-12)  # (x - mean: a sum's order)
    assert jf.stats()["compiles"] == 1


def test_a_scalar_also_returned_stays_one_numpy_step(backend):
    def f(x):
        m = x.sum() / x.size
        return x - m, m * 2.0
    x = np.random.default_rng(0).random((5, 7))
    plan = plan_of(f, x)
    assert "a scalar read outside a kernel" in plan.describe(), plan.describe()
    jf = jit(f, backend=backend)
    for rows in (5, 9, 300):
        x = np.random.default_rng(rows).random((rows, 7))
        jf(x)
        got, want = jf(x), f(x)
        assert_like_numpy(got, want, ulps=16)
        assert type(got[1]) is type(want[1])


def _standardize_columns(x):
    mu = x.mean(axis=0, keepdims=True)
    sd = x.std(axis=0, ddof=1, keepdims=True)
    return (x - mu) / sd, np.ptp(x, axis=0), x.sum(0) * 2 + 1, np.sqrt((x * x).sum(0)) / x.shape[0]


def _batchnorm_train(x):  # (N, H, C): statistics over the batch and the rows
    m = x.mean(axis=(0, 1), keepdims=True)
    v = ((x - m) ** 2).mean(axis=(0, 1), keepdims=True)
    return (x - m) / np.sqrt(v + 1e-5), v * 2


def _batched_columns(x):  # (B, M, N): reduced over M, kept B
    s = x.sum(1, keepdims=True)
    return s / x.shape[1] + 1, x.max(1, keepdims=True) - x.min(1, keepdims=True)


def _row_siblings(x):
    return x.sum(1), (x * x).sum(1), x.max(1), x.argmax(1)


@pytest.mark.parametrize("fn, kernels, shapes", [
    (_standardize_columns, 4, [(5, 7), (64, 33), (300, 2100)]),  # (over one block of columns, and two)
    (_batchnorm_train, 4, [(2, 3, 8), (4, 50, 96)]),
    (_batched_columns, 1, [(2, 5, 7), (3, 40, 2100)]),
    (_row_siblings, 1, [(5, 7), (40, 3000)]),
], ids=["standardize_columns", "batchnorm_train", "batched_columns", "row_siblings"])
def test_column_values_and_sibling_reductions_share_a_kernel(fn, kernels, shapes, backend):
    """Elementwise ops of a column reduction's result (x.sum(0) / n, the
    sqrt of a variance) are computed in the column kernel once every row is
    in (they were kernels of their own: "a column reduction ends its
    kernel"), and reductions that read the same array share its one pass
    (x.max(0) and x.min(0), x.sum(1) and (x * x).sum(1)).
    standardize_columns was 11 kernels, batchnorm 6."""
    rng = np.random.default_rng(0)
    plan = plan_of(fn, rng.standard_normal(shapes[0]))
    assert len(plan.kernels()) == kernels, plan.describe()
    jf = jit(fn, backend=backend)
    for shape in shapes:
        x = rng.standard_normal(shape)
        jf(x)
        assert_like_numpy(jf(x), fn(x), ulps=64, atol=1e-12)
        x32 = x.astype(np.float32)
        jf(x32)
        assert_like_numpy(jf(x32), fn(x32), ulps=64, atol=1e-5)


def test_a_scalar_several_kernels_read_does_not_join_them():
    """An unrolled loop's iterations that share a scalar (iteration i's upper
    bound is iteration i + 1's lower one) stay kernels of their own: the
    scalar is one numpy step, not a bridge (the azimuthal integration's 1000
    masked means became kernels of 128 ops, 0.09x numpy)."""
    from bench.corpus.physics import azimint_naive
    rng = np.random.default_rng(0)
    plan = plan_of(azimint_naive, rng.random(500), rng.random(500), 12)
    assert len(plan.kernels()) == 13 and max(len(k.nodes) for k in plan.kernels()) <= 12, plan.describe()
    jf = jit(azimint_naive)
    for n in (500, 2000):
        data, radius = rng.random(n), rng.random(n)
        jf(data, radius, 12)
        assert_like_numpy(jf(data, radius, 12), azimint_naive(data, radius, 12), ulps=16)


def _brighten(img, delta):
    return np.clip(img.astype(np.int16) + delta, 0, 255).astype(np.uint8)


def _mixed(x, y, one, s):
    return np.where(x > y, x * one + s, y - one), x.astype(np.float32) / (1 + np.abs(y))


@pytest.mark.parametrize("shape", [(5, 7, 3), (1, 4, 3), (6, 1, 1), (0, 3, 3), (2, 3, 4, 2), (3, 1), (9, 3)])
def test_an_elementwise_kernel_of_operands_of_its_shape_is_one_loop_over_every_element(backend, shape):
    """Contiguous operands of the domain's shape, or of one element, run
    one loop over all the elements (an RGB image's clip, (H, W, 3), ran rows
    3 long at 0.25x numpy's speed, probe 16): every element right, with
    broadcast operands of one element, 0-d ones, Python numbers, and a
    strided operand (no single loop) beside them."""
    rng = np.random.default_rng(len(shape))
    img = rng.integers(0, 256, shape).astype(np.uint8)
    f, g = jit(_brighten, backend=backend), jit(_mixed, backend=backend)
    for delta in (40, -300):
        assert_like_numpy(f(img, delta), _brighten(img, delta))
    if backend == "llvm" and len(shape) > 1 and shape[-1] != 1:  # (its kernel's units: elements, one loop)
        from runtime.kernelcall import KernelCall
        kcs = [s for st in f._keys.values() for e in st.entries for s in e.executable.steps
               if isinstance(s, KernelCall)]
        assert kcs and all(kc.inner == 1 for kc in kcs), [(kc.rows, kc.inner) for kc in kcs]
    x, y = rng.standard_normal(shape), rng.standard_normal(shape)
    for one in (np.full((1,) * len(shape), 2.5), np.array(-1.5), rng.standard_normal(shape[-1:])):
        for a, b in ((x, y), (x, y[::-1] if shape[0] else y), (np.asfortranarray(x), y)):
            assert_like_numpy(g(a, b, one, 3), _mixed(a, b, one, 3))

