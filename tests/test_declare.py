"""dims= and constraints=: read by shapejit's own grammar (jit/declare.py),
never evaluated; dim names never become identifiers of generated source."""
import builtins
import keyword

import numpy as np
import pytest

from jit import jit
from tests.conftest import assert_like_numpy

HOSTILE = [
    "__import__('os').system('touch {marker}')",
    "B <= 4096 + 0 * __import__('os').system('touch {marker}')",
    "B <= exec('open(\"{marker}\", \"w\")')",
    "B <= (lambda: __import__('os').system('touch {marker}'))()",
    "B <= [c for c in ().__class__.__base__.__subclasses__()][0]",
    "B <= 4096; import os",
    "B <= 1e3",
    "B <= 2**70",
    "B <= 4 and B >= 2",
    "B <= 'a'",
    "B <= B.__class__",
    "B",
    "",
    "B <= 99999999999999999999999",
    "B // 0 <= 1",
    "B <= " + "(" * 200 + "1" + ")" * 200,
    "B <= " + "1 + " * 400 + "1",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_constraints_are_rejected_and_nothing_runs(text, tmp_path):
    marker = tmp_path / "ran"
    with pytest.raises(ValueError, match="constraint"):
        jit(lambda x: x + 1, dims={"x": ("B",)}, constraints=[text.format(marker=marker)])
    assert not marker.exists()


@pytest.mark.parametrize("constraints, error", [
    (["B <= C"], "names 'C', which is not a dim named in dims="),
    ([42], "not a string"),
    (42, "constraints= must be a sequence"),
])
def test_bad_constraints_name_the_option(constraints, error):
    with pytest.raises(ValueError, match=error):
        jit(lambda x: x + 1, dims={"x": ("B",)}, constraints=constraints)


@pytest.mark.parametrize("dims, error", [
    ({"y": ("B",)}, "'y', which is not a parameter"),
    ({"x": "B"}, "must be a tuple"),
    ({"x": ("x y",)}, "ASCII identifier"),
    ({"x": ("_empty",)}, "does not begin with '_'"),
    ({"x": ("ñ",)}, "ASCII identifier"),
    ({"x": ("B" * 65,)}, "at most 64"),
    ({"x": (1.5,)}, "not a dim name"),
    ({"x": (-1,)}, ">= 0"),
    (["x"], "must be a dict"),
])
def test_bad_dims_are_rejected_when_jit_is_called(dims, error):
    with pytest.raises(ValueError, match=error):
        jit(lambda x: x + 1, dims=dims)


# the names generated guards and executables use, the names shapejit gives
# its own symbols, names that begin with its prefix, keywords, builtins
NAMES = ["lambda", "None", "import", "min", "np", "sh", "dims", "inputs", "check", "run", "v0", "s0", "s1", "u0",
         "trip", "d_s0", "B"]


@pytest.mark.parametrize("name", NAMES)
def test_any_identifier_is_a_dim_name(name, backend):
    def f(x, y):
        return (x[:, None] * y).sum(axis=0) + x.shape[0]

    jf = jit(f, dims={"x": (name,), "y": (name, None)}, constraints=[f"{name} <= 100", f"min({name}, 3) >= 2"],
             backend=backend)
    for n in (3, 4, 7):
        x, y = np.arange(n, dtype=np.float64), np.ones((n, n + 1))
        assert_like_numpy(jf(x, y), f(x, y))
    assert jf.stats()["traces"] == 1
    assert f"{name} <= 100" in jf.explain()
    with pytest.raises(ValueError, match=f"constraint '{name} <= 100' is violated"):
        jf(np.ones(101), np.ones((101, 3)))
    assert_like_numpy(jf(np.ones(5), np.ones((5, 2))), f(np.ones(5), np.ones((5, 2))))  # still usable


def test_every_keyword_and_builtin_is_a_dim_name():
    names = sorted(set(keyword.kwlist) | {n for n in dir(builtins) if n.isidentifier() and n.isascii()
                                          and not n.startswith("_")})
    for name in names:
        jf = jit(lambda x: x * 2.0 + x.shape[0], dims={"x": (name,)}, constraints=[f"{name} >= 2"],
                 backend="reference")
        for n in (3, 5):
            assert_like_numpy(jf(np.ones(n)), np.ones(n) * 2.0 + n)
        assert jf.stats()["traces"] == 1, name


def test_a_named_dim_is_never_an_automatic_one():
    """x: ('s1', None) once made both dims the one symbol s1 (the second dim's
    automatic name): x.shape[0] and x.shape[1] were taken as equal."""
    f = jit(lambda x: x.sum(axis=0), dims={"x": ("s1", None)})
    for shape in [(3, 4), (5, 7), (2, 9)]:
        x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
        assert_like_numpy(f(x), x.sum(axis=0))
    assert f.stats()["traces"] == 1


def test_constraint_grammar():
    def f(x, y):
        return x[:, :1] + y

    jf = jit(f, dims={"x": ("B", "K"), "y": ("B", 1)},
             constraints=["1 <= B <= 64", "K % 2 == 0", "max(B, K) - -1 < 10 * (K // 2 + 7)", "B != 13"])
    for b, k in [(2, 4), (5, 8), (64, 2)]:
        x, y = np.ones((b, k)), np.ones((b, 1))
        assert_like_numpy(jf(x, y), f(x, y))
    assert jf.stats()["traces"] == 1
    for b, k, broken in [(65, 4, "1 <= B <= 64"), (3, 5, "K % 2 == 0"), (13, 4, "B != 13")]:
        with pytest.raises(ValueError, match=f"constraint '{broken}'"):
            jf(np.ones((b, k)), np.ones((b, 1)))


def test_a_constraint_on_a_dim_of_size_one_is_decided():
    """A named dim of 0 or 1 is no symbol (0 and 1 are in the key): its
    constraint holds or not for that value."""
    jf = jit(lambda x: x * 2, dims={"x": ("B", "N")}, constraints=["B <= 4", "N >= 1"])
    assert_like_numpy(jf(np.ones((1, 3))), np.ones((1, 3)) * 2)
    assert_like_numpy(jf(np.ones((3, 1))), np.ones((3, 1)) * 2)
    jf = jit(lambda x: x * 2, dims={"x": ("B",)}, constraints=["B >= 2"])
    with pytest.raises(ValueError, match="'B >= 2' is violated: B=1"):
        jf(np.ones(1))
