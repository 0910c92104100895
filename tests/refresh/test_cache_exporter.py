"""The cache metrics exporter (lambdas/cache_exporter): warm, cold and filling nodes, against the
stand-in Kubernetes API and moto's CloudWatch."""

from __future__ import annotations

import base64
import contextlib
import datetime
import logging
import types

import boto3
import fake_kube
import pytest
from moto import mock_aws
from vllm_pages import page, uniform_ttft

from hyperwarm.functions import eks_auth
from hyperwarm.functions.cache_exporter import handler, kube as exporter_kube, placement
from hyperwarm.functions.cache_exporter.counters import Snapshots
from hyperwarm.functions.cache_exporter.placement import (
    WEIGHTS_READY_LABEL_PREFIX,
    ModelFigures,
    model_figures,
    selector_matches,
)
from hyperwarm.functions.cache_exporter.serving import PodServing, serving_figures
from hyperwarm.functions.cache_exporter.vllm import parse
from hyperwarm.functions.node_cache import layout
from hyperwarm.observability.metric_catalog import EXPORTER_NAMESPACE, PUBLISHED_METRICS

NOW = datetime.datetime(2026, 11, 29, 17, 0, 0, tzinfo=datetime.UTC)
MINUTE = datetime.timedelta(minutes=1)
NS = "hyperwarm"
CLUSTER = "hyperwarm-exporter-test"


def ts(delta: datetime.timedelta) -> str:
    return (NOW + delta).strftime("%Y-%m-%dT%H:%M:%SZ")


PORT = 8000


def deployment(name: str = "llama", uid: str = "iec-1") -> dict:
    return {"apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "InferenceEndpointConfig",
            "metadata": {"name": name, "namespace": NS, "uid": uid},
            "spec": {"worker": {"modelInvocationPort": {"containerPort": PORT, "name": "http"}}},
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


def pod(name: str, on: str | None, app: str = "llama", phase: str = "Running",
        started: datetime.timedelta = -60 * MINUTE) -> dict:
    spec = {"nodeName": on} if on else {}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "labels": {"app": app}},
            "spec": spec, "status": {"phase": phase, "startTime": ts(started)}}


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
    measured = parse(page(uniform_ttft(10, 1.0), requests=10, hits=1, queries=2, waiting=1))
    serving = serving_figures("llama", [PodServing(cold=True, scraped=measured, delta=measured)])
    published = {(placement.NAMESPACE, name, unit) for name, _, unit in figures().metrics()}
    published |= {(placement.NAMESPACE, d["MetricName"], d["Unit"]) for d in serving.datums()}
    assert placement.NAMESPACE == EXPORTER_NAMESPACE
    assert published <= catalogued
    assert {m.name for m in PUBLISHED_METRICS if m.namespace == EXPORTER_NAMESPACE} == {n for _, n, _ in published}
    assert all(m.dimensions == ("ClusterName", "Model") for m in PUBLISHED_METRICS if m.namespace == EXPORTER_NAMESPACE)


@pytest.fixture(scope="module")
def kube():
    server = fake_kube.FakeKube(CLUSTER)
    yield server
    server.close()


@contextlib.contextmanager
def _eks(kube, monkeypatch):
    """moto's EKS (its cluster's endpoint the stand-in API server) and CloudWatch, the handler's environment set."""
    monkeypatch.setenv("HYPERWARM_CLUSTER_NAME", CLUSTER)
    monkeypatch.setenv("HYPERWARM_NAMESPACES", NS)
    eks_auth.cluster_access.cache_clear()
    with mock_aws():
        eks = boto3.client("eks", region_name="us-west-2")
        eks.create_cluster(name=CLUSTER, roleArn="arn:aws:iam::123456789012:role/eks",
                           resourcesVpcConfig={"subnetIds": ["subnet-1"]})
        from moto.eks.models import eks_backends
        stored = eks_backends["123456789012"]["us-west-2"].clusters[CLUSTER]
        stored.endpoint = kube.url
        stored.certificate_authority = {"data": base64.b64encode(kube.ca_pem).decode()}
        yield
    eks_auth.cluster_access.cache_clear()


def test_handler_reads_the_cluster_and_publishes_per_model(kube, monkeypatch):
    kube.objects.clear()
    kube.pod_pages.clear()
    for obj in [deployment(), deployment("qwen", "iec-2"), *CACHES, *NODES, *PODS]:
        kube.add(obj)
    with _eks(kube, monkeypatch):
        result = handler.lambda_handler({}, None)
        assert result["models"] == ["llama", "qwen"]
        cw = boto3.client("cloudwatch", region_name="us-west-2")
        listed = cw.list_metrics(Namespace=EXPORTER_NAMESPACE)["Metrics"]
        seen = {(m["MetricName"], tuple(sorted((d["Name"], d["Value"]) for d in m["Dimensions"]))) for m in listed}

        def value(name: str, model: str) -> float:
            data = cw.get_metric_statistics(
                Namespace=EXPORTER_NAMESPACE, MetricName=name, Statistics=["Maximum"], Period=60,
                StartTime=datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5),
                EndTime=datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=5),
                Dimensions=[{"Name": "ClusterName", "Value": CLUSTER}, {"Name": "Model", "Value": model}])
            return data["Datapoints"][0]["Maximum"]

        assert ("ColdPodShare", (("ClusterName", CLUSTER), ("Model", "llama"))) in seen
        assert value("WarmNodes", "llama") == 2
        assert value("ColdPods", "llama") == 2
        assert value("ColdPodShare", "llama") == 50.0
        assert value("ColdPods", "qwen") == 1  # its pod sits on cold-1; no cache of its own
        assert value("ScrapeFailures", "llama") == 4  # no pod serves metrics here: counted, and the run goes on


def test_handler_fails_loudly_when_the_api_refuses(kube, monkeypatch):
    reader = handler.KubeReader(kube.url, kube.ca_pem.decode(), "not-an-eks-token")
    with pytest.raises(RuntimeError, match="HTTP 401"):
        reader.items("/api/v1/nodes")


# --- the pods' own vLLM metrics, through the stand-in API server's pod proxy -------------------------

def _serve(kube, pod_name: str, requests: float, *, cold: bool, port: int = PORT, path: str = "/metrics") -> None:
    """A vLLM page: warm pods answer fast (up to 0.5 s) and hit the prefix cache on 80 % of tokens."""
    text = page(uniform_ttft(requests, 5.0 if cold else 0.5), requests=requests, queries=requests,
                hits=requests * (0.2 if cold else 0.8), waiting=3 if cold else 1)
    kube.pod_pages[(NS, pod_name, port, path)] = (200, text)


def _reader(kube) -> exporter_kube.KubeReader:
    return exporter_kube.KubeReader(kube.url, kube.ca_pem.decode(), eks_auth.eks_token(CLUSTER, "us-west-2"))


def _by_model(collected) -> dict[str, dict[str, dict]]:
    return {cache.model: {d["MetricName"]: d for d in serving.datums()} for cache, serving in collected}


@pytest.fixture
def serving_cluster(kube):
    """warm-1/warm-2 warm, filling-1 and cold-1 cold; llama's p1..p4 serve vLLM; qwen's pod serves no vLLM page."""
    kube.objects.clear()
    kube.pod_pages.clear()
    kube.proxied.clear()
    for obj in [deployment(), deployment("qwen", "iec-2"), *CACHES, *NODES, *PODS]:
        kube.add(obj)
    kube.pod_pages[(NS, "other-model", PORT, "/metrics")] = (200, "# TYPE up gauge\nup 1\n")
    for name, requests, cold in (("p1", 100, False), ("p2", 200, False), ("p3", 50, True), ("p4", 10, True)):
        _serve(kube, name, requests, cold=cold)
    return kube


def test_first_run_records_the_baseline_and_publishes_the_queue_and_cache_figures(serving_cluster):
    collected = handler.collect(_reader(serving_cluster), [NS], NOW, Snapshots())
    llama = _by_model(collected)["llama"]
    assert set(llama) == {"RequestsWaiting", "ScrapeFailures"}  # a cold start: no deltas yet
    assert llama["RequestsWaiting"]["Value"] == 1 + 1 + 3 + 3 and llama["ScrapeFailures"]["Value"] == 0
    assert collected[0][0].cold_pods == 2  # the cache figures as before
    # only Running, scheduled pods of the model, each at its invocation port's /metrics
    assert sorted(p for p in serving_cluster.proxied if "other-model" not in p) == [
        f"/api/v1/namespaces/{NS}/pods/p{i}:{PORT}/proxy/metrics" for i in (1, 2, 3, 4)]


def test_second_run_deltas_with_a_restart_a_new_pod_and_a_failed_scrape(serving_cluster):
    snapshots, reader = Snapshots(), _reader(serving_cluster)
    handler.collect(reader, [NS], NOW, snapshots)
    _serve(serving_cluster, "p1", 130, cold=False)  # +30
    _serve(serving_cluster, "p2", 5, cold=False)  # restarted: counts from 0, so 5
    _serve(serving_cluster, "p3", 70, cold=True)  # +20 on the filling node (cold)
    del serving_cluster.pod_pages[(NS, "p4", PORT, "/metrics")]  # unreachable: 503 from the API server
    serving_cluster.add(pod("p5", "cold-1", started=10 * datetime.timedelta(seconds=1)))  # after the first run
    _serve(serving_cluster, "p5", 8, cold=True)  # all 8 are new
    collected = handler.collect(reader, [NS], NOW + MINUTE, snapshots)
    llama, qwen = _by_model(collected)["llama"], _by_model(collected)["qwen"]
    assert (llama["Requests"]["Value"], llama["ColdRequests"]["Value"]) == (63, 28)
    assert llama["ColdRequestShare"]["Value"] == pytest.approx(100 * 28 / 63)
    hits = 0.8 * (30 + 5) + 0.2 * (20 + 8)
    assert llama["PrefixCacheHitRate"]["Value"] == pytest.approx(100 * hits / 63)
    assert sum(llama["TimeToFirstToken"]["Counts"]) == pytest.approx(63)
    assert llama["ScrapeFailures"]["Value"] == 1 and qwen["ScrapeFailures"]["Value"] == 1  # p4; qwen is not vLLM
    assert collected[0][0].pods == 5  # the failed scrape does not touch the cache figures


def test_the_operators_model_metrics_port_and_path_are_scraped(serving_cluster):
    custom = deployment()
    custom["spec"]["metrics"] = {"enabled": True, "modelMetrics": {"port": 9400, "path": "/engine/metrics"}}
    serving_cluster.add(custom)
    _serve(serving_cluster, "p1", 1, cold=False, port=9400, path="/engine/metrics")
    llama = _by_model(handler.collect(_reader(serving_cluster), [NS], NOW, Snapshots()))["llama"]
    assert f"/api/v1/namespaces/{NS}/pods/p1:9400/proxy/engine/metrics" in serving_cluster.proxied
    assert llama["ScrapeFailures"]["Value"] == 3  # p2..p4 serve nothing on 9400


def test_published_payload_passes_botocores_model_and_the_distribution_limits(serving_cluster):
    snapshots, reader = Snapshots(), _reader(serving_cluster)
    handler.collect(reader, [NS], NOW, snapshots)
    _serve(serving_cluster, "p1", 400, cold=False)
    data = handler.metric_data(CLUSTER, handler.collect(reader, [NS], NOW + MINUTE, snapshots), NOW + MINUTE)
    sent: list[dict] = []
    with mock_aws():
        cw = boto3.client("cloudwatch", region_name="us-west-2")  # validates each call against botocore's model
        cw.meta.events.register("provide-client-params.monitoring.PutMetricData",
                                lambda params, **_: sent.extend(params["MetricData"]))
        handler.publish(cw, data)
        listed = {m["MetricName"] for m in cw.list_metrics(Namespace=EXPORTER_NAMESPACE)["Metrics"]}
    distributions = [d for d in sent if "Values" in d]
    assert distributions and all(len(d["Values"]) == len(d["Counts"]) <= 150 for d in distributions)
    assert all(len(set(d["Values"])) == len(d["Values"]) and "Value" not in d for d in distributions)
    assert {"TimeToFirstToken", "Requests", "ColdRequestShare", "PrefixCacheHitRate", "ColdPodShare"} <= listed


def test_the_handler_keeps_the_previous_scrape_between_invocations(serving_cluster, monkeypatch):
    monkeypatch.setattr(handler, "SNAPSHOTS", Snapshots())
    reader = _reader(serving_cluster)
    handler.collect(reader, [NS], NOW)
    _serve(serving_cluster, "p1", 111, cold=False)
    assert _by_model(handler.collect(reader, [NS], NOW + MINUTE))["llama"]["Requests"]["Value"] == 11


def test_scrapes_past_the_runs_budget_are_skipped_and_counted(serving_cluster, monkeypatch):
    monkeypatch.setattr(handler, "SCRAPE_BUDGET", 0.0)
    collected = handler.collect(_reader(serving_cluster), [NS], NOW, Snapshots())
    assert _by_model(collected)["llama"]["ScrapeFailures"]["Value"] == 4 and serving_cluster.proxied == []
    assert collected[0][0].pods == 4  # the cache figures are still there


def test_a_failed_publish_keeps_the_baseline_so_the_next_run_publishes_both_minutes(serving_cluster, monkeypatch):
    """Old: the snapshots advanced before PutMetricData, so a failed publish lost the minute's deltas (9 of 20)."""
    monkeypatch.setattr(handler, "SNAPSHOTS", Snapshots())
    published: list[dict] = []

    def publish(cloudwatch, data):
        if fail:
            raise RuntimeError("PutMetricData: throttled")
        published.extend(data)

    monkeypatch.setattr(handler, "publish", publish)
    with _eks(serving_cluster, monkeypatch):
        fail = False
        handler.lambda_handler({}, None)  # the baseline: p1 at 100 requests
        _serve(serving_cluster, "p1", 111, cold=False)
        fail = True
        with pytest.raises(RuntimeError, match="throttled"):
            handler.lambda_handler({}, None)  # +11, not published
        _serve(serving_cluster, "p1", 120, cold=False)
        fail, published[:] = False, []
        handler.lambda_handler({}, None)
    requests = [d["Value"] for d in published if d["MetricName"] == "Requests"
                and {"Name": "Model", "Value": "llama"} in d["Dimensions"]]
    assert requests == [20]  # 11 + 9: both minutes


def _context(seconds_left: float):
    return types.SimpleNamespace(get_remaining_time_in_millis=lambda: int(seconds_left * 1000))


def test_scraping_ends_before_the_invocations_time_does_and_the_run_still_publishes(serving_cluster, monkeypatch):
    """Old: the fixed 30 s budget ignored the invocation's remaining time, so a late start could time out unpublished."""
    monkeypatch.setattr(handler, "SNAPSHOTS", Snapshots())
    published: list[dict] = []
    monkeypatch.setattr(handler, "publish", lambda cloudwatch, data: published.extend(data))
    with _eks(serving_cluster, monkeypatch):
        handler.lambda_handler({}, _context(handler.PUBLISH_RESERVE))  # nothing left for scrapes
    assert [p for p in serving_cluster.proxied if "other-model" not in p] == []
    failures = {d["Dimensions"][1]["Value"]: d["Value"] for d in published if d["MetricName"] == "ScrapeFailures"}
    assert failures["llama"] == 4
    assert any(d["MetricName"] == "ColdPodShare" for d in published)  # the cache figures are still published


def test_parallel_scrapes_reuse_the_readers_connections(serving_cluster, monkeypatch, caplog):
    """Old: urllib3's default pool of 1 connection per host under 8 scraper threads discarded the surplus,
    logging "Connection pool is full" once per overlapping scrape."""
    serving_cluster.proxy_delay = 0.3  # the four scrapes overlap
    monkeypatch.setattr(handler, "SNAPSHOTS", Snapshots())
    monkeypatch.setattr(handler, "publish", lambda cloudwatch, data: None)
    try:
        with _eks(serving_cluster, monkeypatch), caplog.at_level(logging.WARNING, logger="urllib3"):
            handler.lambda_handler({}, None)
    finally:
        serving_cluster.proxy_delay = 0.0
    assert len([p for p in serving_cluster.proxied if "other-model" not in p]) == 4
    assert not [r for r in caplog.records if "Connection pool is full" in r.getMessage()]


# --- a warm rollout: the new version staged in a cache of its own, then the deployment switched -----------

BUCKET, PREFIX = "models", "llama"


def source(version: str, *, bucket: str = BUCKET, slash: str = "") -> dict:
    return {"modelSourceType": "s3", "s3Storage": {"bucketName": bucket, "region": "us-west-2"},
            "modelLocation": f"{PREFIX}/{version}{slash}"}


def versioned_deployment(version: str) -> dict:
    iec = deployment()
    iec["spec"]["modelSourceConfig"] = source(version)
    return iec


def versioned_cache(uid: str, version: str, *, labelled: bool = True, name: str | None = None,
                    generation: int | None = None, observed: int | None = None, **source_options) -> dict:
    """A Ready stand-alone cache of ``version``: hyperwarm's pre-warm cache (labelled with the model), or a
    staged copy of it (``labelled=False``: the rollout need not copy the labels)."""
    cache = weights_cache(uid, "Ready", model="llama" if labelled else None)
    cache["spec"] = {"enabled": True, "hostPath": "/opt/dlami/nvme", "modelSourceConfig": source(version, **source_options)}
    if name:
        cache["metadata"]["name"] = name
    if generation is not None:
        cache["metadata"]["generation"] = generation
        cache["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastTransitionTime": ts(-MINUTE),
                                          "observedGeneration": observed}]
    return cache


SERVING = versioned_cache("v1-cache", "v1", name="llama-weights")
ROLLOUT_NODES = ("n1", "n2", "n3")


def rollout_figures(serving_version: str, caches: list[dict], ready: dict[str, tuple[str, ...]],
                    pods: list[dict] | None = None) -> ModelFigures:
    """The model's figures with its deployment at ``serving_version``; ``ready``: node -> uids of the
    caches ready on it; by default one Running pod per node."""
    return model_figures(versioned_deployment(serving_version), caches, [],
                         pods if pods is not None else [pod(f"p-{n}", n) for n in ROLLOUT_NODES],
                         [node(n, *ready.get(n, ())) for n in ROLLOUT_NODES], NOW, MINUTE)


def node_cached_deployment(version: str) -> dict:
    """A node-cached model's deployment, as the caches construct renders it (volume and required label)."""
    deployment = versioned_deployment(version)
    deployment["spec"]["modelSourceConfig"] = {"modelSourceType": "kubernetesVolume"}
    deployment["spec"]["kubernetes"] = {"volumes": [layout.volume(layout.version_dir("/opt/dlami/nvme", "llama",
                                                                                      version))]}
    return deployment


def labelled(name: str, *versions: str) -> dict:
    """A node the filler labelled ready for ``versions`` of llama."""
    n = node(name)
    n["metadata"]["labels"].update({layout.ready_label("llama", v): "true" for v in versions})
    return n


def node_cache_figures(version: str, ready: dict[str, tuple[str, ...]], pods: list[dict] | None = None) -> ModelFigures:
    return model_figures(node_cached_deployment(version), [], [],
                         pods if pods is not None else [pod(f"p-{n}", n) for n in ROLLOUT_NODES],
                         [labelled(n, *ready.get(n, ())) for n in ROLLOUT_NODES], NOW, MINUTE)


def test_a_node_cached_pod_is_warm_only_where_its_versions_ready_label_is():
    filling = node_cache_figures("v1", {"n1": ("v1", "v2"), "n2": ("v1",), "n3": ("v1",)})
    assert (filling.pods, filling.warm_nodes, filling.cold_pods) == (3, 3, 0), "staging v2 leaves v1's pods warm"
    only_next = node_cache_figures("v1", {"n1": ("v1",), "n2": ("v1",), "n3": ("v2",)})
    assert (only_next.warm_nodes, only_next.cold_pods) == (2, 1)
    switched = node_cache_figures("v2", {"n1": ("v1", "v2"), "n2": ("v1", "v2"), "n3": ("v1",)})
    assert (switched.warm_nodes, switched.cold_pods, switched.cold_pod_share) == (2, 1, pytest.approx(100 / 3))


def test_a_node_cached_model_ignores_the_operators_cache_labels():
    """Its pods read the node cache's directory, never an operator cache's: a weights-cache-ready label warms none."""
    f = model_figures(node_cached_deployment("v1"), [versioned_cache("c", "v1")], [],
                      [pod(f"p-{n}", n) for n in ROLLOUT_NODES], [node(n, "c") for n in ROLLOUT_NODES], NOW, MINUTE)
    assert (f.warm_nodes, f.cold_pods) == (0, 3)


def test_a_cache_of_the_same_folder_in_another_bucket_is_another_version():
    other = versioned_cache("elsewhere", "v1", bucket="other-models")
    f = rollout_figures("v1", [other], {n: ("elsewhere",) for n in ROLLOUT_NODES})
    assert (f.warm_nodes, f.cold_pods) == (0, 3)
    slash = versioned_cache("slash", "v1", slash="/")  # the same folder written with its trailing slash
    assert rollout_figures("v1", [slash], {n: ("slash",) for n in ROLLOUT_NODES}).cold_pods == 0


def test_a_cache_repointed_in_place_warms_nothing_until_the_operator_reports_on_its_new_spec():
    """Repointed without staging (one cache object, one uid): the nodes' labels are of the previous version
    until the operator observes the new generation."""
    stale = versioned_cache("pw", "v2", generation=2, observed=1)
    assert rollout_figures("v2", [stale], {n: ("pw",) for n in ROLLOUT_NODES}).cold_pods == 3
    current = versioned_cache("pw", "v2", generation=2, observed=2)
    assert rollout_figures("v2", [current], {n: ("pw",) for n in ROLLOUT_NODES}).cold_pods == 0


def test_the_handler_counts_a_node_cached_model_through_the_api(kube):
    """The same rule through the stand-in API: mid-staging (v2 ready on one node), nothing is cold."""
    kube.objects.clear()
    kube.pod_pages.clear()
    for obj in [node_cached_deployment("v1"), labelled("n1", "v1", "v2"), labelled("n2", "v1"),
                pod("p1", "n1"), pod("p2", "n2")]:
        kube.add(obj)
    (cache, _), = handler.collect(_reader(kube), [NS], NOW, Snapshots())
    assert (cache.pods, cache.warm_nodes, cache.cold_pods, cache.cold_pod_share) == (2, 2, 0, 0.0)
