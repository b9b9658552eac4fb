"""Whole transformer models in plain numpy: a benchmark and a test of shapejit.

``gpt2`` (picoGPT-style functions over a nested dict of weights) and ``llama``
(a class holding its weights and a KV cache, decoded one token at a time)
are written the way numpy ports of these architectures are written; random
seeded weights, no downloads.  ``facts(jf)`` summarises what shapejit did
with a jitted model (its stats and the reasons ``explain()`` gives), and
``bench.models.run`` is the ``python -m bench --models`` section.
"""

from __future__ import annotations

import re
from collections import Counter

_HEADER = "eager nodes (run in numpy between traced segments):"


def facts(jf) -> dict:
    """stats() of a jitted function and the reasons explain() gives, deduplicated:
    ``fallbacks`` (why a signature runs eagerly), ``eager_nodes`` (numpy calls
    between compiled segments, with their source line) and ``recompiles``,
    each a list of (text, count), most frequent first."""
    text = jf.explain()
    fallbacks, nodes, recompiles = Counter(), Counter(), Counter()
    in_nodes = False
    for line in text.splitlines():
        s = line.strip()
        if s == _HEADER:
            in_nodes = True
            continue
        if in_nodes and line.startswith("      "):
            nodes[s] += 1
            continue
        in_nodes = False
        if s.startswith("runs eagerly:"):
            fallbacks[s[len("runs eagerly:"):].strip()] += 1
        elif s.startswith("recompile #"):
            reason = re.sub(r"== \d+", "== N", s.split(":", 1)[1].strip())
            recompiles[reason if len(reason) < 160 else reason[:150] + " ..."] += 1
    return {"stats": jf.stats(), "fallbacks": fallbacks.most_common(),
            "eager_nodes": nodes.most_common(), "recompiles": recompiles.most_common()}


def format_facts(name: str, f: dict, limit: int = 6) -> str:
    st = f["stats"]
    keys = ("calls", "traces", "compiles", "recompiles", "fallbacks", "eager_calls", "eager_nodes", "entries")
    lines = [f"{name}: " + ", ".join(f"{k}={st.get(k)}" for k in keys)]
    for label in ("fallbacks", "eager_nodes", "recompiles"):
        items = f[label]
        if items:
            lines.append(f"  {label} ({len(items)} distinct):")
            lines += [f"    {n}x {text}" for text, n in items[:limit]]
            if len(items) > limit:
                lines.append(f"    ... {len(items) - limit} more")
    return "\n".join(lines)
