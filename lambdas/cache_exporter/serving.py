"""Pure: a model's serving figures for the minute, from its pods' new counts (:mod:`.counters`).

Published only when measured: no ``TimeToFirstToken`` without new first tokens, no
``PrefixCacheHitRate`` without prefix-cache queries, no ``Requests``/``ColdRequests``/
``ColdRequestShare`` without a baseline (a cold start, or only new pods that started before the
previous run), no ``ColdRequestShare`` with 0 requests, and no ``RequestsWaiting`` unless EVERY running pod
of the model was scraped this run: a KEDA trigger on it (statistic Average) divides the sum by all
replicas, so a sum over part of the pods would under-report and scale in under load; without data KEDA
holds at its trigger's ``minValue`` instead. ``ScrapeFailures`` is always published for a model with
running pods.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..metric_publishing.ttft import bucket_counts, distribution
from .vllm import EngineSample


@dataclass(frozen=True)
class PodServing:
    """One running pod of the model this minute."""

    cold: bool
    """On a node without the model's weights cache (the ColdPods rule)."""
    scraped: EngineSample | None
    """This run's scrape; None when it failed."""
    delta: EngineSample | None
    """Its new counts since the previous run; None without a baseline."""


@dataclass(frozen=True)
class ServingFigures:
    """What the exporter publishes from the model's own metrics (names are the metric names)."""

    model: str
    ttft_buckets: dict[tuple[float, float], float] = field(default_factory=dict)
    """(lower, upper) seconds -> new first tokens in that bucket, over the model's pods."""
    requests: float | None = None
    cold_requests: float | None = None
    prefix_hits: float = 0.0
    prefix_queries: float = 0.0
    waiting: float | None = None
    scrape_failures: int = 0

    def datums(self) -> list[dict[str, Any]]:
        """PutMetricData entries without dimensions and timestamp."""
        out: list[dict[str, Any]] = [{"MetricName": "ScrapeFailures", "Value": self.scrape_failures, "Unit": "Count"}]
        ttft = distribution(self.ttft_buckets)
        if ttft is not None:
            out.append({"MetricName": "TimeToFirstToken", "Values": ttft[0], "Counts": ttft[1], "Unit": "Milliseconds"})
        if self.prefix_queries > 0:
            out.append({"MetricName": "PrefixCacheHitRate", "Unit": "Percent",
                        "Value": 100.0 * self.prefix_hits / self.prefix_queries})
        if self.requests is not None:
            out += [{"MetricName": "Requests", "Value": self.requests, "Unit": "Count"},
                    {"MetricName": "ColdRequests", "Value": self.cold_requests, "Unit": "Count"}]
            if self.requests > 0:
                out.append({"MetricName": "ColdRequestShare", "Unit": "Percent",
                            "Value": 100.0 * (self.cold_requests or 0.0) / self.requests})
        if self.waiting is not None:
            out.append({"MetricName": "RequestsWaiting", "Value": self.waiting, "Unit": "Count"})
        return out


def serving_figures(model: str, pods: Iterable[PodServing]) -> ServingFigures:
    """Sums over the model's running pods."""
    pods = list(pods)
    scraped = [p.scraped for p in pods if p.scraped is not None]
    measured = [(p.delta, p.cold) for p in pods if p.delta is not None]
    buckets: dict[tuple[float, float], float] = {}
    for delta, _ in measured:
        for bucket, count in bucket_counts(delta.ttft_buckets).items():
            buckets[bucket] = buckets.get(bucket, 0.0) + count
    return ServingFigures(
        model=model, ttft_buckets=buckets,
        requests=sum(d.requests for d, _ in measured) if measured else None,
        cold_requests=sum(d.requests for d, cold in measured if cold) if measured else None,
        prefix_hits=sum(d.counters.get("prefix_hits", 0.0) for d, _ in measured),
        prefix_queries=sum(d.counters.get("prefix_queries", 0.0) for d, _ in measured),
        waiting=sum(s.waiting for s in scraped) if scraped and len(scraped) == len(pods) else None,
        scrape_failures=len(pods) - len(scraped))
