"""The verifier: SSA, definition before use, known ops, dtypes by the op's
rule.  Runs after every pass when SHAPEJIT_CHECKS=1, and always in tests."""
from __future__ import annotations

from shapes import config
from shapes.ir import Graph
from shapes.ops import OPAQUE, OPS


class VerifyError(AssertionError):
    pass


def checks_enabled() -> bool:
    return config.get("SHAPEJIT_CHECKS")


def verify(g: Graph) -> Graph:
    defined: set[int] = set()
    for v in g.inputs:
        if v.id in defined:
            raise VerifyError(f"input %{v.id} defined twice")
        defined.add(v.id)
    for n in g.nodes:
        op = OPS.get(n.op)
        if op is None:
            raise VerifyError(f"unknown op {n.op!r}")
        for v in n.inputs:
            if v.id not in defined:
                raise VerifyError(f"{n.op}: operand id {v.id} used before its definition")
        for o in n.outputs:
            if o.id in defined:
                raise VerifyError(f"{n.op}: value id {o.id} defined twice (not SSA)")
            defined.add(o.id)
        if op.category != OPAQUE:
            want = op.dtype_rule(n.inputs, n.attrs)
            got = [o.dtype for o in n.outputs]
            if want != got:
                raise VerifyError(f"{n.op}: dtypes {got} but the rule gives {want}")
    for v in g.outputs:
        if v.id not in defined:
            raise VerifyError(f"output id {v.id} is never defined")
    return g
