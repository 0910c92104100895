"""Pod Security admission of the models namespace: the chart's pods checked against the Pod Security Standards'
controls (https://kubernetes.io/docs/concepts/security/pod-security-standards/), and the level it enforces.

The level is the highest every pod of the namespace meets: Restricted is never known of the operator's inference
pods (it writes their security contexts), hostPath (a node-cache filler; a model reading cached weights, the
operator's default) breaks Baseline, so such a namespace enforces ``privileged`` and warns and audits at
``restricted``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_caches_config import default_groups, environment, model
from test_caches_manifests import REPO, objects_of

from hyperwarm.caches.pod_security import PSS_VERSION, enforce_level, labels, pod_problems
from manifests import build_chart
from stacks.caches_stack import chart_props
from stacks.config.environment import parse_environments

PSA = "pod-security.kubernetes.io/"


def namespace_labels(objects: list[dict[str, Any]]) -> dict[str, str]:
    (namespace,) = [o for o in objects if o["kind"] == "Namespace"]
    return {k: v for k, v in namespace["metadata"]["labels"].items() if k.startswith(PSA)}


def pods(objects: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    return [o["spec"]["template"]["spec"] for o in objects
            if o["kind"] == "DaemonSet" and o["metadata"]["name"].startswith(prefix)]


def test_the_node_cache_filler_needs_privileged_and_the_pre_pull_meets_restricted() -> None:
    raw = {**environment(model(weights_cache="node"), model(name="other", prepull="daemonset",
                                                            source={"bucket": "my-models", "prefix": "o",
                                                                    "version": "v1"})),
           "instance_groups": default_groups(instance_count=2)}
    objects = objects_of(raw)
    (filler,) = pods(objects, "hyperwarm-fill-")
    assert "hostPath volume cache" in pod_problems(filler, "baseline")
    assert "fill: may run as root" in pod_problems(filler, "restricted")
    (prepull,) = pods(objects, "prepull-")
    assert pod_problems(prepull, "restricted") == []
    assert namespace_labels(objects) == labels("privileged")
    assert namespace_labels(objects) == {
        f"{PSA}enforce": "privileged", f"{PSA}warn": "restricted", f"{PSA}audit": "restricted",
        f"{PSA}enforce-version": PSS_VERSION, f"{PSA}warn-version": PSS_VERSION, f"{PSA}audit-version": PSS_VERSION}


@pytest.mark.parametrize("cache, level", [("operator", "privileged"), ("node", "privileged"), ("off", "baseline")])
def test_a_model_reading_cached_weights_from_the_node_needs_privileged_else_baseline(cache: str, level: str) -> None:
    objects = objects_of({**environment(model(weights_cache=cache)), "instance_groups": default_groups()})
    assert enforce_level(objects[1:]) == level
    assert namespace_labels(objects)[f"{PSA}enforce"] == level


@pytest.mark.parametrize("pod, level, problem", [
    ({"hostNetwork": True, "containers": [{"name": "c"}]}, "baseline", "host namespace hostNetwork"),
    ({"containers": [{"name": "c", "securityContext": {"privileged": True}}]}, "baseline", "c: privileged"),
    ({"containers": [{"name": "c", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]}, "baseline",
     "c: adds ['SYS_ADMIN']"),
    ({"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}]}]}, "baseline", "c: hostPort"),
    ({"containers": [{"name": "c", "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                                                         "capabilities": {"drop": ["ALL"]}}}]}, "restricted",
     "c: seccomp profile None"),
    ({"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
      "volumes": [{"name": "v", "nfs": {"server": "s", "path": "/"}}],
      "containers": [{"name": "c", "securityContext": {"allowPrivilegeEscalation": False,
                                                         "capabilities": {"drop": ["ALL"]}}}]}, "restricted",
     "volume v of a kind Restricted does not allow"),
])
def test_each_control_is_checked(pod: dict[str, Any], level: str, problem: str) -> None:
    assert problem in pod_problems(pod, level)
    assert pod_problems(pod, "privileged") == []


def test_every_environment_s_models_namespace_is_labelled() -> None:
    environments = parse_environments(json.loads((REPO / "cdk.json").read_text())["context"]["environments"])
    for env, config in environments.items():
        objects = build_chart(env, chart_props(env, config)).to_json()
        found = namespace_labels(objects)
        assert found[f"{PSA}enforce"] == enforce_level(objects[1:]), env
        assert found[f"{PSA}warn"] == found[f"{PSA}audit"] == "restricted", env
