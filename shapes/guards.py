"""Guards: what a trace assumed about the input dims, compiled once into one
Python function that checks them and binds the dim symbols.

The check takes the tuple of input shapes and returns the tuple of values of
the free symbols (in `GuardSet.symbols` order), or None when a guard fails.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy

from shapes.env import ShapeEnv
from shapes.pyexpr import ident, to_python


@dataclass(frozen=True)
class InputDim:
    arg: int   # index among the array inputs
    axis: int
    symbol: sympy.Symbol
    source: str  # "x.shape[0]"


@dataclass(frozen=True)
class Check:
    code: str     # a Python boolean expression over the local dim names
    text: str     # readable: "s1 == 768"
    reason: str   # where it came from


@dataclass(frozen=True)
class GuardState:
    """A GuardSet as plain data (a saved trace's, jit/persist.py)."""
    symbols: tuple     # the local names the check binds, in GuardSet.symbols order
    checks: tuple      # (code, text, reason) of each Check
    bind_lines: tuple


class GuardSet:
    def __init__(self, env: ShapeEnv, dims: list[InputDim]):
        self.symbols: list[sympy.Symbol] = []  # free symbols, bound from inputs
        self.checks: list[Check] = []
        bind_lines: list[str] = []
        reasons = {}
        for g in env.guards:
            if isinstance(g.cond, sympy.Eq) and isinstance(g.cond.lhs, sympy.Symbol):
                reasons.setdefault(g.cond.lhs, g.reason)
        local = {}  # symbol -> local variable name
        for d in dims:
            expr = env.simplify(d.symbol)
            ref = f"sh[{d.arg}][{d.axis}]"
            if isinstance(expr, sympy.Symbol) and expr not in local:
                name = ident(expr)
                local[expr] = name
                self.symbols.append(expr)
                bind_lines.append(f"{name} = {ref}")
                lo, hi = env.range_of(expr)
                why = env.symbols[expr].range_reason or f"declared range of {d.source}"
                # what the key guarantees: a dim is >= 2 (0 and 1 are in the key); an int argument, nothing
                floor = 2 if expr.is_nonnegative else None
                if lo is not None and (floor is None or lo > floor):
                    self.checks.append(Check(f"{name} >= {lo}", f"{expr} >= {lo}", why))
                if hi is not None:
                    self.checks.append(Check(f"{name} <= {hi}", f"{expr} <= {hi}", why))
                continue
            self.checks.append(Check(
                f"{ref} == {to_python(expr)}", f"{d.source} == {expr}",
                reasons.get(d.symbol, "specialized")))
        done = set()  # (a guard an unrolled loop decides at every trip: checked, and printed, once)
        for g in env.guards:
            cond = g.cond
            if isinstance(cond, sympy.core.relational.Relational):
                key = (cond.func, env.simplify(cond.lhs), env.simplify(cond.rhs))
                if key in done:
                    continue
                done.add(key)
                cond = cond.func(key[1], key[2])
            if cond in (sympy.true, True):
                continue
            missing = cond.free_symbols - set(local)
            if missing:
                raise AssertionError(f"guard {cond} uses unbound symbols {missing}")
            self.checks.append(Check(to_python(cond), str(cond), g.reason))
        # drop duplicates, keep order
        seen, uniq = set(), []
        for c in self.checks:
            if c.code not in seen:
                seen.add(c.code)
                uniq.append(c)
        self.checks = uniq
        self.bind_lines = bind_lines
        self.source = self._source()
        self._compile()

    def _compile(self) -> None:
        ns: dict = {}
        exec(compile(self.source, "<shapejit guard>", "exec"), ns)
        self.check = ns["check"]
        self._each = [eval(compile(f"lambda sh: ({_wrap(self.bind_lines)}{c.code})", "<guard>", "eval"))
                      for c in self.checks]

    # Saved with a trace (jit/persist.py): the text is kept as plain data, the
    # functions are compiled again when loaded (no sympy: symbols by name).
    def state(self) -> "GuardState":
        return GuardState(tuple(_name(s) for s in self.symbols), tuple((c.code, c.text, c.reason) for c in self.checks),
                          tuple(self.bind_lines))

    @classmethod
    def restore(cls, st: "GuardState") -> "GuardSet":
        self = cls.__new__(cls)
        self.symbols = list(st.symbols)
        self.checks = [Check(*c) for c in st.checks]
        self.bind_lines = list(st.bind_lines)
        self.source = self._source()
        self._compile()
        return self

    def _source(self) -> str:
        body = ["def check(sh):"]
        body += ["    " + line for line in self.bind_lines]
        if self.checks:
            body.append("    if not (" + " and ".join(f"({c.code})" for c in self.checks) + "):")
            body.append("        return None")
        body.append("    return (" + "".join(f"{_name(s)}, " for s in self.symbols) + ")")
        return "\n".join(body) + "\n"

    def failure(self, shapes) -> str | None:
        """Why these shapes fail: the first guard that does not hold."""
        for c, fn in zip(self.checks, self._each):
            try:
                ok = fn(shapes)
            except Exception:  # noqa: BLE001 - a malformed shape fails the guard
                ok = False
            if not ok:
                return f"guard failed: {c.text} ({c.reason})"
        return None

    def describe(self) -> list[str]:
        return [f"{c.text}    # {c.reason}" for c in self.checks]


def _name(s) -> str:
    return s if isinstance(s, str) else ident(s)


def _wrap(bind_lines: list[str]) -> str:
    # binding inside a lambda: walrus assignments in a tuple, which is true whatever they bind (the comma
    # after the last: one binding alone was a parenthesized value, false where it bound 0)
    if not bind_lines:
        return ""
    return "(" + ", ".join(f"({ln.replace(' = ', ' := ', 1)})" for ln in bind_lines) + ",) and "
