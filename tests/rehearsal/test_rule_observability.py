"""observability.detailed-observability-for-promql-alarms: a TTFT alarm on an endpoint that publishes no TTFT."""

from __future__ import annotations

from typing import Any

import pytest

from hyperwarm.functions.cache_exporter import promql
from rehearsal import Assembly
from rehearsal.rules.observability import promql_alarms_read_published_metrics

QUERY = promql.ttft_above(5, endpoint="chat", variant="main")


def config(metrics: dict[str, Any] | None) -> dict[str, Any]:
    props: dict[str, Any] = {"ProductionVariants": [{"VariantName": "main", "ModelName": "m"}]}
    if metrics is not None:
        props["MetricsConfig"] = metrics
    return {"Type": "AWS::SageMaker::EndpointConfig", "Properties": props}


ENDPOINT = {"Type": "AWS::SageMaker::Endpoint", "Properties": {
    "EndpointName": "chat", "EndpointConfigName": {"Fn::GetAtt": ["Config", "EndpointConfigName"]}}}


def alarm(query: Any = QUERY) -> dict[str, Any]:
    return {"Type": "AWS::CloudWatch::Alarm", "Properties": {
        "EvaluationInterval": 60, "EvaluationCriteria": {"PromQLCriteria": {"Query": query, "PendingPeriod": 300}}}}


def findings(templates: dict[str, dict[str, Any]], dependencies: dict[str, list[str]] | None = None) -> list[str]:
    assembly = Assembly.from_templates(templates, dependencies)
    return [f"{f.stack}/{f.resource}: {f.message}" for f in promql_alarms_read_published_metrics(assembly)]


def app(metrics: dict[str, Any] | None, query: Any = QUERY) -> dict[str, dict[str, Any]]:
    return {"endpoints": {"Resources": {"Config": config(metrics), "Endpoint": ENDPOINT}},
            "observability": {"Resources": {"TtftAlarm": alarm(query)}}}


def test_a_ttft_alarm_on_an_endpoint_without_detailed_observability_fails_naming_both():
    (finding,) = findings(app({"EnableDetailedObservability": False}))
    assert finding.startswith("observability/TtftAlarm: reads vllm_time_to_first_token_seconds_bucket of endpoint "
                              "'chat', whose EndpointConfig endpoints/Config sets MetricsConfig.EnableDetailedObservability")
    assert "can never fire" in finding


@pytest.mark.parametrize("metrics", [{"EnableDetailedObservability": True}, None,
                                     {"EnableDetailedObservability": "true", "MetricPublishFrequencyInSeconds": 30}])
def test_detailed_observability_on_or_left_to_sagemakers_default_passes(metrics):
    assert findings(app(metrics)) == []


def test_a_string_false_counts_as_off():
    assert len(findings(app({"EnableDetailedObservability": "false"}))) == 1


def test_an_endpoint_named_by_reference_in_the_query_is_followed():
    joined = {"Fn::Join": ["", [QUERY.split('"chat"')[0] + '"',
                                {"Fn::GetAtt": ["Endpoint", "EndpointName"]}, '"' + QUERY.split('"chat"')[1]]]}
    templates = {"s": {"Resources": {"Config": config({"EnableDetailedObservability": False}),
                                     "Endpoint": {**ENDPOINT, "Properties": {"EndpointConfigName": {
                                         "Fn::GetAtt": ["Config", "EndpointConfigName"]}}},
                                     "TtftAlarm": alarm(joined)}}}
    assert len(findings(templates)) == 1


def test_an_sglang_ttft_alarm_is_checked_too():
    query = promql.ttft_above(5, endpoint="chat", variant="main", engine="sglang")
    assert len(findings(app({"EnableDetailedObservability": False}, query))) == 1


def test_endpoints_outside_the_app_and_other_alarms_are_left_alone():
    other = promql.ttft_above(5, endpoint="elsewhere", variant="main")
    assert findings(app({"EnableDetailedObservability": False}, other)) == []
    templates = app({"EnableDetailedObservability": False})
    templates["observability"]["Resources"]["TtftAlarm"] = {"Type": "AWS::CloudWatch::Alarm", "Properties": {
        "MetricName": "ModelLatency", "Namespace": "AWS/SageMaker", "Threshold": 1, "EvaluationPeriods": 1}}
    assert findings(templates) == []
