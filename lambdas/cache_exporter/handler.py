"""The exporter's I/O: list the operator's objects, pods and nodes, scrape the pods, publish each model's figures.

Runs every minute (EventBridge). Reads through the Kubernetes API with the EKS token of the
function's role, which an access entry maps to a group that may only get/list/watch the operator's
cache objects, pods and nodes, and get ``pods/proxy`` (each running pod's ``/metrics``). Writes only
``PutMetricData`` to :data:`placement.NAMESPACE`.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import math
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import boto3

from ..eks_auth import cluster_access, eks_token
from ..metric_publishing import publishing
from ..metric_publishing.budget import deadline as run_deadline
from .counters import Scrape, Snapshots
from .kube import KubeReader, ScrapeError
from .placement import NAMESPACE, ModelFigures, metrics_target, model_figures, parse_time, placed_pods, warm_nodes
from .serving import PodServing, ServingFigures, serving_figures
from .vllm import EngineSample, NotVllm, parse

GROUP = "/apis/inference.sagemaker.aws.amazon.com/v1"
WINDOW = datetime.timedelta(minutes=1)  # the schedule's rate: each cache fill is reported once
SCRAPE_TIMEOUT = 5.0  # seconds per pod; scrapes run in parallel
SCRAPE_BUDGET = 30.0
"""Seconds for all scrapes at most: later ones are skipped (ScrapeFailures), the run still publishes."""
PUBLISH_RESERVE = 10.0
"""Seconds of the invocation's remaining time kept for publishing: scraping also ends by then (the list
calls come first and spend from the same remaining time)."""
SCRAPERS = 8
"""Scraper threads, and so the connections the reader keeps."""
SNAPSHOTS = Snapshots()
"""The previous published run's scrapes: module level, so the next run in this (only: reserved concurrency 1)
execution environment finds them; a cold start begins empty. Replaced only after a successful publish."""
LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Model:
    namespace: str
    cache: ModelFigures
    target: tuple[int, str] | None
    running: list[tuple[Mapping[str, Any], bool]]
    """(pod, on a cold node) of each placed, Running pod."""


def _model(namespace: str, deployment: Mapping[str, Any], weights: list[dict[str, Any]],
           images: list[dict[str, Any]], pods: list[dict[str, Any]], nodes: list[dict[str, Any]],
           now: datetime.datetime) -> _Model:
    warm = warm_nodes(deployment, weights, nodes)
    running = [(p, p["spec"]["nodeName"] not in warm) for p in placed_pods(deployment, pods)
               if p["status"].get("phase") == "Running" and p["metadata"].get("uid")]
    return _Model(namespace, model_figures(deployment, weights, images, pods, nodes, now, WINDOW),
                  metrics_target(deployment), running)


def scrape(kube: KubeReader, model: _Model, pod: Mapping[str, Any], deadline: float) -> EngineSample | None:
    """The pod's vLLM metrics, or None (logged) when they cannot be read: never fails the run."""
    name = pod["metadata"]["name"]
    left = deadline - time.monotonic()
    if left <= 0:
        LOG.warning("%s/%s: not scraped, the run's time for scrapes is spent", model.namespace, name)
        return None
    if model.target is None:
        LOG.warning("%s/%s: the deployment names no metrics or invocation port; not scraped", model.namespace, name)
        return None
    try:
        return parse(kube.pod_text(model.namespace, name, *model.target, timeout=min(SCRAPE_TIMEOUT, left)))
    except (ScrapeError, NotVllm) as error:
        LOG.warning("%s/%s: metrics not read: %s", model.namespace, name, error)
        return None


def collect(kube: KubeReader, namespaces: Sequence[str], now: datetime.datetime,
            snapshots: Snapshots | None = None, end: float = math.inf) -> list[tuple[ModelFigures, ServingFigures]]:
    """Every ``InferenceEndpointConfig`` in ``namespaces``: its caches, pods and nodes, and its pods' metrics.
    ``snapshots``: the previous run's scrapes. Default: :data:`SNAPSHOTS`, this environment's. ``end``: the
    ``time.monotonic()`` by which scraping stops at the latest (besides :data:`SCRAPE_BUDGET`)."""
    nodes = kube.items("/api/v1/nodes")
    models = []
    for ns in namespaces:
        weights = kube.items(f"{GROUP}/namespaces/{ns}/modelweightscacheconfigs")
        images = kube.items(f"{GROUP}/namespaces/{ns}/modelimagecaches")
        pods = kube.items(f"/api/v1/namespaces/{ns}/pods")
        for deployment in kube.items(f"{GROUP}/namespaces/{ns}/inferenceendpointconfigs"):
            models.append(_model(ns, deployment, weights, images, pods, nodes, now))
    serving = _serving(kube, models, now, SNAPSHOTS if snapshots is None else snapshots, end)
    return list(zip([m.cache for m in models], serving, strict=True))


def _serving(kube: KubeReader, models: list[_Model], now: datetime.datetime,
             snapshots: Snapshots, end: float) -> list[ServingFigures]:
    """Scrape every running pod (in parallel), difference against the previous run, sum per model."""
    work = [(m, pod) for m in models for pod, _ in m.running]
    deadline = min(end, time.monotonic() + SCRAPE_BUDGET)
    with ThreadPoolExecutor(max_workers=SCRAPERS) as pool:
        samples = dict(zip([_uid(p) for _, p in work], pool.map(lambda w: scrape(kube, w[0], w[1], deadline), work),
                           strict=True))
    scrapes = {_uid(p): Scrape(parse_time(p["status"].get("startTime")), sample)
               for _, p in work if (sample := samples[_uid(p)]) is not None}
    deltas = snapshots.advance(scrapes, running=set(samples), now=now)
    return [serving_figures(m.cache.model, [PodServing(cold, samples[_uid(p)], deltas.get(_uid(p)))
                                            for p, cold in m.running]) for m in models]


def _uid(pod: Mapping[str, Any]) -> str:
    uid: str = pod["metadata"]["uid"]
    return uid


def metric_data(cluster: str, figures: Sequence[tuple[ModelFigures, ServingFigures]],
                now: datetime.datetime) -> list[dict[str, Any]]:
    out = []
    for cache, serving in figures:
        dimensions = [{"Name": "ClusterName", "Value": cluster}, {"Name": "Model", "Value": cache.model}]
        datums = [{"MetricName": n, "Value": v, "Unit": u} for n, v, u in cache.metrics()] + serving.datums()
        out += [{**d, "Timestamp": now, "Dimensions": dimensions} for d in datums]
    return out


def publish(cloudwatch: Any, data: list[dict[str, Any]]) -> None:
    publishing.publish(cloudwatch, NAMESPACE, data)


def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    cluster, region = os.environ["HYPERWARM_CLUSTER_NAME"], os.environ["AWS_REGION"]
    namespaces = [n for n in os.environ["HYPERWARM_NAMESPACES"].split(",") if n]
    endpoint, ca_pem = cluster_access(cluster, region)
    now = datetime.datetime.now(datetime.UTC)
    end = run_deadline(context, math.inf, PUBLISH_RESERVE)
    global SNAPSHOTS
    pending = dataclasses.replace(SNAPSHOTS)  # advance() rebinds, never mutates, its fields: a copy suffices
    reader = KubeReader(endpoint, ca_pem, eks_token(cluster, region), maxsize=SCRAPERS)
    figures = collect(reader, namespaces, now, pending, end)
    data = metric_data(cluster, figures, now)
    publish(boto3.client("cloudwatch", region_name=region), data)
    # Only a published run becomes the baseline: after a failed publish (or a timeout) the next run's
    # deltas span both minutes, so nothing is lost.
    SNAPSHOTS = pending
    return {"models": [cache.model for cache, _ in figures], "metrics": len(data)}
