"""The shape environment: dim symbols with hints and ranges, replacements from
unification, and the guards a trace relied on.

Policy (one place: SYMBOLIC_FROM): input dims of size 0 and 1 are specialized
by the caller (they are part of the signature key, jit/signature.py, and
traced as numbers, jit/trace.py); every other dynamic dim becomes a symbol
with range [2, inf).  Data-dependent symbols (sizes of eager-op outputs) have
range [0, inf) and are bound at run time from the actual array.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy
# (sympy's Add.flatten imports sympy.tensor.tensor, and with it sympy.combinatorics, the first time it runs: 70-100
# ms the first jitted call of a process paid, python -m bench's cold first call; imported with the rest of sympy)
import sympy.assumptions.wrapper  # noqa: F401 - (and this one, a symbol's first assumption asked)
import sympy.tensor.tensor  # noqa: F401


# the least input dim that becomes a symbol: smaller ones (0, 1) are keyed and traced as numbers
SYMBOLIC_FROM = 2


@dataclass
class SymInfo:
    symbol: sympy.Symbol
    hint: int
    lo: int
    hi: int | None
    source: str  # "x.shape[0]" or "np.unique output dim 0"
    data_dependent: bool = False
    range_reason: str = ""  # why lo/hi are narrower than the key or the declaration made them


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
    reserved: frozenset = frozenset()  # the names dims= gives: no generated name takes one
    # simplify's results for expressions, valid while the replacements are as
    # many as `_simplified_at` (they are only ever added: each a symbol new to them)
    _simplified: dict = field(default_factory=dict, repr=False, compare=False)
    _simplified_at: int = field(default=0, repr=False, compare=False)

    # ------------------------------------------------------------ symbols
    def new_symbol(self, hint: int, source: str, *, lo: int | None = SYMBOLIC_FROM, hi: int | None = None,
                   data_dependent: bool = False, name: str | None = None) -> sympy.Symbol:
        if name is None:
            prefix = "u" if data_dependent else "s"
            k = sum(1 for i in self.symbols.values() if i.data_dependent == data_dependent)
            taken = self.reserved | {s.name for s in self.symbols}
            while f"{prefix}{k}" in taken:
                k += 1
            name = f"{prefix}{k}"
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
        # (replacements chain, s2 -> s1 -> 768, as long as unify made them, and never
        # cycle: each maps a symbol to an expression of symbols not replaced then)
        if e.is_Symbol:  # (the common case: no expand, a chain of replacements at most)
            for _ in range(len(self.replacements) + 1):
                r = self.replacements.get(e)
                if r is None:
                    return e
                if not isinstance(r, sympy.Basic) or r.is_Integer:
                    return int(r)
                if not r.is_Symbol:
                    return self.simplify(r)
                e = r
            return e
        if e.is_Integer:
            return int(e)
        if self._simplified_at != len(self.replacements):
            self._simplified.clear()
            self._simplified_at = len(self.replacements)
        got = self._simplified.get(e)
        if got is None:
            got = self._simplified[e] = self._simplify_expr(e)
        return got

    def _simplify_expr(self, e):
        if self.replacements:
            e = e.xreplace(self.replacements)
            for _ in range(len(self.replacements)):
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
        linear = self._linear_range(diff)
        if linear is not None:  # integer arithmetic on the symbols' ranges, no assumptions
            lo, hi = linear
            return _decided(cond.rel_op, lo, hi)
        # s = lo + t with t >= 0: a polynomial in t with nonnegative
        # coefficients is nonnegative for every allowed value.
        shift = {}
        if any(self.symbols[s].lo is None for s in diff.free_symbols):
            return None
        for s in diff.free_symbols:
            t = sympy.Dummy(f"t_{s}", integer=True, nonnegative=True)
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

    def _linear_range(self, diff):
        """(lowest, highest) of an integer-linear expression over the symbols'
        ranges (None: unbounded), or None when it is not one."""
        lo = hi = 0
        for term, c in diff.as_coefficients_dict().items():
            if not c.is_Integer:
                return None
            c = int(c)
            if term == 1:
                lo, hi = (None if lo is None else lo + c), (None if hi is None else hi + c)
                continue
            if not isinstance(term, sympy.Symbol) or term not in self.symbols:
                return None
            s_lo, s_hi = self.symbols[term].lo, self.symbols[term].hi
            a, b = (s_lo, s_hi) if c > 0 else (s_hi, s_lo)
            lo = None if lo is None or a is None else lo + c * a
            hi = None if hi is None or b is None else hi + c * b
        return lo, hi

    def compare(self, op: str, lhs, rhs, reason: str) -> bool:
        """decide(lhs op rhs) without building the relation when both sides
        are ints, or a symbol and an int (an index into a dim, in a loop)."""
        lhs, rhs = self.simplify(lhs), self.simplify(rhs)
        if isinstance(lhs, int) and isinstance(rhs, int):
            return _COMPARE[op](lhs, rhs)
        fast = self._decide_bound(op, lhs, rhs, reason)
        if fast is not None:
            return fast
        return self._decide(_RELATION[op](lhs, rhs, evaluate=False), reason)

    def decide(self, cond, reason: str) -> bool:
        """The truth of `cond` for this trace: proved from ranges, or taken
        from the hints and recorded as a guard."""
        cond = sympy.sympify(cond)
        if isinstance(cond, sympy.core.relational.Relational):
            return self.compare(cond.rel_op, cond.lhs, cond.rhs, reason)
        return self._decide(cond, reason)

    def _decide(self, cond, reason: str) -> bool:
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
        elif not self._narrow(guard, reason):
            self.guards.append(Guard(guard, reason))
        return value

    def _decide_bound(self, op: str, lhs, rhs, reason: str) -> bool | None:
        """`s op k` or `k op s` (an input symbol, an int), without sympy: proved
        from s's range, or taken from its hint and narrowing the range."""
        if isinstance(lhs, sympy.Symbol) and isinstance(rhs, int):
            sym, k = lhs, rhs
        elif isinstance(rhs, sympy.Symbol) and isinstance(lhs, int):
            sym, k, op = rhs, lhs, _MIRROR[op]
        else:
            return None
        info = self.symbols.get(sym)
        if info is None or info.data_dependent or op in ("==", "!="):
            return None
        lo, hi = info.lo, info.hi  # s - k against 0
        known = _decided(op, None if lo is None else lo - k, None if hi is None else hi - k)
        if known is not None:
            return known
        value = _COMPARE[op](info.hint, k)
        _tighten(info, op if value else _NEGATED[op], k, reason)
        return value

    def _narrow(self, guard, reason: str) -> bool:
        """A guard `s op k` (one symbol, coefficient +-1) narrows s's range
        instead: one check per symbol however many such decisions a loop
        takes (and later decisions are proved from the range)."""
        if not isinstance(guard, sympy.core.relational.Relational) or guard.rel_op in ("==", "!="):
            return False
        diff = sympy.expand(guard.lhs - guard.rhs)
        syms = diff.free_symbols
        if len(syms) != 1:
            return False
        (sym,) = syms
        c = diff.coeff(sym)
        k = diff - c * sym
        if c not in (1, -1) or not k.is_Integer:
            return False
        # (c*s + k op 0  <=>  s op' -k/c, the relation mirrored for c = -1)
        _tighten(self.symbols[sym], guard.rel_op if c == 1 else _MIRROR[guard.rel_op], -int(k) * int(c), reason)
        return True

    def specialize(self, e, value: int, reason: str) -> None:
        """e is `value` for this trace (a dim used as a Python number): a guard,
        and for a bare symbol a replacement too, so every later expression
        over it is a plain integer (a loop over range(n) then decides its
        slices without sympy)."""
        self.compare("==", e, value, reason)
        e = self.simplify(e)
        if isinstance(e, sympy.Symbol) and not self.symbols[e].data_dependent:
            self.replacements[e] = sympy.Integer(value)

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
        # Prefer replacing a data-dependent symbol (the executable checks its
        # value against the replacement when it binds it: jit/trace.py
        # DataDependentDim), then the newer input symbol by the older one or
        # by a constant.
        dd = [x for x in syms if self.symbols[x].data_dependent]
        if dd:
            order = list(self.symbols)
            u = max(dd, key=order.index)  # the later one: the other is bound first
            other = b if u == a else a
            self.replacements[u] = other
            return
        free = getattr(a, "free_symbols", set()) | getattr(b, "free_symbols", set())
        if any(self.symbols[x].data_dependent for x in free):
            # (s1 == u0 - 1: solved for the data-dependent size, u0 -> s1 + 1, which the executable checks
            # where it binds u0; an input symbol replaced by it would be a guard before u0 exists)
            solved = self._solve_for_symbol(a - b, data_dependent=True)
            if solved is not None:
                self.replacements[solved[0]] = solved[1]
            else:
                self.compare("==", a, b, reason)  # (a check where the sizes are made)
            return
        if syms:
            order = list(self.symbols)
            target = max(syms, key=order.index)
            other = b if target == a else a
            if isinstance(other, int):
                lo, hi = self.symbols[target].lo, self.symbols[target].hi
                if (lo is not None and other < lo) or (hi is not None and other > hi):
                    raise ValueError(f"{target} = {other} is outside its range: {reason}")
            else:
                self._carry_range(target, other, reason)
            self.replacements[target] = other
            # (unevaluated: equal hints, different expressions, so sympy's
            # evaluation, milliseconds of assumptions, could not decide it)
            self.guards.append(Guard(sympy.Eq(target, other, evaluate=False), reason))
            return
        solved = self._solve_for_symbol(a - b)
        if solved is not None:  # s1 - 2*s3 == s3: s1 -> 3*s3
            target, other = solved
            self._carry_range(target, other, reason)
            self.replacements[target] = other
            self.guards.append(Guard(sympy.Eq(target, other, evaluate=False), reason))
            return
        self.compare("==", a, b, reason)

    def _carry_range(self, target, other, reason: str) -> None:
        """Before `other` replaces `target`: the range decisions narrowed
        target's to (y.shape[0] > 9) must hold for `other` too, or a shape
        outside it would pass the guards once target is gone from them: a
        bare symbol's range narrows, an expression's bound is guarded, one
        the ranges prove records nothing."""
        info = self.symbols[target]
        why = info.range_reason or reason
        if info.lo is not None:
            self.compare(">=", other, info.lo, why)
        if info.hi is not None:
            self.compare("<=", other, info.hi, why)

    def _solve_for_symbol(self, diff, data_dependent: bool = False):
        """(s, e) with diff == 0 <=> s == e, e an integer polynomial in the
        other symbols: diff is linear in s with coefficient +-1.  The newest
        such input symbol (data-dependent size, when `data_dependent`) is
        chosen; None when there is none."""
        diff = sympy.expand(diff)
        if not isinstance(diff, sympy.Basic) or diff.has(sympy.floor, sympy.ceiling, sympy.Mod, sympy.Max,
                                                         sympy.Min):
            return None
        order = list(self.symbols)
        for s in sorted(diff.free_symbols, key=order.index, reverse=True):
            if self.symbols[s].data_dependent != data_dependent:
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
    if isinstance(cond, sympy.core.relational.Relational):
        return _RELATION[_NEGATED[cond.rel_op]](cond.lhs, cond.rhs, evaluate=False)
    return sympy.Not(cond)


def _tighten(info: SymInfo, op: str, k: int, reason: str) -> None:
    """Narrow a symbol's range to `s op k` (an inequality)."""
    if op in (">=", ">"):
        lo = k + (op == ">")
        info.lo = lo if info.lo is None else max(info.lo, lo)
    else:
        hi = k - (op == "<")
        info.hi = hi if info.hi is None else min(info.hi, hi)
    info.range_reason = info.range_reason or reason


_RELATION = {"==": sympy.Eq, "!=": sympy.Ne, "<": sympy.Lt, "<=": sympy.Le, ">": sympy.Gt, ">=": sympy.Ge}
_MIRROR = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}  # k op s  <=>  s op' k
_NEGATED = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_COMPARE = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
            "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def _decided(op: str, lo, hi) -> bool | None:
    """The truth of `d op 0` for every d in [lo, hi] (None bounds: unbounded), or None."""
    if op in ("<", "<="):  # d < 0  <=>  -d > 0
        return _decided(_MIRROR[op], None if hi is None else -hi, None if lo is None else -lo)
    if op in (">", ">="):  # d >= least
        least = 1 if op == ">" else 0
        if lo is not None and lo >= least:
            return True
        if hi is not None and hi < least:
            return False
        return None
    if lo is not None and lo == hi:
        return (lo == 0) == (op == "==")
    if (lo is not None and lo > 0) or (hi is not None and hi < 0):
        return op == "!="
    return None
