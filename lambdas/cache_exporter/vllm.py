"""A vLLM pod's own Prometheus metrics: the few series the exporter uses (where to read them:
:func:`.placement.metrics_target`).

Parsed with ``prometheus_client`` (the Prometheus project's own parser of the text exposition
format: escapes, ``+Inf``, comments and timestamps handled). Series of every label set (``engine``,
``model_name``, ``finished_reason``) are summed: the exporter reports a pod, not an engine.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

TTFT = "vllm:time_to_first_token_seconds"
WAITING = "vllm:num_requests_waiting"
REQUESTS = "vllm:request_success_total"
# vLLM V1 names, and the names of earlier V1 releases (gpu_ prefix)
_COUNTERS = {
    "vllm:prefix_cache_queries_total": "prefix_queries", "vllm:gpu_prefix_cache_queries_total": "prefix_queries",
    "vllm:prefix_cache_hits_total": "prefix_hits", "vllm:gpu_prefix_cache_hits_total": "prefix_hits",
    REQUESTS: "requests", TTFT + "_count": "ttft_count",
}


class NotVllm(ValueError):
    """The page is not a vLLM server's metrics (or not the Prometheus text format at all)."""


@dataclass(frozen=True)
class EngineSample:
    """One scrape of a pod (cumulative counters), or the difference of two scrapes (:meth:`since`)."""

    ttft_buckets: Mapping[float, float]
    """``le`` upper bound (seconds; ``inf`` for +Inf) -> cumulative count of requests at or below it."""
    counters: Mapping[str, float]
    """``requests``, ``prefix_hits``, ``prefix_queries`` (absent when the engine does not export them)."""
    waiting: float = 0.0
    """``vllm:num_requests_waiting``: a gauge, never differenced."""

    def since(self, previous: EngineSample) -> EngineSample:
        """What happened between ``previous`` and this scrape. If any counter went down the container
        restarted and counts from 0 (Prometheus' rate semantics): the whole of this scrape is new."""
        keys = set(self.counters) | set(previous.counters)
        restarted = any(self.counters.get(k, 0.0) < previous.counters.get(k, 0.0) for k in keys) or any(
            self.ttft_buckets.get(le, 0.0) < count for le, count in previous.ttft_buckets.items())
        if restarted:
            return self
        return EngineSample(
            ttft_buckets={le: count - previous.ttft_buckets.get(le, 0.0) for le, count in self.ttft_buckets.items()},
            counters={k: v - previous.counters.get(k, 0.0) for k, v in self.counters.items()}, waiting=self.waiting)

    @property
    def requests(self) -> float:
        """Finished requests (``vllm:request_success_total``), else requests that got a first token."""
        return self.counters.get("requests", self.counters.get("ttft_count", 0.0))


def parse(text: str) -> EngineSample:
    """The exporter's series from a ``/metrics`` page; :class:`NotVllm` without vLLM's TTFT histogram."""
    buckets: dict[float, float] = {}
    counters: dict[str, float] = {}
    waiting = 0.0
    try:
        for sample in (s for family in text_string_to_metric_families(text) for s in family.samples):
            if sample.name == TTFT + "_bucket":
                le = float(sample.labels["le"])
                buckets[le] = buckets.get(le, 0.0) + sample.value
            elif sample.name in _COUNTERS:
                key = _COUNTERS[sample.name]
                counters[key] = counters.get(key, 0.0) + sample.value
            elif sample.name == WAITING:
                waiting += sample.value
    except (ValueError, IndexError, KeyError) as error:  # the parser's (and a bucket without le's) words
        raise NotVllm(f"not Prometheus text: {type(error).__name__} {error}") from None
    if not buckets or math.inf not in buckets:
        raise NotVllm(f"no {TTFT} histogram: not a vLLM server's metrics")
    return EngineSample(ttft_buckets=buckets, counters=counters, waiting=waiting)

