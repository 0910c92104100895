"""kubernetes.refresh-rbac-named and kubernetes.pod-security-labels, on crafted manifests and on every synthesis."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from rehearsal import Assembly
from rehearsal.core import KUBERNETES_RESOURCE
from rehearsal.rules.kubernetes_access import pod_security_labels, refresh_rbac_named

GROUP = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "hyperwarm:cache-refresh"}]
META = {"name": "hyperwarm-cache-refresh", "namespace": "models"}
NAMED = {"apiGroups": ["inference.sagemaker.aws.amazon.com"], "resources": ["inferenceendpointconfigs"],
         "verbs": ["get", "patch"], "resourceNames": ["llama"]}


def applied(*objects: dict[str, Any]) -> Assembly:
    resource = {"Type": KUBERNETES_RESOURCE, "Properties": {"Manifest": json.dumps(list(objects))}}
    return Assembly.from_templates({"s": {"Resources": {"Manifest": resource}}})


def role(*rules: dict[str, Any], subjects: list[dict[str, Any]] = GROUP) -> list[dict[str, Any]]:
    return [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": META, "rules": list(rules)},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": META,
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": META["name"]},
             "subjects": subjects}]


def rbac(*objects: dict[str, Any]) -> list[str]:
    return [f"{f.resource}: {f.message}" for f in refresh_rbac_named(applied(*objects))]


def test_named_gets_and_patches_and_unnamed_lists_pass() -> None:
    assert rbac(*role(NAMED, {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]})) == []


@pytest.mark.parametrize("change, shown", [
    ({"resourceNames": []}, "get/patch without resourceNames"),
    ({"resourceNames": None}, "get/patch without resourceNames"),
    ({"resourceNames": ["*"]}, "get/patch without resourceNames"),
    ({"verbs": ["*"]}, "verbs *"),
    ({"resources": ["*"]}, "resources *"),
    ({"verbs": ["list", "delete"], "resourceNames": []}, "delete without resourceNames"),
])
def test_a_refresh_rule_that_reaches_beyond_named_objects_is_found(change: dict[str, Any], shown: str) -> None:
    rule = {k: v for k, v in {**NAMED, **change}.items() if v is not None}
    (finding,) = rbac(*role(rule))
    assert finding.startswith("Role/hyperwarm-cache-refresh in models: lets the refresh") and shown in finding


def test_roles_bound_to_other_subjects_are_not_the_refresh_s() -> None:
    other = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "developers"}]
    assert rbac(*role({**NAMED, "resourceNames": []}, subjects=other)) == []


def test_the_refresh_rbac_of_every_synthesis_names_its_objects_and_fails_without_the_names(synthesized) -> None:
    assembly = Assembly.from_outdir(synthesized.outdir)
    assert refresh_rbac_named(assembly) == []
    stripped, removed = copy.deepcopy(assembly.templates), 0
    for template in stripped.values():
        for resource in template["Resources"].values():
            manifest = resource.get("Properties", {}).get("Manifest")
            if resource["Type"] != KUBERNETES_RESOURCE or "hyperwarm:cache-refresh" not in json.dumps(manifest):
                continue
            text = json.dumps(manifest)
            removed += text.count('\\"resourceNames\\"')
            resource["Properties"]["Manifest"] = json.loads(text.replace('\\"resourceNames\\"', '\\"unnamed\\"'))
    findings = refresh_rbac_named(Assembly.from_templates(stripped))
    assert removed >= 4 and {f.stack for f in findings} == {"hyperwarm-staging-refresh", "hyperwarm-prod-refresh"}
    assert all("get/patch without resourceNames" in f.message for f in findings)


PSA = "pod-security.kubernetes.io/"
LABELS = {f"{PSA}{mode}{suffix}": value for mode, level in (("enforce", "baseline"), ("warn", "restricted"),
                                                             ("audit", "restricted"))
          for suffix, value in (("", level), ("-version", "v1.30"))}
IEC = {"apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "InferenceEndpointConfig",
       "metadata": {"name": "m", "namespace": "models"}, "spec": {"modelCacheConfig": {"weightsCache": {"enabled": False}}}}
FILLER = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "fill", "namespace": "models"},
          "spec": {"template": {"spec": {"volumes": [{"name": "cache", "hostPath": {"path": "/opt/dlami/nvme"}}]}}}}


def namespace(labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "models", "labels": labels}}


def psa(*objects: dict[str, Any]) -> list[str]:
    return [f.message for f in pod_security_labels(applied(*objects))]


def test_a_labelled_models_namespace_passes_and_privileged_only_with_a_host_path() -> None:
    assert psa(namespace(LABELS), IEC) == []
    privileged = {**LABELS, f"{PSA}enforce": "privileged"}
    assert psa(namespace(privileged), IEC, FILLER) == []
    (message,) = psa(namespace(privileged), IEC)
    assert "no pod of the namespace reads a hostPath" in message


@pytest.mark.parametrize("drop, shown", [
    (f"{PSA}enforce", f"no {PSA}enforce"), (f"{PSA}warn-version", f"no {PSA}warn-version"),
    (f"{PSA}audit", f"no {PSA}audit"),
])
def test_a_models_namespace_missing_a_label_is_found(drop: str, shown: str) -> None:
    (message,) = psa(namespace({k: v for k, v in LABELS.items() if k != drop}), IEC)
    assert shown in message


def test_a_warn_below_restricted_and_unlabelled_namespaces_are_found_others_are_not_judged() -> None:
    (message,) = psa(namespace({**LABELS, f"{PSA}warn": "baseline"}), IEC)
    assert "warn is 'baseline', not 'restricted'" in message
    assert len(psa(namespace({}), IEC)) == 1
    assert psa(namespace({})) == []  # holds no model


def test_every_synthesized_models_namespace_is_labelled_and_fails_without_its_labels(synthesized) -> None:
    assembly = Assembly.from_outdir(synthesized.outdir)
    assert pod_security_labels(assembly) == []
    stripped = copy.deepcopy(assembly.templates)
    for template in stripped.values():
        for resource in template["Resources"].values():
            manifest = resource.get("Properties", {}).get("Manifest")
            if resource["Type"] == KUBERNETES_RESOURCE and PSA in json.dumps(manifest):
                resource["Properties"]["Manifest"] = json.loads(json.dumps(manifest).replace(PSA, "unrelated/"))
    caches = {s for s in assembly.templates if s.endswith("-caches")}
    assert caches and {f.stack for f in pod_security_labels(Assembly.from_templates(stripped))} == caches
