"""serving.node-cache-volume: a node-cached deployment reads its verified copy as AWS documents local NVMe; each
case is a defective manifest the rule must flag, starting from the objects the caches construct renders."""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rehearsal import Assembly
from rehearsal.rules.node_cache import RULE, node_cached_models_read_only_verified_copies

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "refresh"))
from cluster_model import rendered  # noqa: E402


def stack(mutate: Callable[[dict[str, Any], dict[str, Any]], Any] = lambda d, f: None) -> dict[str, Any]:
    deployment, filler = copy.deepcopy(rendered("models", "llama", "v1"))
    mutate(deployment, filler)
    return {"Resources": {"Manifest": {"Type": "Custom::AWSCDK-EKS-KubernetesResource",
                                       "Properties": {"Manifest": json.dumps([filler, deployment])}}}}


def findings(template: dict[str, Any]) -> list[str]:
    found = node_cached_models_read_only_verified_copies(Assembly.from_templates({"s": template}))
    assert all(f.rule == RULE for f in found)
    return [f.message for f in found]


def test_the_rendered_objects_pass() -> None:
    assert findings(stack()) == []


def _drop_label(d: dict[str, Any], f: dict[str, Any]) -> None:
    for term in d["spec"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]:
        term["matchExpressions"] = [e for e in term["matchExpressions"] if not e["key"].startswith("weights.")]


@pytest.mark.parametrize("mutate, message", [
    (lambda d, f: d["spec"]["modelSourceConfig"].update(modelLocation="llama/v1"), "modelLocation is set"),
    (lambda d, f: d["spec"]["worker"]["modelVolumeMount"].update(name="weights"), "no kubernetes.volumes entry"),
    (lambda d, f: d["spec"]["kubernetes"]["volumes"][0]["hostPath"].update(type="DirectoryOrCreate"),
     "not a node-cache directory of type Directory"),
    (_drop_label, "the pods do not require weights.hyperwarm.io/llama."),
    (lambda d, f: d["spec"]["modelCacheConfig"]["weightsCache"].update(enabled=True), "a second copy"),
    (lambda d, f: f["metadata"].update(name="other"), "no filler hyperwarm-fill-llama"),
])
def test_each_defect_is_flagged(mutate: Callable[..., Any], message: str) -> None:
    found = findings(stack(mutate))
    assert any(message in m for m in found), found
