"""dims= and constraints=: checked when `jit` is called, parsed by a small
grammar of our own.

No user string is ever evaluated: a constraint is read by the recursive
descent parser below, which builds sympy expressions from this grammar and
nothing else (anything else is a ValueError naming the option):

    constraint := expr (cmp expr)+        cmp: < <= > >= == !=
    expr       := expr (+ | - | * | // | %) expr | -expr | +expr | (expr)
                | NAME | INT | min(expr, expr, ...) | max(expr, expr, ...)

NAME is a dim named in dims=; a chain (`1 <= B <= 4096`) is one relation
per link.  A dim name is an ASCII identifier that does not begin with an
underscore: shapejit's own symbols do (`_g0`, `_trip`), and generated
source never uses a name as written (shapes.pyexpr.ident), so keywords,
builtins and the generated code's own names are all fine.
"""
from __future__ import annotations

import re

import sympy

NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
MAX_NAME = 64
MAX_TEXT = 1000   # characters of one constraint
MAX_DEPTH = 64    # nesting of one constraint's expression
MAX_INT = 2 ** 63  # literals beyond int64 cannot be a size

_CMP = {"<": sympy.Lt, "<=": sympy.Le, ">": sympy.Gt, ">=": sympy.Ge, "==": sympy.Eq, "!=": sympy.Ne}
_CALL = {"min": sympy.Min, "max": sympy.Max}


def check_dims(dims, params, fname: str) -> dict[str, tuple]:
    """dims= as {parameter: (name | int | None, ...)}, or ValueError."""
    if dims is None:
        return {}
    if not isinstance(dims, dict):
        raise ValueError(f"dims= must be a dict of parameter name to a tuple of dims, not {type(dims).__name__}")
    out = {}
    for param, names in dims.items():
        if not isinstance(param, str) or param not in params:
            raise ValueError(f"dims= names {param!r}, which is not a parameter of {fname}")
        if not isinstance(names, (tuple, list)):
            raise ValueError(f"dims={{{param!r}: ...}} must be a tuple of dim names, ints or None, "
                             f"not {type(names).__name__}")
        for d in names:
            if d is None:
                continue
            if type(d) is int:
                if d < 0:
                    raise ValueError(f"dims={{{param!r}: ...}}: a declared size must be >= 0, not {d}")
                continue
            if not isinstance(d, str):
                raise ValueError(f"dims={{{param!r}: ...}}: {d!r} is not a dim name, an int or None")
            check_name(d, f"dims={{{param!r}: ...}}")
        out[param] = tuple(names)
    return out


def check_name(name: str, where: str) -> None:
    if len(name) > MAX_NAME or not NAME.match(name):
        raise ValueError(f"{where}: dim name {name[:MAX_NAME]!r} must be an ASCII identifier of at most "
                         f"{MAX_NAME} characters that does not begin with '_'")


def dim_names(dims: dict) -> frozenset:
    return frozenset(d for names in dims.values() for d in names if isinstance(d, str))


def check_constraints(constraints, names: frozenset) -> tuple[str, ...]:
    """constraints= as a tuple of strings, each parsed once here (over
    placeholder symbols) so a bad one fails at `jit`, not at the first call."""
    if isinstance(constraints, str):
        constraints = (constraints,)
    try:
        constraints = tuple(constraints)
    except TypeError:
        raise ValueError(f"constraints= must be a sequence of strings, not {type(constraints).__name__}") from None
    for text in constraints:
        parse_constraint(text, {n: sympy.Symbol(n, integer=True, nonnegative=True) for n in names})
    return constraints


def parse_constraint(text, symbols: dict) -> list:
    """The relations one constraint states, over `symbols` ({dim name: sympy
    symbol or integer}), or ValueError."""
    if not isinstance(text, str):
        raise ValueError(f"constraints=: {text!r} is not a string")
    where = f"constraint {text[:80]!r}"
    if len(text) > MAX_TEXT:
        raise ValueError(f"{where}: longer than {MAX_TEXT} characters")
    return _Parser(text, symbols, where).constraint()


_TOKEN = re.compile(r"\s*(?:([A-Za-z_][A-Za-z0-9_]*)|([0-9]+)|(//|<=|>=|==|!=|[-+*%<>(),]))")


class _Parser:
    """Recursive descent over the grammar in the module's docstring."""

    def __init__(self, text: str, symbols: dict, where: str):
        self.symbols, self.where = symbols, where
        self.tokens: list[tuple[str, str]] = []
        pos, end = 0, len(text.rstrip())
        while pos < end:
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                raise ValueError(f"{where}: unexpected {text[pos:].lstrip()[:10]!r} at column {pos} (names from "
                                 f"dims=, integers, + - * // %, min(...), max(...), < <= > >= == !=)")
            kind = "name" if m.group(1) else "int" if m.group(2) else "op"
            self.tokens.append((kind, m.group(m.lastindex)))
            pos = m.end()
        self.tokens.append(("end", ""))
        self.at = 0
        self.depth = 0

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.at]

    def take(self, op: str | None = None) -> tuple[str, str]:
        t = self.tokens[self.at]
        if op is not None and t != ("op", op):
            raise ValueError(f"{self.where}: expected {op!r}, found {t[1] or 'the end'!r}")
        self.at += 1
        return t

    def constraint(self) -> list:
        terms, ops = [self.sum()], []
        while self.peek()[0] == "op" and self.peek()[1] in _CMP:
            ops.append(self.take()[1])
            terms.append(self.sum())
        if not ops:
            raise ValueError(f"{self.where}: not a comparison (one of < <= > >= == != between dim expressions)")
        if self.peek()[0] != "end":
            raise ValueError(f"{self.where}: unexpected {self.peek()[1]!r} after the comparison")
        return [_CMP[op](a, b) for op, a, b in zip(ops, terms, terms[1:])]

    def sum(self):
        e = self.term()
        while self.peek() in (("op", "+"), ("op", "-")):
            op = self.take()[1]
            e = e + self.term() if op == "+" else e - self.term()
        return e

    def term(self):
        e = self.unary()
        while self.peek() in (("op", "*"), ("op", "//"), ("op", "%")):
            op = self.take()[1]
            b = self.unary()
            if op != "*" and b == 0:
                raise ValueError(f"{self.where}: division by zero")
            e = e * b if op == "*" else sympy.floor(e / b) if op == "//" else sympy.Mod(e, b)
        return e

    def unary(self):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ValueError(f"{self.where}: nested deeper than {MAX_DEPTH}")
        try:
            if self.peek() in (("op", "-"), ("op", "+")):
                neg = self.take()[1] == "-"
                e = self.unary()
                return -e if neg else e
            return self.atom()
        finally:
            self.depth -= 1

    def atom(self):
        kind, text = self.take()
        if kind == "int":
            if len(text) > 19 or int(text) >= MAX_INT:
                raise ValueError(f"{self.where}: {text[:20]} is beyond int64")
            return sympy.Integer(int(text))
        if kind == "name" and text in _CALL and self.peek() == ("op", "("):
            self.take("(")
            args = [self.sum()]
            while self.peek() == ("op", ","):
                self.take()
                args.append(self.sum())
            self.take(")")
            if len(args) < 2:
                raise ValueError(f"{self.where}: {text}() takes two or more expressions")
            return _CALL[text](*args)
        if kind == "name":
            if text not in self.symbols:
                raise ValueError(f"{self.where} names {text!r}, which is not a dim named in dims= "
                                 f"(named: {', '.join(sorted(self.symbols)) or 'none'})")
            return self.symbols[text]
        if (kind, text) == ("op", "("):
            e = self.sum()
            self.take(")")
            return e
        raise ValueError(f"{self.where}: expected a dim name, an integer or '(', found {text or 'the end'!r}")
