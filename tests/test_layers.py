"""The package rule (DESIGN.md, README): imports go one way, shapes <-
clustering <- codegen; runtime imports only shapes; jit imports them all;
and no module imports itself back through others.  Read from every module's
import statements (top level or inside a function: a lazy import is an
arrow too), so the rule cannot erode unnoticed."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("shapes", "clustering", "codegen", "runtime", "jit")
MODULES = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
           for package in PACKAGES for p in (ROOT / package).rglob("*.py")}
MAY_IMPORT = {
    "shapes": set(),
    "clustering": {"shapes"},
    "codegen": {"shapes", "clustering"},
    "runtime": {"shapes"},
    "jit": {"shapes", "clustering", "codegen", "runtime"},
}


def imported_modules(path: Path) -> dict[str, int]:
    """{module name: first line importing it} for one module (relative
    imports stay in the module's own package; `from p import m` of a
    module m names p.m)."""
    out: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULES]
            names = subs or [node.module]
        else:
            continue
        for name in names:
            out.setdefault(name, node.lineno)
    return out


def imported_packages(path: Path) -> dict[str, int]:
    """{project package: first line importing it} for one module (relative
    imports stay in the module's own package)."""
    out: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top in PACKAGES:
                out.setdefault(top, node.lineno)
    return out


def arrows() -> list[tuple[str, str, str]]:
    """(package, imported package, 'file:line') for every cross-package import."""
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for other, line in imported_packages(path).items():
                if other != package:
                    out.append((package, other, f"{path.relative_to(ROOT)}:{line}"))
    return out


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_go_one_way(package):
    wrong = [f"{where} imports {other}" for p, other, where in arrows()
             if p == package and other not in MAY_IMPORT[package]]
    assert not wrong, f"{package} may import only {sorted(MAY_IMPORT[package]) or 'nothing of ours'}: " \
                      + "; ".join(wrong)


def test_the_check_sees_lazy_imports(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import numpy\n\ndef f():\n    from jit.api import jit\n    import codegen.gemm\n")
    assert imported_packages(module) == {"jit": 4, "codegen": 5}


def test_no_module_imports_itself_back():
    graph = {m: {d for d in imported_modules(p) if d in MODULES and d != m} for m, p in MODULES.items()}
    cycles = []
    for start in sorted(graph):  # (a path from start back to start, through modules after it)
        stack, seen = [(start, [start])], set()
        while stack:
            m, path = stack.pop()
            for d in sorted(graph[m]):
                if d == start:
                    cycles.append(" -> ".join(path + [d]))
                elif d > start and d not in seen:
                    seen.add(d)
                    stack.append((d, path + [d]))
    assert not cycles, "import cycles: " + "; ".join(cycles)
