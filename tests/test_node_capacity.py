"""Every node holds what is placed on it: synth fails with the group, the resource and the numbers."""

from __future__ import annotations

import pytest

from hyperwarm import instance_spec
from hyperwarm.cluster.node_capacity import (
    NodeGroup,
    Workload,
    node_problems,
    parse_cpu_m,
    parse_memory_mi,
    pod,
    workloads_from_objects,
)
from stacks.config import ConfigError, parse_environment

QWEN = {
    "name": "qwen", "size_gb": 3.5, "instance_group": "inference",
    "image": "763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:0.27.1-gpu-py312-cu130-ubuntu22.04-sagemaker",
    "source": {"bucket": "models", "prefix": "qwen", "version": "v1"},
    "resources": {"gpus": 1, "cpu": "2", "memory": "12Gi"},
}
SYSTEM = {"name": "system", "instance_type": "ml.c5.4xlarge"}
GPU = {"name": "inference", "instance_type": "ml.g5.xlarge", "holds_caches": True, "threads_per_core": 2}


def parse(raw: dict):
    """The dev environment ``raw``, its models' bucket declared as existing."""
    return parse_environment("dev", {**raw, "model_buckets": [{"name": "models"}]} if "caches" in raw else raw)


def error_of(raw: dict) -> str:
    with pytest.raises(ConfigError) as info:
        parse(raw)
    return str(info.value)


def model(**overrides: object) -> dict:
    return {**QWEN, **overrides, "resources": {**QWEN["resources"], **overrides.get("resources", {})}}


def test_catalog_has_hyperpod_max_pods_and_smt_adjusted_vcpus() -> None:
    g5 = instance_spec("ml.g5.xlarge")
    assert (g5.max_pods, g5.vcpus, g5.vcpus_at(1), g5.vcpus_at(2), g5.memory_gib) == (14, 4, 2, 4, 16)
    assert instance_spec("ml.c5.4xlarge").max_pods == 29


def test_old_embedded_default_fails_naming_group_resource_and_numbers() -> None:
    """One ml.g5.xlarge with ThreadsPerCore 1: 2 vCPUs for a 2-CPU model pod and 14 pods for ~23 system pods."""
    message = error_of({"instance_groups": [{"name": "inference", "instance_type": "ml.g5.xlarge",
                                             "holds_caches": True}], "caches": {"models": [QWEN]}})
    assert ("environments.dev: instance group 'inference' (ml.g5.xlarge x 1, ThreadsPerCore 1): cpu per node: "
            "need 2.7 vCPU, have 1.9 vCPU (7 daemonsets 0.7 vCPU; model qwen (1 pod) 2 vCPU)") in message
    assert "system pods (6 add-on and operator deployments): pods: need 23, have 6 left on the nodes" in message
    assert "ml.c5.4xlarge" in message


def test_embedded_default_runs_its_model() -> None:
    config = parse({"caches": {"models": [QWEN]}})
    assert [(g.name, g.instance_type, g.threads_per_core) for g in config.instance_groups] == [
        ("system", "ml.c5.4xlarge", 1), ("inference", "ml.g5.xlarge", 2)]


def test_project_dev_environment_passes(project_context) -> None:
    parse_environment("dev", project_context["environments"]["dev"])


def test_too_many_pods_per_node() -> None:
    message = error_of({"instance_groups": [SYSTEM, GPU], "caches": {"models": [
        model(replicas=8, resources={"gpus": 0, "cpu": "100m", "memory": "100Mi"})]}})
    assert ("instance group 'inference' (ml.g5.xlarge x 1, ThreadsPerCore 2): pods per node: need 15, have 14 "
            "(7 daemonsets 7; model qwen (8 pods) 8)") in message


def test_pods_per_node_is_an_estimate_a_user_overrides_per_instance_type() -> None:
    eight_pods = {"instance_groups": [SYSTEM, GPU], "caches": {"models": [
        model(replicas=8, resources={"gpus": 0, "cpu": "100m", "memory": "100Mi"})]}}
    assert ("14 pods per node is hyperwarm's estimate for ml.g5.xlarge: AWS publishes no figure; kubectl get node "
            "<node> -o jsonpath={.status.allocatable.pods} shows the real one, and pods_per_node['ml.g5.xlarge'] "
            "overrides the estimate") in error_of(eight_pods)
    parse({**eight_pods, "pods_per_node": {"ml.g5.xlarge": 29}})
    message = error_of({**eight_pods, "pods_per_node": {"ml.g5.xlarge": 12}})
    assert "pods per node: need 15, have 12" in message and "estimate for ml.g5.xlarge" not in message


def test_memory_per_node() -> None:
    message = error_of({"instance_groups": [SYSTEM, GPU], "caches": {"models": [model(resources={"memory": "15Gi"})]}})
    assert "instance group 'inference' (ml.g5.xlarge x 1, ThreadsPerCore 2): memory per node: need 15.6 GiB, " \
           "have 15.5 GiB" in message


def test_gpus_per_node_count_every_replica_on_the_node() -> None:
    message = error_of({"instance_groups": [SYSTEM, GPU], "caches": {"models": [model(replicas=2)]}})
    assert "instance group 'inference' (ml.g5.xlarge x 1, ThreadsPerCore 2): gpus per node: need 2 GPU(s), " \
           "have 1 GPU(s) (model qwen (2 pods) 2 GPU(s))" in message


def test_replicas_spread_over_the_group_nodes() -> None:
    parse({"instance_groups": [SYSTEM, {**GPU, "instance_count": 2}], "caches": {"models": [model(replicas=2)]}})


def test_pods_of_different_models_are_packed_onto_different_nodes() -> None:
    parse({"instance_groups": [SYSTEM, {**GPU, "instance_count": 2}],
           "caches": {"models": [model(name="a"), model(name="b")]}})


def test_group_without_nodes_cannot_hold_a_model() -> None:
    message = error_of({"instance_groups": [SYSTEM, {**GPU, "instance_count": 0}], "caches": {"models": [QWEN]}})
    assert "instance group 'inference' (ml.g5.xlarge x 0, ThreadsPerCore 2): has no nodes for model qwen" in message


def test_daemonsets_only_count_on_the_types_they_select() -> None:
    gpu_only = Workload("agent", pod("500m"), daemonset=True, instance_types=frozenset({"ml.g5.xlarge"}))
    groups = [NodeGroup("cpu", "ml.c5.large", 1, 1)]
    assert node_problems(groups, [gpu_only, Workload("big", pod("1"), groups=frozenset({"cpu"}))]) == [
        "instance group 'cpu' (ml.c5.large x 1, ThreadsPerCore 1): cpu per node: need 1 vCPU, have 0.9 vCPU "
        "(big (1 pod) 1 vCPU) -- use a larger instance type, threads_per_core 2, "
        "or smaller cpu requests"]


BIG, SMALL = NodeGroup("big", "ml.g5.12xlarge", 1), NodeGroup("small", "ml.g5.xlarge", 2)  # 4 GPUs; 2 x 1 GPU


def spread(replicas: int, **requests: object) -> Workload:
    """A model on ``big`` with ``small`` as its fallback group."""
    return Workload("model m", pod(**{"cpu": "1", "memory": "4Gi", "gpus": 1, **requests}),  # type: ignore[arg-type]
                    replicas=replicas, groups=frozenset({"big", "small"}), preference=("big", "small"))


def test_a_workload_over_several_groups_spreads_its_replicas_over_their_nodes() -> None:
    """6 replicas of a 1-GPU pod: 4 on the big node, 1 on each small node; not 6 on every group."""
    assert node_problems([BIG, SMALL], [spread(6)]) == []
    (problem,) = node_problems([BIG, SMALL], [spread(7)])
    assert problem == ("model m: 7 pods on instance group 'big' (ml.g5.12xlarge x 1, ThreadsPerCore 1), instance "
                       "group 'small' (ml.g5.xlarge x 2, ThreadsPerCore 1) together: room for 6 beside their other "
                       "pods (a pod: 1 vCPU, 4 GiB, 1 GPU(s)) -- add nodes to these groups, another fallback group, "
                       "or fewer replicas")


def test_the_spread_pods_fill_what_the_groups_own_pods_leave() -> None:
    own = Workload("model own", pod("1", "4Gi", 1), replicas=3, groups=frozenset({"big"}))
    assert node_problems([BIG, SMALL], [own, spread(3)]) == []
    (problem,) = node_problems([BIG, SMALL], [own, spread(4)])
    assert problem.startswith("model m: 4 pods on ") and "room for 3 " in problem


def test_one_pod_of_a_workload_over_several_groups_must_fit_a_node_of_each() -> None:
    """2 GPUs fit the big node, not a small one: however few the replicas, the small group is named."""
    (problem, *_) = node_problems([BIG, SMALL], [spread(1, gpus=2)])
    assert problem.startswith("instance group 'small' (ml.g5.xlarge x 2, ThreadsPerCore 1): gpus per node: need 2 "
                              "GPU(s), have 1 GPU(s) (model m (1 pod) 2 GPU(s))")


def test_the_groups_order_of_preference_is_read_from_the_objects() -> None:
    from test_cached_models import build, llama

    from hyperwarm.cluster.instance_group import InstanceGroupSpec

    groups = [InstanceGroupSpec("system", "ml.c5.4xlarge"), InstanceGroupSpec("small", "ml.g5.xlarge", holds_caches=True),
              InstanceGroupSpec("big", "ml.g5.12xlarge", holds_caches=True)]
    objects = build(llama(instance_group="big", fallback_groups=("small",), replicas=5), groups=groups).objects
    (served,) = [w for w in workloads_from_objects(objects) if w.name == "model llama"]
    assert (served.groups, served.preference, served.replicas) == (frozenset({"big", "small"}), ("big", "small"), 5)


@pytest.mark.parametrize("quantity, millis", [("500m", 500), ("2", 2000), ("0.5", 500), (1, 1000)])
def test_cpu_quantities(quantity, millis) -> None:
    assert parse_cpu_m(quantity) == millis


@pytest.mark.parametrize("quantity, mib", [("512Mi", 512), ("12Gi", 12288), ("1Ti", 1048576), ("1048576Ki", 1024)])
def test_memory_quantities(quantity, mib) -> None:
    assert parse_memory_mi(quantity) == mib


def test_workloads_are_read_from_the_objects_the_stacks_apply() -> None:
    from hyperwarm.cluster import hyperpod_dependencies
    from manifests import build_chart
    from stacks.caches_stack import chart_props

    config = parse({"caches": {"models": [model(prepull="daemonset", replicas=1)]}})
    objects = hyperpod_dependencies.objects("us-west-2") + build_chart("dev", chart_props("dev", config)).to_json()
    workloads = {w.name: w for w in workloads_from_objects(objects)}
    assert workloads["health-monitoring-agent"].daemonset
    assert "ml.g5.xlarge" in workloads["health-monitoring-agent"].instance_types
    assert "ml.g5.xlarge" not in workloads["aws-efa-k8s-device-plugin"].instance_types
    prepull = workloads["prepull-inference"]
    assert (prepull.daemonset, prepull.groups, prepull.requests.cpu_m) == (True, frozenset({"inference"}), 1)
    served = workloads["model qwen"]
    assert (served.daemonset, served.groups, served.requests) == (
        False, frozenset({"inference"}), pod("2", "12Gi", 1))


def test_an_autoscaled_deployment_counts_its_maximum_replicas() -> None:
    """The deploy rehearsal reads rendered objects: an autoscaled model may grow to maxReplicaCount pods."""
    config = {"apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "InferenceEndpointConfig",
              "metadata": {"name": "qwen"},
              "spec": {"replicas": 1, "autoScalingSpec": {"minReplicaCount": 1, "maxReplicaCount": 3},
                       "worker": {"resources": {"requests": {"cpu": "2", "memory": "12Gi", "nvidia.com/gpu": 1}}}}}
    (served,) = workloads_from_objects([config])
    assert served.replicas == 3


# NVMe: ml.g5.xlarge has 250 GB, 225 GB usable at the default 10 % headroom; the serving image takes 20 GB.
NVME_GB, HEADROOM, IMAGE_GB = instance_spec("ml.g5.xlarge").nvme_gb, 10, 20
USABLE_GB = NVME_GB * (100 - HEADROOM) / 100
ONE_BUT_NOT_TWO_GB = 110  # one version fits (110 + 20 <= 225), two do not (2 x 110 + 20 > 225)


def refreshed(raw: dict, *names: str) -> dict:
    """``raw`` with a refresh prefix targeting the cached models ``names`` (all read s3://models/qwen/)."""
    return {**raw, "refresh": {"bucket": "models", "models": [{"prefix": "qwen", "caches": list(names)}]}}


def test_sizes_put_one_version_within_the_nvme_and_two_beyond() -> None:
    assert ONE_BUT_NOT_TWO_GB + IMAGE_GB <= USABLE_GB < 2 * ONE_BUT_NOT_TWO_GB + IMAGE_GB


def test_a_refreshed_model_needs_room_for_two_versions_or_synth_fails_naming_model_sizes_and_group() -> None:
    big = {"instance_groups": [SYSTEM, GPU], "caches": {"models": [model(size_gb=ONE_BUT_NOT_TWO_GB)]}}
    message = error_of(refreshed(big, "qwen"))
    need = 2 * ONE_BUT_NOT_TWO_GB + IMAGE_GB
    assert (f"caches: instance group 'inference' (ml.g5.xlarge): need {need} GB, have {USABLE_GB:.0f} GB (NVMe {NVME_GB:.0f} GB "
            f"less {HEADROOM} % headroom); weights {2 * ONE_BUT_NOT_TWO_GB} GB from models qwen "
            f"({ONE_BUT_NOT_TWO_GB} GB x 2 versions, refreshed); images {IMAGE_GB} GB -- does not fit (a refreshed "
            "model, qwen, holds its new version beside the serving one until the switch)") in message


def test_a_model_no_refresh_targets_needs_room_for_one_version() -> None:
    parse({"instance_groups": [SYSTEM, GPU], "caches": {"models": [model(size_gb=ONE_BUT_NOT_TWO_GB)]}})


def test_a_refreshed_node_cached_model_holds_two_versions_and_no_third_copy() -> None:
    """The node cache is the pods' own directory: a refresh holds the new version beside the serving one, nothing
    more (no stand-alone copy that nothing reads)."""
    size = 100  # two versions: 2 x 100 + 20 = 220 GB fits the 225 GB; 105: 230 GB does not
    parse(refreshed({"instance_groups": [SYSTEM, GPU],
                     "caches": {"models": [model(size_gb=size, weights_cache="node")]}}, "qwen"))
    message = error_of(refreshed({"instance_groups": [SYSTEM, GPU],
                                  "caches": {"models": [model(size_gb=size + 5, weights_cache="node")]}}, "qwen"))
    assert f"need {2 * (size + 5) + IMAGE_GB} GB" in message
    assert f"qwen ({size + 5} GB x 2 versions, refreshed)" in message


def test_the_library_construct_reserves_two_versions_of_the_models_it_is_told_are_refreshed() -> None:
    from test_cached_models import build, llama

    from hyperwarm.caches import PropsError, gigabytes

    big = llama(size=gigabytes(ONE_BUT_NOT_TWO_GB))
    build(big)
    with pytest.raises(PropsError, match=rf"instance group 'inference' \(ml\.g5\.xlarge\): "
                                         rf"need {2 * ONE_BUT_NOT_TWO_GB + IMAGE_GB} GB.*"
                                         rf"llama \({ONE_BUT_NOT_TWO_GB} GB x 2 versions, refreshed\)"):
        build(big, refreshed=["llama"])
    with pytest.raises(PropsError, match=r"refreshed = qwen -- not a model of models; allowed: llama"):
        build(big, refreshed=["qwen"])
