"""A refreshed HyperPod model's warm rollout on the dashboard and in the alarms: staging progress, time to warm
and to switch, cold pods during a refresh; alarms on a staging or switch timeout and on a cold pod during a
refresh, each to the alarm topic. Minimal stacks (an imported cluster), no app synthesis."""

from __future__ import annotations

import json
import re
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import assertions, aws_sns as sns
from stand_ins import cached_model, imported_cluster

from hyperwarm.cluster.instance_group import InstanceGroupSpec
from hyperwarm.functions.cache_refresh import contract
from hyperwarm.observability.dashboard import InferenceObservability
from hyperwarm.observability.metric_catalog import EXPORTER_NAMESPACE, PUBLISHED_METRICS
from hyperwarm.observability.props import HyperPodModels, InferenceObservabilityProps
from hyperwarm.refresh.hook import HyperPodRefreshTarget

GROUPS = [InstanceGroupSpec("system", "ml.c5.4xlarge"),
          InstanceGroupSpec("inference", "ml.g5.xlarge", instance_count=2, holds_caches=True)]
TOPIC = "arn:aws:sns:us-west-2:123456789012:hyperwarm-test-alarms"
NS = "hyperwarm-models"
TARGET = "hyperpod:hyperpod-eks/hyperwarm-models/InferenceEndpointConfig/llama"
"""contract.hyperpod_target_id of the stand-in cluster's llama deployment, written out."""
CATALOGUED = {(m.namespace, m.name): set(m.dimensions) for m in PUBLISHED_METRICS}


def build(models: tuple[str, ...] = ("llama", "qwen"), refreshed: tuple[str, ...] = ("llama",),
          cold: tuple[str, ...] = ()) -> dict[str, Any]:
    """Observability of ``models`` (node-cached, but ``cold``), with refresh targets of ``refreshed``."""
    stack = cdk.Stack(cdk.App(), "Obs", env=cdk.Environment(account="123456789012", region="us-west-2"))
    cluster = imported_cluster(stack, GROUPS)
    handles = {name: cached_model(cluster, name, NS, node_cached=name not in cold) for name in {*models, *refreshed}}
    InferenceObservability(stack, "Observability", InferenceObservabilityProps(
        hyperpod=HyperPodModels(models=[handles[m] for m in models],
                                refreshed=[HyperPodRefreshTarget(handles[m]) for m in refreshed]),
        topic=sns.Topic.from_topic_arn(stack, "Topic", TOPIC)))
    template: dict[str, Any] = assertions.Template.from_stack(stack).to_json()
    return template


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return build()


def widgets(template: dict[str, Any]) -> list[dict[str, Any]]:
    (dashboard,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Dashboard"]
    body = dashboard["Properties"]["DashboardBody"]
    parts = body["Fn::Join"][1] if isinstance(body, dict) else [body]
    found: list[dict[str, Any]] = json.loads("".join(p if isinstance(p, str) else "TOKEN" for p in parts))["widgets"]
    return found


def lines(widget: dict[str, Any]) -> list[tuple[str, str, dict[str, str]]]:
    """(namespace, metric, dimensions) of each metric line ('.' repeats the line above's field)."""
    out, previous = [], []
    for line in widget["properties"].get("metrics", []):
        fields = [previous[i] if f == "." else f for i, f in enumerate(f for f in line if not isinstance(f, dict))]
        previous = fields
        out.append((fields[0], fields[1], dict(zip(fields[2::2], fields[3::2], strict=True))))
    return out


def titled(template: dict[str, Any], pattern: str) -> list[dict[str, Any]]:
    return [w for w in widgets(template) if re.search(pattern, w["properties"].get("title", ""))]


def alarms(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: r["Properties"] for k, r in template["Resources"].items() if r["Type"] == "AWS::CloudWatch::Alarm"}


def alarm(template: dict[str, Any], logical_prefix: str) -> dict[str, Any]:
    (found,) = [a for k, a in alarms(template).items() if k.startswith(logical_prefix)]
    return found


ROLLOUT = {"service": contract.SERVICE, "target": TARGET}
EXPORTED = {"ClusterName": "hyperpod-eks", "Model": "llama"}


def test_a_refreshed_model_charts_staging_progress_time_to_warm_and_switch_and_cold_pods(template):
    staging, timing, cold = (titled(template, rf"^llama: {what}") for what in
                             ("refresh staging", "refresh TimeToWarm", "ColdPods .* RolloutInProgress"))
    assert [lines(w) for w in staging[0:1]] == [[
        ("Hyperwarm", "StagingReadyNodes", ROLLOUT), ("Hyperwarm", "StagingTargetNodes", ROLLOUT)]]
    assert lines(timing[0]) == [("Hyperwarm", "TimeToWarm", ROLLOUT), ("Hyperwarm", "TimeToSwitch", ROLLOUT),
                                ("Hyperwarm", "RolloutAborted", ROLLOUT)]
    assert lines(cold[0]) == [(EXPORTER_NAMESPACE, "ColdPods", EXPORTED), ("Hyperwarm", "RefreshColdPods", ROLLOUT),
                              ("Hyperwarm", "RolloutInProgress", ROLLOUT)]
    assert [m[-1].get("yAxis") for m in cold[0]["properties"]["metrics"]] == [None, None, "right"]
    assert len(staging) == len(timing) == len(cold) == 1
    assert not titled(template, r"^qwen: .*(refresh|RolloutInProgress)")  # not refreshed: no rollout widgets


def test_every_rollout_widget_metric_is_catalogued_with_its_dimensions(template):
    charted = [line for w in titled(template, r"refresh|RolloutInProgress") for line in lines(w)]
    assert {name for _, name, _ in charted} >= set(contract.ROLLOUT_METRICS)
    for namespace, name, dimensions in charted:
        assert CATALOGUED[namespace, name] == set(dimensions), (namespace, name)


def test_the_target_dimension_is_the_refresh_functions_target_id():
    """The dashboard's target id and the one the refresh stack hands the function are the same string."""
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(account="123456789012", region="us-west-2"))
    cluster = imported_cluster(stack, GROUPS)
    refreshed = HyperPodRefreshTarget(cached_model(cluster, "llama", NS, node_cached=True))
    assert stack.resolve(refreshed.model.target_id) == stack.resolve(refreshed.to_contract().id) == TARGET


def cloudwatch_math(expression: str, **series: list[float | None]) -> list[float]:
    """The alarm's metric math evaluated point by point (IF, FILL with a constant, AND, comparisons): enough
    of CloudWatch's metric math for the expressions here, so a test reads what the alarm computes."""
    python = expression.replace(" AND ", " and ")
    assert re.fullmatch(r"[A-Za-z_(), 0-9<>=.]+", python), expression

    def evaluate(i: int) -> float:
        scope = {"IF": lambda c, a, b: a if c else b, "FILL": lambda v, d: d if v is None else v,
                 **{name: values[i] for name, values in series.items()}}
        return float(eval(python, {"__builtins__": {}}, scope))  # noqa: S307 (our own checked expression)

    return [evaluate(i) for i in range(len(next(iter(series.values()))))]


def test_a_cold_pod_during_a_refresh_alarms_through_metric_math(template):
    cold = alarm(template, "ObservabilityllamaColdDuringRefresh")
    (expression,) = [m for m in cold["Metrics"] if "Expression" in m]
    inputs = {m["Id"]: m["MetricStat"] for m in cold["Metrics"] if "MetricStat" in m}
    dimensions = {k: {d["Name"]: d["Value"] for d in s["Metric"]["Dimensions"]} for k, s in inputs.items()}
    assert {k: (s["Metric"]["Namespace"], s["Metric"]["MetricName"], s["Stat"], s["Period"])
            for k, s in inputs.items()} == {"rollout": ("Hyperwarm", "RolloutInProgress", "Maximum", 120),
                                            "cold": (EXPORTER_NAMESPACE, "ColdPods", "Maximum", 120)}
    assert dimensions == {"rollout": ROLLOUT, "cold": EXPORTED}
    assert all(not m.get("ReturnData", True) for m in cold["Metrics"] if "MetricStat" in m)
    assert (cold["Threshold"], cold["ComparisonOperator"], cold["EvaluationPeriods"], cold["TreatMissingData"]) == (
        1, "GreaterThanOrEqualToThreshold", 1, "notBreaching")
    # before, during staging (cold 0), a cold pod mid-rollout, a step missing from the period, after the rollout
    rollout = [None, 1, 1, None, None]
    pods = [2, 0, 1, 1, 3]
    assert cloudwatch_math(expression["Expression"], rollout=rollout, cold=pods) == [0, 0, 1, 0, 0]
    assert "ColdPods" in cold["AlarmDescription"] and "StagingReadyNodes" in cold["AlarmDescription"]


@pytest.mark.parametrize("reason, logical", [("staging-timeout", "ObservabilityRefreshStagingTimeout"),
                                             ("switch-timeout", "ObservabilityRefreshSwitchTimeout")])
def test_a_staging_or_switch_timeout_alarms_on_refresh_failed_by_reason(template, reason, logical):
    timeout = alarm(template, logical)
    assert (timeout["Namespace"], timeout["MetricName"], timeout["Statistic"], timeout["Period"]) == (
        "Hyperwarm", "RefreshFailed", "Sum", 300)
    assert {d["Name"]: d["Value"] for d in timeout["Dimensions"]} == {"service": contract.SERVICE, "Reason": reason}
    assert CATALOGUED["Hyperwarm", "RefreshFailed"] == {"service", "Reason"}
    assert (timeout["Threshold"], timeout["ComparisonOperator"], timeout["EvaluationPeriods"]) == (
        1, "GreaterThanOrEqualToThreshold", 1)
    description = timeout["AlarmDescription"]
    assert "previous version" in description and "hyperwarm refresh replay" in description  # what to do next


def test_every_rollout_alarm_notifies_the_alarm_topic(template):
    rollout = {k: a for k, a in alarms(template).items() if re.search("ColdDuringRefresh|Refresh.*Timeout", k)}
    assert len(rollout) == 3
    assert all(a["AlarmActions"] == [TOPIC] for a in rollout.values())


def test_timeout_alarms_are_made_once_however_many_models_are_refreshed():
    both = alarms(build(refreshed=("llama", "qwen")))
    assert len([k for k in both if "Timeout" in k]) == 2
    assert len([k for k in both if "ColdDuringRefresh" in k]) == 2


def test_without_refreshed_models_there_are_no_rollout_widgets_or_alarms():
    plain = build(refreshed=())
    assert not titled(plain, r"refresh|RolloutInProgress")
    assert not [k for k in alarms(plain) if re.search("ColdDuringRefresh|Refresh.*Timeout", k)]


def test_refreshed_models_must_be_watched_models_each_once():
    with pytest.raises(ValueError) as error:
        build(models=("llama",), refreshed=("mistral", "llama", "llama"))
    text = str(error.value)
    assert "Obs/Observability: " in text
    assert "hyperpod.refreshed = mistral -- a refresh target of a model not in hyperpod.models (llama)" in text
    assert "hyperpod.refreshed = llama -- each model once" in text


def test_a_model_the_refresh_repoints_cold_gets_no_warm_rollout_charts_or_alarms():
    """What the dashboard charts follows from the model, as the refresh does: the two cannot disagree."""
    plain = build(refreshed=("llama",), cold=("llama",))
    assert not titled(plain, r"refresh|RolloutInProgress")


def test_models_of_two_clusters_are_refused_naming_both():
    stack = cdk.Stack(cdk.App(), "Obs", env=cdk.Environment(account="123456789012", region="us-west-2"))
    one, two = imported_cluster(stack, GROUPS), imported_cluster(stack, GROUPS, id="Other")
    with pytest.raises(ValueError, match=r"hyperpod.models = Obs/HyperPod/hyperwarm-models, Obs/Other/hyperwarm-models "
                                         r"-- one cluster and namespace per HyperPodModels"):
        InferenceObservability(stack, "Observability", InferenceObservabilityProps(hyperpod=HyperPodModels(
            models=[cached_model(one, "llama", NS), cached_model(two, "qwen", NS)])))


def test_the_app_watches_the_models_its_refresh_rolls_out_warm(synthesized):
    """The observability stack charts a warm rollout for exactly the refresh stack's node-cached targets."""
    for env, warm in {"dev": [], "staging": ["llama-3-1-8b"], "prod": ["llama-3-1-70b", "llama-3-1-8b"]}.items():
        observability = synthesized.resources(f"hyperwarm-{env}-observability", "AWS::CloudWatch::Alarm")
        charted = sorted({re.sub(r"ColdDuringRefresh.*", "", k) for k in observability if "ColdDuringRefresh" in k})
        assert charted == [f"Observability{model.replace('-', '')}" for model in warm], (env, charted)


def test_the_rollout_widgets_and_alarms_synthesize_without_warnings():
    """A metric whose period differs from its math expression's makes CDK warn that it overrides it."""
    stack = cdk.Stack(cdk.App(), "Obs", env=cdk.Environment(account="123456789012", region="us-west-2"))
    InferenceObservability(stack, "Observability", InferenceObservabilityProps(
        hyperpod=HyperPodModels(models=[llama := cached_model(imported_cluster(stack, GROUPS), "llama", NS,
                                                               node_cached=True)],
                                refreshed=[HyperPodRefreshTarget(llama)]),
        topic=sns.Topic.from_topic_arn(stack, "Topic", TOPIC)))
    warnings = assertions.Annotations.from_stack(stack).find_warning("*", assertions.Match.any_value())
    assert [w.entry.data for w in warnings if w.id.startswith("/Obs/Observability")] == []
    assert warnings  # the imported stand-in cluster's subnets do warn: the filter sees warnings
