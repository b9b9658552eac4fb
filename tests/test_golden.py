"""Golden-text tests of the passes and the plan: for each program below,
the whole printed IR as traced, after every pass of the pipeline, and the
plan's printout (clusters, products, refusals), compared with
tests/golden/<name>.txt.  A change that moves the IR shows as a diff of
whole texts; when it is meant, rewrite the expectations with

    SHAPEJIT_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py

and read the diff of tests/golden/ before committing it."""
import difflib
import os
from pathlib import Path

import numpy as np
import pytest

from clustering import partition
from clustering.passes import PIPELINE, verify
from jit import jit
from shapes.ir import format_graph

GOLDEN = Path(__file__).resolve().parent / "golden"
F32 = np.float32


def _gelu(y):
    return 0.5 * y * (1.0 + np.tanh(0.7978845608 * (y + 0.044715 * y ** 3)))


def linear_gelu(x, w, b):
    return _gelu(x @ w + b)


def layernorm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * g + b


def causal_softmax(s):
    t = s.shape[-1]
    s = np.where(np.tri(t, dtype=bool), s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def column_stats(x, w):
    return (np.exp(x) * w).sum(0), x.std(axis=0)


def smooth_in_place(x):
    x[1:-1] = 0.5 * (x[:-2] + x[2:])
    x *= 2.0


def embed(table, ids, scale):
    return table[ids] * scale


def row_dots(a, b):
    return (a * b).sum(-1) + 1.0


def _rng():
    return np.random.default_rng(0)


PROGRAMS = {
    "linear_gelu": (linear_gelu, lambda: (np.ones((4, 8), F32), np.ones((8, 16), F32), np.ones(16, F32))),
    "layernorm": (layernorm, lambda: (np.ones((4, 16), F32), np.ones(16, F32), np.zeros(16, F32))),
    "causal_softmax": (causal_softmax, lambda: (np.ones((2, 5, 5), F32),)),
    "column_stats": (column_stats, lambda: (np.ones((6, 40), F32), np.full(40, 0.5, F32))),
    "smooth_in_place": (smooth_in_place, lambda: (np.arange(10.0),)),
    "embed": (embed, lambda: (np.ones((50, 8), F32), np.array([3, 1, 4, 1], np.int64), F32(2.0))),
    "row_dots": (row_dots, lambda: (np.ones((3, 7)), np.ones((3, 7)))),
}


def printed(fn, args) -> str:
    """The program's IR as traced, after each pass that changes it, and its plan."""
    jf = jit(fn, backend="reference")
    jf(*args)
    (state,) = jf._keys.values()
    g = state.entries[0].trace.graph
    text = format_graph(g)
    parts = ["# traced", text]
    for p in PIPELINE:
        g = p(g)
        verify(g)
        before, text = text, format_graph(g)
        parts += [f"# after {p.__name__}" + (": unchanged" if text == before else ""), *([text] * (text != before))]
    parts += ["# plan", partition(g).describe()]
    return "\n".join(parts) + "\n"


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_printed_ir_and_plan(name):
    fn, make = PROGRAMS[name]
    text = printed(fn, make())
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("SHAPEJIT_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"no {path.relative_to(GOLDEN.parent.parent)}: write it with SHAPEJIT_UPDATE_GOLDEN=1"
    want = path.read_text()
    if text != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True),
                                            f"golden/{name}.txt", "now"))
        pytest.fail(f"{name}'s printed IR or plan changed (SHAPEJIT_UPDATE_GOLDEN=1 rewrites it):\n{diff}")


def test_a_changed_program_fails_with_a_diff(tmp_path, monkeypatch):
    """The comparison is of whole texts: one node more is a failure."""
    monkeypatch.delenv("SHAPEJIT_UPDATE_GOLDEN", raising=False)
    monkeypatch.setattr(f"{__name__}.GOLDEN", tmp_path)
    (tmp_path / "row_dots.txt").write_text(printed(row_dots, PROGRAMS["row_dots"][1]()))
    monkeypatch.setitem(PROGRAMS, "row_dots", (lambda a, b: (a * b).sum(-1) + 2.0, PROGRAMS["row_dots"][1]))
    with pytest.raises(pytest.fail.Exception, match=r"(?s)changed.*value=1\.0.*value=2\.0"):
        test_printed_ir_and_plan("row_dots")
