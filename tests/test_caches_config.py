"""The ``caches`` section: model entries, cross-field rules and the NVMe capacity guard."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from hyperwarm.caches.capacity import CacheFootprint, group_usage
from hyperwarm.caches.placement import footprint
from stacks.app import build_app
from stacks.config.caches import CachedModel
from stacks.config.environment import ConfigError, parse_environment, parse_environments

IMAGE = "763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:0.27.1-gpu-py312-cu130-ubuntu22.04-sagemaker"


def model(**overrides: Any) -> dict[str, Any]:
    entry = {"name": "qwen", "size_gb": 10, "image": IMAGE, "instance_group": "inference",
             "source": {"bucket": "my-models", "prefix": "qwen2.5-7b", "version": "v1"},
             # Requests one ml.g5.xlarge node holds beside its daemonsets (see test_node_capacity).
             "resources": {"gpus": 1, "cpu": "2", "memory": "12Gi"}}
    entry.update(overrides)
    return entry


def environment(*models: dict[str, Any], **caches: Any) -> dict[str, Any]:
    """The dev default (groups "system" and "inference", ml.g5.xlarge with NVMe 250 GB) with ``models``
    cached from existing buckets (declared in ``model_buckets``)."""
    buckets = sorted({m["source"]["bucket"] for m in models if "bucket" in m.get("source", {})})
    return {"caches": {"models": list(models), **caches}, "model_buckets": [{"name": b} for b in buckets]}


def default_groups(**inference: Any) -> list[dict[str, Any]]:
    """The dev default's instance groups, the GPU group changed by ``inference``."""
    return [{"name": "system", "instance_type": "ml.c5.4xlarge"},
            {"name": "inference", "instance_type": "ml.g5.xlarge", "threads_per_core": 2, "holds_caches": True,
             **inference}]


def problems(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as error:
        parse_environment("dev", raw)
    return str(error.value)


def test_caches_default_to_no_models() -> None:
    assert parse_environment("dev", {}).caches.models == ()


def test_project_staging_and_prod_cache_models(project_context) -> None:
    environments = parse_environments(project_context["environments"])
    assert environments["staging"].caches.models and environments["prod"].caches.models


def test_model_source_is_a_versioned_location() -> None:
    source = parse_environment("dev", environment(model())).caches.models[0].source
    assert (source.location, source.uri) == ("qwen2.5-7b/v1", "s3://my-models/qwen2.5-7b/v1")


def test_source_without_version_is_rejected() -> None:
    message = problems(environment(model(source={"bucket": "my-models", "prefix": "qwen2.5-7b"})))
    assert "environments.dev.caches.models[0].source.version" in message


def test_unknown_instance_group_is_rejected_naming_the_allowed_ones() -> None:
    message = problems(environment(model(instance_group="nope")))
    assert "caches.models[0].instance_group: 'nope' -- no such instance group; allowed: system, inference" in message
    assert message.startswith("invalid configuration for environment 'dev'")


def test_group_without_caches_is_rejected() -> None:
    raw = environment(model(instance_group="cpu"))
    raw["instance_groups"] = [{"name": "cpu", "instance_type": "ml.m5.xlarge"},
                              {"name": "inference", "instance_type": "ml.g5.xlarge", "holds_caches": True}]
    assert "caches.models[0].instance_group: 'cpu' -- holds_caches is false for this group; allowed: inference" \
        in problems(raw)


def test_tainted_group_is_rejected_because_the_operator_has_no_tolerations() -> None:
    raw = environment(model())
    raw["instance_groups"] = [{"name": "inference", "instance_type": "ml.g5.xlarge", "holds_caches": True,
                               "taints": [{"key": "dedicated", "value": "llm", "effect": "NoSchedule"}]}]
    assert "the group is tainted (dedicated=llm:NoSchedule)" in problems(raw)


def test_more_gpus_than_the_instance_has_is_rejected() -> None:
    message = problems(environment(model(resources={"gpus": 2})))
    assert "caches.models[0].resources.gpus: 2 -- ml.g5.xlarge (instance group inference) has 1 GPU(s); allowed: 0..1" in message


def test_moving_image_tag_is_rejected() -> None:
    assert "moving tag (:latest)" in problems(environment(model(image="public.ecr.aws/x/vllm:latest")))


def test_extra_images_need_the_daemonset() -> None:
    message = problems(environment(model(extra_images=[{"image": "public.ecr.aws/x/proxy:1.2"}])))
    assert "caches.models[0].extra_images: pre-pulled by the DaemonSet; set prepull to daemonset or both" in message


def test_unknown_prepull_mode_is_rejected() -> None:
    assert "caches.models[0].prepull: 'kubelet'" in problems(environment(model(prepull="kubelet")))


def test_unknown_routing_strategy_is_rejected() -> None:
    assert "caches.models[0].routing: 'random'" in problems(environment(model(routing="random")))


def test_duplicate_model_names_are_rejected() -> None:
    assert "model names must be unique; repeated: qwen" in problems(environment(model(), model()))


def test_oversize_cache_fails_with_its_numbers() -> None:
    message = problems(environment(model(name="big", size_gb=220), model(name="small", size_gb=5)))
    # (220 + 5) x 1 version + 20 GB image = 245 GB; 250 GB NVMe less 10 % = 225 GB.
    assert "instance group 'inference' (ml.g5.xlarge): need 245 GB, have 225 GB (NVMe 250 GB less 10 % headroom)" in message
    assert "models big (220 GB x 1 version), small (5 GB x 1 version); images 20 GB -- does not fit;" in message


def test_oversize_cache_fails_synth(project_context) -> None:
    project_context["environments"]["dev"] = environment(model(size_gb=300))
    project_context["env"] = "dev"
    with pytest.raises(ConfigError, match="need 320 GB, have 225 GB"):
        build_app(context=project_context, nag=False)


def test_headroom_is_configurable() -> None:
    raw = environment(model(size_gb=220))  # 240 GB: over 225 GB at 10 %, under 250 GB at 0 %
    assert "need 240 GB, have 225 GB" in problems(raw)
    raw["caches"]["nvme_headroom_percent"] = 0
    assert parse_environment("dev", raw).caches.nvme_headroom_percent == 0


def test_a_model_keeps_one_version_and_a_refreshed_one_two() -> None:
    props = CachedModel.model_validate(model(size_gb=100)).props
    placed, refreshed = footprint(props), footprint(props, refreshed=True)
    assert (placed.weights_gb, placed.cached, placed.versions, placed.peak_gb) == (100, True, 1, 100)
    assert (refreshed.versions, refreshed.peak_gb) == (2, 200)


@pytest.mark.parametrize("cache", ["node", "operator"])
def test_either_cache_holds_one_copy_of_each_version_kept(cache: str) -> None:
    """No stand-alone copy beside the one the pods read: the node cache is the pods' own directory, the operator's
    cache the deployment's."""
    props = CachedModel.model_validate(model(weights_cache=cache)).props
    assert (footprint(props).peak_gb, footprint(props, refreshed=True).peak_gb) == (10, 10 * 2)


def test_uncached_weights_take_no_nvme() -> None:
    assert footprint(CachedModel.model_validate(model(weights_cache="off")).props).peak_gb == 0


def test_prewarm_and_a_boolean_weights_cache_still_work_with_a_deprecation_warning() -> None:
    """For one release: prewarm means the node cache; the library's props still take a boolean (cdk.json names
    the allowed values instead)."""
    with pytest.warns(DeprecationWarning, match='use weights_cache="node"'):
        props = CachedModel.model_validate(model(prewarm=True)).props
    assert props.weights_cache == "node"
    with pytest.warns(DeprecationWarning, match='use "operator" or "off"'):
        assert dataclasses.replace(props, weights_cache=False, prewarm=False).weights_cache == "off"
    with pytest.raises(ValueError, match="Input should be 'node', 'operator' or 'off'"):
        CachedModel.model_validate(model(weights_cache=False))


def test_serving_image_counts_even_without_image_cache() -> None:
    assert footprint(CachedModel.model_validate(model(image_cache=False)).props).images == {IMAGE: 20}


def test_shared_image_is_counted_once_per_node() -> None:
    usage = group_usage("g", 1000, [CacheFootprint("a", 10, True, {IMAGE: 20}, versions=2),
                                    CacheFootprint("b", 5, True, {IMAGE: 20}, versions=2)], 10)
    assert (usage.weights_gb, usage.images_gb, usage.need_gb, usage.have_gb) == (30, 20, 50, 900)


def test_worker_parallelism_must_match_its_gpus() -> None:
    message = problems(environment(model(serving={"environment": {"SM_VLLM_TENSOR_PARALLEL_SIZE": "2"}})))
    assert ("caches.models[0].serving.environment.SM_VLLM_TENSOR_PARALLEL_SIZE: '2' -- vllm runs one server on "
            "2 GPU(s) but resources.gpus is 1; allowed: settings whose product is 1") in message


def test_a_custom_image_needs_its_convention() -> None:
    message = problems(environment(model(image="123456789012.dkr.ecr.us-west-2.amazonaws.com/my-server:1.0")))
    assert "caches.models[0].serving.framework: None -- hyperwarm cannot tell how the server in " \
           "123456789012.dkr.ecr.us-west-2.amazonaws.com/my-server:1.0 reads" in message


def test_a_fixed_port_server_on_another_port_is_rejected() -> None:
    image = "763104351884.dkr.ecr.us-west-2.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128"
    message = problems(environment(model(image=image, port=9000)))
    assert "caches.models[0].port: 9000 -- the lmi container listens on 8080; allowed: 8080" in message


def test_a_cached_model_image_needing_a_newer_cuda_than_the_hyperpod_ami_is_rejected() -> None:
    # HyperPod's EKS AMIs run NVIDIA driver 580 (CUDA <= 13.0): the SageMaker AMI rule never saw these workers.
    cu131 = "763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:0.29.0-gpu-py312-cu131-ubuntu22.04-sagemaker"
    message = problems(environment(model(image=cu131)))
    assert f"environments.dev.caches.models[0].image: '{cu131}' -- the image needs CUDA 13.1 but HyperPod's EKS " \
           "AMIs run NVIDIA driver 580, CUDA <= 13.0" in message
    parse_environment("dev", environment(model(image=cu131.replace("cu131", "cu130"))))
