"""hyperwarm.caches.autoscaling: the operator's autoScalingSpec as typed, self-validating library props."""

from __future__ import annotations

import aws_cdk as cdk
import pytest

from hyperwarm.caches.autoscaling import (
    EXPORTER_SCALING_METRICS,
    CloudWatchTrigger,
    HyperPodAutoscaling,
    PrometheusTrigger,
)
from hyperwarm.observability.metric_catalog import EXPORTER_NAMESPACE, find

AMP = "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd-4567"


def test_an_exporter_trigger_reads_the_exporters_metric_of_the_model() -> None:
    trigger = CloudWatchTrigger.on_exporter("RequestsWaiting", cluster_name="eks-1", model="llama", target_value=8)
    spec = HyperPodAutoscaling(max_replicas=3, trigger=trigger).to_crd()
    assert spec["cloudWatchTrigger"] == {
        "namespace": "Hyperwarm/Caches", "metricName": "RequestsWaiting",
        "dimensions": [{"name": "ClusterName", "value": "eks-1"}, {"name": "Model", "value": "llama"}],
        "metricStat": "Average", "metricType": "Average", "targetValue": 8, "activationTargetValue": 0,
        "metricCollectionPeriod": 60, "minValue": 0}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"], spec["scaleDownStabilizationTime"]) == (1, 3, 300)


def test_every_metric_fit_to_scale_on_is_one_the_exporter_publishes_per_model() -> None:
    for name in EXPORTER_SCALING_METRICS:
        assert find(EXPORTER_NAMESPACE, name).dimensions == ("ClusterName", "Model")
    with pytest.raises(ValueError, match="metric = 'ColdPods' -- allowed: RequestsWaiting"):
        CloudWatchTrigger.on_exporter("ColdPods", cluster_name="eks-1", model="llama", target_value=1)


def test_a_prometheus_trigger_renders_its_crd_field() -> None:
    spec = HyperPodAutoscaling(max_replicas=2, min_replicas=0,
                               trigger=PrometheusTrigger(AMP, "sum(vllm:num_requests_waiting)", 10)).to_crd()
    assert spec["prometheusTrigger"] == {"serverAddress": AMP, "query": "sum(vllm:num_requests_waiting)",
                                         "targetValue": 10, "activationTargetValue": 0, "metricType": "Average"}
    assert "cloudWatchTrigger" not in spec


def test_every_problem_is_named_with_its_value_and_what_is_allowed() -> None:
    with pytest.raises(ValueError) as error:
        HyperPodAutoscaling(max_replicas=2, min_replicas=3, polling_interval=cdk.Duration.seconds(0),
                            scale_down_stabilization=cdk.Duration.hours(2),
                            trigger=CloudWatchTrigger("AWS/SageMaker", "Invocations", 0, statistic="Median",
                                                      metric_type="Total", period=cdk.Duration.seconds(30)))
    text = str(error.value)
    for expected in ("min_replicas = 3 -- must not exceed max_replicas (2)",
                     "polling_interval = 0 seconds -- allowed: 1..3600 seconds",
                     "scale_down_stabilization = 7200 seconds -- allowed: 0..3600 seconds",
                     "trigger.target_value = 0 -- allowed: > 0",
                     "trigger.statistic = 'Median' -- allowed: a CloudWatch statistic: Average, Sum",
                     "trigger.metric_type = 'Total' -- allowed: Average, Value",
                     "trigger.period = 30 seconds -- allowed: 60..86400 seconds"):
        assert expected in text
    with pytest.raises(ValueError, match="trigger.server_address = 'http://prometheus:9090' -- allowed: an Amazon "
                                         "Managed Service for Prometheus workspace URL"):
        HyperPodAutoscaling(max_replicas=1, trigger=PrometheusTrigger("http://prometheus:9090", "up", 1))


def test_unresolved_tokens_are_not_checked() -> None:
    stack = cdk.Stack(cdk.App(), "S")
    replicas = cdk.Token.as_number(cdk.CfnParameter(stack, "Max", type="Number").value_as_number)
    spec = HyperPodAutoscaling(max_replicas=replicas, min_replicas=2,
                               trigger=PrometheusTrigger(cdk.Fn.import_value("amp"), "up", 1))
    assert stack.resolve(spec.to_crd()["maxReplicaCount"]) == {"Ref": "Max"}
