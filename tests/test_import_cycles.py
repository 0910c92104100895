"""The library's modules import each other without cycles, type-checking imports included.

A cycle hidden behind ``if TYPE_CHECKING`` still ties two modules together: neither can be read, tested
or moved without the other, and the next runtime import between them fails on a half-initialised module.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROOT = REPO / "constructs"


def _modules() -> dict[str, list[Path]]:
    """Dotted name -> files (``.py`` and its stub) of every module in ``hyperwarm`` (the function packages'
    links followed)."""
    found: dict[str, list[Path]] = {}
    for folder, _, files in os.walk(ROOT / "hyperwarm", followlinks=True):
        for file in files:
            path = Path(folder) / file
            if path.suffix in (".py", ".pyi"):
                parts = path.relative_to(ROOT).with_suffix("").parts
                found.setdefault(".".join(parts[:-1] if parts[-1] == "__init__" else parts), []).append(path)
    return found


def _imported(name: str, path: Path, modules: dict[str, list[Path]]) -> set[str]:
    """The library modules ``name`` names in its imports, wherever they are (type-checking blocks too)."""
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}".rstrip(".")
            for alias in node.names:
                targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return {t for t in targets if t in modules and t != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_the_library_has_no_import_cycles() -> None:
    modules = _modules()
    graph = {name: set().union(*(_imported(name, path, modules) for path in paths)) for name, paths in modules.items()}
    assert "hyperwarm.observability.dashboard" in graph and "hyperwarm.functions.eks_auth" in graph
    assert _cycles(graph) == []


def test_the_cycle_finder_reports_a_cycle_once_and_no_chain() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
