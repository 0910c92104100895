"""The public surface reads like aws-cdk-lib's: every public class's annotations resolve at run time (pdoc, pydantic
and a team's own tooling call ``typing.get_type_hints``), and a name a pure module types for checkers only loads
nothing until asked."""

from __future__ import annotations

import inspect
import subprocess
import sys
import typing

import hyperwarm


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
