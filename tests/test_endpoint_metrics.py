"""EndpointMetricsBridge: which variants it reads, with which queries, its metrics and its validation."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from hyperwarm import InferenceEndpoint, InferenceEndpointProps, ModelSpec, ProductionVariant, Serving, ServingImage
from hyperwarm.functions.endpoint_metrics import promql
from hyperwarm.observability.dashboard import InferenceObservability, InferenceObservabilityProps
from hyperwarm.observability.endpoint_metrics import (
    BRIDGE_HANDLER,
    ENVIRONMENT_LIMIT,
    MAX_VARIANTS,
    EndpointMetricsBridge,
    EndpointMetricsBridgeProps,
    environment_size,
)
from hyperwarm.observability.metric_catalog import ENDPOINTS_NAMESPACE

_ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com/serving/server:1"


def _variant(name: str, framework: str = "vllm") -> ProductionVariant:
    model = ModelSpec(ServingImage.from_uri(_ECR), model_data="s3://models-bucket/m/v1/",
                      serving=Serving(framework=framework))
    return ProductionVariant(name=name, model=model, instance_type="ml.g5.2xlarge")


def _endpoint(stack: cdk.Stack, id: str, *variants: ProductionVariant, **props: Any) -> InferenceEndpoint:
    return InferenceEndpoint(stack, id, InferenceEndpointProps(variants=list(variants), **props))


def _stack() -> cdk.Stack:
    return cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="us-east-1", account="111122223333"))


def _environment(stack: cdk.Stack, bridge: EndpointMetricsBridge) -> list[dict[str, str]]:
    function = Template.from_stack(stack).to_json()["Resources"][stack.get_logical_id(bridge.node.default_child)]
    return json.loads(function["Properties"]["Environment"]["Variables"]["HYPERWARM_VARIANTS"])


def test_each_variant_gets_a_compact_entry_its_engines_queries_are_written_from():
    stack = _stack()
    chat = _endpoint(stack, "Chat", _variant("v"), _variant("s", "sglang"), endpoint_name="chat",
                     metric_publish_frequency=cdk.Duration.seconds(120))
    bridge = EndpointMetricsBridge(stack, "Bridge", EndpointMetricsBridgeProps(endpoints=[chat]))
    entries = _environment(stack, bridge)
    assert entries == [{"endpoint": "chat", "variant": "v", "engine": "vllm", "window": "8m"},
                       {"endpoint": "chat", "variant": "s", "engine": "sglang", "window": "8m"}]
    v, s = (promql.Variant.from_entry(e) for e in entries)  # what the function does with them
    assert (v.ttft, v.hit_rate) == (promql.ttft_buckets_per_minute(endpoint="chat", variant="v", window="8m"),
                                    promql.prefix_cache_hit_rate(endpoint="chat", variant="v", window="8m"))
    assert (s.ttft, s.hit_rate) == (
        promql.ttft_buckets_per_minute(endpoint="chat", variant="s", engine="sglang", window="8m"), None)
    assert bridge.function.node.default_child.handler == BRIDGE_HANDLER


def test_a_generated_endpoint_name_reaches_the_queries_at_deploy_time():
    stack = _stack()
    chat = _endpoint(stack, "Chat", _variant("v"))  # no endpoint_name: CloudFormation names it
    EndpointMetricsBridge(stack, "Bridge", EndpointMetricsBridgeProps(endpoints=[chat]))
    (function,) = Template.from_stack(stack).find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": BRIDGE_HANDLER}}).values()
    variables = json.dumps(function["Properties"]["Environment"]["Variables"])
    assert "Fn::GetAtt" in variables and "EndpointName" in variables


def test_metrics_name_endpoint_and_variant_with_documented_defaults():
    stack = _stack()
    chat = _endpoint(stack, "Chat", _variant("v"), endpoint_name="chat")
    bridge = EndpointMetricsBridge(stack, "Bridge", EndpointMetricsBridgeProps(endpoints=[chat]))
    ttft = bridge.metric_time_to_first_token(chat, "v")
    assert (ttft.namespace, ttft.metric_name, ttft.statistic, ttft.period.to_seconds()) == (
        ENDPOINTS_NAMESPACE, "TimeToFirstToken", "p99", 60)
    assert ttft.dimensions == {"EndpointName": "chat", "VariantName": "v"}
    assert bridge.metric_time_to_first_token(chat, "v", statistic="p50").statistic == "p50"
    assert bridge.metric_prefix_cache_hit_rate(chat, "v").metric_name == "PrefixCacheHitRate"
    assert bridge.metric_query_failures(chat, "v").statistic == "Maximum"
    with pytest.raises(KeyError, match="not in the metric catalog"):
        bridge.metric("TTFT", chat, "v")


def test_validation_names_every_problem():
    stack = _stack()
    off = _endpoint(stack, "Off", _variant("v"), endpoint_name="off", detailed_observability=False)
    unknown = InferenceEndpoint.from_endpoint_attributes(stack, "Ext", endpoint_name="ext")
    twice = InferenceEndpoint.from_endpoint_attributes(stack, "Ext2", endpoint_name="off", variant_names=["a"])
    with pytest.raises(ValueError) as error:
        EndpointMetricsBridge(stack, "Bridge", EndpointMetricsBridgeProps(endpoints=[off, unknown, twice]))
    text = str(error.value)
    assert text.startswith("S/Bridge: ")
    assert "endpoints = S/Off -- detailed observability is off" in text
    assert "endpoints = S/Ext -- its variant_names must be known" in text
    assert "endpoints = off -- each endpoint once" in text
    with pytest.raises(ValueError, match="endpoints = \\[\\] -- give at least one endpoint"):
        EndpointMetricsBridge(stack, "Empty", EndpointMetricsBridgeProps(endpoints=[]))


def _long_named(stack: cdk.Stack, count: int, start: int = 0) -> list[InferenceEndpoint]:
    """``count`` variants with the longest names (63-character endpoint and variant names), one endpoint each."""
    return [InferenceEndpoint.from_endpoint_attributes(stack, f"E{i}", endpoint_name=f"{i:03d}".ljust(63, "e"),
                                                       variant_names=[f"{i:03d}".ljust(63, "v")])
            for i in range(start, start + count)]


def test_22_variants_with_the_longest_names_fit_one_bridge_and_23_fail_synth_saying_what_to_do():
    """Old: the full PromQL per variant (~746 bytes at 63-character names) filled 4 KB at 5 variants."""
    stack = _stack()
    fits = _long_named(stack, 22)
    assert environment_size(fits) <= ENVIRONMENT_LIMIT < environment_size(_long_named(_stack(), 23))
    EndpointMetricsBridge(stack, "Fits", EndpointMetricsBridgeProps(endpoints=fits))
    with pytest.raises(ValueError) as error:
        EndpointMetricsBridge(stack, "Bridge", EndpointMetricsBridgeProps(endpoints=_long_named(stack, 23, 100)))
    assert "endpoints = 23 variants -- their entries take 4274 bytes of Lambda's 4096 bytes" in str(error.value)
    assert f"one bridge holds {MAX_VARIANTS} variants" in str(error.value)
    assert "several EndpointMetricsBridge constructs, each EndpointMetricsBridgeProps(endpoints=[...])" in str(error.value)


def test_the_worst_case_per_bridge_holds_max_variants():
    entry = {"endpoint": "e" * 63, "variant": "v" * 63, "engine": "sglang", "window": "20m"}
    assert len("HYPERWARM_VARIANTS") + len(json.dumps([entry] * MAX_VARIANTS, separators=(",", ":"))) <= 4096
    assert len("HYPERWARM_VARIANTS") + len(json.dumps([entry] * (MAX_VARIANTS + 1), separators=(",", ":"))) > 4096


def test_the_size_is_what_cloudformation_renders():
    stack = _stack()
    chat = _endpoint(stack, "Chat", _variant("v"), _variant("s", "sglang"), endpoint_name="chat")
    bridge = EndpointMetricsBridge(stack, "Bridge", EndpointMetricsBridgeProps(endpoints=[chat]))
    function = Template.from_stack(stack).to_json()["Resources"][stack.get_logical_id(bridge.node.default_child)]
    value = function["Properties"]["Environment"]["Variables"]["HYPERWARM_VARIANTS"]
    assert environment_size([chat]) == len("HYPERWARM_VARIANTS") + len(value)


def test_an_unresolved_name_is_sized_at_the_longest_endpoint_name():
    stack = _stack()
    named = _endpoint(stack, "Named", _variant("v"), endpoint_name="e")
    generated = _endpoint(stack, "Generated", _variant("v"))
    assert environment_size([generated]) - environment_size([named]) == 63 - 1


def test_observability_splits_endpoints_over_as_many_bridges_as_their_entries_need():
    stack = _stack()
    endpoints = _long_named(stack, 50)
    obs = InferenceObservability(stack, "Obs", InferenceObservabilityProps(otel_enrichment="existing", endpoints=endpoints))
    bridges = obs.endpoint_metrics_bridges
    assert [b.node.id for b in bridges] == ["EndpointMetrics", "EndpointMetrics2", "EndpointMetrics3"]
    assert obs.endpoint_metrics is bridges[0]
    assert [len(_environment(stack, b)) for b in bridges] == [22, 22, 6]
    assert [e["endpoint"] for b in bridges for e in _environment(stack, b)] == [e.endpoint_name for e in endpoints]
    errors = Template.from_stack(stack).find_resources("AWS::CloudWatch::Alarm", {"Properties": {
        "MetricName": "Errors", "Namespace": "AWS/Lambda"}})
    assert len(errors) == 3


def test_observability_bridges_only_endpoints_with_detailed_observability():
    stack = _stack()
    on = _endpoint(stack, "On", _variant("v"), endpoint_name="on")
    off = _endpoint(stack, "Off", _variant("v"), endpoint_name="off", detailed_observability=False)
    obs = InferenceObservability(stack, "Obs", InferenceObservabilityProps(otel_enrichment="existing", endpoints=[on, off]))
    assert [v["endpoint"] for v in _environment(stack, obs.endpoint_metrics)] == ["on"]
    only_off = _stack()
    obs = InferenceObservability(only_off, "Obs", InferenceObservabilityProps(
        endpoints=[_endpoint(only_off, "Off", _variant("v"), endpoint_name="off", detailed_observability=False)]))
    assert obs.endpoint_metrics is None
    Template.from_stack(only_off).resource_count_is("AWS::Lambda::Function", 0)
