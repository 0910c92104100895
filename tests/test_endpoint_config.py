"""The ``endpoints`` section of an environment: validated with the environment and field path."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import Stack

from stacks.app import build_app
from stacks.config import ConfigError, parse_environment

IMAGE = {"uri": "123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm:1"}


def env_with(**variant: Any) -> dict[str, Any]:
    base = {"name": "v1", "image": IMAGE, "instance_type": "ml.g5.2xlarge", "instance_count": 2,
            "model_data": "s3://models/qwen/v1/", "serving": {"framework": "vllm"}}
    return {"endpoints": [{"name": "chat", "variants": [{**base, **variant}]}], "model_buckets": [{"name": "models"}],
            "observability": {"otel_enrichment": "existing"}}


def rejected(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_environment("prod", raw)
    return str(info.value)


def test_prefix_aware_without_both_parameters_names_environment_and_field() -> None:
    message = rejected(env_with(routing={"strategy": "PREFIX_AWARE", "prefix_length": 4096}))
    assert "environments.prod.endpoints[0].variants[0].routing:" in message
    assert "routing.concurrency_threshold = None -- PREFIX_AWARE needs both" in message


def test_prefix_length_out_of_range_is_rejected_in_config() -> None:
    message = rejected(env_with(routing={"strategy": "PREFIX_AWARE", "prefix_length": 100, "concurrency_threshold": 4}))
    assert "environments.prod.endpoints[0].variants[0].routing.prefix_length: 100" in message
    assert "greater than or equal to 1024" in message


def test_prefix_settings_with_random_are_rejected_in_config() -> None:
    message = rejected(env_with(routing={"strategy": "RANDOM", "concurrency_threshold": 4}))
    assert "only PREFIX_AWARE takes concurrency_threshold" in message


def test_cache_aware_routing_on_one_fixed_instance_is_rejected_in_config() -> None:
    message = rejected(env_with(instance_count=1, routing={"strategy": "KV_AWARE"}))
    assert "environments.prod.endpoints[0].variants[0]" in message and "fixed at 1 instance" in message


def test_autoscaling_max_counts_toward_two_instances() -> None:
    config = parse_environment("qa", env_with(instance_count=1, routing={"strategy": "KV_AWARE"},
                                                autoscaling={"max_capacity": 3, "target_value": 8}))
    assert config.endpoints[0].variants[0].max_instances == 3


def test_non_ml_instance_type_is_rejected_in_config() -> None:
    message = rejected(env_with(instance_type="p5.48xlarge"))
    assert "variants[0].instance_type: 'p5.48xlarge'" in message


def test_malformed_model_data_uri_is_rejected_in_config() -> None:
    assert "variants[0].model_data: 'bucket/key'" in rejected(env_with(model_data="bucket/key"))


def test_non_positive_weight_is_rejected_in_config() -> None:
    assert "variants[0].initial_weight: 0.0" in rejected(env_with(initial_weight=0.0))


def test_duplicate_variant_names_are_rejected_in_config() -> None:
    raw = env_with()
    raw["endpoints"][0]["variants"].append(dict(raw["endpoints"][0]["variants"][0]))
    assert "variant names must be unique; repeated: v1" in rejected(raw)


def test_image_needs_either_uri_or_framework_and_version() -> None:
    assert "give either uri, or framework with version" in rejected(env_with(image={"framework": "vllm", **IMAGE}))


def test_environment_without_endpoints_gets_no_endpoints_stack() -> None:
    app = build_app(context={"environments": {"dev": {}}}, nag=False)
    assert [s.stack_name for s in app.node.children if isinstance(s, Stack) and s.stack_name.endswith("-endpoints")] \
        == []


def test_serving_parallelism_is_checked_against_the_instance_type_with_its_field_path() -> None:
    message = rejected(env_with(instance_type="ml.p5.48xlarge",
                                serving={"framework": "vllm", "environment": {"SM_VLLM_TENSOR_PARALLEL_SIZE": "3"}}))
    assert ("environments.prod: endpoints[0].variants[0].serving.environment.SM_VLLM_TENSOR_PARALLEL_SIZE: '3' -- "
            "vllm runs one server on 3 GPU(s) but ml.p5.48xlarge has 8 GPU(s); allowed: settings whose product is 8"
            ) in message


def test_an_image_hyperwarm_cannot_recognise_needs_its_convention_in_config() -> None:
    raw = env_with()
    del raw["endpoints"][0]["variants"][0]["serving"]
    assert "endpoints[0].variants[0].serving.framework: None -- hyperwarm cannot tell how the server in " \
           "123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm:1 reads" in rejected(raw)


def test_unknown_serving_keys_are_rejected() -> None:
    message = rejected(env_with(serving={"framework": "vllm", "env": {}}))
    assert "environments.prod.endpoints[0].variants[0].serving.env: unknown key" in message


@pytest.fixture(scope="module")
def endpoints_template() -> dict[str, Any]:
    """One synthesis for the settings that reach the endpoints stack: ``chat`` with serving arguments, ``quiet`` with
    detailed observability off (each test reads its own endpoint's resources; nothing else to observe)."""
    chat = env_with(serving={"framework": "vllm", "args": ["--max-model-len", "8192"]})["endpoints"][0]
    quiet = {**env_with()["endpoints"][0], "name": "quiet", "detailed_observability": False,
             "metric_publish_frequency": 30}
    app = build_app(context={"environments": {"dev": {"endpoints": [chat, quiet], "model_buckets": [{"name": "models"}],
                                                      "observability": {"enabled": False}}}}, nag=False)
    return app.synth().get_stack_by_name("hyperwarm-dev-endpoints").template


def _of(template: dict[str, Any], kind: str, endpoint: str) -> list[dict[str, Any]]:
    return [r for logical_id, r in template["Resources"].items()
            if r["Type"] == kind and logical_id.startswith(endpoint)]


def test_serving_overrides_in_config_reach_the_endpoints_models(endpoints_template) -> None:
    (model,) = _of(endpoints_template, "AWS::SageMaker::Model", "chat")
    assert model["Properties"]["PrimaryContainer"]["Environment"] == {
        "SM_VLLM_MAX_MODEL_LEN": "8192", "SM_VLLM_MODEL": "/opt/ml/model", "SM_VLLM_TENSOR_PARALLEL_SIZE": "1"}


def test_detailed_observability_settings_in_config_reach_the_endpoint_config(endpoints_template) -> None:
    (config,) = _of(endpoints_template, "AWS::SageMaker::EndpointConfig", "quiet")
    assert config["Properties"]["MetricsConfig"] == {"EnableDetailedObservability": False,
                                                     "MetricPublishFrequencyInSeconds": 30}
    (chat,) = _of(endpoints_template, "AWS::SageMaker::EndpointConfig", "chat")  # the default, for contrast
    assert chat["Properties"]["MetricsConfig"]["EnableDetailedObservability"] is True


def test_a_publish_frequency_sagemaker_does_not_accept_is_rejected_in_config() -> None:
    raw = env_with()
    raw["endpoints"][0]["metric_publish_frequency"] = 45
    message = rejected(raw)
    assert "environments.prod.endpoints[0].metric_publish_frequency: 45 -- " in message
    assert "allowed: 10, 30, 60, 120, 180, 240, 300 seconds" in message
