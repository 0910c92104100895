"""No import cycles among hyperwarm's modules: each module imports from the modules that define what it uses
(never from a package ``__init__``), so the graph read from the source has no cycle. Type-only imports
(``if TYPE_CHECKING:``) count too: a cycle there is a design knot, even if Python never runs it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

LIBRARY = Path(__file__).resolve().parent.parent / "constructs" / "hyperwarm"


def module_name(path: Path, root: Path = LIBRARY) -> str:
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.AST, module: str, is_package: bool, known: set[str]) -> Iterator[str]:
    """The library modules one import statement of ``module`` loads (a name that is a submodule: that one)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names if alias.name in known)
    elif isinstance(node, ast.ImportFrom):
        base = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            base = base.rpartition(".")[0]
        target = (f"{base}.{node.module}" if node.module else base) if node.level else (node.module or "")
        submodules = [f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in known]
        if submodules:
            yield from submodules
        elif target in known:
            yield target


def import_graph(root: Path = LIBRARY) -> dict[str, set[str]]:
    """module -> the library modules it imports anywhere in its source, read with ast."""
    paths = {module_name(p, root): p for p in root.rglob("*.py")}
    known = set(paths)
    return {name: {m for node in ast.walk(ast.parse(path.read_text()))
                   for m in _imported(node, name, path.name == "__init__.py", known) if m != name}
            for name, path in paths.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path whose last module is its first, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], node, nxt] if nxt in path else [node, nxt]
            if nxt not in state and (cycle := visit(nxt, [*path, node])):
                return cycle
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start, [])):
            return cycle
    return None


def test_hyperwarm_has_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 50 and "hyperwarm.observability.sagemaker_ttft" in graph
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


@pytest.mark.parametrize("guarded", [False, True], ids=["import", "type-checking import"])
def test_a_cycle_is_found(tmp_path: Path, guarded: bool) -> None:
    package = tmp_path / "hyperwarm"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "a.py").write_text("from hyperwarm.sub.b import B\n")
    lines = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n" if guarded \
        else "from . import a\n"
    (package / "sub" / "b.py").write_text(lines)
    cycle = find_cycle(import_graph(package))
    assert cycle is not None and cycle[0] == cycle[-1]
    assert set(cycle) == {"hyperwarm.sub.a", "hyperwarm.sub.b"}
