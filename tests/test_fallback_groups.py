"""A cached model's fallback instance groups: ordered preference, and every group checked as the first is."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import test_caches_manifests
from test_cached_models import build, llama
from test_caches_manifests import crd_errors

from hyperwarm.caches import PropsError, WorkerResources, gigabytes
from hyperwarm.cluster.instance_group import INSTANCE_GROUP_LABEL, InstanceGroupSpec
from hyperwarm.functions.cache_refresh.contract import HyperPodTarget, NodeCache
from hyperwarm.functions.cache_refresh.targets import warm
from hyperwarm.functions.node_cache import layout
from stacks.config import ConfigError, parse_environment

crd_schemas = test_caches_manifests.crd_schemas  # the fixture
GROUPS = [InstanceGroupSpec("system", "ml.c5.4xlarge"),
          InstanceGroupSpec("big", "ml.g5.12xlarge", holds_caches=True),
          InstanceGroupSpec("small", "ml.g5.xlarge", holds_caches=True),
          InstanceGroupSpec("plain", "ml.g5.xlarge")]


def _kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def test_the_pods_may_use_every_listed_group_and_prefer_them_in_order(crd_schemas) -> None:
    caches = build(llama(instance_group="big", fallback_groups=("small",)), groups=GROUPS)
    (deployment,) = _kind(caches.objects, "InferenceEndpointConfig")
    affinity = deployment["spec"]["nodeAffinity"]
    (term,) = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": INSTANCE_GROUP_LABEL, "operator": "In", "values": ["big", "small"]}]
    assert [(p["weight"], p["preference"]["matchExpressions"][0]["values"])
            for p in affinity["preferredDuringSchedulingIgnoredDuringExecution"]] == [(100, ["big"]), (50, ["small"])]
    assert "instanceTypes" not in deployment["spec"], "the CRD makes instanceTypes exclusive of nodeAffinity"
    assert crd_errors(deployment, crd_schemas) == []


def test_a_node_cached_model_is_filled_and_pre_pulled_on_every_listed_group() -> None:
    caches = build(llama(instance_group="big", fallback_groups=("small",), weights_cache="node", prepull="both"),
                   groups=GROUPS)
    daemonsets = {d["metadata"]["name"]: d for d in _kind(caches.objects, "DaemonSet")}
    filler = daemonsets[layout.filler_name("llama")]
    required = filler["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert required["values"] == ["big", "small"]
    assert {n for n in daemonsets if n != layout.filler_name("llama")} == {"prepull-big", "prepull-small"}


def test_a_fallback_group_that_cannot_hold_the_model_fails_naming_it() -> None:
    with pytest.raises(PropsError, match=r"models\[0\]\.fallback_groups\[0\]: 'plain' -- holds_caches is false"):
        build(llama(instance_group="big", fallback_groups=("plain",)), groups=GROUPS)
    with pytest.raises(PropsError, match=r"models\[0\]\.fallback_groups\[0\]: 'nope' -- no such instance group; "
                                         r"allowed: system, big, small, plain"):
        build(llama(instance_group="big", fallback_groups=("nope",)), groups=GROUPS)


def test_a_fallback_type_with_too_few_gpus_fails_naming_the_type() -> None:
    with pytest.raises(PropsError, match=r"models\[0\]\.resources\.gpus: 4 -- ml\.g5\.xlarge \(instance group small\) "
                                         r"has 1 GPU\(s\); allowed: 0\.\.1"):
        build(llama(instance_group="big", fallback_groups=("small",), resources=WorkerResources(gpus=4)),
              groups=GROUPS)


def test_the_fallback_groups_nvme_must_hold_the_caches_too() -> None:
    """300 GB fits ml.g5.12xlarge's 3,800 GB, not ml.g5.xlarge's 250 GB."""
    with pytest.raises(PropsError, match=r"instance group 'small' \(ml\.g5\.xlarge\): need .* -- does not fit"):
        build(llama(instance_group="big", fallback_groups=("small",), size=gigabytes(300)), groups=GROUPS)


def test_a_group_listed_twice_is_refused() -> None:
    with pytest.raises(PropsError, match=r"fallback_groups = \['small', 'big'\] -- lists big again"):
        llama(instance_group="big", fallback_groups=("small", "big"))


def _node(name: str, group: str, ready_for: str | None) -> dict[str, Any]:
    labels = {INSTANCE_GROUP_LABEL: group, **({layout.ready_label("llama", ready_for): "true"} if ready_for else {})}
    return {"metadata": {"name": name, "labels": labels},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"nvidia.com/gpu": "1"}}}


class _Kube:
    def __init__(self, deployment: dict[str, Any], nodes: list[dict[str, Any]]) -> None:
        self.deployment, self.all_nodes = deployment, nodes

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.deployment)

    def nodes(self, selector: dict[str, str]) -> list[dict[str, Any]]:
        return [n for n in self.all_nodes if all(n["metadata"]["labels"].get(k) == v for k, v in selector.items())]


def test_a_warm_rollout_stages_the_version_on_the_nodes_of_every_listed_group() -> None:
    deployment = _kind(build(llama(instance_group="big", fallback_groups=("small",), weights_cache="node"),
                             groups=GROUPS).objects, "InferenceEndpointConfig")[0]
    target = HyperPodTarget("eks", "hyperwarm-models", "InferenceEndpointConfig", "llama",
                            node_cache=NodeCache("llama", "/opt/dlami/nvme"))
    kube = _Kube(deployment, [_node("b-1", "big", "v2"), _node("s-1", "small", None), _node("p-1", "plain", None)])
    staged = warm.staging(kube, target, "v2")  # type: ignore[arg-type]
    assert (staged.ready_nodes, staged.waiting_nodes, staged.ready) == (["b-1"], ["s-1"], False)
    kube.all_nodes[1] = _node("s-1", "small", "v2")
    assert warm.staging(kube, target, "v2").ready  # type: ignore[arg-type]


def test_cdk_json_lists_fallback_groups_and_a_bad_one_names_its_field(project_context) -> None:
    env = json.loads(json.dumps(project_context["environments"]["prod"]))
    model = env["caches"]["models"][0]
    groups = [g["name"] for g in env["instance_groups"]]
    model["fallback_groups"] = ["nope"]
    with pytest.raises(ConfigError, match=r"environments\.prod: caches\.models\[0\]\.fallback_groups\[0\]: 'nope' -- "
                                          rf"no such instance group; allowed: {', '.join(groups)}"):
        parse_environment("prod", env)


def test_a_jumpstart_model_names_one_instance_type_so_it_takes_no_fallback_group() -> None:
    from hyperwarm.caches import CachedModelSpec, JumpStartModelSource

    with pytest.raises(PropsError, match=r"fallback_groups = \['small'\] -- a JumpStartModel names one instance type"):
        CachedModelSpec(name="js", source=JumpStartModelSource("deepseek-llm-r1-distill-qwen-1-5b", "2.0.4"),
                         size=gigabytes(4), instance_group="big", fallback_groups=("small",))


# Capacity: a fallback group adds nodes ------------------------------------------------------------------------------

def _staging_with_spare(project_context, replicas: int, spare_count: int = 1) -> dict[str, Any]:
    """staging plus a group ``spare`` (ml.g6e.xlarge: 1 GPU, 4 vCPUs, 32 GiB), its Hub model at ``replicas`` with
    ``spare`` as fallback, sized to fit a spare node."""
    env = json.loads(json.dumps(project_context["environments"]["staging"]))
    env["instance_groups"].append({"name": "spare", "instance_type": "ml.g6e.xlarge", "instance_count": spare_count,
                                   "holds_caches": True, "threads_per_core": 2})
    (hub,) = [m for m in env["caches"]["models"] if m["name"] == "qwen2-5-7b-hub"]
    hub.update(replicas=replicas, fallback_groups=["spare"], resources={"gpus": 1, "cpu": "2", "memory": "16Gi"})
    return env


def test_a_fallback_group_adds_its_nodes_to_the_preferred_groups(project_context) -> None:
    """Two replicas and a 1-GPU spare node: the replicas go to the preferred group's nodes first, not all of them
    to every listed group (which failed with "instance group 'spare' ...: gpus per node: need 2 GPU(s), have 1")."""
    parse_environment("staging", _staging_with_spare(project_context, replicas=2))
    # staging's two ml.g6e.12xlarge have 8 GPUs, 3 left beside its other models: the fourth pod on the spare node.
    parse_environment("staging", _staging_with_spare(project_context, replicas=4))


def test_a_pod_too_large_for_a_fallback_groups_node_fails_naming_the_group(project_context) -> None:
    env = _staging_with_spare(project_context, replicas=1)
    (hub,) = [m for m in env["caches"]["models"] if m["name"] == "qwen2-5-7b-hub"]
    hub["resources"]["memory"] = "64Gi"
    with pytest.raises(ConfigError, match=r"instance group 'spare' \(ml\.g6e\.xlarge x 1, ThreadsPerCore 2\): memory "
                                          r"per node: need 64\.6 GiB, have 31\.5 GiB"):
        parse_environment("staging", env)


def test_replicas_the_listed_groups_cannot_hold_together_fail_naming_the_groups(project_context) -> None:
    """The Hub model's 5 replicas: 3 GPUs left on staging's two ml.g6e.12xlarge beside its other models (llama-3-1-8b
    2 x 1, qwen2-5-32b 1 x 2, mistral-7b-fsx 1), 1 on the spare node: room for 4."""
    with pytest.raises(ConfigError) as info:
        parse_environment("staging", _staging_with_spare(project_context, replicas=5))
    message = " ".join(str(info.value).split())
    assert ("model qwen2-5-7b-hub: 5 pods on instance group 'inference-g6e' (ml.g6e.12xlarge x 2, ThreadsPerCore 2), "
            "instance group 'spare' (ml.g6e.xlarge x 1, ThreadsPerCore 2) together: room for 4 ") in message
    assert "add nodes to these groups, another fallback group, or fewer replicas" in message
