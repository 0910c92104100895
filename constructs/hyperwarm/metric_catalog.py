"""What the services publish to CloudWatch, for exactly the metrics hyperwarm's dashboard and alarms use.

Pure data (no aws-cdk): the observability construct builds its widgets and alarms from these entries,
and the tests assert every widget and alarm against them. Where a figure the operators want (time to
first token) is not published as a CloudWatch metric, :data:`NOT_PUBLISHED` says so and where it can
be read instead.
"""

from __future__ import annotations

from dataclasses import dataclass

SAGEMAKER_NAMESPACE = "AWS/SageMaker"
EXPORTER_NAMESPACE = "Hyperwarm/Caches"
"""The cache metrics exporter's namespace (``lambdas/cache_exporter``)."""

_SAGEMAKER_DOCS = "https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html"
_EXPORTER_SOURCE = "lambdas/cache_exporter (hyperwarm's cache metrics exporter)"


@dataclass(frozen=True)
class PublishedMetric:
    """One CloudWatch metric: where it lives, what it means, who publishes it."""

    namespace: str
    name: str
    dimensions: tuple[str, ...]
    unit: str
    source: str
    """The publisher's documentation (URL) or, for hyperwarm's own metrics, the publishing code."""
    description: str


def _sagemaker(name: str, unit: str, description: str) -> PublishedMetric:
    return PublishedMetric(SAGEMAKER_NAMESPACE, name, ("EndpointName", "VariantName"), unit, _SAGEMAKER_DOCS,
                           description)


def _exporter(name: str, unit: str, description: str) -> PublishedMetric:
    return PublishedMetric(EXPORTER_NAMESPACE, name, ("ClusterName", "Model"), unit, _EXPORTER_SOURCE, description)


PUBLISHED_METRICS: tuple[PublishedMetric, ...] = (
    _sagemaker("Invocations", "None", "InvokeEndpoint requests sent to the variant (Sum)."),
    _sagemaker("Invocation4XXErrors", "None", "Requests the model answered with a 4XX status (Sum)."),
    _sagemaker("Invocation5XXErrors", "None", "Requests the model answered with a 5XX status (Sum)."),
    _sagemaker("ModelLatency", "Microseconds",
               "Time the model container took to respond, as SageMaker sees it; for a streamed response "
               "(InvokeEndpointWithResponseStream) until the LAST byte, so it is not time to first token."),
    _sagemaker("OverheadLatency", "Microseconds",
               "Time SageMaker added on top of ModelLatency (authentication, routing, payload handling)."),
    _exporter("Pods", "Count", "Scheduled, not terminating pods of the model's deployment (status.selector)."),
    _exporter("WarmNodes", "Count",
              "Nodes carrying the operator's weights-cache-ready.<uid> label of one of the model's weights caches."),
    _exporter("ColdPods", "Count", "Pods of the model scheduled on a node where none of its weights caches is ready."),
    _exporter("ColdPodShare", "Percent",
              "ColdPods / Pods x 100: the share of the model's pods that started on unprepared nodes (the "
              "complement is the weights-cache hit rate). Not published while the model has no pods."),
    _exporter("CacheFillSeconds", "Seconds",
              "For each of the model's caches (weights, and image caches naming it as parent) that became "
              "Ready since the previous run: Ready time minus the cache object's creation time."),
    _exporter("FailedCaches", "Count", "The model's weights and image caches whose status.state is Failed."),
    PublishedMetric("AWS/Lambda", "Errors", ("FunctionName",), "Count",
                    "https://docs.aws.amazon.com/lambda/latest/dg/monitoring-metrics-types.html",
                    "Invocations of the exporter that failed: while it fails, the cache metrics have no data."),
)

NOT_PUBLISHED: dict[str, str] = {
    "SageMaker real-time endpoints: time to first token":
        "AWS/SageMaker lists no TTFT metric for real-time endpoints (SageMaker's CloudWatch metrics page, "
        "checked 2026-11-29; its latency metrics end at the last byte). "
        "SageMaker AI detailed observability (OpenTelemetry, queried with PromQL in CloudWatch, not a "
        "namespace/metric-name pair an alarm can name) exposes the vLLM/SGLang container's TTFT: "
        "https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch-detailed-observability.html",
    "HyperPod deployments: latency and time to first byte/token":
        "The inference operator's `metrics` section makes the pods expose Prometheus metrics "
        "(model_latency_milliseconds, model_ttfb_milliseconds, and the container's own, e.g. vLLM's "
        "vllm:time_to_first_token_seconds and prefix-cache hit counters), collected by HyperPod observability "
        "into Amazon Managed Service for Prometheus, not CloudWatch metrics: "
        "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-observability.html",
    "Requests served by pods on unprepared nodes":
        "Not measurable from the cluster's objects: the exporter counts pods (ColdPodShare), not requests.",
}


def find(namespace: str, name: str) -> PublishedMetric:
    """The catalogued metric, or a KeyError naming what is catalogued in ``namespace``."""
    for metric in PUBLISHED_METRICS:
        if metric.namespace == namespace and metric.name == name:
            return metric
    known = ", ".join(m.name for m in PUBLISHED_METRICS if m.namespace == namespace) or "nothing"
    raise KeyError(f"{namespace} {name} is not in the metric catalog; catalogued there: {known}")
