"""observability.detailed-observability-for-promql-alarms: a TTFT alarm whose query can return no series."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hyperwarm.functions.endpoint_metrics import promql
from rehearsal import Assembly
from rehearsal.rules.observability import promql_alarms_read_published_metrics

QUERY = promql.ttft_above(5, endpoint="chat", variant="main")
VLLM = "763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:0.27.1-gpu-py312-cu130-ubuntu22.04-sagemaker"
SGLANG = "763104351884.dkr.ecr.us-west-2.amazonaws.com/sglang:0.5.5-gpu-py312-cu129-ubuntu22.04-sagemaker"
ON = {"EnableDetailedObservability": True}


def config(metrics: dict[str, Any] | None) -> dict[str, Any]:
    props: dict[str, Any] = {"ProductionVariants": [
        {"VariantName": "main", "ModelName": {"Fn::GetAtt": ["Model", "ModelName"]}}]}
    if metrics is not None:
        props["MetricsConfig"] = metrics
    return {"Type": "AWS::SageMaker::EndpointConfig", "Properties": props}


def model(image: str = VLLM, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"Type": "AWS::SageMaker::Model", "Properties": {"PrimaryContainer": {"Image": image}},
            **({"Metadata": metadata} if metadata else {})}


ENDPOINT = {"Type": "AWS::SageMaker::Endpoint", "Properties": {
    "EndpointName": "chat", "EndpointConfigName": {"Fn::GetAtt": ["Config", "EndpointConfigName"]}}}
ENRICHMENT = {"Tags": {"Type": "AWS::ObservabilityAdmin::TelemetryEnrichment", "Properties": {"Scope": "ACCOUNT"}},
              "OTel": {"Type": "AWS::CloudWatch::OTelEnrichment", "DependsOn": ["Tags"]}}


def alarm(query: Any = QUERY) -> dict[str, Any]:
    return {"Type": "AWS::CloudWatch::Alarm", "Properties": {
        "EvaluationInterval": 60, "EvaluationCriteria": {"PromQLCriteria": {"Query": query, "PendingPeriod": 300}}}}


def findings(templates: dict[str, dict[str, Any]], dependencies: dict[str, list[str]] | None = None) -> list[str]:
    assembly = Assembly.from_templates(templates, {"observability": ["endpoints"]} if dependencies is None
                                       else dependencies)
    return [f"{f.stack}/{f.resource}: {f.message}" for f in promql_alarms_read_published_metrics(assembly)]


def app(metrics: dict[str, Any] | None = ON, query: Any = QUERY, image: str = VLLM,
        enrichment: dict[str, Any] | None = ENRICHMENT) -> dict[str, dict[str, Any]]:
    """An endpoint whose alarm can fire: detailed observability on, enrichment created with the alarm, vLLM."""
    return {"endpoints": {"Resources": {"Config": config(metrics), "Endpoint": ENDPOINT, "Model": model(image)}},
            "observability": {"Resources": {"TtftAlarm": alarm(query), **copy.deepcopy(enrichment or {})}}}


def test_an_alarm_whose_query_can_return_series_passes():
    assert findings(app()) == []


def test_a_ttft_alarm_on_an_endpoint_without_detailed_observability_fails_naming_both():
    (finding,) = findings(app({"EnableDetailedObservability": False}))
    assert finding.startswith("observability/TtftAlarm: reads vllm_time_to_first_token_seconds_bucket of endpoint "
                              "'chat', whose EndpointConfig endpoints/Config sets MetricsConfig.EnableDetailedObservability")
    assert "can never fire" in finding


def test_a_string_false_counts_as_off():
    assert len(findings(app({"EnableDetailedObservability": "false"}))) == 1


@pytest.mark.parametrize("metrics", [None, {"MetricPublishFrequencyInSeconds": 30}])
def test_detailed_observability_left_to_sagemakers_default_fails(metrics):
    """The default is false for configs created before 2026-06-17: the rule cannot see the flag is on."""
    (finding,) = findings(app(metrics))
    assert "leaves MetricsConfig.EnableDetailedObservability to SageMaker's default" in finding


def test_without_otel_enrichment_the_alarm_fails():
    (finding,) = findings(app(enrichment={}))
    assert "no AWS::CloudWatch::OTelEnrichment in this stack or one it deploys after" in finding


def test_enrichment_declared_existing_passes():
    templates = app(enrichment={})
    templates["observability"]["Metadata"] = {"hyperwarm:otelEnrichment": "existing"}
    assert findings(templates) == []


def test_enrichment_in_a_stack_deployed_before_passes_and_one_deployed_after_fails():
    templates = app(enrichment={})
    templates["account"] = {"Resources": copy.deepcopy(ENRICHMENT)}
    assert findings(templates, {"observability": ["endpoints", "account"]}) == []
    assert len(findings(templates, {"observability": ["endpoints"], "account": ["observability"]})) == 1


def test_otel_enrichment_without_resource_tags_for_telemetry_first_fails():
    (finding,) = findings(app(enrichment={"OTel": {"Type": "AWS::CloudWatch::OTelEnrichment"}}))
    assert "created without AWS::ObservabilityAdmin::TelemetryEnrichment before it" in finding


def test_a_vllm_query_on_an_sglang_variant_fails():
    (finding,) = findings(app(image=SGLANG))
    assert "whose sglang container does not publish it (its TTFT histogram is sglang_time_to_first_token_seconds)" \
        in finding
    sglang = promql.ttft_above(5, endpoint="chat", variant="main", engine="sglang")
    assert findings(app(image=SGLANG, query=sglang)) == []


def test_a_variant_whose_engine_the_rule_cannot_tell_fails():
    (finding,) = findings(app(image="123456789012.dkr.ecr.us-west-2.amazonaws.com/my-server:1"))
    assert "whose serving engine the rule cannot tell" in finding
    templates = app(image="123456789012.dkr.ecr.us-west-2.amazonaws.com/my-server:1")
    templates["endpoints"]["Resources"]["Model"]["Metadata"] = {"hyperwarm:serving": {"framework": "vllm"}}
    assert findings(templates) == []


def test_an_lmi_variant_has_no_ttft_histogram_hyperwarm_knows():
    lmi = "763104351884.dkr.ecr.us-west-2.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128"
    (finding,) = findings(app(image=lmi))
    assert "lmi container does not publish it: hyperwarm knows no TTFT histogram of that engine" in finding


def test_an_endpoint_named_by_reference_in_the_query_is_followed():
    joined = {"Fn::Join": ["", [QUERY.split('"chat"')[0] + '"',
                                {"Fn::GetAtt": ["Endpoint", "EndpointName"]}, '"' + QUERY.split('"chat"')[1]]]}
    templates = {"s": {"Resources": {"Config": config({"EnableDetailedObservability": False}), "Model": model(),
                                     "Endpoint": {**ENDPOINT, "Properties": {"EndpointConfigName": {
                                         "Fn::GetAtt": ["Config", "EndpointConfigName"]}}},
                                     "TtftAlarm": alarm(joined), **copy.deepcopy(ENRICHMENT)}}}
    (finding,) = findings(templates, {})
    assert "sets MetricsConfig.EnableDetailedObservability to false" in finding


def test_an_sglang_ttft_alarm_is_checked_too():
    query = promql.ttft_above(5, endpoint="chat", variant="main", engine="sglang")
    assert len(findings(app({"EnableDetailedObservability": False}, query, image=SGLANG))) == 1


def test_an_endpoint_outside_the_app_fails_as_unknown():
    other = promql.ttft_above(5, endpoint="elsewhere", variant="main")
    (finding,) = findings(app(query=other))
    assert "endpoint 'elsewhere', which is not in the app: the rule cannot see" in finding


def test_a_detailed_metric_read_without_an_endpoint_or_an_unreadable_query_fails():
    (finding,) = findings(app(query="histogram_quantile(0.99, rate(vllm_time_to_first_token_seconds_bucket[5m])) > 5"))
    assert "without selecting an endpoint" in finding
    (finding,) = findings(app(query={"Fn::Sub": "${Query}"}))
    assert "cannot be read" in finding


def test_metric_alarms_and_promql_alarms_on_other_series_are_left_alone():
    templates = app(enrichment={})
    templates["observability"]["Resources"]["TtftAlarm"] = {"Type": "AWS::CloudWatch::Alarm", "Properties": {
        "MetricName": "ModelLatency", "Namespace": "AWS/SageMaker", "Threshold": 1, "EvaluationPeriods": 1}}
    templates["observability"]["Resources"]["Other"] = alarm('sum(rate(http_requests_total{job="api"}[5m])) > 1')
    assert findings(templates) == []


def test_every_promql_alarm_of_the_synthesized_environments_can_return_series(synthesized):
    assembly = Assembly.from_outdir(synthesized.outdir)
    assert list(promql_alarms_read_published_metrics(assembly)) == []
