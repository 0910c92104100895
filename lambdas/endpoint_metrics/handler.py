"""The endpoint metrics bridge: SageMaker variants' TTFT and prefix-cache hit rate as CloudWatch metrics.

SageMaker AI detailed observability stores the serving container's metrics as OpenTelemetry metrics
that only PromQL reads, and a classic CloudWatch dashboard has no PromQL graph. Every minute
(EventBridge), for each variant in ``HYPERWARM_VARIANTS`` (JSON, set by the construct: a compact
``{endpoint, variant, engine, window}`` per variant, from which :mod:`.promql` writes the queries here,
so the environment stays small: :class:`.promql.Variant`), this runs the variant's queries through QueryMetrics and publishes to
:data:`NAMESPACE` (dimensions ``EndpointName``, ``VariantName``): ``TimeToFirstToken`` as a
distribution (the same :mod:`..metric_publishing.ttft` code as the HyperPod exporter), ``PrefixCacheHitRate`` when the
series exist, ``SeriesReturned`` (series the TTFT query returned: 0 while the source is blind) and
``QueryFailures``. A failed query is logged and counted; the run goes on. When every
query of a run failed, the run raises after publishing (so the function's Errors alarm fires: the
graphs and the TTFT alarm are blind). The function needs no SageMaker permission: which variants to
read comes from its environment.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import time
from collections.abc import Callable
from typing import Any

import boto3
import urllib3

from ..metric_publishing import publishing
from ..metric_publishing.budget import deadline as run_deadline
from ..metric_publishing.ttft import bucket_counts, distribution
from .promql import Variant
from .query_metrics import TIMEOUT, QueryError, cumulative_buckets, instant, sample

NAMESPACE = "Hyperwarm/Endpoints"
VARIANTS = "HYPERWARM_VARIANTS"
BUDGET = 35.0
"""Seconds of the run for queries at most (the function has 50): later ones are skipped and counted in
QueryFailures, so a slow API never makes the run time out and publish nothing."""
RESERVE = 10.0
"""Seconds of the invocation's remaining time kept for publishing: the queries' deadline is the sooner
of :data:`BUDGET` and the remaining time less this."""
HTTP = urllib3.PoolManager()
LOG = logging.getLogger(__name__)


class AllQueriesFailed(RuntimeError):
    """Every query of the run failed: raised after publishing (QueryFailures included), so the function's
    Errors alarm fires instead of a run that reads nothing looking like success."""


def variants(text: str) -> list[Variant]:
    """The variants of ``HYPERWARM_VARIANTS``: a JSON list of :meth:`Variant.entry`."""
    return [Variant.from_entry(v) for v in json.loads(text)]


def variant_datums(variant: Variant, query: Callable[[str], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The variant's PutMetricData entries (without timestamp). Published only when measured: no
    ``TimeToFirstToken`` without first tokens, no ``PrefixCacheHitRate`` without a finite value, no
    ``SeriesReturned`` when the TTFT query failed; ``QueryFailures`` always."""
    out: list[dict[str, Any]] = []
    failures = 0
    try:
        result = query(variant.ttft)
        # How many series the TTFT query returned: 0 means blind (no OTel enrichment in the account,
        # detailed observability off, or an engine without this histogram), which an idle variant is not.
        out.append({"MetricName": "SeriesReturned", "Value": len(result), "Unit": "Count"})
        ttft = distribution(bucket_counts(cumulative_buckets(result)))
        if ttft is not None:
            out.append({"MetricName": "TimeToFirstToken", "Values": ttft[0], "Counts": ttft[1],
                        "Unit": "Milliseconds"})
    except QueryError as error:
        failures += 1
        LOG.warning("%s/%s: TTFT query failed: %s", variant.endpoint, variant.variant, error)
    if variant.hit_rate:
        try:
            rates = [r for r in map(sample, query(variant.hit_rate)) if r is not None]
            if rates:
                out.append({"MetricName": "PrefixCacheHitRate", "Value": min(100.0, max(0.0, rates[0])),
                            "Unit": "Percent"})
        except QueryError as error:
            failures += 1
            LOG.warning("%s/%s: prefix-cache query failed: %s", variant.endpoint, variant.variant, error)
    out.append({"MetricName": "QueryFailures", "Value": failures, "Unit": "Count"})
    dimensions = [{"Name": "EndpointName", "Value": variant.endpoint},
                  {"Name": "VariantName", "Value": variant.variant}]
    return [{**d, "Dimensions": dimensions} for d in out]


def metric_data(selected: list[Variant], query: Callable[[str], list[dict[str, Any]]],
                now: datetime.datetime) -> list[dict[str, Any]]:
    return [{**d, "Timestamp": now} for v in selected for d in variant_datums(v, query)]


def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    region = os.environ["AWS_REGION"]
    selected = variants(os.environ[VARIANTS])
    now = datetime.datetime.now(datetime.UTC).replace(second=0, microsecond=0)
    credentials = boto3.Session().get_credentials()
    deadline = run_deadline(context, BUDGET, RESERVE)

    def query(text: str) -> list[dict[str, Any]]:
        left = deadline - time.monotonic()
        if left <= 0:
            raise QueryError("not sent: the run's time for queries is spent")
        return instant(HTTP, text, now.timestamp(), region, credentials, timeout=min(TIMEOUT, left))

    data = metric_data(selected, query, now)
    publishing.publish(boto3.client("cloudwatch", region_name=region), NAMESPACE, data)
    failed = sum(d["Value"] for d in data if d["MetricName"] == "QueryFailures")
    if selected and failed == sum(v.queries for v in selected):
        raise AllQueriesFailed(f"all {failed} queries of {len(selected)} variants failed (see the warnings above); "
                               "QueryFailures was published")
    return {"variants": [f"{v.endpoint}/{v.variant}" for v in selected], "metrics": len(data), "query_failures": failed}
