"""refresh.versions-guarded: every model version a manifest sets waits for a guard that knows it; shown on the
synthesized project and on it with a guard target dropped, a version changed, and the dependency removed."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from rehearsal import Assembly
from rehearsal.rules.versions import GUARD, RULE, model_versions_are_guarded

Templates = dict[str, dict[str, Any]]


def _guard_targets(templates: Templates) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    return [(r, r["Properties"]["Targets"]) for t in templates.values() for r in t["Resources"].values()
            if r["Type"] == GUARD]


def _drop_recorded(templates: Templates) -> None:
    """The guards as they were before versions only a deploy moves were guarded."""
    for resource, targets in _guard_targets(templates):
        resource["Properties"]["Targets"] = [t for t in targets if not t.get("Recorded")]


def _other_version(templates: Templates) -> None:
    for _, targets in _guard_targets(templates):
        for target in targets:
            target["Version"] = "v0"


def _no_dependency(templates: Templates) -> None:
    for template in templates.values():
        guards = {k for k, r in template["Resources"].items() if r["Type"] == GUARD}
        for resource in template["Resources"].values():
            depends = resource.get("DependsOn")
            if isinstance(depends, list):
                resource["DependsOn"] = [d for d in depends if d not in guards]


def test_the_synthesized_project_passes(synthesized) -> None:
    assert model_versions_are_guarded(Assembly.from_outdir(synthesized.outdir)) == []


@pytest.mark.parametrize("break_it, message", [
    (_drop_recorded, "no deploy guard in"),
    (_other_version, "checks version 'v0' but the object sets"),
    (_no_dependency, "the manifest does not depend on the deploy guard"),
])
def test_each_gap_is_found(synthesized, break_it: Callable[[Templates], None], message: str) -> None:
    assembly = Assembly.from_outdir(synthesized.outdir)
    broken = copy.deepcopy(assembly.templates)
    break_it(broken)
    found = model_versions_are_guarded(Assembly(broken, assembly.dependencies))
    assert found and {f.rule for f in found} == {RULE}
    assert all(message in f.message for f in found), found
    if break_it is _drop_recorded:  # dev's S3 and JumpStart models, staging's unrefreshed S3, Hub and FSx ones
        assert sorted(f.resource.split("/", 1)[1] for f in found) == [
            "InferenceEndpointConfig/mistral-7b-fsx", "InferenceEndpointConfig/qwen2-5-1-5b",
            "InferenceEndpointConfig/qwen2-5-32b", "InferenceEndpointConfig/qwen2-5-7b-hub",
            "JumpStartModel/deepseek-r1-qwen-1-5b"]
