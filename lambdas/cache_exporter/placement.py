"""Pure logic of the exporter: from the cluster's objects to each model's warm/cold figures.

A pod of a node-cached model (its deployment reads a ``kubernetesVolume``, hyperwarm's node cache) is WARM when
its node carries the ready label of the version the deployment reads (``node_cache.layout.ready_label``: the
filler sets it only once that version's copy is verified on the node), else COLD.

A pod of an operator-cached model is WARM when its node carries the operator's ``weights-cache-ready.<uid>`` label
of a weights cache that holds the VERSION the pod reads (the node has those weights on NVMe), else COLD
(it downloads). A model's weights caches are the ``ModelWeightsCacheConfig`` objects labelled
``hyperwarm.io/model=<model>`` (hyperwarm's pre-warm caches), owned by the model's
``InferenceEndpointConfig`` (the operator's per-deployment cache), or reading the version the deployment
reads (a warm rollout's staged cache once the deployment is switched to it). A version is a
``spec.modelSourceConfig`` location (type, bucket, ``modelLocation``); the pods read their
deployment's: no documented field of the operator's pods names it, and a warm rollout switches the
deployment only once the new version is ready on every node, so the pods of the old version still
running then sit on nodes that hold both. A staged cache of the next version therefore warms nobody
while it fills, and a pod of a new version on a node with only the old one cached is cold. Its pods
are those matching the deployment's ``status.selector`` (the scale subresource's label selector).
Their own metrics are read at :func:`metrics_target` (also the port the deploy rehearsal checks the
network for).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..node_cache import layout

NAMESPACE = "Hyperwarm/Caches"
MODEL_LABEL = "hyperwarm.io/model"
PARENTS_ANNOTATION = "hyperwarm.io/parents"
WEIGHTS_READY_LABEL_PREFIX = "inference.sagemaker.aws.amazon.com/weights-cache-ready."
METRICS_PATH = "/metrics"

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class ModelFigures:
    """What the exporter publishes for one model (names are the metric names)."""

    model: str
    pods: int
    warm_nodes: int
    cold_pods: int
    fill_seconds: tuple[float, ...]
    failed_caches: int

    @property
    def cold_pod_share(self) -> float | None:
        """Percent of pods on unprepared nodes; None without pods (a share of nothing is undefined)."""
        return 100.0 * self.cold_pods / self.pods if self.pods else None

    def metrics(self) -> list[tuple[str, float, str]]:
        """(metric name, value, CloudWatch unit) for PutMetricData."""
        out: list[tuple[str, float, str]] = [("Pods", self.pods, "Count"), ("WarmNodes", self.warm_nodes, "Count"),
               ("ColdPods", self.cold_pods, "Count"), ("FailedCaches", self.failed_caches, "Count")]
        if self.cold_pod_share is not None:
            out.append(("ColdPodShare", self.cold_pod_share, "Percent"))
        out += [("CacheFillSeconds", s, "Seconds") for s in self.fill_seconds]
        return out


def parse_time(value: str | None) -> datetime.datetime | None:
    """A Kubernetes RFC 3339 timestamp (``2026-11-29T16:00:00Z``)."""
    if not value:
        return None
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))


def selector_matches(selector: str | None, labels: Mapping[str, str]) -> bool:
    """Equality-based label selector (``a=b,c==d,e!=f``) as the scale subresource reports it.

    An empty or missing selector matches nothing: counting every pod in the namespace would be wrong.
    """
    if not selector:
        return False
    for term in selector.split(","):
        term = term.strip()
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif labels.get(term) is None:  # bare key: "exists"
            return False
    return True


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


Version = tuple[str | None, str | None, str]
"""(modelSourceType, S3 bucket, modelLocation without trailing slashes)."""


def version_of(obj: Obj) -> Version | None:
    """The model version a deployment or cache reads, from ``spec.modelSourceConfig``; None when it names
    no ``modelLocation`` (a JumpStart source): then no version is compared."""
    source = (obj.get("spec") or {}).get("modelSourceConfig") or {}
    location = source.get("modelLocation")
    if not location:
        return None
    return source.get("modelSourceType"), (source.get("s3Storage") or {}).get("bucketName"), location.rstrip("/")


def _labelled_or_owned(deployment: Obj, cache: Obj) -> bool:
    meta = _meta(deployment)
    return (_meta(cache).get("labels") or {}).get(MODEL_LABEL) == meta.get("name") \
        or any(ref.get("uid") == meta.get("uid") for ref in _meta(cache).get("ownerReferences") or [])


def weights_caches_of(deployment: Obj, caches: Iterable[Obj]) -> list[Obj]:
    """The model's weights caches, of any version: labelled with the model, owned by its deployment, or
    reading the version it reads."""
    version = version_of(deployment)
    return [c for c in caches
            if _labelled_or_owned(deployment, c) or (version is not None and version_of(c) == version)]


def _current(cache: Obj) -> bool:
    """False while the operator has not reported on the cache's present spec (every condition's
    ``observedGeneration`` behind ``metadata.generation``): its node labels may be of a previous version."""
    generation = _meta(cache).get("generation")
    observed = [c["observedGeneration"] for c in (cache.get("status") or {}).get("conditions") or []
                if isinstance(c.get("observedGeneration"), int)]
    return not isinstance(generation, int) or not observed or max(observed) >= generation


def version_caches(deployment: Obj, caches: Iterable[Obj]) -> list[Obj]:
    """The model's weights caches that hold the version its deployment (and so its pods) reads. A cache
    naming no version counts when labelled or owned, as does any when the deployment names none."""
    version = version_of(deployment)
    return [c for c in weights_caches_of(deployment, caches) if _current(c)
            and (version is None or version_of(c) in (version, None))]


def image_caches_of(model: str, image_caches: Iterable[Obj]) -> list[Obj]:
    return [c for c in image_caches
            if model in ((_meta(c).get("annotations") or {}).get(PARENTS_ANNOTATION) or "").split(",")]


def _ready_at(cache: Obj) -> datetime.datetime | None:
    """When a Ready cache became Ready: its Ready condition, else ``status.lastTransitionTime``."""
    status = cache.get("status") or {}
    if status.get("state") != "Ready":
        return None
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("status") == "True":
            return parse_time(condition.get("lastTransitionTime"))
    return parse_time(status.get("lastTransitionTime"))


def fill_seconds(caches: Iterable[Obj], now: datetime.datetime, window: datetime.timedelta) -> tuple[float, ...]:
    """Fill time of each cache that became Ready in ``(now - window, now]``: each fill is reported once."""
    out = []
    for cache in caches:
        ready, created = _ready_at(cache), parse_time(_meta(cache).get("creationTimestamp"))
        if ready and created and now - window < ready <= now:
            out.append(max((ready - created).total_seconds(), 0.0))
    return tuple(out)


def _placed(pod: Obj) -> bool:
    """Scheduled, not terminating, not finished."""
    status = (pod.get("status") or {}).get("phase")
    return bool((pod.get("spec") or {}).get("nodeName")) and not _meta(pod).get("deletionTimestamp") \
        and status in ("Pending", "Running")


def node_cached(deployment: Obj) -> tuple[str, str] | None:
    """(model, version) a node-cached deployment reads, from its model volume's directory; None for another source."""
    spec = deployment.get("spec") or {}
    if (spec.get("modelSourceConfig") or {}).get("modelSourceType") != "kubernetesVolume":
        return None
    for volume in (spec.get("kubernetes") or {}).get("volumes") or []:
        if volume.get("name") == layout.MODEL_VOLUME:
            return layout.model_and_version(str((volume.get("hostPath") or {}).get("path") or ""))
    return None


def warm_nodes(deployment: Obj, weights_caches: Iterable[Obj], nodes: Iterable[Obj]) -> set[str]:
    """Names of the nodes that hold the version the model's deployment reads: labelled ready for it by the node
    cache's filler, or where a weights cache of that version is ready."""
    cached = node_cached(deployment)
    if cached is not None:
        label = layout.ready_label(*cached)
        return {_meta(n)["name"] for n in nodes if (_meta(n).get("labels") or {}).get(label) == "true"}
    own = version_caches(deployment, weights_caches)
    ready_labels = {WEIGHTS_READY_LABEL_PREFIX + _meta(c)["uid"] for c in own if _meta(c).get("uid")}
    return {_meta(n)["name"] for n in nodes if ready_labels & set(_meta(n).get("labels") or {})}


def placed_pods(deployment: Obj, pods: Iterable[Obj]) -> list[Obj]:
    """The deployment's scheduled, not terminating, not finished pods."""
    selector = (deployment.get("status") or {}).get("selector")
    return [p for p in pods if _placed(p) and selector_matches(selector, _meta(p).get("labels") or {})]


def model_figures(deployment: Obj, weights_caches: Iterable[Obj], image_caches: Iterable[Obj],
                  pods: Iterable[Obj], nodes: Iterable[Obj], now: datetime.datetime,
                  window: datetime.timedelta) -> ModelFigures:
    """The figures of the model served by ``deployment`` (an ``InferenceEndpointConfig``)."""
    model = _meta(deployment)["name"]
    own = weights_caches_of(deployment, weights_caches)
    warm = warm_nodes(deployment, own, nodes)
    placed = placed_pods(deployment, pods)
    cold = sum(1 for p in placed if p["spec"]["nodeName"] not in warm)
    images = image_caches_of(model, image_caches)
    failed = sum(1 for c in [*own, *images] if (c.get("status") or {}).get("state") == "Failed")
    return ModelFigures(model=model, pods=len(placed), warm_nodes=len(warm), cold_pods=cold,
                        fill_seconds=fill_seconds([*own, *images], now, window), failed_caches=failed)


def metrics_target(deployment: Mapping[str, Any]) -> tuple[int, str] | None:
    """(port, path) of the model container's metrics: the operator's ``spec.metrics.modelMetrics`` when
    set, else the model's invocation port and ``/metrics`` (vLLM serves them beside its API). None
    when the spec names no port."""
    spec = deployment.get("spec") or {}
    model_metrics = (spec.get("metrics") or {}).get("modelMetrics") or {}
    invocation = (spec.get("worker") or {}).get("modelInvocationPort") or {}
    port = model_metrics.get("port") or invocation.get("containerPort")
    return (int(port), model_metrics.get("path") or METRICS_PATH) if port else None
