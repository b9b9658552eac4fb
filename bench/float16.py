"""python -m bench.float16 [--rounds 7] [--rows 128,1024,4096]: the
memory-bound workloads of `python -m bench` (gelu_bias, layernorm, softmax,
width 768) on float16 arrays, jitted once for every row count, against numpy
(whose float16 loops convert each element to float32 and back) and, when
installed, torch eager on the same float16 tensors; calls interleaved in
turns (bench.harness.in_turns), medians over rounds.  Prints each peer's
time and numpy's time over it (above 1: faster than numpy), after checking
shapejit's output against numpy's (float16, to a few ulp of float16)."""
from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

from bench import harness
from bench import workloads as W
from bench.report import cpu_description
from jit import jit

WIDTH = 768
PROGRAMS = {
    "gelu_bias": (W.gelu_bias, lambda rng, t: (rng.standard_normal((t, WIDTH)), rng.standard_normal(WIDTH))),
    "layernorm": (W.layernorm, lambda rng, t: (rng.standard_normal((t, WIDTH)), rng.standard_normal(WIDTH),
                                               rng.standard_normal(WIDTH))),
    "softmax": (W.softmax, lambda rng, t: (rng.standard_normal((t, WIDTH)),)),
}


def _torch():
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(os.cpu_count() or 1)
    return torch


def _torch_fn(torch, name):
    tf = torch.nn.functional
    if name == "gelu_bias":
        return lambda x, b: tf.gelu(x + b, approximate="tanh")
    if name == "layernorm":
        return lambda x, g, b: tf.layer_norm(x, (x.shape[-1],), g, b, 1e-5)
    return lambda x: torch.softmax(x, dim=-1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--rows", default="128,1024,4096")
    a = ap.parse_args(argv)
    os.environ.setdefault("SHAPEJIT_CACHE_DIR", tempfile.mkdtemp(prefix="sj_float16_"))
    torch = _torch()
    print(f"{cpu_description()}; float16, width {WIDTH}; numpy's time over each peer's (above 1: faster)")
    print("| workload | rows | numpy | shapejit | " + ("torch |" if torch else ""))
    print("|---|--:|--:|--:|" + ("--:|" if torch else ""))
    for name, (fn, make) in PROGRAMS.items():
        jf = jit(fn)
        for t in (int(r) for r in a.rows.split(",")):
            args = tuple(x.astype(np.float16) for x in make(np.random.default_rng(t), t))
            got, want = jf(*args), fn(*args)
            jf(*args)  # (the first call's result came from the trace: the compiled one is checked too)
            np.testing.assert_allclose(jf(*args).astype(np.float64), want.astype(np.float64), rtol=1e-2, atol=1e-2)
            assert got.dtype == want.dtype == np.float16
            calls = [lambda: fn(*args), lambda: jf(*args)]
            if torch:
                targs = tuple(torch.from_numpy(x) for x in args)
                tfn = _torch_fn(torch, name)
                calls.append(lambda: tfn(*targs))
            times = harness.in_turns(calls, a.rounds)
            row = f"| {name} | {t} | {times[0] * 1e3:.3f} ms | {times[1] * 1e3:.3f} ms ({times[0] / times[1]:.1f}x) |"
            if torch:
                row += f" {times[2] * 1e3:.3f} ms ({times[0] / times[2]:.1f}x) |"
            print(row)
        s = jf.stats()
        assert s["compiles"] == 1 and s["eager_nodes"] == 0, jf.explain()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
