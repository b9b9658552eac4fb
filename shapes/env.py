"""The shape environment: dim symbols with hints and ranges, replacements from
unification, and the guards a trace relied on.

Policy (one place): input dims of size 0 and 1 are specialized by the caller
(they are part of the signature key); every other dynamic dim becomes a symbol
with range [2, inf).  Data-dependent symbols (sizes of eager-op outputs) have
range [0, inf) and are bound at run time from the actual array.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy


@dataclass
class SymInfo:
    symbol: sympy.Symbol
    hint: int
    lo: int
    hi: int | None
    source: str  # "x.shape[0]" or "np.unique output dim 0"
    data_dependent: bool = False


@dataclass(frozen=True)
class Guard:
    cond: sympy.Basic  # a relational over input dim symbols
    reason: str


@dataclass
class ShapeEnv:
    symbols: dict[sympy.Symbol, SymInfo] = field(default_factory=dict)
    replacements: dict[sympy.Symbol, sympy.Expr] = field(default_factory=dict)
    guards: list[Guard] = field(default_factory=list)
    dd_guards: list[Guard] = field(default_factory=list)  # decisions on data-dependent sizes
    # data-dependent symbols that were unified: checked right after binding
    deferred: list[tuple[sympy.Symbol, sympy.Expr]] = field(default_factory=list)

    # ------------------------------------------------------------ symbols
    def new_symbol(self, hint: int, source: str, *, lo: int | None = 2, hi: int | None = None,
                   data_dependent: bool = False, name: str | None = None) -> sympy.Symbol:
        if name is None:
            prefix = "u" if data_dependent else "s"
            name = f"{prefix}{sum(1 for i in self.symbols.values() if i.data_dependent == data_dependent)}"
        # (lo None: an int argument, automatic dynamic: no sign assumption, its sign is a guard)
        sym = sympy.Symbol(name, integer=True, nonnegative=True) if lo is not None else \
            sympy.Symbol(name, integer=True)
        self.symbols[sym] = SymInfo(sym, int(hint), lo, hi, source, data_dependent)
        return sym

    def constrain(self, sym: sympy.Symbol, lo: int | None = None, hi: int | None = None) -> None:
        info = self.symbols[sym]
        if lo is not None:
            info.lo = lo if info.lo is None else max(info.lo, lo)
        if hi is not None:
            info.hi = hi if info.hi is None else min(info.hi, hi)

    # ------------------------------------------------------- simplification
    def simplify(self, e):
        if not isinstance(e, sympy.Basic):
            return int(e) if not isinstance(e, bool) else e
        if self.replacements:
            e = e.xreplace(self.replacements)
            # replacements may chain (s2 -> s1, s1 -> 768)
            for _ in range(4):
                if not isinstance(e, sympy.Basic):
                    break
                e2 = e.xreplace(self.replacements)
                if e2 == e:
                    break
                e = e2
        if not isinstance(e, sympy.Basic):
            return int(e)
        e = sympy.expand(e) if not e.has(sympy.floor, sympy.ceiling, sympy.Mod, sympy.Max, sympy.Min) else e
        if e.is_Integer:
            return int(e)
        return e

    def simplify_shape(self, shape) -> tuple:
        return tuple(self.simplify(d) for d in shape)

    def hint(self, e) -> int:
        if not isinstance(e, sympy.Basic):
            return int(e)
        e = self.simplify(e)
        if not isinstance(e, sympy.Basic):
            return int(e)
        return int(e.xreplace({s: sympy.Integer(self.symbols[s].hint) for s in e.free_symbols}))

    def is_data_dependent(self, e) -> bool:
        return isinstance(e, sympy.Basic) and any(
            self.symbols[s].data_dependent for s in self.simplify(e).free_symbols
            if isinstance(self.simplify(e), sympy.Basic))

    # ------------------------------------------------------------- deciding
    def _static_truth(self, cond) -> bool | None:
        """Try to prove or refute `cond` from the symbol ranges alone."""
        if cond in (sympy.true, True):
            return True
        if cond in (sympy.false, False):
            return False
        if not isinstance(cond, sympy.core.relational.Relational):
            return None
        diff = sympy.expand(cond.lhs - cond.rhs)
        if diff.has(sympy.floor, sympy.ceiling, sympy.Mod, sympy.Max, sympy.Min):
            return None
        # s = lo + t with t >= 0: a polynomial in t with nonnegative
        # coefficients is nonnegative for every allowed value.
        shift = {}
        if any(self.symbols[s].lo is None for s in diff.free_symbols):
            return None
        for s in diff.free_symbols:
            t = sympy.Symbol(f"_t_{s}", integer=True, nonnegative=True)
            shift[s] = self.symbols[s].lo + t
        d = sympy.expand(diff.xreplace(shift))
        lo_nonneg, lo_pos = d.is_nonnegative, d.is_positive
        hi_nonpos, hi_neg = (-d).is_nonnegative, (-d).is_positive
        op = cond.rel_op
        if op == ">=":
            return True if lo_nonneg else (False if hi_neg else None)
        if op == ">":
            return True if lo_pos else (False if hi_nonpos else None)
        if op == "<=":
            return True if hi_nonpos else (False if lo_pos else None)
        if op == "<":
            return True if hi_neg else (False if lo_nonneg else None)
        if op == "==":
            if d == 0:
                return True
            return False if (lo_pos or hi_neg) else None
        if op == "!=":
            if d == 0:
                return False
            return True if (lo_pos or hi_neg) else None
        return None

    def decide(self, cond, reason: str) -> bool:
        """The truth of `cond` for this trace: proved from ranges, or taken
        from the hints and recorded as a guard."""
        cond = sympy.sympify(cond)
        if isinstance(cond, sympy.core.relational.Relational):
            cond = cond.func(self.simplify(cond.lhs), self.simplify(cond.rhs))
        if cond in (sympy.true, sympy.false):
            return bool(cond)
        static = self._static_truth(cond)
        if static is not None:
            return static
        value = bool(cond.xreplace({s: sympy.Integer(self.symbols[s].hint) for s in cond.free_symbols}))
        guard = cond if value else _negate(cond)
        if any(self.symbols[s].data_dependent for s in cond.free_symbols):
            # a size an eager op makes: checked right after the op runs (an unbacked
            # symbol's runtime assert); a call that fails it runs in numpy
            self.dd_guards.append(Guard(guard, reason))
        else:
            self.guards.append(Guard(guard, reason))
        return value

    def unify(self, a, b, reason: str) -> None:
        """Make two dims equal (broadcasting two non-1 dims, matmul's inner
        dims): a replacement when one side is a bare symbol, else a guard."""
        a, b = self.simplify(a), self.simplify(b)
        if a == b:
            return
        if self.hint(a) != self.hint(b):
            raise ValueError(f"cannot unify {a} and {b}: {reason}")
        # a bare symbol is replaced only by an expression that does not contain it
        syms = [x for x in (a, b) if isinstance(x, sympy.Symbol)
                and x not in getattr(b if x == a else a, "free_symbols", ())]
        # Prefer replacing a data-dependent symbol (checked when bound), then
        # the newer input symbol by the older one or by a constant.
        dd = [x for x in syms if self.symbols[x].data_dependent]
        if dd:
            order = list(self.symbols)
            u = max(dd, key=order.index)  # the later one: the other is bound first
            other = b if u == a else a
            self.replacements[u] = other
            self.deferred.append((u, other))
            return
        if syms:
            order = list(self.symbols)
            target = max(syms, key=order.index)
            other = b if target == a else a
            if isinstance(other, int):
                lo, hi = self.symbols[target].lo, self.symbols[target].hi
                if (lo is not None and other < lo) or (hi is not None and other > hi):
                    raise ValueError(f"{target} = {other} is outside its range: {reason}")
            self.replacements[target] = other
            # (unevaluated: equal hints, different expressions, so sympy's
            # evaluation, milliseconds of assumptions, could not decide it)
            self.guards.append(Guard(sympy.Eq(target, other, evaluate=False), reason))
            return
        solved = self._solve_for_symbol(a - b)
        if solved is not None:  # s1 - 2*s3 == s3: s1 -> 3*s3
            target, other = solved
            self.replacements[target] = other
            self.guards.append(Guard(sympy.Eq(target, other, evaluate=False), reason))
            return
        self.decide(sympy.Eq(a, b), reason)

    def _solve_for_symbol(self, diff):
        """(s, e) with diff == 0 <=> s == e, e an integer polynomial in the
        other symbols: diff is linear in s with coefficient +-1.  The newest
        such input symbol is chosen; None when there is none."""
        diff = sympy.expand(diff)
        if not isinstance(diff, sympy.Basic) or diff.has(sympy.floor, sympy.ceiling, sympy.Mod, sympy.Max,
                                                         sympy.Min):
            return None
        order = list(self.symbols)
        for s in sorted(diff.free_symbols, key=order.index, reverse=True):
            if self.symbols[s].data_dependent:
                continue
            c = diff.coeff(s)
            if c not in (1, -1) or (diff - c * s).has(s):
                continue
            return s, sympy.expand(-(diff - c * s) / c)
        return None

    # ---------------------------------------------------------------- ranges
    def range_of(self, sym: sympy.Symbol) -> tuple[int | None, int | None]:
        info = self.symbols[sym]
        return info.lo, info.hi


def _negate(cond):
    flip = {"==": sympy.Ne, "!=": sympy.Eq, "<": sympy.Ge, "<=": sympy.Gt, ">": sympy.Le, ">=": sympy.Lt}
    if isinstance(cond, sympy.core.relational.Relational):
        return flip[cond.rel_op](cond.lhs, cond.rhs)
    return sympy.Not(cond)
