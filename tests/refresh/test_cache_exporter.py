"""The cache metrics exporter (lambdas/cache_exporter): warm, cold and filling nodes, against the
stand-in Kubernetes API and moto's CloudWatch."""

from __future__ import annotations

import base64
import datetime

import boto3
import pytest
from moto import mock_aws

import fake_kube
from hyperwarm.functions.cache_exporter import handler, kube as exporter_kube, placement
from hyperwarm.functions.cache_exporter.placement import WEIGHTS_READY_LABEL_PREFIX, ModelFigures, model_figures, selector_matches
from hyperwarm.metric_catalog import PUBLISHED_METRICS, EXPORTER_NAMESPACE

NOW = datetime.datetime(2026, 11, 29, 17, 0, 0, tzinfo=datetime.timezone.utc)
MINUTE = datetime.timedelta(minutes=1)
NS = "hyperwarm"
CLUSTER = "hyperwarm-exporter-test"


def ts(delta: datetime.timedelta) -> str:
    return (NOW + delta).strftime("%Y-%m-%dT%H:%M:%SZ")


def deployment(name: str = "llama", uid: str = "iec-1") -> dict:
    return {"apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "InferenceEndpointConfig",
            "metadata": {"name": name, "namespace": NS, "uid": uid},
            "status": {"selector": f"app={name}"}}


def weights_cache(uid: str, state: str, *, model: str | None = "llama", owner: str | None = None,
                  created: datetime.timedelta = -10 * MINUTE, ready: datetime.timedelta | None = None) -> dict:
    meta: dict = {"name": f"cache-{uid}", "namespace": NS, "uid": uid, "creationTimestamp": ts(created)}
    if model:
        meta["labels"] = {"hyperwarm.io/model": model}
    if owner:
        meta["ownerReferences"] = [{"kind": "InferenceEndpointConfig", "name": "llama", "uid": owner}]
    status: dict = {"state": state, "readyNodes": 0, "targetNodes": 3}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True", "reason": "Cached", "message": "",
                                 "lastTransitionTime": ts(ready)}]
    return {"apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "ModelWeightsCacheConfig",
            "metadata": meta, "status": status}


def node(name: str, *ready_uids: str) -> dict:
    labels = {f"{WEIGHTS_READY_LABEL_PREFIX}{uid}": "true" for uid in ready_uids}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def pod(name: str, on: str | None, app: str = "llama", phase: str = "Running") -> dict:
    spec = {"nodeName": on} if on else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": {"app": app}},
            "spec": spec, "status": {"phase": phase}}


# warm-1/warm-2 hold the pre-warm cache "pw" (Ready); filling-1 is still downloading it (no label yet);
# cold-1 is outside the cache's reach.
NODES = [node("warm-1", "pw"), node("warm-2", "pw"), node("filling-1"), node("cold-1")]
CACHES = [weights_cache("pw", "Ready", created=-20 * MINUTE, ready=-30 * datetime.timedelta(seconds=1))]
PODS = [pod("p1", "warm-1"), pod("p2", "warm-2"), pod("p3", "filling-1"), pod("p4", "cold-1"),
        pod("unscheduled", None, phase="Pending"), pod("done", "cold-1", phase="Succeeded"),
        pod("other-model", "cold-1", app="qwen")]


def figures(**overrides) -> ModelFigures:
    args = {"deployment": deployment(), "weights_caches": CACHES, "image_caches": [], "pods": PODS,
            "nodes": NODES, "now": NOW, "window": MINUTE, **overrides}
    return model_figures(**args)


def test_pods_on_nodes_without_the_ready_label_are_cold():
    f = figures()
    assert (f.pods, f.warm_nodes, f.cold_pods) == (4, 2, 2)  # filling-1 and cold-1 are not ready yet
    assert f.cold_pod_share == 50.0


def test_a_filling_node_turns_warm_when_the_operator_labels_it():
    f = figures(nodes=[node("warm-1", "pw"), node("warm-2", "pw"), node("filling-1", "pw"), node("cold-1")])
    assert (f.warm_nodes, f.cold_pods, f.cold_pod_share) == (3, 1, 25.0)


def test_the_operators_own_cache_counts_through_its_owner_reference():
    own = weights_cache("op", "Ready", model=None, owner="iec-1")
    f = figures(weights_caches=[own], nodes=[node("warm-1", "op"), node("cold-1", "other-uid")],
                pods=[pod("p1", "warm-1"), pod("p2", "cold-1")])
    assert (f.warm_nodes, f.cold_pods) == (1, 1)


def test_another_models_cache_does_not_warm_this_model():
    f = figures(weights_caches=[weights_cache("pw", "Ready", model="qwen")])
    assert (f.warm_nodes, f.cold_pods) == (0, 4)


def test_no_pods_publishes_no_share():
    f = figures(pods=[])
    assert f.cold_pod_share is None
    assert "ColdPodShare" not in [name for name, _, _ in f.metrics()]


def test_a_fill_is_reported_once_in_the_window_it_completed():
    # created 20 min ago, ready 30 s ago: 19.5 minutes of filling, inside this run's minute
    assert figures().fill_seconds == (1170.0,)
    assert figures(now=NOW + MINUTE).fill_seconds == ()  # the next run does not repeat it


def test_failed_weights_and_image_caches_are_counted():
    image = {"kind": "ModelImageCache", "metadata": {"name": "img", "namespace": NS, "uid": "i1",
                                                      "annotations": {"hyperwarm.io/parents": "qwen,llama"}},
             "status": {"state": "Failed"}}
    unrelated = {**image, "metadata": {**image["metadata"], "annotations": {"hyperwarm.io/parents": "qwen"}}}
    f = figures(weights_caches=[*CACHES, weights_cache("x", "Failed")], image_caches=[image, unrelated])
    assert f.failed_caches == 2


@pytest.mark.parametrize("selector, labels, expected", [
    ("app=llama", {"app": "llama"}, True), ("app==llama,tier=web", {"app": "llama"}, False),
    ("app!=llama", {"app": "llama"}, False), ("app", {"app": "x"}, True), ("", {"app": "llama"}, False),
    (None, {}, False)])
def test_selector(selector, labels, expected):
    assert selector_matches(selector, labels) is expected


def test_every_published_metric_is_catalogued():
    catalogued = {(m.namespace, m.name, m.unit) for m in PUBLISHED_METRICS}
    published = {(placement.NAMESPACE, name, unit) for name, _, unit in figures().metrics()}
    assert placement.NAMESPACE == EXPORTER_NAMESPACE
    assert published <= catalogued
    assert {m.name for m in PUBLISHED_METRICS if m.namespace == EXPORTER_NAMESPACE} == {n for _, n, _ in published}
    assert all(m.dimensions == ("ClusterName", "Model") for m in PUBLISHED_METRICS if m.namespace == EXPORTER_NAMESPACE)


@pytest.fixture(scope="module")
def kube():
    server = fake_kube.FakeKube(CLUSTER)
    yield server
    server.close()


def test_handler_reads_the_cluster_and_publishes_per_model(kube, monkeypatch):
    kube.objects.clear()
    for obj in [deployment(), deployment("qwen", "iec-2"), *CACHES, *NODES, *PODS]:
        kube.add(obj)
    monkeypatch.setenv("HYPERWARM_CLUSTER_NAME", CLUSTER)
    monkeypatch.setenv("HYPERWARM_NAMESPACES", NS)
    exporter_kube.cluster_access.cache_clear()
    with mock_aws():
        eks = boto3.client("eks", region_name="us-west-2")
        eks.create_cluster(name=CLUSTER, roleArn="arn:aws:iam::123456789012:role/eks",
                           resourcesVpcConfig={"subnetIds": ["subnet-1"]})
        from moto.eks.models import eks_backends
        stored = eks_backends["123456789012"]["us-west-2"].clusters[CLUSTER]
        stored.endpoint = kube.url
        stored.certificate_authority = {"data": base64.b64encode(kube.ca_pem).decode()}
        result = handler.lambda_handler({}, None)
        assert result["models"] == ["llama", "qwen"]
        cw = boto3.client("cloudwatch", region_name="us-west-2")
        listed = cw.list_metrics(Namespace=EXPORTER_NAMESPACE)["Metrics"]
        seen = {(m["MetricName"], tuple(sorted((d["Name"], d["Value"]) for d in m["Dimensions"]))) for m in listed}

        def value(name: str, model: str) -> float:
            data = cw.get_metric_statistics(
                Namespace=EXPORTER_NAMESPACE, MetricName=name, Statistics=["Maximum"], Period=60,
                StartTime=datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5),
                EndTime=datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=5),
                Dimensions=[{"Name": "ClusterName", "Value": CLUSTER}, {"Name": "Model", "Value": model}])
            return data["Datapoints"][0]["Maximum"]

        assert ("ColdPodShare", (("ClusterName", CLUSTER), ("Model", "llama"))) in seen
        assert value("WarmNodes", "llama") == 2
        assert value("ColdPods", "llama") == 2
        assert value("ColdPodShare", "llama") == 50.0
        assert value("ColdPods", "qwen") == 1  # its pod sits on cold-1; no cache of its own
    exporter_kube.cluster_access.cache_clear()


def test_handler_fails_loudly_when_the_api_refuses(kube, monkeypatch):
    reader = handler.KubeReader(kube.url, kube.ca_pem.decode(), "not-an-eks-token")
    with pytest.raises(RuntimeError, match="HTTP 401"):
        reader.items("/api/v1/nodes")
