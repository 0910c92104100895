"""The account's OTel enrichment, which PromQL queries of SageMaker endpoint metrics need.

SageMaker's "Getting started with detailed observability" requires account-level OTel enrichment for
PromQL (``aws observabilityadmin start-telemetry-enrichment``, then ``aws cloudwatch
start-otel-enrichment``). Without it a query returns no series: a PromQL alarm stays OK however slow
the endpoint, and the endpoint metrics bridge publishes no TTFT. CloudFormation has both as resources:
``AWS::ObservabilityAdmin::TelemetryEnrichment`` (resource tags for telemetry, ``Scope: ACCOUNT``; the
OTel enrichment's page says to enable it first) and ``AWS::CloudWatch::OTelEnrichment``. Each is one per
account (and region): created by one stack, and retained when that stack goes, since other environments
and tools of the account query PromQL too. Where enrichment is on already, a stack declares it instead
(:func:`declare_existing_otel_enrichment`), and the deploy rehearsal accepts the declaration. Being one per
account, they are never created by default: a second app in the account would collide with the first
(``InferenceObservabilityProps.otel_enrichment`` has no default where a PromQL alarm is made).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch, aws_observabilityadmin as observabilityadmin
from constructs import Construct

METADATA = "hyperwarm:otelEnrichment"
"""Template metadata key: ``existing`` when the stack relies on enrichment turned on outside the app."""
OtelEnrichment = Literal["create", "existing"]
"""How a stack with PromQL alarms has the account's OTel enrichment: ``create`` (the stack creates it and retains
it) or ``existing`` (on already: the stack declares it)."""
CREATE: OtelEnrichment = "create"
EXISTING: OtelEnrichment = "existing"
CHOICES: tuple[OtelEnrichment, ...] = (CREATE, EXISTING)
DOCS = "https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-detailed-observability-getting-started.html"


def enrichment_problem(otel_enrichment: str | None, promql: Sequence[str]) -> str | None:
    """Why ``otel_enrichment`` cannot serve a stack whose PromQL TTFT alarms read the endpoints ``promql`` (those
    with detailed observability on or not known to be off), or None; the caller names the field and its value."""
    if otel_enrichment is not None and otel_enrichment not in CHOICES:
        return f"allowed: {', '.join(CHOICES)}"
    if otel_enrichment is None and promql:
        return (f"required: the PromQL TTFT alarms of {', '.join(promql)} (detailed observability on or not known to "
                "be off) read no series without the account's OTel enrichment; set \"existing\" (on already, "
                f"{DOCS}) or \"create\" (the stack creates it and retains it; one per account and region)")
    return None


def creates_enrichment(otel_enrichment: str | None, promql: Sequence[str]) -> bool:
    """Whether a stack whose PromQL TTFT alarms read the endpoints ``promql`` creates the account's OTel enrichment:
    ``create`` and at least one such endpoint (:class:`InferenceObservability` makes the resources then)."""
    return otel_enrichment == CREATE and bool(promql)


def otel_enrichment(scope: Construct, id: str = "OTelEnrichment") -> cloudwatch.CfnOTelEnrichment:
    """Resource tags for telemetry (``<id>Tags``), then OTel enrichment of every supported namespace, both
    retained (one per account: deleting one stack must not turn PromQL off for the others)."""
    tags = observabilityadmin.CfnTelemetryEnrichment(scope, f"{id}Tags", scope="ACCOUNT")
    enrichment = cloudwatch.CfnOTelEnrichment(scope, id)
    enrichment.node.add_dependency(tags)
    for resource in (tags, enrichment):
        resource.apply_removal_policy(cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE)
    return enrichment


def declare_existing_otel_enrichment(stack: cdk.Stack) -> None:
    """Record in ``stack``'s template that the account's OTel enrichment is on before it deploys."""
    stack.template_options.metadata = {**(stack.template_options.metadata or {}), METADATA: EXISTING}
