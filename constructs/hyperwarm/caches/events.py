"""What a fleet event does to a cached model: how many new pods start cold, and when all serve.

Pure arithmetic over a model's cold and warm time to serve, so the planner (``python -m stacks plan
cache``), synth-time warnings and tests share one definition of the figures the dashboard shows.
Each new pod lands on its own node (the usual case for GPU-bound serving pods); a pod on a node
whose cache is not ready falls back to the normal download (the operator's node affinity is only
preferred), so it is slower, never failed.

Names match the dashboard's: ``cold_pods`` (peak pods starting on unprepared nodes at once, the
exporter's ``ColdPods``), ``cold_pod_share`` (that over the model's pods, ``ColdPodShare``),
``cold_share`` (share of the pods the event starts that start cold), ``hit_rate_scale_out``
(share that start on a warm cache), ``cache_fill_s`` (one node's weights download,
``CacheFillSeconds``).
"""

from __future__ import annotations

from dataclasses import dataclass

SCALE_OUT = "scale-out"
ROLLING_DEPLOYMENT = "rolling-deployment"
NODE_REPLACED = "node-replaced"
SPOT_INTERRUPTION = "spot-interruption"
EVENTS = (SCALE_OUT, ROLLING_DEPLOYMENT, NODE_REPLACED, SPOT_INTERRUPTION)


@dataclass(frozen=True)
class EventForecast:
    """The predicted course of one event for one model."""

    event: str
    pods_started: int
    """New pods the event starts."""
    cold_started: int
    """Of those, the pods that start on a node whose cache is not ready."""
    cold_pods: int
    """Most pods starting cold at the same moment (``ColdPods``)."""
    fleet_pods: int
    """Pods of the model once the event is over."""
    time_to_serve_all_s: float
    """From the event until every new pod serves."""
    cache_fill_s: float
    """Weights download into one node's cache during the event (``CacheFillSeconds``); 0: none fills."""

    @property
    def cold_share(self) -> float:
        """Share of the started pods that start cold: (K-W)/K for a scale-out of K onto W warm nodes."""
        return self.cold_started / self.pods_started if self.pods_started else 0.0

    @property
    def hit_rate_scale_out(self) -> float:
        """Share of the started pods whose node's cache was ready (the weights-cache hit rate)."""
        return 1.0 - self.cold_share if self.pods_started else 0.0

    @property
    def cold_pod_share(self) -> float:
        """Peak share of the model's pods on unprepared nodes (``ColdPodShare``)."""
        return self.cold_pods / self.fleet_pods if self.fleet_pods else 0.0

    def as_dict(self) -> dict[str, object]:
        return {"event": self.event, "pods_started": self.pods_started, "cold_started": self.cold_started,
                "cold_share": self.cold_share, "hit_rate_scale_out": self.hit_rate_scale_out,
                "cold_pods": self.cold_pods, "cold_pod_share": self.cold_pod_share,
                "fleet_pods": self.fleet_pods, "time_to_serve_all_s": self.time_to_serve_all_s,
                "cache_fill_s": self.cache_fill_s}


def _check(**counts: int) -> None:
    for name, value in counts.items():
        if value < 0:
            raise ValueError(f"{name}: {value} -- must be >= 0")


def scale_out(pods: int, warm_nodes: int, replicas: int, cold_s: float, warm_s: float,
              fill_s: float) -> EventForecast:
    """K new pods, the first W on pre-warmed nodes; beyond the preloaded fleet (K > W) the rest
    download on cold nodes: all serve after the cold time, else after the warm time."""
    _check(pods=pods, warm_nodes=warm_nodes, replicas=replicas)
    cold = max(0, pods - warm_nodes)
    time = cold_s if cold else (warm_s if pods else 0.0)
    return EventForecast(SCALE_OUT, pods, cold, cold, replicas + pods, time, fill_s if cold else 0.0)


def rolling_deployment(replicas: int, cold_s: float, warm_s: float, fill_s: float, *,
                       version_changed: bool, prefilled: bool) -> EventForecast:
    """Pods replaced one by one, each on a node whose cache is warm unless the model version changed.

    A new version needs a new cache (the operator detects no overwrite in place). With stand-alone
    caches that fill the group first (``prefilled``) the roll waits one fill, then starts every pod
    warm; without, each replacement downloads on its own, one cold pod at a time.
    """
    _check(replicas=replicas)
    if not version_changed:
        return EventForecast(ROLLING_DEPLOYMENT, replicas, 0, 0, replicas, replicas * warm_s, 0.0)
    if prefilled:
        return EventForecast(ROLLING_DEPLOYMENT, replicas, 0, 0, replicas, fill_s + replicas * warm_s, fill_s)
    return EventForecast(ROLLING_DEPLOYMENT, replicas, replicas, min(1, replicas), replicas,
                         replicas * cold_s, fill_s)


def node_replaced(pods_on_node: int, replicas: int, cold_s: float, fill_s: float) -> EventForecast:
    """A warm node is replaced (health check, recovery): the new node is cold until its cache
    fills, so the pods that ran on it restart cold."""
    _check(pods_on_node=pods_on_node, replicas=replicas)
    return _lost(NODE_REPLACED, min(pods_on_node, replicas), replicas, cold_s, fill_s)


def spot_interruption(pods: int, replicas: int, cold_s: float, fill_s: float) -> EventForecast:
    """K pods lose their nodes at once; their replacement nodes are cold, so all K restart cold in
    parallel and the model runs on ``replicas - K`` pods until the cold time has passed."""
    _check(pods=pods, replicas=replicas)
    return _lost(SPOT_INTERRUPTION, min(pods, replicas), replicas, cold_s, fill_s)


def _lost(event: str, pods: int, replicas: int, cold_s: float, fill_s: float) -> EventForecast:
    return EventForecast(event, pods, pods, pods, replicas, cold_s if pods else 0.0, fill_s if pods else 0.0)


@dataclass(frozen=True)
class RefreshForecast:
    """A new model version reaching a model's pods through a refresh, with and without staging.

    With staging (the model has stand-alone caches the refresh can stage in), every node of the group downloads
    the new version into a cache of its own, all at once at the per-node rate, while the old version serves;
    then the deployment's pods roll one by one onto nodes that hold it. Without, the deployment moves at once
    and each new-version pod downloads on its own: every one starts cold.
    """

    refreshed: bool
    """A refresh prefix targets the model (else a new version comes with a deploy)."""
    staged: bool
    """The refresh stages the new version before it switches (a refreshed model with stand-alone caches)."""
    nodes: int
    """Nodes of the group that stage the new version."""
    staging_s: float
    """Until the new version is ready on every node (0 when nothing stages)."""
    peak_gb: float
    """The model's weights on one node at the peak: both versions of each of its caches."""
    switch_s: float
    """Rolling the pods onto the staged version, one by one, each a warm start."""
    without_staging: EventForecast
    """The same new version rolled without staging."""
    with_staging: EventForecast | None
    """Rolled after staging; None when the refresh does not stage."""

    def as_dict(self) -> dict[str, object]:
        return {"refreshed": self.refreshed, "staged": self.staged, "nodes": self.nodes, "staging_s": self.staging_s,
                "peak_gb": self.peak_gb, "switch_s": self.switch_s,
                "without_staging": self.without_staging.as_dict(),
                "with_staging": self.with_staging.as_dict() if self.with_staging else None}


def refresh(replicas: int, nodes: int, cold_s: float, warm_s: float, fill_s: float, peak_gb: float, *,
            refreshed: bool, staged: bool) -> RefreshForecast:
    """A refresh of a model with ``replicas`` pods on a group of ``nodes``: staging takes one node's fill (the
    nodes download in parallel), the switch ``replicas`` warm starts; without staging it is a rolling
    deployment of a new version onto cold caches (:func:`rolling_deployment`)."""
    _check(replicas=replicas, nodes=nodes)
    staged = staged and refreshed
    without = rolling_deployment(replicas, cold_s, warm_s, fill_s, version_changed=True, prefilled=False)
    with_staging = (rolling_deployment(replicas, cold_s, warm_s, fill_s, version_changed=True, prefilled=True)
                    if staged else None)
    return RefreshForecast(refreshed, staged, nodes, fill_s if staged else 0.0, peak_gb,
                           replicas * warm_s if staged else 0.0, without, with_staging)
