"""Public names of ``hyperwarm.observability`` (read by type checkers, and by lazy_loader at run time)."""

from .alarms import (
    AlarmDestination as AlarmDestination,
)
from .alarms import (
    AlarmDestinationProps as AlarmDestinationProps,
)
from .alarms import (
    SlackChannel as SlackChannel,
)
from .alarms import (
    alarm_topic as alarm_topic,
)
from .alarms import (
    allow_cloudwatch_alarms as allow_cloudwatch_alarms,
)
from .alarms import (
    declare_existing_alarm_topic as declare_existing_alarm_topic,
)
from .alarms import (
    notify_alarms as notify_alarms,
)
from .cache_exporter import CacheMetricsExporter as CacheMetricsExporter
from .cache_exporter import CacheMetricsExporterProps as CacheMetricsExporterProps
from .dashboard import (
    HyperPodModels as HyperPodModels,
)
from .dashboard import (
    InferenceObservability as InferenceObservability,
)
from .dashboard import (
    InferenceObservabilityProps as InferenceObservabilityProps,
)
from .endpoint_metrics import EndpointMetricsBridge as EndpointMetricsBridge
from .endpoint_metrics import EndpointMetricsBridgeProps as EndpointMetricsBridgeProps
from .metric_catalog import PUBLISHED_METRICS as PUBLISHED_METRICS
from .metric_catalog import PublishedMetric as PublishedMetric
