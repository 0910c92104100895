"""PromQL alarms on an endpoint's container metrics read series that exist."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from hyperwarm.functions.endpoint_metrics.promql import (
    ENDPOINT_LABEL,
    PREFIX_CACHE_COUNTERS,
    TTFT_METRICS,
    VARIANT_LABEL,
    selectors,
)
from hyperwarm.observability.metric_catalog import PROMQL_METRICS
from hyperwarm.observability.otel_enrichment import DOCS, EXISTING, METADATA
from hyperwarm.serving.settings import SERVING_METADATA, convention_from_metadata, convention_of_image
from rehearsal.core import Assembly, Finding, rule

RULE = "observability.detailed-observability-for-promql-alarms"
_ENDPOINT = "AWS::SageMaker::Endpoint"
_CONFIG = "AWS::SageMaker::EndpointConfig"
_MODEL = "AWS::SageMaker::Model"
_COMPONENT = "AWS::SageMaker::InferenceComponent"
_OTEL = "AWS::CloudWatch::OTelEnrichment"
_TAGS = "AWS::ObservabilityAdmin::TelemetryEnrichment"
_DETAILED = {m.name for m in PROMQL_METRICS} | {f"{m.name}_bucket" for m in PROMQL_METRICS}
_PUBLISHED = {engine: {metric, f"{metric}_bucket"} | (set(PREFIX_CACHE_COUNTERS) if engine == "vllm" else set())
              for engine, metric in TTFT_METRICS.items()}
"""The detailed-observability series each engine's container publishes (its own metric names)."""


@rule(RULE, source=DOCS)
def promql_alarms_read_published_metrics(assembly: Assembly) -> Iterator[Finding]:
    """A PromQL alarm (``EvaluationCriteria.PromQLCriteria``) that reads an endpoint's container metrics
    (a detailed-observability metric, or any series selected by ``'aws.sagemaker.endpoint.name'``) needs all
    of what makes the query return series; each missing one is a finding, and so is each the rule cannot see:

    - the endpoint in the app, and its EndpointConfig with ``MetricsConfig.EnableDetailedObservability``
      set to true. SageMaker publishes the container's metrics only while it is on; absent, it is
      SageMaker's default, which is true only for configs created after 2026-06-17 (an older config of
      an updated stack keeps false), so it must be explicit;
    - the account's OTel enrichment, which SageMaker's getting-started guide requires for PromQL: an
      ``AWS::CloudWatch::OTelEnrichment`` in the alarm's stack or one it deploys after (itself after
      ``AWS::ObservabilityAdmin::TelemetryEnrichment``, which CloudFormation's page says comes first), or
      ``Metadata.hyperwarm:otelEnrichment: existing`` on the alarm's stack (a declared prerequisite);
    - the metric is one the variant's serving engine publishes (vLLM's ``vllm_...``, SGLang's
      ``sglang_...``), the engine read from the variant's model image or hyperwarm's serving record.

    A PromQL alarm whose query returns no series treats that as "nothing breaching": it stays OK however
    slow the endpoint gets, and cfn-lint and the CloudWatch API accept it.
    """
    for stack, logical_id, alarm in assembly.resources("AWS::CloudWatch::Alarm"):
        criteria = alarm.get("Properties", {}).get("EvaluationCriteria", {}).get("PromQLCriteria", {})
        if not criteria:
            continue
        query, references = _text(criteria.get("Query"))
        if not query:
            yield Finding(RULE, stack, logical_id, "its PromQL query cannot be read: the rule cannot tell which "
                          "series it needs")
            continue
        read = [(m, labels) for m, labels in selectors(query) if m in _DETAILED or ENDPOINT_LABEL in labels]
        unscoped = sorted(m for m in _DETAILED if re.search(rf"\b{m}\b(?!\{{)", query))
        for metric in unscoped:
            yield Finding(RULE, stack, logical_id, f"reads {metric} without selecting an endpoint "
                          f"({ENDPOINT_LABEL}): the rule cannot see what publishes it")
        if read or unscoped:
            problem = _enrichment_problem(assembly, stack)
            if problem:
                yield Finding(RULE, stack, logical_id, problem)
        for metric, labels in read:
            for problem in _series_problems(assembly, stack, metric, labels, references):
                yield Finding(RULE, stack, logical_id, problem)


def _series_problems(assembly: Assembly, stack: str, metric: str, labels: dict[str, str],
                     references: dict[str, Any]) -> Iterator[str]:
    name = labels.get(ENDPOINT_LABEL)
    if name is None:
        yield f"reads {metric} without selecting an endpoint ({ENDPOINT_LABEL}): the rule cannot see what publishes it"
        return
    endpoint = _endpoint(assembly, stack, references.get(name, name))
    if endpoint is None:
        yield (f"reads {metric} of endpoint {name!r}, which is not in the app: the rule cannot see its endpoint "
               "config or serving engine")
        return
    config = _config(assembly, endpoint)
    if config is None:
        yield f"reads {metric} of endpoint {name!r}, whose EndpointConfig the rule cannot find"
        return
    flag = _resource(assembly, config).get("Properties", {}).get("MetricsConfig", {}).get("EnableDetailedObservability")
    where = f"EndpointConfig {config[0]}/{config[1]}"
    if _false(flag):
        yield (f"reads {metric} of endpoint {name!r}, whose {where} sets MetricsConfig.EnableDetailedObservability "
               "to false: SageMaker publishes none of the container's metrics, so the alarm can never fire; turn "
               "detailed observability on (InferenceEndpointProps.detailed_observability) or drop the alarm")
    elif not _true(flag):
        yield (f"reads {metric} of endpoint {name!r}, whose {where} leaves MetricsConfig.EnableDetailedObservability "
               "to SageMaker's default (false for configs created before 2026-06-17): set it true")
    variant = labels.get(VARIANT_LABEL)
    for variant_name, engine in _engines(assembly, endpoint, config, variant):
        if engine is None:
            yield (f"reads {metric} of {name!r}/{variant_name}, whose serving engine the rule cannot tell (an AWS "
                   f"serving image, or hyperwarm's {SERVING_METADATA} record on the model)")
        elif metric not in _PUBLISHED.get(engine, set()):
            yield (f"reads {metric} of {name!r}/{variant_name}, whose {engine} container does not publish it"
                   + (f" (its TTFT histogram is {TTFT_METRICS[engine]})" if engine in TTFT_METRICS else
                      ": hyperwarm knows no TTFT histogram of that engine") + "; the query returns no series")


def _enrichment_problem(assembly: Assembly, stack: str) -> str | None:
    if assembly.templates[stack].get("Metadata", {}).get(METADATA) == EXISTING:
        return None
    found = [(s, i) for s, i, _ in assembly.resources(_OTEL) if s == stack or assembly.deploys_after(stack, s)]
    if not found:
        return (f"no {_OTEL} in this stack or one it deploys after, and no {METADATA}: {EXISTING} declaration: "
                "PromQL needs the account's OTel enrichment and returns no series without it")
    for otel_stack, otel_id in found:
        if any(assembly.created_before(otel_stack, otel_id, s, i) for s, i, _ in assembly.resources(_TAGS)):
            return None
    where = ", ".join(f"{s}/{i}" for s, i in found)
    return f"{where}: OTel enrichment is created without {_TAGS} before it (resource tags for telemetry come first)"


def _engines(assembly: Assembly, endpoint: tuple[str, str], config: tuple[str, str],
             variant: str | None) -> Iterator[tuple[str, str | None]]:
    """(variant, engine) of the selected variant, or of every variant of the config when none is selected:
    of the variant's model, or of the models of the inference components placed on it."""
    variants = _resource(assembly, config).get("Properties", {}).get("ProductionVariants", [])
    chosen = [v for v in variants if variant is None or v.get("VariantName") == variant]
    if not chosen:
        yield variant or "?", None
    for entry in chosen:
        name = str(entry.get("VariantName"))
        models = [_model(assembly, config[0], entry["ModelName"])] if "ModelName" in entry else [
            _model(assembly, s, c.get("Properties", {}).get("Specification", {}).get("ModelName"))
            for s, _, c in assembly.resources(_COMPONENT)
            if c.get("Properties", {}).get("VariantName") == name
            and _endpoint(assembly, s, c.get("Properties", {}).get("EndpointName")) == endpoint]
        if not models:
            yield name, None
        for model in models:
            yield name, _engine(_resource(assembly, model)) if model else None


def _engine(model: dict[str, Any]) -> str | None:
    props = model.get("Properties", {})
    image = (props.get("PrimaryContainer") or next(iter(props.get("Containers", [])), {})).get("Image")
    convention = (convention_of_image(image) if isinstance(image, str) else None) or \
        convention_from_metadata(model.get("Metadata", {}).get(SERVING_METADATA, {}))
    return convention.name if convention else None


def _model(assembly: Assembly, stack: str, name: Any) -> tuple[str, str] | None:
    if name is None:
        return None
    if not isinstance(name, str):
        found = assembly.referenced(stack, name)
        return found if found and _resource(assembly, found).get("Type") == _MODEL else None
    return next(((s, i) for s, i, r in assembly.resources(_MODEL) if r.get("Properties", {}).get("ModelName") == name),
                None)


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
        return found if found and _resource(assembly, found).get("Type") == _ENDPOINT else None
    return next(((s, i) for s, i, r in assembly.resources(_ENDPOINT)
                 if r.get("Properties", {}).get("EndpointName") == name), None)


def _config(assembly: Assembly, endpoint: tuple[str, str]) -> tuple[str, str] | None:
    stack, logical_id = endpoint
    value = assembly.templates[stack]["Resources"][logical_id].get("Properties", {}).get("EndpointConfigName")
    if isinstance(value, str):
        return next(((s, i) for s, i, r in assembly.resources(_CONFIG)
                     if r.get("Properties", {}).get("EndpointConfigName") == value), None)
    found = assembly.referenced(stack, value)
    return found if found and _resource(assembly, found).get("Type") == _CONFIG else None


def _resource(assembly: Assembly, where: tuple[str, str]) -> dict[str, Any]:
    return assembly.templates.get(where[0], {}).get("Resources", {}).get(where[1], {})


def _false(flag: Any) -> bool:
    return flag is False or (isinstance(flag, str) and flag.lower() == "false")


def _true(flag: Any) -> bool:
    return flag is True or (isinstance(flag, str) and flag.lower() == "true")
