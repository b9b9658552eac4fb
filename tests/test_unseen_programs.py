"""Programs written as numpy users write them (tests/unseen_programs.py),
jitted and called at four lengths: each returns what numpy returns (values
to a few ulp, dtypes, shapes and Python types) and leaves its arguments as
numpy leaves them, never runs the call in numpy (no fallback), and compiles
no more than its bound (once for every length, where the program's shape
logic allows) with at most its bound of numpy steps of data-dependent size
(eager nodes: np.unique, np.insert, np.nonzero)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from jit import JitWarning, jit
from tests import unseen_programs as P
from tests.conftest import assert_like_numpy

F32 = np.float32


def _sym(a):
    return a + a.T


# name: (arguments for a length n and a generator, most compiles over the lengths, most eager nodes)
CASES = {
    "kmeans_step": (lambda n, r: (r.standard_normal((n, 3)), r.standard_normal((4, 3))), 1, 0),
    "xent": (lambda n, r: (r.standard_normal((n, 10)).astype(F32), r.integers(0, 10, n)), 1, 0),
    "topk": (lambda n, r: (r.standard_normal((n, 7)),), 1, 0),
    "polyfeat": (lambda n, r: (r.standard_normal(n),), 1, 0),
    "stencil1d": (lambda n, r: (r.standard_normal(n),), 1, 0),
    "clip_norm": (lambda n, r: (r.standard_normal(n) * 3,), 1, 0),
    "masked_fill": (lambda n, r: (r.standard_normal((n, 6)), 0.1), 1, 0),
    "standardize": (lambda n, r: (r.standard_normal((n, 5)),), 1, 0),
    "hist_int": (lambda n, r: (r.integers(0, 100, n),), 1, 0),
    "rolling_max": (lambda n, r: (r.standard_normal(n + 4),), 1, 0),
    "pairwise_cos": (lambda n, r: (r.standard_normal((n, 8)),), 1, 0),
    "einsum_attn": (lambda n, r: tuple(r.standard_normal((2, n, 4)).astype(F32) for _ in range(3)), 1, 0),
    "int_math": (lambda n, r: (r.integers(-50, 50, n), r.integers(-50, 50, n)), 1, 0),
    "sort_median": (lambda n, r: (r.standard_normal((4, n)),), 1, 0),
    "linreg_step": (lambda n, r: (r.standard_normal((n, 4)), r.standard_normal(n), r.standard_normal(4)), 1, 0),
    "logreg_loss": (lambda n, r: (r.standard_normal((n, 4)).astype(F32), (r.random(n) > .5).astype(F32),
                                  r.standard_normal(4).astype(F32)), 1, 0),
    "sobel": (lambda n, r: (r.standard_normal((n, n + 1)),), 1, 0),
    "softmax0": (lambda n, r: (r.standard_normal((n, 3)).astype(F32),), 1, 0),
    "batchnorm": (lambda n, r: (r.standard_normal((n, 5)), r.random(5), r.random(5)), 1, 0),
    "onehot": (lambda n, r: (r.integers(0, 5, n), 5), 1, 0),
    "gauss_kernel": (lambda n, r: (r.standard_normal((n, 3)),), 1, 0),
    "lstm_step": (lambda n, r: (r.standard_normal((n, 6)).astype(F32), r.standard_normal((n, 4)).astype(F32),
                                r.standard_normal((n, 4)).astype(F32), r.standard_normal((6, 16)).astype(F32),
                                r.standard_normal((4, 16)).astype(F32), r.standard_normal(16).astype(F32)), 1, 0),
    "first_negative": (lambda n, r: (np.concatenate([np.ones(n), -np.ones(2)]),), 1, 0),
    "inplace_mix": (lambda n, r: (r.standard_normal(n) * 3,), 1, 0),
    "int_ops": (lambda n, r: (r.integers(-20, 20, n),), 1, 0),
    "dict_out": (lambda n, r: (r.standard_normal((n, 3)),), 1, 0),
    "weak_scalars": (lambda n, r: (r.standard_normal(n).astype(F32),), 1, 0),
    "arange_ops": (lambda n, r: (r.standard_normal(n),), 1, 0),
    "stack_list": (lambda n, r: (r.standard_normal((3, n)),), 1, 0),
    "newton_sqrt": (lambda n, r: (r.random(n) * 10 + 1,), 1, 0),  # (a while loop on a traced test: a scan)
    "power_iter": (lambda n, r: (_sym(r.standard_normal((n, n))),), 1, 0),
    "jacobi_inplace": (lambda n, r: (r.standard_normal(n),), 1, 0),
    "drawdown": (lambda n, r: (r.standard_normal(n).cumsum(),), 1, 0),
    "moving_avg_conv": (lambda n, r: (r.standard_normal(n),), 1, 0),
    "moving_avg_cumsum": (lambda n, r: (r.standard_normal(n),), 1, 1),
    "bucketize": (lambda n, r: (r.random(n), np.linspace(0, 1, 5)), 1, 0),
    "interp": (lambda n, r: (r.random(n), np.linspace(0, 1, 7), r.random(7)), 1, 0),
    "upper_pairs": (lambda n, r: (r.standard_normal((n, 2)),), 1, 0),
    "smallest_k": (lambda n, r: (r.standard_normal(n),), 1, 0),
    "pair_sums": (lambda n, r: (r.standard_normal(2 * n),), 1, 0),
    "pos_sum": (lambda n, r: (r.standard_normal((n, 3)),), 1, 0),
    "close_check": (lambda n, r: (np.ones(n), np.ones(n) + (n % 3 == 0) * 1e-3), 2, 0),
    "mlp_train_step": (lambda n, r: (r.standard_normal((n, 4)), r.standard_normal((n, 2)),
                                     r.standard_normal((4, 8)) * .3, r.standard_normal((8, 2)) * .3), 1, 0),
    "causal_attn": (lambda n, r: tuple(r.standard_normal((n, 4)).astype(F32) for _ in range(3)), 1, 0),
    "conv2d_im2col": (lambda n, r: (r.standard_normal((n, n + 2)), r.standard_normal((3, 3))), 1, 0),
    "rmsnorm_rope": (lambda n, r: (r.standard_normal((n, 8)).astype(F32), r.random(8).astype(F32)), 1, 0),
    "hist_eq": (lambda n, r: (r.random((n, 5)),), 1, 0),
    # (loops over the length that write into an array they do not rebind, indexed by a traced element,
    # obs[t], a traced pivot: unrolled for the first two lengths, then a scan for every length)
    "viterbi": (lambda n, r: (np.log(r.random((3, 3))), np.log(r.random((3, 4))), r.integers(0, 4, n)), 3, 0),
    "gauss_elim": (lambda n, r: (r.standard_normal((n, n)) + n * np.eye(n), r.standard_normal(n)), 3, 0),
    "sieve": (lambda n, r: (np.zeros(n * 10),), 4, 4),
    "life": (lambda n, r: ((r.random((n, n)) > 0.6).astype(np.int64),), 1, 0),
    "bilinear": (lambda n, r: (r.random((6, 7)), r.random(n) * 5, r.random(n) * 6), 1, 0),
    "knn_predict": (lambda n, r: (r.standard_normal((n, 2)), r.integers(0, 3, n), r.standard_normal((4, 2))), 1, 0),
    "model_forward": (lambda n, r: (r.standard_normal((n, 4)),), 1, 0),
    "rows_to_list": (lambda n, r: (r.standard_normal((n, 3)), r.standard_normal(3)), 4, 0),  # (a list per size)
    "grow": (lambda n, r: (r.standard_normal(n),), 1, 0),
    "weighted": (lambda n, r: (r.standard_normal((n, 3)), r.random(n)), 1, 0),
    "grads": (lambda n, r: (r.standard_normal(n),), 1, 0),
    "crossk": (lambda n, r: (r.standard_normal(3), r.standard_normal(3)), 1, 0),
    "rep": (lambda n, r: (r.standard_normal(n), r.integers(0, 3, n)), 1, 1),
    "unravel": (lambda n, r: (r.standard_normal((n, 4)),), 1, 0),
    "fft_conv": (lambda n, r: (r.standard_normal(n), r.standard_normal(4)), 1, 0),
    "uniq": (lambda n, r: (r.integers(0, 4, n),), 4, 4),
    "select_piece": (lambda n, r: (r.standard_normal(n) * 2,), 1, 0),
    "ravel_multi": (lambda n, r: (r.integers(0, n, 5), r.integers(0, n, 5), n), 2, 2),
    "reshape_neg": (lambda n, r: (r.standard_normal((3, 2 * n)),), 1, 0),
    "lexsort2": (lambda n, r: (r.integers(0, 3, n), r.integers(0, 3, n)), 1, 0),
    "nan_stats": (lambda n, r: (r.standard_normal(n),), 1, 0),
    "percentile": (lambda n, r: (r.standard_normal(n),), 1, 1),
    "outer_loop_matrix": (lambda n, r: (np.zeros(n),), 1, 0),
    "batched_mm": (lambda n, r: (r.standard_normal((2, n, 3)), r.standard_normal((2, 3, 4))), 1, 1),
    "clip_none": (lambda n, r: (r.standard_normal(n),), 1, 0),
    "rounding": (lambda n, r: (r.standard_normal(n) * 3,), 1, 0),
    "uint8_img": (lambda n, r: (r.integers(0, 256, (n, 4)).astype(np.uint8),), 1, 0),
    "flat_rows": (lambda n, r: (r.standard_normal((n, 3, 2)),), 1, 1),
    "newaxis": (lambda n, r: (r.standard_normal(n), r.standard_normal(4)), 1, 0),
    "multi_axis": (lambda n, r: (r.standard_normal((n, 3, 4)),), 1, 0),
    "rev_cumsum": (lambda n, r: (r.standard_normal(n),), 1, 0),
    "sorted_desc": (lambda n, r: (r.standard_normal((n, 3)),), 1, 0),
    "named": (lambda n, r: (r.standard_normal(n),), 1, 0),  # (a namedtuple: it leaked traced values)
    "logsumexp": (lambda n, r: (r.standard_normal((n, 5)),), 1, 0),
    "scale_cols": (lambda n, r: (np.concatenate([r.standard_normal((n, 3)), np.ones((n, 1))], 1),), 1, 0),
    "running_stats": (lambda n, r: (r.standard_normal(n),), 1, 0),
    "where_nonzero": (lambda n, r: (r.standard_normal(n),), 1, 1),
    "piecewise_loop": (lambda n, r: (r.standard_normal(n) * 2,), 1, 0),  # (x ** 2 in a lifted loop)
    # (loops over the length carrying arrays: unrolled for the first two lengths, then a scan)
    "floyd": (lambda n, r: (r.random((n, n)) * 10,), 3, 0),
    "dijkstra": (lambda n, r: (r.random((n, n)) * 10,), 3, 0),
    "kalman": (lambda n, r: (r.standard_normal((n, 2)), np.array([[1.0, 1.0], [0.0, 1.0]]), np.eye(2),
                             np.eye(2) * 0.1, np.eye(2) * 0.5), 3, 0),
    "edit_rows": (lambda n, r: (r.integers(0, 3, n), r.integers(0, 3, n + 2)), 3, 0),  # (a lifted loop in a scan)
    "add_at_hist": (lambda n, r: (r.integers(0, 8, n), r.random(n)), 1, 0),
    "top_p": (lambda n, r: (r.standard_normal(n), 0.8), 1, 0),
    "windows": (lambda n, r: (r.standard_normal(n),), 1, 0),
    "xent_arange": (lambda n, r: (r.standard_normal((n, 5)), r.integers(0, 5, n)), 1, 0),
    "cummax": (lambda n, r: (r.standard_normal(n),), 1, 0),
    "kth": (lambda n, r: (r.standard_normal(n),), 1, 1),
    "padconv": (lambda n, r: (r.standard_normal((n, n + 1)),), 1, 0),
    "layernorm": (lambda n, r: (r.standard_normal((n, 8)).astype(F32), r.random(8).astype(F32),
                                r.random(8).astype(F32)), 1, 0),
    "einsum3": (lambda n, r: (r.standard_normal((n, 3)), r.standard_normal((3, 4)), r.standard_normal((4, 2))), 1, 0),
    "diff_cumsum": (lambda n, r: (r.standard_normal((n, 3)),), 1, 1),
    "sort_by_key": (lambda n, r: (r.integers(0, 5, n), r.standard_normal(n)), 1, 0),
    "batch_gather": (lambda n, r: (r.standard_normal((n, 6)), r.integers(0, 6, (n, 2))), 1, 0),
    "clip_out": (lambda n, r: (r.standard_normal(n) * 2,), 1, 0),
    "mandel": (lambda n, r: ((r.random((n, 4)) - 0.5) * 3 + 1j * (r.random((n, 4)) - 0.5) * 3, 10), 1, 0),
    "bubble": (lambda n, r: (r.standard_normal(n),), 1, 0),  # (nested loops, a swap: one lifted loop)
    "seg_sum": (lambda n, r: (r.standard_normal(n), r.integers(0, 4, n), 4), 1, 0),
    "argmax_rows_loop": (lambda n, r: (r.standard_normal((n, 3)),), 4, 0),  # (a list of ints per length)
    "normalize_cols_inplace": (lambda n, r: (r.standard_normal((n, 3)),), 1, 0),
    "attention_mask_pad": (lambda n, r: (r.standard_normal((n, 4)), r.standard_normal((n + 1, 4)),
                                         r.integers(1, n + 1, n)), 1, 0),
    "power_conv": (lambda n, r: (_sym(r.standard_normal((n, n))) + n * np.eye(n),), 1, 0),  # (a converged: break)
}


def _atol(x) -> float:
    """A few ulp of terms of magnitude ~1 where a sum cancels (float32's
    rotary embedding: x1 * c - x2 * s near 0)."""
    leaves = x.values() if isinstance(x, dict) else x if isinstance(x, (tuple, list)) else [x]
    return 1e-6 if any(np.asarray(v).dtype == np.float32 for v in leaves if not isinstance(v, (dict, tuple))) \
        else 1e-9


def _copy(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_unseen_program_runs_as_numpy_and_compiles(name, backend):
    make, most_compiles, most_eager = CASES[name]
    fn = P.Model(4).forward if name == "model_forward" else getattr(P, name)
    jf = jit(fn, backend=backend)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        warnings.simplefilter("ignore", RuntimeWarning)  # (numpy's own: log of 0, overflow in exp)
        for n in (5, 9, 17, 33):
            args = make(n, rng)
            want_args, got_args = _copy(args), _copy(args)
            want = fn(*want_args)
            got = jf(*got_args)
            assert type(got) is type(want)
            assert_like_numpy(got, want, ulps=64, atol=_atol(want))
            for g, w in zip(got_args, want_args):
                assert_like_numpy(g, w, ulps=64, atol=_atol(w))
    s = jf.stats()
    assert s["fallbacks"] == 0 and s["eager_calls"] == 0, jf.explain()
    assert s["compiles"] <= most_compiles and s["eager_nodes"] <= most_eager, jf.explain()

