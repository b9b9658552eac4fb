"""Whole models (bench/models: GPT-2, Llama) jitted vs plain numpy.

Every sequence length and every decode step gives numpy's logits (float32,
rtol 1e-4) on both back ends, and the Llama KV cache holds numpy's values.
GPT-2 and Llama (prefill and the decode loop) compile whole — no eager node,
no graph break, at most two compiles; ``test_compile_facts`` prints stats()
and explain()'s reasons (set SHAPEJIT_MODELS_FACTS=FILE to have them written there).
"""
import warnings

import numpy as np
import pytest

from bench.models import facts, format_facts
from bench.models import gpt2 as G
from bench.models import llama as L
from jit import JitWarning, jit
from shapes import config

LENGTHS = [1, 2, 7, 16, 33]
PROMPT, STEPS = 5, 6

pytestmark = pytest.mark.filterwarnings("ignore::jit.JitWarning")

_LLVM_RUNS: dict = {}  # the llvm runs of the tests below, for test_compile_facts (saves recompiling)


@pytest.fixture(scope="module")
def gpt2_params():
    return G.init_params(**G.SMALL)


@pytest.fixture(scope="module")
def llama_params():
    return L.init_params(**L.SMALL)


def assert_close(got, want):
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(want).max())))


def ids_of(T, vocab, seed, batch=None):
    shape = (T,) if batch is None else (batch, T)
    return np.random.default_rng(seed).integers(0, vocab, shape, dtype=np.int64)


# ------------------------------------------------------------ the numpy models themselves


@pytest.mark.parametrize("model", [G.gpt2, G.gpt2_pico])
def test_gpt2_numpy_is_causal(model, gpt2_params):
    ids = ids_of(12, G.SMALL["n_vocab"], 0)
    full = model(ids, gpt2_params, G.SMALL["n_head"])
    assert full.shape == (12, G.SMALL["n_vocab"]) and full.dtype == np.float32
    assert_close(model(ids[:5], gpt2_params, G.SMALL["n_head"]), full[:5])


def test_gpt2_variants_agree(gpt2_params):
    ids = ids_of(9, G.SMALL["n_vocab"], 1)
    assert_close(G.gpt2_pico(ids, gpt2_params, 4), G.gpt2(ids, gpt2_params, 4))


def test_llama_numpy_decode_equals_prefill(llama_params):
    """The KV-cache path gives the logits of a full prefill at every position."""
    ids = ids_of(PROMPT + STEPS, L.SMALL["vocab"], 2, batch=1)
    full = L.Llama(llama_params, L.SMALL).prefill(ids)
    m = L.Llama(llama_params, L.SMALL)
    assert_close(m.prefill(ids[:, :PROMPT]), full[:, :PROMPT])
    for s in range(PROMPT, PROMPT + STEPS):
        assert_close(m.decode_step(ids[:, s], s), full[:, s])


def test_torch_ports_agree(gpt2_params, llama_params):
    torch = pytest.importorskip("torch")
    from bench.models import torch_ref
    ids = ids_of(7, G.SMALL["n_vocab"], 3)
    got = torch_ref.gpt2(torch.from_numpy(ids), torch_ref.to_torch(gpt2_params), 4).numpy()
    np.testing.assert_allclose(got, G.gpt2(ids, gpt2_params, 4), rtol=1e-3, atol=1e-4)
    ids = ids_of(7, L.SMALL["vocab"], 4, batch=1)
    ref, t = L.Llama(llama_params, L.SMALL), torch_ref.Llama(llama_params, L.SMALL)
    np.testing.assert_allclose(t.prefill(ids).numpy(), ref.prefill(ids), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(t.decode_step(ids[:, 3], 7).numpy(), ref.decode_step(ids[:, 3], 7),
                               rtol=1e-3, atol=1e-4)


# ------------------------------------------------------------ jitted == numpy


def gpt2_sweep(model, params, backend):
    jf = jit(model, backend=backend)
    for T in LENGTHS:
        ids = ids_of(T, G.SMALL["n_vocab"], T)
        assert_close(jf(ids, params, G.SMALL["n_head"]), model(ids, params, G.SMALL["n_head"]))
    return jf


def llama_prefill_sweep(params, backend):
    ref, m = L.Llama(params, L.SMALL), L.Llama(params, L.SMALL, jit_options={"backend": backend})
    for T in LENGTHS:
        ids = ids_of(T, L.SMALL["vocab"], T, batch=1)
        assert_close(m.prefill(ids), ref.prefill(ids))
        for a, b in zip(m.cache_k + m.cache_v, ref.cache_k + ref.cache_v):
            assert_close(a, b)
    return m


def llama_decode(params, backend):
    """Greedy decoding: numpy picks the tokens; both models see the same ones."""
    ref, m = L.Llama(params, L.SMALL), L.Llama(params, L.SMALL, jit_options={"backend": backend})
    ids = ids_of(PROMPT, L.SMALL["vocab"], 5, batch=1)
    want = ref.prefill(ids)
    assert_close(m.prefill(ids), want)
    token = np.argmax(want[:, -1], axis=-1)
    for pos in range(PROMPT, PROMPT + STEPS):
        want = ref.decode_step(token, pos)
        assert_close(m.decode_step(token, pos), want)
        for a, b in zip(m.cache_k + m.cache_v, ref.cache_k + ref.cache_v):
            assert_close(a, b)
        token = np.argmax(want, axis=-1)
    return m


@pytest.mark.slow
@pytest.mark.parametrize("model", [G.gpt2, G.gpt2_pico])
def test_gpt2_lengths(model, gpt2_params, backend):
    jf = gpt2_sweep(model, gpt2_params, backend)
    assert jf.stats()["calls"] == len(LENGTHS)
    if backend == "llvm":
        _LLVM_RUNS[model.__name__] = jf


def test_llama_prefill_lengths(llama_params, backend):
    m = llama_prefill_sweep(llama_params, backend)
    assert m.forward.stats()["calls"] == len(LENGTHS)
    if backend == "llvm":
        _LLVM_RUNS["llama prefill"] = m.forward


def test_llama_decode_loop(llama_params, backend):
    m = llama_decode(llama_params, backend)
    assert m.forward.stats()["calls"] == 1 + STEPS
    if backend == "llvm":
        _LLVM_RUNS["llama decode"] = m.forward


def test_llama_inputs_untouched_by_a_failed_trace(llama_params):
    """The weights come out of a jitted run as they went in (a trace that writes
    into captured arrays and then falls back must not leave stray values)."""
    before = {k: v.copy() for k, v in llama_params["layers"][0].items()}
    llama_decode(llama_params, "llvm")
    for k, v in before.items():
        np.testing.assert_array_equal(llama_params["layers"][0][k], v)


# ------------------------------------------------------------ how much compiles


def _runs(gpt2_params, llama_params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        runs = {  # the llvm runs of the tests above when they ran in this session, else run here
            "gpt2": lambda: gpt2_sweep(G.gpt2, gpt2_params, "llvm"),
            "gpt2_pico": lambda: gpt2_sweep(G.gpt2_pico, gpt2_params, "llvm"),
            "llama prefill": lambda: llama_prefill_sweep(llama_params, "llvm").forward,
            "llama decode": lambda: llama_decode(llama_params, "llvm").forward,
        }
        return {k: _LLVM_RUNS.get(k) or run() for k, run in runs.items()}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "llama prefill", "llama decode"])
def test_models_compile_whole(name, gpt2_params, llama_params):
    """No eager node, no graph break, no fallback, and at most two compiles
    over the sequence lengths (length 1 is specialized) or over prefill and
    every decode step (start_pos becomes a symbol when it changes)."""
    jf = _runs(gpt2_params, llama_params)[name]
    s = jf.stats()
    assert s["eager_nodes"] == 0 and s["graph_breaks"] == 0, jf.explain()
    assert s["fallbacks"] == 0 and s["eager_calls"] == 0, jf.log
    assert s["compiles"] <= 2 and s["traces"] <= 2, jf.log


@pytest.mark.slow
def test_compile_facts(gpt2_params, llama_params, capsys):
    """Prints stats() and explain()'s reasons after the sweeps (llvm back end),
    gpt2_pico too: `np.arange(len(ids))` is the length, a symbol (len() of a
    traced array is its first dim), so it traces once for every length but
    1 (a key of its own), with no eager node."""
    jfs = _runs(gpt2_params, llama_params)
    found = {
        "gpt2 (reshape heads), lengths %s" % LENGTHS: facts(jfs["gpt2"]),
        "gpt2_pico (np.split heads), lengths %s" % LENGTHS: facts(jfs["gpt2_pico"]),
        "llama prefill, lengths %s" % LENGTHS: facts(jfs["llama prefill"]),
        "llama prefill %d + %d decode steps" % (PROMPT, STEPS): facts(jfs["llama decode"]),
    }
    text = "\n\n".join(format_facts(name, f) for name, f in found.items())
    with capsys.disabled():
        print("\n" + text)
    if config.get("SHAPEJIT_MODELS_FACTS"):
        with open(config.get("SHAPEJIT_MODELS_FACTS"), "w") as f:
            f.write(text + "\n")
    pico = jfs["gpt2_pico"].stats()
    assert pico["eager_nodes"] == 0 and pico["fallbacks"] == 0 and pico["traces"] == 2
