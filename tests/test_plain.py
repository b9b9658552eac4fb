"""The cache's plain-data codec (runtime/plain.py): every value a saved
trace holds comes back equal and of the same type; anything else is refused
when saving; a record that is not ours never decodes into anything but the
closed set of types, and nothing in it is called."""
import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from runtime import plain


@dataclasses.dataclass(frozen=True)
class Pair:
    a: object
    b: object = None


def same(x, y) -> bool:
    if type(x) is not type(y):
        return False
    if isinstance(x, np.ndarray):
        return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
    if isinstance(x, float):
        return x.hex() == y.hex() or (math.isnan(x) and math.isnan(y))
    if isinstance(x, np.generic):
        return x.dtype == y.dtype and x.tobytes() == y.tobytes()
    if isinstance(x, (list, tuple)):
        return len(x) == len(y) and all(same(a, b) for a, b in zip(x, y))
    if isinstance(x, dict):
        return list(x) == list(y) and all(same(x[k], y[k]) for k in x)
    if isinstance(x, Pair):
        return same(x.a, y.a) and same(x.b, y.b)
    return x == y


VALUES = [
    None, True, False, 0, -1, 2**70, "", "s\u00e9", b"\x00\xff", 1.5, -0.0, float("nan"), float("inf"),
    complex(1, -0.0), (), [], {}, (1, [2, (3,)]), {1: "a", "b": (2,), (3, 4): None},
    slice(None), slice(1, -1, 2), Ellipsis, np.dtype("float32"), np.dtype(">i2"), np.dtype("c16"),
    np.float32(1.25), np.int8(-3), np.bool_(True), np.float64("nan"),
    np.arange(6, dtype=np.float32).reshape(2, 3), np.zeros((0, 4)), np.array(3.5), np.arange(10)[::3],
    np.ones((2, 2), dtype=np.int64).T, int, float, tuple, dict, type(None), np.float32, np.int64,
    np.sort, np.add, np.linalg.norm, np.ndarray.sum, np.fft.rfft, Pair(1, Pair((2.5,), np.float16(1))),
]


@pytest.mark.parametrize("value", VALUES, ids=[type(v).__name__ for v in VALUES])
def test_round_trip(value):
    back = plain.loads(plain.dumps(value, (Pair,)), (Pair,))
    assert same(value, back)
    if callable(value):
        assert back is value


scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=8),
                    st.binary(max_size=8), st.complex_numbers(allow_nan=False))
trees = st.recursive(scalars, lambda c: st.one_of(st.lists(c, max_size=4), st.tuples(c, c),
                                                  st.dictionaries(st.one_of(st.integers(), st.text(max_size=4)), c,
                                                                  max_size=3)), max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(trees)
def test_round_trip_of_nested_plain_values(value):
    assert same(value, plain.loads(plain.dumps(value)))


class Opaque:
    pass


@pytest.mark.parametrize("value", [
    lambda x: x, Opaque(), Opaque, np.array([object()], dtype=object), np.zeros(2, dtype=[("a", "f4")]),
    print, eval, __import__("os").system, {1, 2}, Pair(1),  # (Pair not among the classes named)
    np.random.default_rng(0), np.ma.masked_array([1.0]),
], ids=lambda v: type(v).__name__)
def test_values_with_no_plain_form_are_refused(value):
    with pytest.raises(plain.Unencodable):
        plain.dumps(value)


@pytest.mark.parametrize("record", [
    b"", b"not json", b"[]", b'["Z"]', b'["F", "__import__"]', b'["F", "os.system"]', b'["F", "_core.umath"]',
    b'["F", "testing.sys.modules"]', b'["F", "testing.os.system"]', b'["F", "lib.npyio.os.system"]',
    b'["F", "ctypeslib.ctypes.CDLL"]', b'["F", "ma.sort"]', b'["F", "float64"]', b'["T", "eval"]', b'["T", "np:O"]', b'["y", "O"]',
    b'["y", "[(\'a\', \'<f4\')]"]', b'["D", "Pair", {"a": 1}]', b'["D", "Opaque", {}]', b'["D", "Pair", {"a": 1, "b": 2, "c": 3}]',
    b'["a", "<f8", [2], "AAAA"]', b'["a", "<f8", [-1], ""]', b'["g", "<f4", "AA=="]', b'["b", "!!"]',
    b'["f", "0x1.8p+0junk"]', b'{"a": 1}', b"[" * 100000 + b"]" * 100000, b'["d", [1]]',
], ids=lambda r: r[:30].decode(errors="replace"))
def test_records_that_are_not_ours_do_not_decode(record):
    with pytest.raises(plain.Undecodable):
        plain.loads(record, (Pair,))
