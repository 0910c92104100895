"""``InferenceObservability``: one dashboard and the alarms that matter for cache-aware inference.

Every widget and alarm reads a metric from :mod:`hyperwarm.observability.metric_catalog` (what the services really
publish), and each widget title names its source. SageMaker variants: ModelLatency p50/p95/p99 (to
the last byte), overhead, invocations and errors, and time to first token from detailed observability
(p50/p95/p99 and the prefix-cache hit rate republished by the endpoint metrics bridge,
:class:`EndpointMetricsBridge`, created here; a PromQL alarm on p99 reading the source;
:mod:`hyperwarm.observability.sagemaker_ttft`).
HyperPod models: the cache metrics exporter's warm/cold figures (:class:`CacheMetricsExporter`,
created here), and from the pods' own vLLM metrics TTFT p50/p95/p99 (an alarm on p99), the engine's
prefix-cache hit rate and the share of requests on unprepared nodes; for a model the refresh function
rolls out warm, its staging progress, time to warm and to switch, and its cold pods during a refresh
(:mod:`hyperwarm.observability.warm_rollout`, with alarms on a staging or switch timeout and on a cold pod
during a refresh). What CloudWatch metrics do not hold, a text widget says where to read.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch, aws_cloudwatch_actions as actions
from constructs import Construct

from hyperwarm._internal.constraints import field_problems
from hyperwarm._internal.durations import FIVE_MINUTES, ONE_MINUTE
from hyperwarm._internal.validation import repeated
from hyperwarm.endpoints.base import IInferenceEndpoint
from hyperwarm.observability import otel_enrichment as otel
from hyperwarm.observability.alarms import alarm_topic
from hyperwarm.observability.cache_exporter import CacheMetricsExporter, CacheMetricsExporterProps
from hyperwarm.observability.endpoint_metrics import EndpointMetricsBridge, EndpointMetricsBridgeProps, bridge_groups
from hyperwarm.observability.metric_catalog import NOT_PUBLISHED
from hyperwarm.observability.props import HyperPodModels, InferenceObservabilityProps
from hyperwarm.observability.sagemaker_ttft import variant_ttft
from hyperwarm.observability.ttft_source import detailed_observability_off
from hyperwarm.observability.warm_rollout import (
    STAGING_TIMEOUT,
    SWITCH_TIMEOUT,
    cold_during_rollout,
    refresh_failed,
    rollout_widgets,
)

_LATENCY_STATS = ("p50", "p95", "p99")
BLIND_MINUTES = 15
"""A variant's QueryFailures or a model's ScrapeFailures at 1 or more for this many consecutive minutes alarms:
its TTFT and hit-rate graphs and its TTFT alarm are then (partly) blind, while the function itself succeeds."""


class InferenceObservability(Construct):
    """A CloudWatch dashboard, alarms to an SNS topic, (with ``hyperpod``) the cache metrics exporter, and
    (with endpoints whose detailed observability is on) the endpoint metrics bridge: several when the
    endpoints' variants exceed one function's environment (ids ``EndpointMetrics``, ``EndpointMetrics2``, ...)."""

    def __init__(self, scope: Construct, id: str, props: InferenceObservabilityProps) -> None:
        super().__init__(scope, id)
        _validate(self, props)
        self.topic = props.topic or alarm_topic(self, "AlarmTopic")
        self.exporter: CacheMetricsExporter | None = None
        if props.hyperpod is not None:
            self.exporter = CacheMetricsExporter(self, "Exporter", CacheMetricsExporterProps(
                cluster=props.hyperpod.cluster, namespaces=[props.hyperpod.namespace]))
        self.alarms: list[cloudwatch.Alarm] = []
        self._bridges(props)
        self.variant_ttft_alarms: dict[str, cloudwatch.PromQLAlarm] = {}
        """PromQL alarms on p99 time to first token, by ``<endpoint id>/<variant>``."""
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=props.dashboard_name,
                                              default_interval=cdk.Duration.hours(3))
        self.dashboard.add_widgets(cloudwatch.TextWidget(markdown=_not_published(), width=24, height=5))
        for endpoint in props.endpoints:
            for variant in endpoint.variant_names or ():
                self._variant(endpoint, variant, props)
        if props.hyperpod is not None and self.exporter is not None:
            warm = props.hyperpod.warm
            for handle in props.hyperpod.models:
                model = handle.name
                self._model(model, props)
                self.dashboard.add_widgets(*serving_widgets(self.exporter, model))
                self._serving_alarms(model, props)
                if handle in warm:
                    self._warm_rollout(model, handle.target_id)
            if warm:
                self._rollout_timeouts(props.hyperpod.namespace)
            self._alarm("ExporterErrors", self.exporter.function.metric_errors(period=FIVE_MINUTES),
                        threshold=1, periods=1, description="the cache metrics exporter failed: cold-share and "
                        "cache alarms see no data until it runs again")

    def _bridges(self, props: InferenceObservabilityProps) -> None:
        """The endpoint metrics bridges: as many as the endpoints' entries need (Lambda's 4 KB of environment)."""
        self.endpoint_metrics_bridges: list[EndpointMetricsBridge] = []
        """Every bridge, in order; the first keeps the construct id ``EndpointMetrics``."""
        self._bridge_of: dict[str, EndpointMetricsBridge] = {}
        bridged = [e for e in props.endpoints if not detailed_observability_off(e)]
        for i, group in enumerate(bridge_groups(bridged)):
            id = "EndpointMetrics" if i == 0 else f"EndpointMetrics{i + 1}"
            bridge = EndpointMetricsBridge(self, id, EndpointMetricsBridgeProps(endpoints=group))
            self.endpoint_metrics_bridges.append(bridge)
            self._bridge_of.update({e.node.path: bridge for e in group})
            self._alarm(f"{id}Errors", bridge.function.metric_errors(period=FIVE_MINUTES),
                        threshold=1, periods=1, description="the endpoint metrics bridge failed: the SageMaker "
                        "variants' TTFT graphs have no data until it runs again (the PromQL TTFT alarms still work)")
        self.endpoint_metrics: EndpointMetricsBridge | None = next(iter(self.endpoint_metrics_bridges), None)
        """The first endpoint metrics bridge (None without endpoints with detailed observability on)."""
        self.otel_enrichment: cloudwatch.CfnOTelEnrichment | None = None
        """The account's OTel enrichment where this construct creates it (with bridges and ``create``)."""
        if self.endpoint_metrics_bridges:  # PromQL alarms read the bridged endpoints
            if otel.creates_enrichment(props.otel_enrichment, list(self._bridge_of)):
                self.otel_enrichment = otel.otel_enrichment(self)
            else:
                otel.declare_existing_otel_enrichment(cdk.Stack.of(self))

    def _alarm(self, id: str, metric: cloudwatch.IMetric, *, threshold: float, periods: int,
               description: str) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self, id, metric=metric, threshold=threshold, evaluation_periods=periods,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING, alarm_description=description)
        alarm.add_alarm_action(actions.SnsAction(self.topic))
        self.alarms.append(alarm)
        return alarm

    def _variant(self, endpoint: IInferenceEndpoint, variant: str, props: InferenceObservabilityProps) -> None:
        where = f"{endpoint.node.id}/{variant}"
        latency = [endpoint.metric_model_latency(variant, statistic=s, period=ONE_MINUTE, label=s)
                   for s in _LATENCY_STATS]
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title=f"{where}: ModelLatency p50/p95/p99 (AWS/SageMaker, microseconds, to the last byte: not TTFT)",
                left=latency, width=12),
            cloudwatch.GraphWidget(
                title=f"{where}: Invocations, 5XX errors, OverheadLatency p99 (AWS/SageMaker)",
                left=[endpoint.metric_invocations(variant, period=ONE_MINUTE),
                      endpoint.metric_invocation_5xx_errors(variant, period=ONE_MINUTE)],
                right=[endpoint.metric_overhead_latency(variant, statistic="p99", period=ONE_MINUTE)],
                width=12))
        micros = props.model_latency_p99.to_milliseconds() * 1000
        p99 = endpoint.metric_model_latency(variant, statistic="p99", period=ONE_MINUTE)
        self._alarm(f"{endpoint.node.id}{variant}LatencyP99", p99, threshold=micros, periods=5,
                    description=f"{where}: p99 ModelLatency at or above {props.model_latency_p99.to_milliseconds() / 1000:g} s "
                                "for 5 minutes (whole responses; time to first token has its own PromQL alarm)")
        self._variant_ttft(endpoint, variant, props)

    def _variant_ttft(self, endpoint: IInferenceEndpoint, variant: str, props: InferenceObservabilityProps) -> None:
        if detailed_observability_off(endpoint):
            cdk.Annotations.of(self).add_warning_v2(
                f"hyperwarm:ttft:{endpoint.node.id}", f"{endpoint.node.path}: detailed observability is off, so "
                "SageMaker publishes no time to first token: no TTFT alarm for its variants")
            return
        bridge = self._bridge_of[endpoint.node.path]
        alarm, widgets = variant_ttft(self, endpoint, variant, threshold=props.ttft_p99, topic=self.topic,
                                      bridge=bridge)
        self.variant_ttft_alarms[f"{endpoint.node.id}/{variant}"] = alarm
        self.dashboard.add_widgets(*widgets)
        where = f"{endpoint.node.id}/{variant}"
        self._alarm(f"{endpoint.node.id}-{variant}QueryFailures",
                    bridge.metric_query_failures(endpoint, variant), threshold=1, periods=BLIND_MINUTES,
                    description=f"{where}: a query of the endpoint metrics bridge failed every minute for "
                                f"{BLIND_MINUTES} minutes: the variant's TTFT and prefix-cache hit-rate graphs have "
                                "gaps or no data (the PromQL TTFT alarm reads the source and still works; if "
                                "QueryMetrics itself fails, it may be blind too)")
        self._no_series(endpoint, variant, bridge)

    def _no_series(self, endpoint: IInferenceEndpoint, variant: str, bridge: EndpointMetricsBridge) -> None:
        """A PromQL alarm whose query returns no series stays OK, so a blind source is an alarm of its own:
        the bridge's TTFT query returned nothing in minutes the variant served requests."""
        where = f"{endpoint.node.id}/{variant}"
        period = FIVE_MINUTES
        blind = cloudwatch.MathExpression(
            # No requests, or no answer from the bridge (its QueryFailures and Errors alarms), is not blind.
            expression="IF(FILL(requests, 0) > 0 AND series == 0, 1, 0)", period=period,
            label="5-minute periods with requests and no TTFT series",
            using_metrics={"requests": endpoint.metric_invocations(variant, period=period),
                           "series": bridge.metric_series_returned(endpoint, variant, period=period)})
        self._alarm(f"{endpoint.node.id}-{variant}NoSeries", blind, threshold=1,
                    periods=BLIND_MINUTES // 5,
                    description=f"{where}: served requests for {BLIND_MINUTES} minutes while its TTFT query "
                                "returned no series: the PromQL TTFT alarm and the TTFT graphs are blind. Check "
                                "the account's OTel enrichment (aws cloudwatch get-otel-enrichment), the endpoint "
                                "config's detailed observability, and that the engine publishes the histogram")

    def _model(self, model: str, props: InferenceObservabilityProps) -> None:
        exporter = self.exporter
        assert exporter is not None
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title=f"{model}: WarmNodes, Pods, ColdPods (Hyperwarm/Caches, cache exporter)",
                left=[exporter.metric_warm_nodes(model), exporter.metric_pods(model), exporter.metric_cold_pods(model)],
                width=12),
            cloudwatch.GraphWidget(
                title=f"{model}: CacheFillSeconds and FailedCaches (Hyperwarm/Caches, cache exporter)",
                left=[exporter.metric_cache_fill_seconds(model)], right=[exporter.metric_failed_caches(model)],
                width=12))
        self._alarm(f"{model}ColdPodShare", exporter.metric_cold_pod_share(model),
                    threshold=props.cold_pod_share_percent, periods=int(props.cold_pod_share_period.to_minutes()),
                    description=f"{model}: {props.cold_pod_share_percent:g} % or more of its pods on nodes without "
                                f"its weights cache for {props.cold_pod_share_period.to_minutes():g} minutes")
        self._alarm(f"{model}CacheFailed", exporter.metric_failed_caches(model), threshold=1, periods=1,
                    description=f"{model}: a weights or image cache of the model is in state Failed")

    def _warm_rollout(self, model: str, target: str) -> None:
        """A refreshed model's rollout widgets, and an alarm on a cold pod during a refresh."""
        exporter = self.exporter
        assert exporter is not None
        self.dashboard.add_widgets(*rollout_widgets(exporter, model, target))
        self._alarm(f"{model}ColdDuringRefresh", cold_during_rollout(exporter, model, target), threshold=1,
                    periods=1,
                    description=f"{model}: a pod on a node without the version it reads while a refresh of it "
                                "stages or switches: the rollout is not warm and that pod downloads the weights. "
                                "Compare the model's ColdPods and WarmNodes with StagingReadyNodes: a node that "
                                "joined after staging, or a node whose filler could not fill the version (kubectl "
                                "describe node: a failed: annotation; kubectl logs ds/hyperwarm-fill-<model>). Cold "
                                "before the refresh already: see the ColdPodShare alarm")

    def _rollout_timeouts(self, namespace: str) -> None:
        """Alarms on a warm rollout's staging or switch timeout: once, as ``RefreshFailed`` names no target."""
        self._alarm("RefreshStagingTimeout", refresh_failed(STAGING_TIMEOUT), threshold=1, periods=1,
                    description="a refresh's new version was not cached on every node within its staging timeout: "
                                "the refresh failed for good (one dead letter), the fillers dropped the new version "
                                "and the previous version still serves. Check which nodes held it (kubectl get nodes "
                                "-L weights.hyperwarm.io/<model>.<version>-<hash>), a failed: annotation (kubectl "
                                "describe node), the fillers' progress (kubectl logs ds/hyperwarm-fill-<model> -n "
                                f"{namespace}) and StagingReadyNodes on the dashboard; raise the target's "
                                "staging timeout if the fill needs longer (`python -m stacks plan cache` forecasts it), "
                                "then `hyperwarm refresh replay`")
        self._alarm("RefreshSwitchTimeout", refresh_failed(SWITCH_TIMEOUT), threshold=1, periods=1,
                    description="a refreshed deployment did not finish rolling out the staged version within its "
                                "switch timeout: it was pointed back at the previous version, which serves (one "
                                "dead letter). Check the deployment's status and pods (kubectl describe "
                                f"inferenceendpointconfigs -n {namespace}: pending pods, GPU capacity, "
                                "image pulls, failing probes); raise the switch timeout if the rollout needs "
                                "longer, then `hyperwarm refresh replay`")

    def _serving_alarms(self, model: str, props: InferenceObservabilityProps) -> None:
        assert self.exporter is not None
        self._alarm(f"{model}ScrapeFailures", self.exporter.metric_scrape_failures(model), threshold=1,
                    periods=BLIND_MINUTES,
                    description=f"{model}: some of its pods' metrics could not be read every minute for "
                                f"{BLIND_MINUTES} minutes: its TTFT, hit-rate and cold-request graphs miss those "
                                "pods' requests and its TTFT alarm may go blind; a RequestsWaiting autoscaling "
                                "trigger sees no data (KEDA falls back to its min_value)")
        self._alarm(f"{model}TtftP99", self.exporter.metric_time_to_first_token(model, statistic="p99"),
                    threshold=props.ttft_p99.to_milliseconds(), periods=5,
                    description=f"{model}: p99 time to first token at or above "
                                f"{props.ttft_p99.to_milliseconds() / 1000:g} s for 5 minutes (from its vLLM pods' "
                                "histogram; no data, e.g. no requests, is not breaching)")


def serving_widgets(exporter: CacheMetricsExporter, model: str) -> list[cloudwatch.GraphWidget]:
    """From a HyperPod model's own vLLM metrics: TTFT p50/p95/p99, the engine's prefix-cache hit rate
    beside the weights-cache hit rate, the request share on cold nodes beside the pod share, the queue."""
    source = "Hyperwarm/Caches, cache exporter from the pods' vLLM metrics"
    weights_hit_rate = cloudwatch.MathExpression(
        expression="100 - share", label="weights-cache hit rate % (100 - ColdPodShare)",
        period=ONE_MINUTE,  # the exporter's: any other period makes CDK warn that it overrides
        using_metrics={"share": exporter.metric_cold_pod_share(model)})
    percent = cloudwatch.YAxisProps(min=0, max=100)
    return [
        cloudwatch.GraphWidget(
            title=f"{model}: TimeToFirstToken p50/p95/p99, milliseconds ({source})",
            left=[exporter.metric_time_to_first_token(model, statistic=s, label=s) for s in _LATENCY_STATS], width=6),
        cloudwatch.GraphWidget(
            title=f"{model}: PrefixCacheHitRate % (engine) beside the weights-cache hit rate % ({source})",
            left=[exporter.metric_prefix_cache_hit_rate(model), weights_hit_rate], left_y_axis=percent, width=6),
        cloudwatch.GraphWidget(
            title=f"{model}: ColdRequestShare % of requests beside ColdPodShare % of pods on unprepared "
                  f"nodes ({source})",
            left=[exporter.metric_cold_request_share(model), exporter.metric_cold_pod_share(model)],
            left_y_axis=percent, width=6),
        cloudwatch.GraphWidget(
            title=f"{model}: Requests, RequestsWaiting, ScrapeFailures ({source})",
            left=[exporter.metric_requests(model), exporter.metric_requests_waiting(model)],
            right=[exporter.metric_scrape_failures(model)], width=6),
    ]


def _not_published() -> str:
    lines = ["### Not published by the services as CloudWatch metrics (and what this dashboard does instead)"]
    lines += [f"* **{what}**: {why}" for what, why in NOT_PUBLISHED.items()]
    return "\n".join(lines)


def _hyperpod_problems(hyperpod: HyperPodModels) -> list[str]:
    models = list(hyperpod.models)
    if not models:
        return ["hyperpod.models = [] -- give at least one model (CachedModels.models.values())"]
    names = [m.name for m in models]
    problems = []
    if repeated(names):
        problems.append(f"hyperpod.models = {', '.join(repeated(names))} -- each model once")
    places = sorted({f"{m.cluster.node.path}/{m.namespace}" for m in models})
    if len(places) > 1:
        problems.append(f"hyperpod.models = {', '.join(places)} -- one cluster and namespace per HyperPodModels")
    refreshed = [t.model.name for t in hyperpod.refreshed]
    foreign = [t.model.name for t in hyperpod.refreshed if t.model not in models]
    if foreign:
        problems.append(f"hyperpod.refreshed = {', '.join(foreign)} -- a refresh target of a model not in "
                        f"hyperpod.models ({', '.join(names)})")
    if repeated(refreshed):
        problems.append(f"hyperpod.refreshed = {', '.join(repeated(refreshed))} -- each model once")
    return problems


def _validate(scope: Construct, props: InferenceObservabilityProps) -> None:
    path = scope.node.path
    problems = []
    for endpoint in props.endpoints:
        if endpoint.variant_names is None:
            problems.append(f"endpoints = {endpoint.node.path} -- its variant_names must be known (import it with "
                            "variant_names) to chart and alarm per variant")
    if props.hyperpod is not None:
        problems += _hyperpod_problems(props.hyperpod)
    problems += field_problems(props)  # thresholds within their Annotated ranges
    problems += _enrichment_problems(props)
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))


def _enrichment_problems(props: InferenceObservabilityProps) -> list[str]:
    """The account's OTel enrichment is one per account and region, so the library never creates it unasked; a
    PromQL alarm without it never fires, so where one is made the props say how enrichment is on."""
    promql = [e.node.path for e in props.endpoints if not detailed_observability_off(e)]
    problem = otel.enrichment_problem(props.otel_enrichment, promql)
    return [f"otel_enrichment = {props.otel_enrichment!r} -- {problem}"] if problem else []
