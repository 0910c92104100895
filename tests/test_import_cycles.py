"""Imports point one way: no cycles between modules, type-checking imports included, and layers that import
only downward.

A cycle hidden behind ``if TYPE_CHECKING`` still ties two modules together: neither can be read, tested
or moved without the other, and the next runtime import between them fails on a half-initialised module.
The layers: the library (``hyperwarm``, its packages in :data:`LIBRARY_LAYERS`), then what renders or checks
its output (``manifests``, ``rehearsal``), then the app (``stacks``, whose ``config`` parses cdk.json below the
stacks that compose the library's constructs). The library importing nothing of the app is
tests/test_library_boundary.py's.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROOT = REPO / "constructs"


APP_PACKAGES = ("stacks", "manifests", "rehearsal")
LIBRARY_LAYERS = (
    {"_internal", "_node", "functions", "metric_options", "constraints"},  # the catalog, constraints, contracts
    {"serving"},  # images, server settings, buckets: what every host of a model uses
    {"cluster"},
    {"endpoints"},
    {"caches"},  # cached models on a cluster, and their handles
    {"refresh"},  # refreshes caches and endpoints, each target a handle
    {"observability"},  # dashboards and alarms of the endpoints, the cached models and their refresh
    {"planner", "cli", "run", ""},  # the commands, and ``hyperwarm`` itself (every public name)
)
"""``hyperwarm``'s packages, lowest first: a module imports its own package or one of a lower layer."""
APP_LAYERS = ({"hyperwarm"}, {"manifests", "rehearsal"}, {"stacks.config"}, {"stacks"})
"""The repository's packages, lowest first (``stacks.config`` is its own layer, below the stacks)."""


def _modules(package: str = "hyperwarm", root: Path = ROOT) -> dict[str, list[Path]]:
    """Dotted name -> files (``.py`` and its stub) of every module in ``package`` under ``root`` (the function
    packages' links followed)."""
    found: dict[str, list[Path]] = {}
    for folder, _, files in os.walk(root / package, followlinks=True):
        for file in files:
            path = Path(folder) / file
            if path.suffix in (".py", ".pyi") and "__pycache__" not in path.parts:
                parts = path.relative_to(root).with_suffix("").parts
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


def _graph(modules: dict[str, list[Path]]) -> dict[str, set[str]]:
    return {name: set().union(*(_imported(name, path, modules) for path in paths)) for name, paths in modules.items()}


def _app_modules() -> dict[str, list[Path]]:
    found = _modules()
    for package in APP_PACKAGES:
        found.update(_modules(package, REPO))
    return found


def test_the_library_has_no_import_cycles() -> None:
    graph = _graph(_modules())
    assert "hyperwarm.observability.dashboard" in graph and "hyperwarm.functions.eks_auth" in graph
    assert _cycles(graph) == []


def test_the_app_has_no_import_cycles() -> None:
    graph = _graph(_app_modules())
    assert "stacks.config.environment" in graph and "rehearsal.rules.observability" in graph
    assert _cycles(graph) == []


def _layer(module: str, layers: tuple[set[str], ...], of: Callable[[str], str]) -> int:
    (index,) = [i for i, layer in enumerate(layers) if of(module) in layer]
    return index


def _upward(graph: dict[str, set[str]], layers: tuple[set[str], ...], of: Callable[[str], str]) -> list[str]:
    """Every import of a module in a higher layer than the importer's, as ``importer -> imported``."""
    return sorted(f"{name} -> {target}" for name, targets in graph.items() for target in targets
                  if _layer(target, layers, of) > _layer(name, layers, of))


def _library_package(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def _app_package(module: str) -> str:
    return "stacks.config" if module.startswith("stacks.config") else module.split(".")[0]


def test_library_packages_import_only_their_own_or_lower_layers() -> None:
    graph = _graph(_modules())
    assert {_library_package(m) for m in graph} == set().union(*LIBRARY_LAYERS)  # every package has its layer
    assert _upward(graph, LIBRARY_LAYERS, _library_package) == []


def test_the_repositorys_packages_import_only_their_own_or_lower_layers() -> None:
    """The rendered manifests and the rehearsal take the library's types, never the app's configuration; the
    configuration parses into the library's props, never through a stack."""
    graph = _graph(_app_modules())
    assert _upward(graph, APP_LAYERS, _app_package) == []


def test_the_layer_check_reports_an_upward_import() -> None:
    graph = {"stacks.app": {"manifests.chart"}, "manifests.chart": {"stacks.config.environment"}}
    assert _upward(graph, APP_LAYERS, _app_package) == ["manifests.chart -> stacks.config.environment"]


def test_the_cycle_finder_reports_a_cycle_once_and_no_chain() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
