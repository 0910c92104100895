"""The public surface reads like aws-cdk-lib's: every public class's annotations resolve at run time (pdoc, pydantic
and a team's own tooling call ``typing.get_type_hints``), and a name a pure module types for checkers only loads
nothing until asked."""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
import typing
from pathlib import Path

import hyperwarm

REPO = Path(__file__).resolve().parent.parent


def _public_classes() -> list[tuple[str, type]]:
    return [(n, getattr(hyperwarm, n)) for n in hyperwarm.__all__ if inspect.isclass(getattr(hyperwarm, n))]


def test_get_type_hints_works_on_every_public_class_and_method() -> None:
    broken = []
    for name, cls in _public_classes():
        for where, target in [(name, cls), *((f"{name}.{m}", f) for m, f in inspect.getmembers(cls, inspect.isfunction)
                                              if not m.startswith("_") or m == "__init__")]:
            try:
                typing.get_type_hints(target)
            except Exception as exc:  # noqa: BLE001 - every failure is listed
                broken.append(f"{where}: {type(exc).__name__}: {exc}")
    assert len(_public_classes()) > 60 and broken == []


def test_instance_group_specs_still_load_without_aws_cdk() -> None:
    """Its ``cdk.Size`` annotation resolves on first use: loading the module starts no Node."""
    code = ("import sys, typing, hyperwarm.cluster.instance_group as m\n"
            "assert 'aws_cdk' not in sys.modules\n"
            "import aws_cdk\n"
            "assert typing.get_type_hints(m.InstanceGroupSpec)['ebs_volume'] == typing.Optional[aws_cdk.Size]\n")
    subprocess.run([sys.executable, "-c", code], check=True)


PACKAGES = {"caches", "cluster", "endpoints", "observability", "planner", "refresh", "serving"}
"""``hyperwarm``'s public packages: each exports its names (``__all__``)."""
PUBLIC_MODULES = {"hyperwarm.cli", "hyperwarm.constraints"}
"""Library modules public as a whole (a command line, the props' constraint vocabulary), besides the packages."""
APP = [p for root in ("stacks", "manifests", "examples") for p in (REPO / root).rglob("*.py")] + [REPO / "app.py"]


def _private_uses(path: Path) -> list[str]:
    """``module.name`` for every name ``path`` takes from the library that the library does not export: a name of
    ``hyperwarm`` or of a public package (``hyperwarm.caches`` ...) outside its ``__all__``, anything of a submodule
    or of ``_internal``. The functions' contract modules (``hyperwarm.functions.*``) are their documented wire
    contract, and :data:`PUBLIC_MODULES` public as a whole."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "hyperwarm"):
            continue
        module = node.module
        if module in PUBLIC_MODULES or (module.startswith("hyperwarm.functions.") and "._" not in module):
            continue
        for alias in node.names:
            if f"{module}.{alias.name}" in PUBLIC_MODULES or (module == "hyperwarm" and alias.name in PACKAGES):
                continue
            package = importlib.import_module(module) if module.count(".") <= 1 else None
            if package is None or alias.name not in getattr(package, "__all__", ()):
                found.append(f"{path.relative_to(REPO)}: {module}.{alias.name}")
    return found


def test_the_app_and_the_example_use_only_what_the_library_exports() -> None:
    """The app composes the library as any team's app would: no underscore module, no submodule's unexported name
    (the issue: ``caches.objects.weights_cache_name``)."""
    assert len(APP) > 20
    assert [use for path in APP for use in _private_uses(path)] == []


def test_the_check_finds_a_private_import(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text("from hyperwarm._internal.retention import retain_except_on_create\n"
                   "from hyperwarm.caches.objects import weights_cache_name\n"
                   "from hyperwarm.caches import CachedModels, objects\n"
                   "from hyperwarm import retain_except_on_create\n")
    original = Path.relative_to
    Path.relative_to = lambda self, *other: self.name  # type: ignore[method-assign,assignment]
    try:
        assert _private_uses(app) == ["app.py: hyperwarm._internal.retention.retain_except_on_create",
                                      "app.py: hyperwarm.caches.objects.weights_cache_name",
                                      "app.py: hyperwarm.caches.objects"]
    finally:
        Path.relative_to = original  # type: ignore[method-assign]
