"""Public names of ``hyperwarm.observability`` (read by type checkers, and by lazy_loader at run time)."""

from .alarms import (
    AlarmDestination as AlarmDestination,
    AlarmDestinationProps as AlarmDestinationProps,
    SlackChannel as SlackChannel,
    alarm_topic as alarm_topic,
    allow_cloudwatch_alarms as allow_cloudwatch_alarms,
    declare_existing_alarm_topic as declare_existing_alarm_topic,
    has_alarms as has_alarms,
    notify_alarms as notify_alarms,
    placeholder_problem as placeholder_problem,
)
from .cache_exporter import (
    EXPORTER_HANDLER as EXPORTER_HANDLER,
    CacheMetricsExporter as CacheMetricsExporter,
    CacheMetricsExporterProps as CacheMetricsExporterProps,
)
from .dashboard import InferenceObservability as InferenceObservability
from .endpoint_metrics import (
    BRIDGE_HANDLER as BRIDGE_HANDLER,
    EndpointMetricsBridge as EndpointMetricsBridge,
    EndpointMetricsBridgeProps as EndpointMetricsBridgeProps,
)
from .metric_catalog import PUBLISHED_METRICS as PUBLISHED_METRICS, PublishedMetric as PublishedMetric
from .otel_enrichment import (
    OtelEnrichment as OtelEnrichment,
    creates_enrichment as creates_enrichment,
    enrichment_problem as enrichment_problem,
)
from .props import (
    ColdPodSharePercent as ColdPodSharePercent,
    ColdPodSharePeriod as ColdPodSharePeriod,
    HyperPodModels as HyperPodModels,
    InferenceObservabilityProps as InferenceObservabilityProps,
    LatencyThreshold as LatencyThreshold,
    TtftThreshold as TtftThreshold,
)
