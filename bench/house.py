"""The house's figures (issue 13): the import graph between the packages,
the largest files and functions, and the lines per package.

    python -m bench.house [--top 5] [--root PATH]

Read from the source with `ast` (nothing is imported), so a checkout of any
commit can be measured: `git worktree add /tmp/old REV && python -m
bench.house --root /tmp/old`.
"""
from __future__ import annotations

import argparse
import ast
from pathlib import Path

from tests.test_layers import PACKAGES, imported_packages


def modules(root: Path) -> dict[str, Path]:
    return {str(p.relative_to(root)): p for package in PACKAGES for p in sorted((root / package).rglob("*.py"))}


def package_arrows(root: Path) -> dict[str, dict[str, int]]:
    """{package: {package it imports: how many of its modules do}} (lazy
    imports count), read by the import-layers test's own reader."""
    out: dict[str, dict[str, int]] = {p: {} for p in PACKAGES}
    for rel, path in modules(root).items():
        own = rel.split("/")[0]
        for other in imported_packages(path):
            if other != own:
                out[own][other] = out[own].get(other, 0) + 1
    return out


def sizes(root: Path) -> tuple[list[tuple[int, str]], list[tuple[int, str]], dict[str, int]]:
    """(files by lines, functions by lines, lines per package); a method is
    named Class.method, a nested function outer.inner."""
    files, funcs, per_package = [], [], {p: 0 for p in PACKAGES}
    for rel, path in modules(root).items():
        src = path.read_text()
        n = len(src.splitlines())
        files.append((n, rel))
        per_package[rel.split("/")[0]] += n

        def walk(node, prefix):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    funcs.append((child.end_lineno - child.lineno + 1, f"{rel}:{prefix}{child.name}"))
                    walk(child, f"{prefix}{child.name}.")
                elif isinstance(child, ast.ClassDef):
                    walk(child, f"{prefix}{child.name}.")
                else:
                    walk(child, prefix)
        walk(ast.parse(src, rel), "")
    return sorted(files, reverse=True), sorted(funcs, reverse=True), per_package


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = ap.parse_args(argv)
    print("import graph (package -> packages it imports: modules that do)")
    for p, targets in package_arrows(args.root).items():
        shown = ", ".join(f"{t} ({n})" for t, n in sorted(targets.items())) or "nothing of ours"
        print(f"  {p} -> {shown}")
    files, funcs, per_package = sizes(args.root)
    print(f"\n{args.top} largest files (lines)")
    for n, name in files[:args.top]:
        print(f"  {n:5d}  {name}")
    print(f"\n{args.top} largest functions (lines)")
    for n, name in funcs[:args.top]:
        print(f"  {n:5d}  {name}")
    print("\nlines per package: " + ", ".join(f"{p} {n}" for p, n in per_package.items())
          + f"; {sum(per_package.values())} in {len(files)} files")


if __name__ == "__main__":
    main()
