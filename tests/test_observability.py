"""The observability stacks: every widget and alarm reads a catalogued metric; the exporter is
read-only in the cluster and least-privilege in IAM; thresholds come from cdk.json."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hyperwarm.functions.endpoint_metrics import promql
from hyperwarm.observability.metric_catalog import (
    ENDPOINTS_NAMESPACE,
    EXPORTER_NAMESPACE,
    NOT_PUBLISHED,
    PUBLISHED_METRICS,
    find,
    find_promql,
)

ENVIRONMENTS = ("dev", "staging", "prod")
CATALOGUED = {(m.namespace, m.name): set(m.dimensions) for m in PUBLISHED_METRICS}


def _stack(synthesized, env: str) -> dict[str, Any]:
    return synthesized.template(f"hyperwarm-{env}-observability")


def _of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


_EXPORTER = "hyperwarm.functions.cache_exporter.handler.lambda_handler"
_BRIDGE = "hyperwarm.functions.endpoint_metrics.handler.lambda_handler"


def _function(template: dict[str, Any], handler: str) -> tuple[str, dict[str, Any]]:
    """(logical id, resource) of the one function with ``handler``."""
    (found,) = [(k, f) for k, f in _of_type(template, "AWS::Lambda::Function").items()
                if f["Properties"]["Handler"] == handler]
    return found


def _role_statements(template: dict[str, Any], function: dict[str, Any]) -> list[dict[str, Any]]:
    """Every IAM statement of the function's role (its inline policies)."""
    role = function["Properties"]["Role"]["Fn::GetAtt"][0]
    return [s for p in _of_type(template, "AWS::IAM::Policy").values() if {"Ref": role} in p["Properties"]["Roles"]
            for s in p["Properties"]["PolicyDocument"]["Statement"]]


def dashboard_widgets(template: dict[str, Any]) -> list[dict[str, Any]]:
    """The dashboard body's widgets; tokens (endpoint and cluster names) become the text TOKEN."""
    (dashboard,) = _of_type(template, "AWS::CloudWatch::Dashboard").values()
    body = dashboard["Properties"]["DashboardBody"]
    parts = body["Fn::Join"][1] if isinstance(body, dict) else [body]
    return json.loads("".join(p if isinstance(p, str) else "TOKEN" for p in parts))["widgets"]


def widget_metrics(widget: dict[str, Any]) -> list[tuple[str, str, set[str]]]:
    """(namespace, name, dimension names) of each metric line; '.' repeats the line above's field."""
    out, previous = [], []
    for line in widget.get("properties", {}).get("metrics", []):
        fields = [f for f in line if not isinstance(f, dict)]
        if not fields:  # a math expression line: its inputs are metric lines of their own
            continue
        fields = [previous[i] if f == "." else f for i, f in enumerate(fields)]
        previous = fields
        out.append((fields[0], fields[1], set(fields[2::2])))
    return out


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_widget_metric_is_catalogued(synthesized, env):
    widgets = dashboard_widgets(_stack(synthesized, env))
    charted = [m for w in widgets for m in widget_metrics(w)]
    assert charted
    for namespace, name, dimensions in charted:
        assert (namespace, name) in CATALOGUED, (namespace, name)
        assert dimensions == CATALOGUED[namespace, name], (namespace, name, dimensions)


def promql_query(alarm: dict[str, Any]) -> str | None:
    """A PromQL alarm's query (None for a metric alarm)."""
    return alarm["Properties"].get("EvaluationCriteria", {}).get("PromQLCriteria", {}).get("Query")


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_alarm_metric_is_catalogued(synthesized, env):
    alarms = _of_type(_stack(synthesized, env), "AWS::CloudWatch::Alarm")
    assert alarms
    for alarm in alarms.values():
        props = alarm["Properties"]
        assert props["AlarmActions"], "every alarm notifies the topic"
        query = promql_query(alarm)
        if query is not None:  # reads catalogued PromQL metrics, selected by catalogued labels
            found = promql.selectors(query)
            assert found, query
            for metric, labels in found:
                catalogued = find_promql(metric)
                assert set(labels) == set(catalogued.labels), (metric, labels)  # scoped to endpoint and variant
            continue
        # a single metric; a math or labelled alarm carries each metric in Metrics[].MetricStat.Metric
        metrics = [m["MetricStat"]["Metric"] for m in props.get("Metrics", []) if "MetricStat" in m] or [props]
        for metric in metrics:
            key = (metric["Namespace"], metric["MetricName"])
            assert key in CATALOGUED, key
            assert {d["Name"] for d in metric["Dimensions"]} == CATALOGUED[key]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_widget_titles_name_their_source(synthesized, env):
    for widget in dashboard_widgets(_stack(synthesized, env)):
        if widget["type"] != "metric":
            continue
        namespaces = {ns for ns, _, _ in widget_metrics(widget)}
        assert all(ns in widget["properties"]["title"] for ns in namespaces), widget["properties"]["title"]


def test_what_is_not_published_is_said_on_the_dashboard(synthesized):
    text = [w for w in dashboard_widgets(_stack(synthesized, "prod")) if w["type"] == "text"]
    assert all(what in text[0]["properties"]["markdown"] for what in NOT_PUBLISHED)


def test_each_sagemaker_variant_has_a_ttft_alarm_its_status_and_the_queries_behind_it(synthesized):
    template = _stack(synthesized, "prod")
    alarms = {promql_query(a): a["Properties"] for a in _of_type(template, "AWS::CloudWatch::Alarm").values()
              if promql_query(a)}
    widgets = dashboard_widgets(template)
    texts = [w["properties"]["markdown"] for w in widgets if w["type"] == "text"]
    status = [w for w in widgets if w["type"] == "alarm"]
    variants = ("random", "prefix-aware")  # prod's chat endpoint
    assert len(alarms) == len(status) == len(variants)
    for variant in variants:
        scope = dict(endpoint="hyperwarm-prod-chat", variant=variant)
        query = promql.ttft_above(5, **scope)  # cdk.json: ttft_p99 default 5
        assert alarms[query]["EvaluationCriteria"]["PromQLCriteria"]["PendingPeriod"] == 300
        assert alarms[query]["EvaluationInterval"] == 60
        (text,) = [t for t in texts if f"chat/{variant}: TTFT sources" in t]
        assert f"`{promql.ttft_quantile(0.99, **scope)}`" in text  # what the alarm reads
        assert f"`{promql.ttft_buckets_per_minute(**scope)}`" in text  # what the graph's bridge reads
        assert "Query Studio" in text and "SageMaker AI Insights" in text
        assert any(w["properties"]["title"] == f"chat/{variant}: TTFT p99 alarm (PromQL)" for w in status)


def test_each_sagemaker_variant_charts_ttft_p50_p95_p99_from_the_bridge(synthesized):
    """The graph reads the bridge's distribution per endpoint and variant: three percentiles of one metric."""
    widgets = dashboard_widgets(_stack(synthesized, "prod"))
    for variant in ("random", "prefix-aware"):
        (graph,) = [w for w in widgets if w["type"] == "metric"
                    and w["properties"]["title"].startswith(f"chat/{variant}: TimeToFirstToken p50/p95/p99")]
        lines = graph["properties"]["metrics"]
        assert [m for _, m, _ in widget_metrics(graph)] == ["TimeToFirstToken"] * 3
        assert {ns for ns, _, _ in widget_metrics(graph)} == {ENDPOINTS_NAMESPACE}
        assert [line[-1]["stat"] for line in lines] == ["p50", "p95", "p99"]
        assert all("hyperwarm-prod-chat" in line and variant in line for line in lines)
        (rates,) = [w for w in widgets if w["type"] == "metric"
                    and w["properties"]["title"].startswith(f"chat/{variant}: PrefixCacheHitRate")]
        assert {m for _, m, _ in widget_metrics(rates)} == {"PrefixCacheHitRate", "QueryFailures"}


def test_prod_alarms_cover_latency_cold_share_and_cache_failures(synthesized):
    alarms = [a["Properties"] for a in _of_type(_stack(synthesized, "prod"), "AWS::CloudWatch::Alarm").values()]
    by_metric: dict[str, list[dict[str, Any]]] = {}
    for alarm in alarms:
        kind = alarm.get("MetricName") or ("math" if "Metrics" in alarm else "PromQL")
        by_metric.setdefault(kind, []).append(alarm)
    latency = by_metric["ModelLatency"]
    assert len(latency) == 2  # the two variants of prod's chat endpoint
    assert all(a["ExtendedStatistic"] == "p99" and a["Threshold"] == 60_000_000 for a in latency)  # cdk.json: 60 s
    cold = by_metric["ColdPodShare"]
    assert {next(d["Value"] for d in a["Dimensions"] if d["Name"] == "Model") for a in cold} == {
        "llama-3-1-70b", "llama-3-1-8b"}
    assert all(a["Threshold"] == 25 and a["EvaluationPeriods"] == 10 and a["Period"] == 60 for a in cold)
    assert len(by_metric["FailedCaches"]) == 2
    ttft = by_metric["TimeToFirstToken"]  # one per HyperPod model, default threshold 5 s
    assert {next(d["Value"] for d in a["Dimensions"] if d["Name"] == "Model") for a in ttft} == {
        "llama-3-1-70b", "llama-3-1-8b"}
    assert all(a["ExtendedStatistic"] == "p99" and a["Threshold"] == 5000 and a["EvaluationPeriods"] == 5
               and a["TreatMissingData"] == "notBreaching" for a in ttft)
    assert len(by_metric["Errors"]) == 2  # the exporter and the endpoint metrics bridge
    blind = by_metric["QueryFailures"] + by_metric["ScrapeFailures"]  # per variant, per model
    assert sorted((a["MetricName"], d["Value"]) for a in blind for d in a["Dimensions"]
                  if d["Name"] in ("VariantName", "Model")) == [
        ("QueryFailures", v) for v in ("prefix-aware", "random")] + [
        ("ScrapeFailures", "llama-3-1-70b"), ("ScrapeFailures", "llama-3-1-8b")]
    assert all(a["Threshold"] == 1 and a["EvaluationPeriods"] == 15 and a["Period"] == 60
               and a["ComparisonOperator"] == "GreaterThanOrEqualToThreshold" and "TTFT" in a["AlarmDescription"]
               for a in blind)
    assert len(by_metric["PromQL"]) == 2  # TTFT p99 of each variant
    # no TTFT series while serving, per variant (2); a cold pod during a refresh of each node-cached model (2)
    assert len(by_metric["math"]) == 4


def test_each_variant_alarms_when_its_ttft_query_returns_no_series_while_it_serves(synthesized):
    """A PromQL alarm whose query returns nothing stays OK (no OTel enrichment, detailed observability off, an
    engine without the histogram): the bridge's SeriesReturned at 0 while Invocations is above 0 fires."""
    alarms = {k: a["Properties"] for k, a in _of_type(_stack(synthesized, "prod"), "AWS::CloudWatch::Alarm").items()
              if "NoSeries" in k}
    assert len(alarms) == 2
    for props in alarms.values():
        expression, *inputs = props["Metrics"]
        assert expression["Expression"] == "IF(FILL(requests, 0) > 0 AND series == 0, 1, 0)"
        stats = {m["Id"]: m["MetricStat"] for m in inputs}
        assert (stats["requests"]["Metric"]["MetricName"], stats["requests"]["Stat"]) == ("Invocations", "Sum")
        assert stats["series"]["Metric"]["Namespace"] == ENDPOINTS_NAMESPACE
        assert (stats["series"]["Metric"]["MetricName"], stats["series"]["Stat"]) == ("SeriesReturned", "Maximum")
        assert {m["Period"] for m in stats.values()} == {300}
        assert props["EvaluationPeriods"] * 5 == 15 and props["Threshold"] == 1
        assert props["TreatMissingData"] == "notBreaching" and props["AlarmActions"]
        assert "OTel enrichment" in props["AlarmDescription"]


def test_the_observability_stack_creates_the_accounts_otel_enrichment_once_and_retains_it(synthesized):
    """PromQL returns no series without it (SageMaker's getting-started guide); one per account: retained."""
    template = _stack(synthesized, "prod")
    (tags_id, tags), = _of_type(template, "AWS::ObservabilityAdmin::TelemetryEnrichment").items()
    (enrichment,) = _of_type(template, "AWS::CloudWatch::OTelEnrichment").values()
    assert tags["Properties"] == {"Scope": "ACCOUNT"} and enrichment["DependsOn"] == [tags_id]
    assert {r["DeletionPolicy"] for r in (tags, enrichment)} == {"RetainExceptOnCreate"}
    staging = _stack(synthesized, "staging")  # cdk.json: otel_enrichment existing (dev creates it, same account)
    assert not _of_type(staging, "AWS::CloudWatch::OTelEnrichment")
    assert staging["Metadata"]["hyperwarm:otelEnrichment"] == "existing"


_SINGLETONS = ("AWS::ObservabilityAdmin::TelemetryEnrichment", "AWS::CloudWatch::OTelEnrichment")


def _team_app(detailed_observability: bool | None = False, **props: Any) -> dict[str, Any]:
    """One platform team's app: its own cdk.App, an endpoint it observes, the library's defaults otherwise."""
    import aws_cdk as cdk
    from aws_cdk import assertions

    from hyperwarm import InferenceEndpoint
    from hyperwarm.observability.dashboard import InferenceObservability, InferenceObservabilityProps

    stack = cdk.Stack(cdk.App(), "Team", env=cdk.Environment(account="111122223333", region="us-east-1"))
    chat = InferenceEndpoint.from_endpoint_attributes(stack, "Chat", endpoint_name="chat", variant_names=["a"],
                                                      detailed_observability=detailed_observability)
    InferenceObservability(stack, "Obs", InferenceObservabilityProps(endpoints=[chat], **props))
    return assertions.Template.from_stack(stack).to_json()


def _singletons(template: dict[str, Any]) -> list[str]:
    return sorted(r["Type"] for r in template["Resources"].values() if r["Type"] in _SINGLETONS)


def test_two_apps_with_the_librarys_defaults_create_no_account_wide_resource():
    """Two teams' apps deploy into one account: neither creates the account's OTel enrichment unasked (the second
    would fail with "already exists", and deleting the first would turn PromQL off for both)."""
    # Each app the same (a build is deterministic): what one creates, the other would too.
    template = _team_app()  # an endpoint without detailed observability: no PromQL alarm
    assert _singletons(template) == [] and "Metadata" not in template
    with pytest.raises(ValueError) as error:  # a PromQL alarm: the default refuses rather than create it or go blind
        _team_app(detailed_observability=None)  # imported: not known to be off, so a PromQL TTFT alarm
    assert "Team/Obs: otel_enrichment = None -- required: the PromQL TTFT alarms of Team/Chat" in str(error.value)
    assert 'set "existing"' in str(error.value) and 'or "create"' in str(error.value)
    template = _team_app(True, otel_enrichment="existing")
    assert _singletons(template) == [] and template["Metadata"]["hyperwarm:otelEnrichment"] == "existing"


def test_the_opt_in_creates_the_accounts_otel_enrichment_and_retains_it():
    created = _team_app(detailed_observability=True, otel_enrichment="create")
    assert _singletons(created) == sorted(_SINGLETONS)
    assert {r["DeletionPolicy"] for r in created["Resources"].values() if r["Type"] in _SINGLETONS} == {
        "RetainExceptOnCreate"}
    with pytest.raises(ValueError, match="otel_enrichment = 'on' -- allowed: create, existing"):
        _team_app(otel_enrichment="on")


def test_cdk_json_names_the_enrichment_where_an_endpoint_is_observed(project_context):
    from stacks.config import ConfigError, parse_environments

    del project_context["environments"]["prod"]["observability"]["otel_enrichment"]
    with pytest.raises(ConfigError) as error:
        parse_environments(project_context["environments"])
    assert ("environments.prod.observability.otel_enrichment: missing -- required: the PromQL TTFT alarms of chat "
            "(detailed observability on or not known to be off) read no series") in str(error.value)
    for endpoint in project_context["environments"]["prod"]["endpoints"]:  # no PromQL alarm: nothing to say
        endpoint["detailed_observability"] = False
    assert parse_environments(project_context["environments"])["prod"].observability.otel_enrichment is None


def test_the_alarm_topic_is_encrypted_with_a_key_cloudwatch_may_use_and_lets_its_alarms_publish(synthesized):
    template = synthesized.template("hyperwarm-prod-alarms")
    (topic_id, topic), = _of_type(template, "AWS::SNS::Topic").items()
    assert "KmsMasterKeyId" in topic["Properties"] and topic["Properties"]["TopicName"] == "hyperwarm-prod-alarms"
    (key,) = _of_type(template, "AWS::KMS::Key").values()
    statements = key["Properties"]["KeyPolicy"]["Statement"]
    assert any(s["Principal"].get("Service") == "cloudwatch.amazonaws.com"
               and "kms:GenerateDataKey*" in s["Action"] for s in statements)
    (policy,) = _of_type(template, "AWS::SNS::TopicPolicy").values()
    (allow,) = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"]
    assert allow["Principal"] == {"Service": "cloudwatch.amazonaws.com"} and allow["Action"] == "sns:Publish"
    assert allow["Resource"] == {"Ref": topic_id}
    assert allow["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert allow["Condition"]["ArnLike"]["aws:SourceArn"] == {"Fn::Join": ["", [
        "arn:aws:cloudwatch:us-east-1:", {"Ref": "AWS::AccountId"}, ":alarm:*"]]}


def test_the_construct_default_topic_lets_cloudwatch_publish():
    """Without a topic, InferenceObservability's own topic had only the SSL deny in its policy."""
    import aws_cdk as cdk
    from aws_cdk import assertions

    from hyperwarm.observability.dashboard import InferenceObservability, InferenceObservabilityProps

    stack = cdk.Stack(cdk.App(), "S")
    InferenceObservability(stack, "Obs", InferenceObservabilityProps())
    assertions.Template.from_stack(stack).has_resource_properties("AWS::SNS::TopicPolicy", {
        "PolicyDocument": {"Statement": assertions.Match.array_with([assertions.Match.object_like({
            "Effect": "Allow", "Principal": {"Service": "cloudwatch.amazonaws.com"}, "Action": "sns:Publish"})])}})


def test_exporter_runs_every_minute_in_the_private_subnets(synthesized):
    template = _stack(synthesized, "prod")
    function_id, function = _function(template, _EXPORTER)
    (rule,) = [r for r in _of_type(template, "AWS::Events::Rule").values()
               if r["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}]
    assert rule["Properties"]["ScheduleExpression"] == "rate(1 minute)"
    assert function["Properties"]["VpcConfig"]["SubnetIds"]
    assert function["Properties"]["Environment"]["Variables"]["HYPERWARM_NAMESPACES"] == "hyperwarm-models"


def test_exporter_iam_is_least_privilege(synthesized):
    template = _stack(synthesized, "prod")
    statements = _role_statements(template, _function(template, _EXPORTER)[1])
    actions = sorted(a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]))
    assert actions == ["cloudwatch:PutMetricData", "eks:DescribeCluster"]
    (put,) = [s for s in statements if s["Action"] == "cloudwatch:PutMetricData"]
    assert put["Condition"] == {"StringEquals": {"cloudwatch:namespace": EXPORTER_NAMESPACE}}
    (describe,) = [s for s in statements if s["Action"] == "eks:DescribeCluster"]
    assert describe["Resource"] != "*"


def test_exporter_kubernetes_access_is_read_only():
    from hyperwarm.observability.cache_exporter import rbac_objects

    objects = rbac_objects(["hyperwarm-models"])
    rules = [r for o in objects if o["kind"] in ("Role", "ClusterRole") for r in o["rules"]]
    assert {v for r in rules for v in r["verbs"]} == {"get", "list", "watch"}
    assert sorted((g, res) for r in rules for g in r["apiGroups"] for res in r["resources"]) == [
        ("", "nodes"), ("", "pods"), ("", "pods/proxy"),
        ("inference.sagemaker.aws.amazon.com", "inferenceendpointconfigs"),
        ("inference.sagemaker.aws.amazon.com", "modelimagecaches"),
        ("inference.sagemaker.aws.amazon.com", "modelweightscacheconfigs")]
    cluster_wide = [o for o in objects if o["kind"] == "ClusterRole"]
    assert [r["resources"] for o in cluster_wide for r in o["rules"]] == [["nodes"]]


def test_exporter_may_only_get_the_pod_proxy_in_the_models_namespace(synthesized):
    """The pods' own metrics are read through the API server's pod proxy: ``get`` on ``pods/proxy``, in a
    Role of the caches' namespace, never cluster-wide (a ClusterRole would open every pod's ports)."""
    (rbac,) = synthesized.resources("hyperwarm-prod-observability", "Custom::AWSCDK-EKS-KubernetesResource").values()
    objects = json.loads(rbac["Properties"]["Manifest"])
    proxy = [(o["kind"], o["metadata"].get("namespace"), r["verbs"]) for o in objects
             for r in o.get("rules", []) if any(res.startswith("pods/") for res in r["resources"])]
    assert proxy == [("Role", "hyperwarm-models", ["get"])]


def test_catalog_lookup_names_what_exists():
    assert find(EXPORTER_NAMESPACE, "ColdPodShare").unit == "Percent"
    assert find(EXPORTER_NAMESPACE, "TimeToFirstToken").unit == "Milliseconds"  # from the HyperPod pods' vLLM metrics
    with pytest.raises(KeyError, match="catalogued there: .*ColdPods"):
        find(EXPORTER_NAMESPACE, "TTFT")


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_each_hyperpod_model_charts_ttft_hit_rates_and_request_share(synthesized, env):
    widgets = dashboard_widgets(_stack(synthesized, env))
    charted = {name for w in widgets for _, name, _ in widget_metrics(w)}
    assert {"TimeToFirstToken", "PrefixCacheHitRate", "ColdRequestShare", "ColdPodShare", "RequestsWaiting",
            "ScrapeFailures"} <= charted
    titles = [w["properties"]["title"] for w in widgets if w["type"] == "metric"]
    ttft = [t for t in titles if "TimeToFirstToken p50/p95/p99" in t and EXPORTER_NAMESPACE in t]
    hit_rates = [t for t in titles if "PrefixCacheHitRate" in t and "weights-cache hit rate" in t]
    shares = [t for t in titles if "ColdRequestShare" in t and "ColdPodShare" in t]
    assert len(ttft) == len(hit_rates) == len(shares) > 0


def test_exporter_runs_in_one_environment_at_a_time(synthesized):
    """The previous scrape lives in the function's memory: one execution environment must see every run."""
    _, function = _function(_stack(synthesized, "prod"), _EXPORTER)
    assert function["Properties"]["ReservedConcurrentExecutions"] == 1


def _app(context, env: str):
    from stacks.app import build_app

    return build_app(context={**context, "env": env}, nag=False)


def test_thresholds_come_from_cdk_json(prod_variant):
    import aws_cdk.assertions as assertions

    assert prod_variant.observability == {"cold_pod_share_percent": 20, "cold_pod_share_period": 300,
                                          "model_latency_p99": 2.5, "ttft_p99": 0.75}
    template = assertions.Template.from_json(prod_variant.template("hyperwarm-prod-observability"))
    template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "MetricName": "ColdPodShare", "Threshold": 20, "EvaluationPeriods": 5})
    template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "MetricName": "ModelLatency", "Threshold": 2_500_000})
    template.has_resource_properties("AWS::CloudWatch::Alarm", {"EvaluationCriteria": {"PromQLCriteria": {
        "Query": promql.ttft_above(0.75, endpoint="hyperwarm-prod-chat", variant="random")}}})
    template.has_resource_properties("AWS::CloudWatch::Alarm", {  # the same threshold for HyperPod models
        "MetricName": "TimeToFirstToken", "ExtendedStatistic": "p99", "Threshold": 750})


def test_an_existing_topic_is_used_declared_and_none_created(prod_variant):
    import aws_cdk.assertions as assertions

    arn = prod_variant.topic_arn  # alarms.topic_arn
    assert "hyperwarm-prod-alarms" not in [c.node.id for c in prod_variant.app.node.children]
    for part in ("observability", "endpoints", "refresh"):
        template = assertions.Template.from_json(prod_variant.template(f"hyperwarm-prod-{part}"))
        template.resource_count_is("AWS::SNS::Topic", 0)
        for alarm in template.find_resources("AWS::CloudWatch::Alarm").values():
            assert alarm["Properties"]["AlarmActions"] == [arn]
        assert template.to_json()["Metadata"]["hyperwarm:existingAlarmTopics"] == [arn]


def test_disabled_observability_adds_no_stack(project_context):
    # An environment of endpoints alone (no cluster to build): something to observe, and no observability stack.
    dev = project_context["environments"]["dev"]
    edge = {"endpoints": dev["endpoints"], "model_buckets": dev["model_buckets"], "observability": {"enabled": False}}
    app = _app({**project_context, "environments": {"dev": edge}}, "dev")
    stacks = [c.node.id for c in app.node.children]
    assert "hyperwarm-dev-endpoints" in stacks and "hyperwarm-dev-observability" not in stacks


@pytest.mark.parametrize("section, message", [
    ({"cold_pod_share_percent": 150}, "environments.prod.observability.cold_pod_share_percent: 150"),
    ({"alarm_topic_arn": "arn:aws:sns:us-east-1:123456789012:oncall"},
     "environments.prod.observability: alarm_topic_arn moved to alarms.topic_arn"),
    ({"otel_enrichment": "on"}, "environments.prod.observability.otel_enrichment: 'on' -- Input should be 'create' or"),
    ({"cold_pod_share_period": 0}, "environments.prod.observability.cold_pod_share_period: 0"),
    ({"cold_pod_share_period": 90}, "environments.prod.observability.cold_pod_share_period: 90 -- Input should be a "
                                    "multiple of 60"),
    ({"cold_pod_share_minutes": 15}, "environments.prod.observability.cold_pod_share_minutes: 15 -- unknown key; it "
                                     "is now cold_pod_share_period (seconds, whole minutes: 15 minutes is 900)"),
    ({"ttft_p99": 0}, "environments.prod.observability.ttft_p99: 0"),
    ({"ttft_p99_seconds": 5}, "environments.prod.observability.ttft_p99_seconds: 5 -- unknown key; it is now ttft_p99"),
])
def test_bad_observability_config_fails_with_the_field(project_context, section, message):
    from stacks.config import ConfigError, parse_environments

    project_context["environments"]["prod"]["observability"] = section
    with pytest.raises(ConfigError) as error:
        parse_environments(project_context["environments"])
    assert message in str(error.value)


def test_construct_validation_names_every_problem():
    import aws_cdk as cdk

    from hyperwarm import InferenceEndpoint
    from hyperwarm.observability.dashboard import InferenceObservability, InferenceObservabilityProps

    stack = cdk.Stack(cdk.App(), "S")
    imported = InferenceEndpoint.from_endpoint_attributes(stack, "Chat", endpoint_name="chat")
    with pytest.raises(ValueError) as error:
        InferenceObservability(stack, "Obs", InferenceObservabilityProps(
            endpoints=[imported], cold_pod_share_percent=120, cold_pod_share_period=cdk.Duration.seconds(90),
            ttft_p99=cdk.Duration.seconds(0)))
    text = str(error.value)
    assert "S/Obs: " in text and "variant_names must be known" in text
    assert "cold_pod_share_percent = 120 -- allowed: 0..100" in text
    assert "cold_pod_share_period = 90 seconds -- allowed: 60..86400, a multiple of 60 seconds" in text
    assert "ttft_p99 = 0 seconds -- allowed: > 0 seconds" in text


_EXPORTER_RUNTIME = """
import importlib, importlib.machinery, sys
from pathlib import Path
asset, site, handler, bundled = sys.argv[1:5]
sys.path.insert(0, asset)
class Runtime:  # what the Lambda Python runtime brings: boto3 and its own dependencies, nothing else
    def find_spec(self, name, path=None, target=None):
        if path is None and name in {"boto3", "botocore", "s3transfer", "urllib3", "dateutil", "six", "jmespath"}:
            return importlib.machinery.PathFinder.find_spec(name, [site])
sys.meta_path.append(Runtime())
module_name, function = handler.rsplit(".", 1)
module = importlib.import_module(module_name)
assert callable(getattr(module, function)) and module.__file__.startswith(asset)
if bundled == "prometheus_client":
    assert sys.modules["prometheus_client"].__file__.startswith(asset)  # bundled at its pin, not the runtime's
    assert sys.modules["hyperwarm.functions.eks_auth"].__file__.startswith(asset)  # shared with the refresh function
    assert "hyperwarm.functions.endpoint_metrics" not in sys.modules
else:
    assert "prometheus_client" not in sys.modules, "the bridge needs nothing beyond the runtime"
    assert not {"hyperwarm.functions.cache_exporter", "hyperwarm.functions.eks_auth"} & set(sys.modules)
    assert not (Path(asset) / "hyperwarm" / "functions" / "cache_exporter").exists()  # its own asset alone
assert sys.modules["hyperwarm.functions.metric_publishing.ttft"].__file__.startswith(asset)  # the shared TTFT code
assert sys.modules["hyperwarm"].__file__.startswith(asset)  # the asset's empty package, not the library
assert not {"aws_cdk", "jsii", "constructs", "hyperwarm.cli", "hyperwarm.functions.cache_refresh"} & set(sys.modules), \
    sorted(sys.modules)
"""


@pytest.mark.parametrize("handler, bundled", [(_EXPORTER, "prometheus_client"), (_BRIDGE, "-")])
def test_exporter_handler_imports_from_a_copy_of_its_asset_alone(synthesized, tmp_path, handler, bundled):
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    import boto3

    _, function = _function(_stack(synthesized, "prod"), handler)
    copy = tmp_path / "asset"
    shutil.copytree(synthesized.outdir / f"asset.{function['Properties']['Code']['S3Key'].removesuffix('.zip')}", copy)
    site = str(Path(boto3.__file__).resolve().parent.parent)
    subprocess.run([sys.executable, "-S", "-c", _EXPORTER_RUNTIME, str(copy), site, handler, bundled], check=True,
                   env={"AWS_REGION": "us-west-2", "PATH": "/usr/bin:/bin"}, cwd=tmp_path, capture_output=True)


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_the_observability_stack_synthesizes_without_warnings(synthesized, env):
    """A warning on every `cdk` command is noise users learn to ignore (e.g. CDK overriding a math
    expression's period when it differs from the exporter's one-minute metrics). The stack's messages come
    from the session's synthesis (Annotations.from_stack would synthesize the whole app again)."""
    assert f"hyperwarm-{env}-observability" in synthesized.stack_names()
    assert synthesized.warnings().get(f"hyperwarm-{env}-observability", []) == []



def test_bridge_iam_is_promql_reads_and_its_own_namespace_only(synthesized):
    template = _stack(synthesized, "prod")
    _, function = _function(template, _BRIDGE)
    statements = _role_statements(template, function)
    actions = sorted(a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]))
    assert actions == ["cloudwatch:GetMetricData", "cloudwatch:ListMetrics", "cloudwatch:PutMetricData",
                       "logs:CreateLogStream", "logs:PutLogEvents"]
    (put,) = [s for s in statements if s["Action"] == "cloudwatch:PutMetricData"]
    assert put["Condition"] == {"StringEquals": {"cloudwatch:namespace": ENDPOINTS_NAMESPACE}}
    (logs,) = [s for s in statements if "logs:PutLogEvents" in s["Action"]]
    assert "Fn::GetAtt" in json.dumps(logs["Resource"])  # its own log group, not logs:*
    role = template["Resources"][function["Properties"]["Role"]["Fn::GetAtt"][0]]
    assert "ManagedPolicyArns" not in role["Properties"]  # no SageMaker, no VPC, no managed policy


def test_bridge_runs_every_minute_once_at_a_time_outside_any_vpc(synthesized):
    template = _stack(synthesized, "prod")
    function_id, function = _function(template, _BRIDGE)
    (rule,) = [r for r in _of_type(template, "AWS::Events::Rule").values()
               if r["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}]
    assert rule["Properties"]["ScheduleExpression"] == "rate(1 minute)"
    assert rule["Properties"]["Targets"][0]["RetryPolicy"]["MaximumRetryAttempts"] == 0
    assert function["Properties"]["ReservedConcurrentExecutions"] == 1
    assert "VpcConfig" not in function["Properties"]


def test_bridge_environment_lists_each_variant_from_which_it_writes_the_promql_it_runs(synthesized):
    _, function = _function(_stack(synthesized, "prod"), _BRIDGE)
    variants = json.loads(function["Properties"]["Environment"]["Variables"]["HYPERWARM_VARIANTS"])
    scopes = [dict(endpoint="hyperwarm-prod-chat", variant=v) for v in ("prefix-aware", "random")]
    assert variants == [{**scope, "engine": "vllm", "window": "5m"} for scope in scopes]
    assert [(v.ttft, v.hit_rate) for v in map(promql.Variant.from_entry, variants)] == [
        (promql.ttft_buckets_per_minute(**scope), promql.prefix_cache_hit_rate(**scope)) for scope in scopes]


def test_the_bridge_has_an_errors_alarm(synthesized):
    template = _stack(synthesized, "prod")
    function_id, _ = _function(template, _BRIDGE)
    (alarm,) = [a["Properties"] for a in _of_type(template, "AWS::CloudWatch::Alarm").values()
                if a["Properties"].get("MetricName") == "Errors"
                and a["Properties"]["Dimensions"][0]["Value"] == {"Ref": function_id}]
    assert alarm["Threshold"] == 1 and alarm["AlarmActions"]
