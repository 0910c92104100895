"""PromQL alarms on an endpoint's container metrics read metrics SageMaker actually publishes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hyperwarm.metric_catalog import PROMQL_METRICS
from hyperwarm.functions.cache_exporter.promql import ENDPOINT_LABEL, selectors
from rehearsal.core import Assembly, Finding, rule

RULE = "observability.detailed-observability-for-promql-alarms"
_ENDPOINT = "AWS::SageMaker::Endpoint"
_CONFIG = "AWS::SageMaker::EndpointConfig"
_DETAILED = {m.name for m in PROMQL_METRICS} | {f"{m.name}_bucket" for m in PROMQL_METRICS}


@rule(RULE, source="https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch-detailed-observability.html")
def promql_alarms_read_published_metrics(assembly: Assembly) -> Iterator[Finding]:
    """A PromQL alarm (``EvaluationCriteria.PromQLCriteria``) that reads a detailed-observability metric
    of an endpoint in the app (time to first token, selected by ``'aws.sagemaker.endpoint.name'``)
    needs that endpoint's EndpointConfig to leave detailed observability on.

    SageMaker publishes the serving container's metrics only while ``MetricsConfig.EnableDetailedObservability``
    is true; with it false the query returns nothing, and a PromQL alarm treats an empty result as
    "no contributor breaching": the alarm stays OK however slow the endpoint gets. cfn-lint and the
    CloudWatch API accept such an alarm. An absent flag is not reported: SageMaker defaults it to true
    for configs created after 2026-06-17 (hyperwarm's EndpointConfiguration always sets it).
    """
    for stack, logical_id, alarm in assembly.resources("AWS::CloudWatch::Alarm"):
        criteria = alarm.get("Properties", {}).get("EvaluationCriteria", {}).get("PromQLCriteria", {})
        query, references = _text(criteria.get("Query"))
        for metric, labels in selectors(query):
            if metric not in _DETAILED or ENDPOINT_LABEL not in labels:
                continue
            name = labels[ENDPOINT_LABEL]
            endpoint = _endpoint(assembly, stack, references.get(name, name))
            config = _config(assembly, endpoint) if endpoint else None
            if config and _disabled(assembly.templates[config[0]]["Resources"][config[1]]):
                yield Finding(RULE, stack, logical_id, (
                    f"reads {metric} of endpoint {name!r}, whose EndpointConfig {config[0]}/{config[1]} sets "
                    "MetricsConfig.EnableDetailedObservability to false: SageMaker publishes none of the "
                    "container's metrics, so the alarm can never fire; turn detailed observability on "
                    "(InferenceEndpointProps.detailed_observability) or drop the alarm"))


def _text(value: Any) -> tuple[str, dict[str, Any]]:
    """The query as text, references standing in as ``${REF<n>}`` placeholders (with what each stands for)."""
    if isinstance(value, str):
        return value, {}
    join = value.get("Fn::Join") if isinstance(value, dict) else None
    if not (isinstance(join, list) and len(join) == 2 and isinstance(join[1], list)):
        return "", {}
    parts, references = [], {}
    for index, part in enumerate(join[1]):
        if isinstance(part, str):
            parts.append(part)
        else:
            references[f"${{REF{index}}}"] = part
            parts.append(f"${{REF{index}}}")
    return str(join[0]).join(parts), references


def _endpoint(assembly: Assembly, stack: str, name: Any) -> tuple[str, str] | None:
    """The app's endpoint a label value names: by a reference to it, or by its literal EndpointName."""
    if not isinstance(name, str):
        found = assembly.referenced(stack, name)
        return found if found and _type(assembly, found) == _ENDPOINT else None
    return next(((s, i) for s, i, r in assembly.resources(_ENDPOINT)
                 if r.get("Properties", {}).get("EndpointName") == name), None)


def _config(assembly: Assembly, endpoint: tuple[str, str]) -> tuple[str, str] | None:
    stack, logical_id = endpoint
    value = assembly.templates[stack]["Resources"][logical_id].get("Properties", {}).get("EndpointConfigName")
    if isinstance(value, str):
        return next(((s, i) for s, i, r in assembly.resources(_CONFIG)
                     if r.get("Properties", {}).get("EndpointConfigName") == value), None)
    found = assembly.referenced(stack, value)
    return found if found and _type(assembly, found) == _CONFIG else None


def _type(assembly: Assembly, where: tuple[str, str]) -> str | None:
    return assembly.templates.get(where[0], {}).get("Resources", {}).get(where[1], {}).get("Type")


def _disabled(config: dict[str, Any]) -> bool:
    flag = config.get("Properties", {}).get("MetricsConfig", {}).get("EnableDetailedObservability")
    return flag is False or (isinstance(flag, str) and flag.lower() == "false")
