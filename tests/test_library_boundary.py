"""The boundary between ``hyperwarm`` (the construct library) and the app around it.

The library serves other teams' apps: it knows nothing of cdk.json, its runtime helper loads no
aws-cdk, and its classes and functions stay small enough to read.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LIBRARY = REPO / "constructs" / "hyperwarm"
APP_PACKAGES = ("stacks", "manifests", "rehearsal")


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("module", sorted(p.relative_to(LIBRARY).as_posix() for p in LIBRARY.rglob("*.py")))
def test_library_module_imports_nothing_of_the_app(module: str) -> None:
    imported = _imports(LIBRARY / module)
    leaks = sorted(n for n in imported if n.split(".")[0] in (*APP_PACKAGES, "pydantic"))
    assert not leaks, f"hyperwarm/{module} imports the app or its config models: {leaks}"


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, capture_output=True, text=True)
    return {name.split(".")[0] for name in result.stdout.split()}


def test_runtime_client_helper_loads_neither_aws_cdk_nor_jsii() -> None:
    loaded = _loaded_after("import hyperwarm.endpoints.client")
    assert not loaded & {"aws_cdk", "jsii", "constructs", "pydantic"}, sorted(loaded & {"aws_cdk", "jsii"})


@pytest.mark.parametrize("statement", [
    "import hyperwarm.endpoints.routing",  # the routing rules
    "import hyperwarm.planner",  # the routing planner (`hyperwarm routing`), a command outside any synth
    "import hyperwarm._internal.constraints",  # reading the props' constraints needs no aws-cdk of its own
])
def test_runtime_pieces_load_no_aws_cdk(statement: str) -> None:
    """cdk.json is parsed into the library's props, whose Duration and Size fields are aws-cdk's: parsing it
    loads aws-cdk. What runs outside a synth (the rehearsal, the planner's routing rules) must not."""
    loaded = _loaded_after(statement)
    assert not loaded & {"aws_cdk", "jsii", "constructs"}, sorted(loaded & {"aws_cdk", "jsii", "constructs"})


def test_parsing_the_app_configuration_loads_none_of_the_library_constructs() -> None:
    """A bad cdk.json fails fast: the config models parse into the library's props (whose times and sizes are
    aws_cdk Durations and Sizes), never through its constructs, charts or the CRDs' generated types."""
    code = "import sys, stacks.config; print(' '.join(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, capture_output=True, text=True)
    loaded = set(result.stdout.split())
    heavy = {"cdk8s", "aws_cdk.aws_eks_v2", "hyperwarm.caches.cached_models", "hyperwarm.caches.chart",
             "hyperwarm.caches.k8s"}
    assert not loaded & heavy, sorted(loaded & heavy)


def test_library_root_exports_no_app_configuration() -> None:
    import hyperwarm
    from stacks import config

    assert not set(hyperwarm.__all__) & set(config.__all__)
    assert "EndpointConfig" not in hyperwarm.__all__  # SageMaker's own name; the app's model is not the library's


CLASS_LINES, FUNCTION_LINES = 200, 60
"""A hand-written class or function longer than this is split (ruff's C901 and PLR0915, pyproject.toml, bound a
function's branches and statements, not its lines)."""
GENERATED = LIBRARY / "caches" / "k8s"  # cdk8s import's output (make crds), not written by hand
EXCEPTIONS = {
    # The routing simulator's one hot loop is kept whole for speed (docs/performance.md).
    "constructs/hyperwarm/planner/sim.py:_core": "a call per simulated request",
}


def _hand_written() -> list[Path]:
    """The hand-written modules (the functions once, under lambdas/, not through hyperwarm.functions' links)."""
    return [p for root in ("constructs", "stacks", "lambdas", "manifests", "rehearsal") for p in (REPO / root).rglob("*.py")
            if GENERATED not in p.parents and not any(d.is_symlink() for d in p.parents)]


def _too_long(path: Path) -> list[str]:
    """``<module>:<name> (<lines> lines)`` of each class over CLASS_LINES and function over FUNCTION_LINES, counted
    from its ``class``/``def`` line to its last."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        limit = (CLASS_LINES if isinstance(node, ast.ClassDef)
                 else FUNCTION_LINES if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else None)
        if limit is not None and node.end_lineno is not None and node.end_lineno - node.lineno + 1 > limit:
            found.append(f"{path.relative_to(REPO).as_posix()}:{node.name} ({node.end_lineno - node.lineno + 1} lines)")
    return found


def test_no_hand_written_class_over_200_lines_or_function_over_60() -> None:
    found = [f for path in _hand_written() for f in _too_long(path)]
    assert len(_hand_written()) > 100 and all(f.split(" (")[0] in EXCEPTIONS for f in found), found
