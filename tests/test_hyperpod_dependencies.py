"""The packaged HyperPod dependency objects are valid Kubernetes objects and pinned per region."""

from __future__ import annotations

import kubernetes_validate
import pytest

from hyperwarm import hyperpod_dependencies


@pytest.mark.parametrize("kubernetes_version", ["1.30", "1.33"])
def test_every_object_validates_against_the_kubernetes_schema(kubernetes_version) -> None:
    for obj in hyperpod_dependencies.objects("us-east-1"):
        kubernetes_validate.validate(obj, desired_version=kubernetes_version, strict=True)


def test_namespace_comes_first_and_is_the_fixed_hyperpod_namespace() -> None:
    first = hyperpod_dependencies.objects("us-west-2")[0]
    assert (first["kind"], first["metadata"]["name"]) == ("Namespace", "aws-hyperpod")


def test_health_agent_image_is_pinned_and_regional() -> None:
    assert hyperpod_dependencies.health_agent_image("us-west-2") == (
        "905418368575.dkr.ecr.us-west-2.amazonaws.com/hyperpod-health-monitoring-agent:1.0.935.0_1.0.282.0")


def test_unknown_region_lists_supported_regions() -> None:
    with pytest.raises(ValueError, match=r"region 'mars-1'.*published in ap-northeast-1"):
        hyperpod_dependencies.health_agent_image("mars-1")


def test_daemonsets_run_only_on_gpu_types_and_tolerate_health_checks() -> None:
    daemonsets = [o for o in hyperpod_dependencies.objects("us-west-2") if o["kind"] == "DaemonSet"]
    assert {d["metadata"]["name"] for d in daemonsets} == {"health-monitoring-agent", "nvidia-device-plugin-daemonset"}
    for daemonset in daemonsets:
        pod = daemonset["spec"]["template"]["spec"]
        types = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
        assert "ml.p5.48xlarge" in types and "ml.m5.xlarge" not in types
        assert {"operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]


def test_no_image_is_a_floating_tag() -> None:
    for obj in hyperpod_dependencies.objects("us-west-2"):
        for container in obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            assert ":" in container["image"] and not container["image"].endswith(":latest")
