"""TTFT of SageMaker variants: which engine's histogram each alarm reads, its window, and when there is none."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Annotations, Match, Template

from hyperwarm import InferenceEndpoint, InferenceEndpointProps, ModelSpec, ProductionVariant, Serving, ServingImage
from hyperwarm.functions.endpoint_metrics import promql
from hyperwarm.observability.dashboard import InferenceObservability, InferenceObservabilityProps

_ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com/serving/server:1"


def _variant(name: str, framework: str, **serving: Any) -> ProductionVariant:
    model = ModelSpec(ServingImage.from_uri(_ECR), model_data="s3://models-bucket/m/v1/",
                      serving=Serving(framework=framework, **serving))
    return ProductionVariant(name=name, model=model, instance_type="ml.g5.2xlarge")


def _queries(*variants: ProductionVariant, **endpoint_props: Any) -> tuple[dict[str, str], cdk.Stack]:
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="us-east-1", account="111122223333"))
    endpoint = InferenceEndpoint(stack, "Chat", InferenceEndpointProps(
        variants=list(variants), endpoint_name="chat", **endpoint_props))
    obs = InferenceObservability(stack, "Obs", InferenceObservabilityProps(otel_enrichment="existing", endpoints=[endpoint]))
    queries = {key: stack.resolve(alarm.node.default_child.evaluation_criteria)["promQlCriteria"]["query"]
               for key, alarm in obs.variant_ttft_alarms.items()}
    return queries, stack


def test_each_variant_reads_its_own_engines_histogram_scoped_to_itself():
    queries, _ = _queries(_variant("v", "vllm"), _variant("s", "sglang"), _variant("l", "djl-lmi"))
    assert queries == {
        "Chat/v": promql.ttft_above(5, endpoint="chat", variant="v"),
        "Chat/s": promql.ttft_above(5, endpoint="chat", variant="s", engine="sglang"),
        "Chat/l": promql.ttft_above(5, endpoint="chat", variant="l"),  # LMI: vLLM's metric, said so
    }


def test_an_assumed_engine_is_said_in_the_alarm_description():
    _, stack = _queries(_variant("l", "djl-lmi"))
    (alarm,) = Template.from_stack(stack).find_resources(
        "AWS::CloudWatch::Alarm", {"Properties": {"EvaluationCriteria": {}}}).values()
    assert "assumed: the lmi container's TTFT metric is not known to hyperwarm" in alarm["Properties"]["AlarmDescription"]


def test_an_imported_endpoint_is_queried_with_vllms_metric():
    stack = cdk.Stack(cdk.App(), "S")
    imported = InferenceEndpoint.from_endpoint_attributes(stack, "Ext", endpoint_name="ext", variant_names=["a"])
    obs = InferenceObservability(stack, "Obs", InferenceObservabilityProps(otel_enrichment="existing", endpoints=[imported],
                                                                           ttft_p99=cdk.Duration.millis(800)))
    criteria = stack.resolve(obs.variant_ttft_alarms["Ext/a"].node.default_child.evaluation_criteria)
    assert criteria["promQlCriteria"]["query"] == promql.ttft_above(0.8, endpoint="ext", variant="a")


def test_an_imported_endpoint_that_says_its_engine_frequency_and_observability_is_read_so():
    """No construct type check: the TTFT alarm reads what IInferenceEndpoint says, created or imported."""
    stack = cdk.Stack(cdk.App(), "S")
    told = InferenceEndpoint.from_endpoint_attributes(
        stack, "Ext", endpoint_name="ext", variant_names=["a"], serving_engines={"a": "sglang"},
        metric_publish_frequency=cdk.Duration.seconds(120), detailed_observability=True)
    dark = InferenceEndpoint.from_endpoint_attributes(stack, "Dark", endpoint_name="dark", variant_names=["b"],
                                                      detailed_observability=False)
    obs = InferenceObservability(stack, "Obs", InferenceObservabilityProps(otel_enrichment="existing", endpoints=[told, dark]))
    criteria = stack.resolve(obs.variant_ttft_alarms["Ext/a"].node.default_child.evaluation_criteria)
    assert criteria["promQlCriteria"]["query"] == promql.ttft_above(5, endpoint="ext", variant="a", engine="sglang",
                                                                    window="8m")
    assert set(obs.variant_ttft_alarms) == {"Ext/a"}


@pytest.mark.parametrize("seconds, window", [(10, "5m"), (60, "5m"), (120, "8m"), (300, "20m")])
def test_the_rate_window_holds_several_samples_at_the_publish_frequency(seconds, window):
    queries, _ = _queries(_variant("v", "vllm"), metric_publish_frequency=cdk.Duration.seconds(seconds))
    assert queries["Chat/v"].endswith(f"}}[{window}]))) > 5")


def test_no_ttft_alarm_where_detailed_observability_is_off_and_synth_says_so():
    queries, stack = _queries(_variant("v", "vllm"), detailed_observability=False)
    assert queries == {}
    Annotations.from_stack(stack).has_warning("/S/Obs", Match.string_like_regexp("detailed observability is off"))


def test_the_ttft_alarm_notifies_the_topic():
    _, stack = _queries(_variant("v", "vllm"))
    (alarm,) = Template.from_stack(stack).find_resources(
        "AWS::CloudWatch::Alarm", {"Properties": {"EvaluationCriteria": {}}}).values()
    assert alarm["Properties"]["AlarmActions"] == [{"Ref": stack.get_logical_id(
        stack.node.find_child("Obs").node.find_child("AlarmTopic").node.default_child)}]


def test_alarm_ids_keep_endpoint_and_variant_apart():
    """Old: ``a``/``bc`` and ``ab``/``c`` both made the construct id ``abcTtftP99`` and synth failed."""
    from aws_cdk import aws_sns as sns

    from hyperwarm.observability.endpoint_metrics import EndpointMetricsBridge, EndpointMetricsBridgeProps
    from hyperwarm.observability.sagemaker_ttft import variant_ttft

    stack = cdk.Stack(cdk.App(), "S")
    a = InferenceEndpoint.from_endpoint_attributes(stack, "a", endpoint_name="a", variant_names=["bc"])
    ab = InferenceEndpoint.from_endpoint_attributes(stack, "ab", endpoint_name="ab", variant_names=["c"])
    bridge = EndpointMetricsBridge(stack, "Bridge", EndpointMetricsBridgeProps(endpoints=[a, ab]))
    topic = sns.Topic(stack, "Topic")
    first, _ = variant_ttft(stack, a, "bc", threshold=cdk.Duration.seconds(5), topic=topic, bridge=bridge)
    second, _ = variant_ttft(stack, ab, "c", threshold=cdk.Duration.seconds(5), topic=topic, bridge=bridge)
    assert (first.node.id, second.node.id) == ("a-bcTtftP99", "ab-cTtftP99")
