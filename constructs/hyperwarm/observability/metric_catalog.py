"""What the services publish to CloudWatch, for exactly the metrics hyperwarm's dashboard and alarms use.

Pure data (no aws-cdk): the observability construct builds its widgets and alarms from these entries,
and the tests assert every widget and alarm against them. :data:`PROMQL_METRICS` lists the
OpenTelemetry metrics of SageMaker AI detailed observability that hyperwarm's PromQL alarms read
(time to first token); :data:`NOT_PUBLISHED` says what is not published as a CloudWatch metric and
where it can be read instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from hyperwarm.functions.cache_exporter import placement
from hyperwarm.functions.cache_refresh import contract
from hyperwarm.functions.endpoint_metrics.promql import ENDPOINT_LABEL, PREFIX_CACHE_COUNTERS, TTFT_METRICS, VARIANT_LABEL

SAGEMAKER_NAMESPACE = "AWS/SageMaker"
EXPORTER_NAMESPACE = placement.NAMESPACE
"""The cache metrics exporter's namespace (``lambdas/cache_exporter``)."""

ENDPOINTS_NAMESPACE = "Hyperwarm/Endpoints"
"""The endpoint metrics bridge's namespace (``lambdas/endpoint_metrics``)."""

_SAGEMAKER_DOCS = "https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html"
_EXPORTER_SOURCE = "lambdas/cache_exporter (hyperwarm's cache metrics exporter)"
_BRIDGE_SOURCE = "lambdas/endpoint_metrics (hyperwarm's endpoint metrics bridge)"
_REFRESH_SOURCE = "lambdas/cache_refresh (hyperwarm's refresh function; names in its contract.ROLLOUT_METRICS)"


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


def _bridge(name: str, unit: str, description: str) -> PublishedMetric:
    return PublishedMetric(ENDPOINTS_NAMESPACE, name, ("EndpointName", "VariantName"), unit, _BRIDGE_SOURCE,
                           description)


_SAGEMAKER_BRIDGE = (  # the bridge's figures from SageMaker AI detailed observability (PromQL)
    _bridge("TimeToFirstToken", "Milliseconds",
            "Time to first token of the variant's requests, from the engine's TTFT histogram that detailed "
            "observability stores (PROMQL_METRICS), read every minute with QueryMetrics: first tokens per "
            "minute in each bucket averaged over the alarm's rate window (5 minutes at the default publish "
            "frequency), each bucket's count spread evenly inside it as a distribution (the exporter's "
            "ttft.py), so p50/p95/p99 match histogram_quantile to a fraction of a bucket. Not published "
            "without first tokens."),
    _bridge("PrefixCacheHitRate", "Percent",
            "vLLM's prefix (KV) cache over every instance of the variant: increase of "
            "vllm_prefix_cache_hits_total / increase of vllm_prefix_cache_queries_total x 100 over the same "
            "window. UNCONFIRMED: SageMaker's OpenTelemetry metric reference (checked 2026-11-29) does not "
            "list these counters; where detailed observability does not store them the query returns nothing "
            "and nothing is published. Not published for SGLang variants or without queries."),
    _bridge("SeriesReturned", "Count",
            "Series the variant's TTFT query returned this run (one per histogram bucket). 0 while the variant "
            "serves requests means the source is blind: no account-level OTel enrichment (PromQL returns no "
            "series without it), detailed observability off, or an engine that publishes no such histogram; "
            "the PromQL TTFT alarm then stays OK whatever the latency. Not published when the query failed."),
    _bridge("QueryFailures", "Count",
            "The variant's QueryMetrics queries that failed this run (HTTP error, timeout, throttling, an "
            "error status): 0..2. While it is above 0 the figures above are missing for the minute."),
)

_WARM_ROLLOUT = (  # the refresh function's steps of a HyperPod target's warm rollout, per target
    *(PublishedMetric(contract.METRICS_NAMESPACE, name, ("service", "target"), unit, _REFRESH_SOURCE,
                      f"Per refresh target (its id, e.g. hyperpod:<cluster>/<namespace>/InferenceEndpointConfig/"
                      f"<model>): {meaning}.") for name, (unit, meaning) in contract.ROLLOUT_METRICS.items()),
    PublishedMetric(contract.METRICS_NAMESPACE, "RefreshFailed", ("service", "Reason"), "Count", _REFRESH_SOURCE,
                    "Refreshes that failed for good or were rolled back, by Reason (also published with service "
                    "alone); a warm rollout's: staging-timeout, staging-failed, switch-timeout, switch-failed. "
                    "The previous version still serves."),
)

_HYPERPOD_SERVING = (  # the exporter's figures from the HyperPod pods' own vLLM metrics
    _exporter("TimeToFirstToken", "Milliseconds",
              "Time to first token of the model's requests since the previous run, from each Running pod's "
              "vllm:time_to_first_token_seconds histogram (read through the API server's pod proxy): each "
              "bucket's new count spread evenly inside the bucket (+Inf at the last bound) as a distribution, "
              "so p50/p95/p99 are exact to a fraction of a bucket over any period."),
    _exporter("PrefixCacheHitRate", "Percent",
              "The engine's prefix (KV) cache: new vllm:prefix_cache_hits_total / new "
              "vllm:prefix_cache_queries_total x 100 over the model's pods (tokens). Not published without queries."),
    _exporter("Requests", "Count", "Requests the model's pods finished since the previous run "
              "(vllm:request_success_total, else the TTFT histogram's count)."),
    _exporter("ColdRequests", "Count", "Of Requests, those served by pods on unprepared nodes (the ColdPods rule)."),
    _exporter("ColdRequestShare", "Percent",
              "ColdRequests / Requests x 100: the share of requests served on unprepared nodes. Not published "
              "without requests."),
    _exporter("RequestsWaiting", "Count",
              "Requests queued in the model's engines now (sum of the vllm:num_requests_waiting gauge). Published "
              "only when every running pod of the model was read this run (a partial sum would under-report "
              "to an autoscaling trigger averaging over all replicas)."),
    _exporter("ScrapeFailures", "Count",
              "Running pods of the model whose metrics could not be read this run (timeout, HTTP error, not "
              "vLLM): their requests are missing from the figures above until they are read again."),
)

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
              "Nodes carrying the operator's weights-cache-ready.<uid> label of a weights cache of the version "
              "(modelSourceConfig location) the model's deployment reads."),
    _exporter("ColdPods", "Count", "Pods of the model scheduled on a node where no weights cache of the version "
              "its deployment reads is ready (a staged next version warms nobody until the switch)."),
    _exporter("ColdPodShare", "Percent",
              "ColdPods / Pods x 100: the share of the model's pods that started on unprepared nodes (the "
              "complement is the weights-cache hit rate). Not published while the model has no pods."),
    _exporter("CacheFillSeconds", "Seconds",
              "For each of the model's caches (weights, and image caches naming it as parent) that became "
              "Ready since the previous run: Ready time minus the cache object's creation time."),
    _exporter("FailedCaches", "Count", "The model's weights and image caches whose status.state is Failed."),
    *_HYPERPOD_SERVING,
    *_SAGEMAKER_BRIDGE,
    *_WARM_ROLLOUT,
    PublishedMetric("AWS/Lambda", "Errors", ("FunctionName",), "Count",
                    "https://docs.aws.amazon.com/lambda/latest/dg/monitoring-metrics-types.html",
                    "Invocations of the exporter or the endpoint metrics bridge that failed: while one fails, "
                    "its metrics have no data."),
)

_DETAILED_OBSERVABILITY = "https://docs.aws.amazon.com/sagemaker/latest/dg/inference-monitoring.html"


@dataclass(frozen=True)
class PromQLMetric:
    """One OpenTelemetry metric of SageMaker AI detailed observability, read with PromQL (no namespace).

    Published only for endpoint configs with ``MetricsConfig.EnableDetailedObservability`` true (the
    default for configs created after 2026-06-17; hyperwarm sets it explicitly), from the serving
    container's Prometheus endpoint.
    """

    name: str
    """The name in PromQL (a histogram: query ``<name>_bucket``)."""
    container_metric: str
    """The serving container's own Prometheus name."""
    labels: tuple[str, ...]
    """Labels SageMaker adds, by which hyperwarm's queries select."""
    unit: str
    source: str
    description: str


def _detailed(engine: str, description: str) -> PromQLMetric:
    return PromQLMetric(TTFT_METRICS[engine], TTFT_METRICS[engine].replace("_", ":", 1),
                        (ENDPOINT_LABEL, VARIANT_LABEL), "Seconds", _DETAILED_OBSERVABILITY, description)


PROMQL_METRICS: tuple[PromQLMetric, ...] = (
    _detailed("vllm", "vLLM's time to first token histogram (request arrival to first output token), per "
                      "container; its quantiles over all instances of a variant are TTFT p50/p95/p99."),
    _detailed("sglang", "SGLang's time to first token histogram, the same figure for SGLang containers."),
    *(PromQLMetric(name, name.replace("vllm_", "vllm:", 1), (ENDPOINT_LABEL, VARIANT_LABEL), "Count",
                   _DETAILED_OBSERVABILITY,
                   f"vLLM's {what} counter (tokens). UNCONFIRMED: not in SageMaker's published OpenTelemetry "
                   "metric list; the endpoint metrics bridge reads it where it exists and skips it otherwise.")
      for name, what in zip(PREFIX_CACHE_COUNTERS, ("prefix-cache hits", "prefix-cache queries"), strict=True)),
)
"""What hyperwarm's PromQL alarms, printed queries and endpoint metrics bridge read (SageMaker's
OpenTelemetry metrics reference)."""


NOT_PUBLISHED: dict[str, str] = {
    "SageMaker real-time endpoints: time to first token as an AWS/SageMaker metric":
        "AWS/SageMaker lists no TTFT metric (SageMaker's CloudWatch metrics page, checked 2026-11-29; its "
        "latency metrics end at the last byte). SageMaker AI detailed observability stores the vLLM/SGLang "
        "container's TTFT histogram as an OpenTelemetry metric read only with PromQL (PROMQL_METRICS), and a "
        "classic dashboard has no documented PromQL graph widget: hyperwarm's endpoint metrics bridge "
        "republishes it every minute as Hyperwarm/Endpoints TimeToFirstToken (charted p50/p95/p99), and a "
        "PromQL alarm reads the source directly: "
        "https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch-detailed-observability.html",
    "HyperPod deployments: whole-request latency, and serving containers other than vLLM":
        "The exporter reads vLLM's own series only (TimeToFirstToken, PrefixCacheHitRate, Requests). The "
        "operator's model_latency_milliseconds and model_ttfb_milliseconds, and other engines' metrics, go with "
        "HyperPod observability to Amazon Managed Service for Prometheus, not CloudWatch metrics: "
        "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-observability.html",
}


def find(namespace: str, name: str) -> PublishedMetric:
    """The catalogued metric, or a KeyError naming what is catalogued in ``namespace``."""
    for metric in PUBLISHED_METRICS:
        if metric.namespace == namespace and metric.name == name:
            return metric
    known = ", ".join(m.name for m in PUBLISHED_METRICS if m.namespace == namespace) or "nothing"
    raise KeyError(f"{namespace} {name} is not in the metric catalog; catalogued there: {known}")


def find_promql(name: str) -> PromQLMetric:
    """The catalogued PromQL metric ``name`` (a histogram's ``_bucket`` series names it too), or a KeyError."""
    for metric in PROMQL_METRICS:
        if name in (metric.name, f"{metric.name}_bucket"):
            return metric
    raise KeyError(f"PromQL {name} is not in the metric catalog; catalogued: {', '.join(m.name for m in PROMQL_METRICS)}")
