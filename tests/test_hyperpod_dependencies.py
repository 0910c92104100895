"""The packaged HyperPod dependency objects are valid Kubernetes objects, pinned per region, and
carry what the HyperPod Helm chart installs by default for an inference cluster."""

from __future__ import annotations

import kubernetes_validate
import pytest

from hyperwarm.cluster import hyperpod_dependencies

OBJECTS = hyperpod_dependencies.objects("us-west-2")


def find(kind: str, name: str) -> dict:
    matches = [o for o in OBJECTS if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}"
    return matches[0]


def daemonset_types(name: str) -> list[str]:
    pod = find("DaemonSet", name)["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return terms[0]["matchExpressions"][0]["values"]


@pytest.mark.parametrize("kubernetes_version", ["1.30", "1.33"])
def test_every_object_validates_against_the_kubernetes_schema(kubernetes_version) -> None:
    for obj in hyperpod_dependencies.objects("us-east-1"):
        kubernetes_validate.validate(obj, desired_version=kubernetes_version, strict=True)


def test_namespace_comes_first_and_is_the_fixed_hyperpod_namespace() -> None:
    first = OBJECTS[0]
    assert (first["kind"], first["metadata"]["name"]) == ("Namespace", "aws-hyperpod")


def test_health_agent_image_is_the_charts_current_pin_and_regional() -> None:
    assert hyperpod_dependencies.health_agent_image("us-west-2") == (
        "905418368575.dkr.ecr.us-west-2.amazonaws.com/hyperpod-health-monitoring-agent:1.0.1892.0_1.0.424.0")
    assert hyperpod_dependencies.health_agent_image("ca-central-1").startswith("843976229209.dkr.ecr.ca-central-1")


def test_unknown_region_lists_supported_regions() -> None:
    with pytest.raises(ValueError, match=r"region 'mars-1'.*published in ap-northeast-1"):
        hyperpod_dependencies.health_agent_image("mars-1")


def test_deep_health_check_service_account_and_rbac_match_the_chart() -> None:
    account = find("ServiceAccount", "deep-health-check-service-account")
    assert account["metadata"]["namespace"] == "aws-hyperpod"
    assert find("ClusterRole", "deep-health-check-service-account-role")["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "patch"]},
    ]
    binding = find("ClusterRoleBinding", "deep-health-check-service-account-role-binding")
    assert binding["roleRef"]["name"] == "deep-health-check-service-account-role"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "deep-health-check-service-account", "namespace": "aws-hyperpod"}]


def test_patching_and_job_auto_restart_rbac_are_bound_to_the_hyperpod_service_user() -> None:
    user = {"kind": "User", "name": "hyperpod-service-linked-role", "apiGroup": "rbac.authorization.k8s.io"}
    assert find("ClusterRole", "hyperpod-patching")["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    ]
    restart_rules = find("ClusterRole", "job-auto-restart")["rules"]
    assert {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete", "deletecollection"]} in restart_rules
    assert {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
            "verbs": ["get", "create", "update", "delete"]} in restart_rules
    assert len(restart_rules) == 6
    assert find("ServiceAccount", "job-auto-restart")["metadata"]["namespace"] == "aws-hyperpod"
    for name in ("hyperpod-patching", "job-auto-restart"):
        binding = find("ClusterRoleBinding", name)
        assert (binding["roleRef"]["name"], binding["subjects"]) == (name, [user])


def test_efa_device_plugin_runs_on_efa_types_only_from_the_regional_eks_registry() -> None:
    types = daemonset_types("aws-efa-k8s-device-plugin")
    assert "ml.p5.48xlarge" in types and "ml.g6e.12xlarge" in types
    assert "ml.g5.xlarge" not in types and "ml.m5.xlarge" not in types
    container = find("DaemonSet", "aws-efa-k8s-device-plugin")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.13"
    assert hyperpod_dependencies.efa_device_plugin_image("ap-southeast-3").startswith("296578399912.dkr.ecr.")


def test_gpu_daemonsets_run_only_on_gpu_types_and_tolerate_health_checks() -> None:
    for name in ("health-monitoring-agent", "nvidia-device-plugin-daemonset"):
        types = daemonset_types(name)
        assert "ml.p5.48xlarge" in types and "ml.g5.xlarge" in types and "ml.m5.xlarge" not in types
        pod = find("DaemonSet", name)["spec"]["template"]["spec"]
        assert {"operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]


def test_device_plugin_gets_no_kubernetes_api_token() -> None:
    (plugin,) = [o for o in hyperpod_dependencies.objects("us-west-2") if o["metadata"]["name"].startswith("nvidia")]
    assert plugin["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_no_image_is_a_floating_tag() -> None:
    for obj in OBJECTS:
        for container in obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            assert ":" in container["image"] and not container["image"].endswith(":latest")
