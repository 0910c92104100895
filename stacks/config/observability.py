"""The ``observability`` section: alarm thresholds of the environment's dashboard, and OTel enrichment.

The app turns it into :class:`hyperwarm.observability.dashboard.InferenceObservabilityProps`
(:meth:`ObservabilityConfig.to_props`), whose fields of the same names give each threshold's range and
default (times in seconds); the stack adds the endpoints, cached models and topic (the ``alarms``
section says where alarms go).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from hyperwarm.observability import (
    ColdPodSharePercent,
    ColdPodSharePeriod,
    InferenceObservabilityProps,
    LatencyThreshold,
    OtelEnrichment,
    TtftThreshold,
)

from .strict import StrictModel, library_default

_PROPS = InferenceObservabilityProps


class ObservabilityConfig(StrictModel):
    """Dashboard and alarms of one environment (``hyperwarm-<env>-observability``)."""

    enabled: bool = Field(default=True, description="create the dashboard, alarms and cache metrics exporter")
    model_latency_p99: LatencyThreshold = Field(
        default_factory=lambda: library_default(_PROPS, "model_latency_p99"),
        description="seconds: alarm when a variant's p99 ModelLatency stays above this")
    ttft_p99: TtftThreshold = Field(
        default_factory=lambda: library_default(_PROPS, "ttft_p99"),
        description="seconds: alarm when p99 time to first token stays above it for 5 minutes")
    cold_pod_share_percent: ColdPodSharePercent = Field(
        default=library_default(_PROPS, "cold_pod_share_percent"),
        description="alarm when a cached model's ColdPodShare stays above this")
    cold_pod_share_period: ColdPodSharePeriod = Field(
        default_factory=lambda: library_default(_PROPS, "cold_pod_share_period"),
        description="seconds, whole minutes: ...for this long (a scale-out is briefly cold by design)")
    otel_enrichment: OtelEnrichment | None = Field(
        default=None, description="the account's OTel enrichment, which PromQL queries of endpoint metrics "
        "need: created (and retained) by this environment's observability stack, or existing already; required "
        "where an endpoint has detailed observability on (one per account and region: never created unasked)")

    @model_validator(mode="before")
    @classmethod
    def _topic_moved(cls, data: Any) -> Any:
        if isinstance(data, dict) and "alarm_topic_arn" in data:
            raise ValueError("alarm_topic_arn moved to alarms.topic_arn (every stack's alarms notify it)")
        return data

    def to_props(self, **parts: Any) -> InferenceObservabilityProps:
        """:class:`~hyperwarm.observability.dashboard.InferenceObservabilityProps` with these thresholds; ``parts``
        are the props this section does not know (endpoints, hyperpod, topic, dashboard_name)."""
        return InferenceObservabilityProps(
            model_latency_p99=self.model_latency_p99, ttft_p99=self.ttft_p99,
            cold_pod_share_percent=self.cold_pod_share_percent,
            cold_pod_share_period=self.cold_pod_share_period, otel_enrichment=self.otel_enrichment, **parts)
