"""A node-cached model on a modelled HyperPod cluster (cluster_model.py), driven through the refresh function and
the rollout workflow's steps (``flow.on_rollout_step``), with a crash possible at any call of any port.

The deployment and the filler start exactly as the caches construct renders them, and the cluster allows only
what the refresh's rendered RBAC and admission policy allow.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import model_world as mw
import pytest
from cluster_model import MODEL, NAMESPACE, Cluster, ClusterKube, Crash, manifest_digest, rbac_rules, rendered
from model_world import BUCKET, PREFIX, Faults, MemStore, manifest_event, scheduled_event

from hyperwarm.functions.cache_refresh import contract, flow
from hyperwarm.functions.cache_refresh.config import HyperPodTarget, NodeCache, Settings
from hyperwarm.functions.cache_refresh.state import StateTable
from hyperwarm.refresh.access import RBAC_GROUP, rbac_objects
from hyperwarm.refresh.admission import admission_objects

TARGET = HyperPodTarget(cluster="c", namespace=NAMESPACE, name=MODEL, node_cache=NodeCache(MODEL),
                        staging_timeout_seconds=1800, switch_timeout_seconds=900)
SETTINGS = Settings(targets={PREFIX: (TARGET,)}, state_table="t", allowed_buckets=frozenset({BUCKET}), dlq_url="q")
ADMISSION, _ = admission_objects(RBAC_GROUP, {PREFIX: [TARGET]}, BUCKET, name="hyperwarm-cache-refresh", labels={})


def cluster(nodes: int = 4, replicas: int = 4, **options: Any) -> Cluster:
    deployment, filler = rendered(BUCKET, PREFIX, "v1", replicas=replicas)
    return Cluster.serving(deployment, filler, [f"node-{i}" for i in range(nodes)],
                           rbac=rbac_rules(rbac_objects([TARGET])), admission=ADMISSION, **options)


@dataclass
class WarmWorld:
    cluster: Cluster = field(default_factory=cluster)
    letters: list[dict[str, Any]] = field(default_factory=list)
    metrics: list[tuple[str, str | None, float]] = field(default_factory=list)
    executions: list[tuple[str, str]] = field(default_factory=list)
    """(version, execution name) of every StartExecution."""
    crash: tuple[int, str] | None = None
    """(call number, "before" or "after"): the process dies at that call of any port (Kubernetes, the state
    table, the dead-letter queue, StartExecution), before it runs or after it went through (its answer lost)."""
    calls: list[str] = field(default_factory=list)
    marks: list[mw.Mark] | None = None
    """Recording a rollout without a crash: a mark before each of its steps (crash cases start from them)."""
    refuse: Callable[[str], Exception | None] | None = None
    """A call (``get DaemonSet/...``) -> the error the cluster answers it with instead, or None."""
    settings: Settings = SETTINGS
    gate: Callable[[str], str] | None = None
    """The gate's content step for a version: its manifest's digest, or a PermanentError. Default: admitted."""

    def __post_init__(self) -> None:
        self.store = MemStore(Faults(random.Random(0), 0.0))
        self.cluster.on_call = self._before

    def _before(self, what: str) -> None:
        self._at(what, "before")
        error = self.refuse(what) if self.refuse else None
        if error is not None:
            raise error

    def _at(self, what: str, when: str) -> None:
        if when == "before":
            self.calls.append(what)
        if self.crash == (len(self.calls) - 1, when):
            self.crash = None  # the process dies once; the retry runs in a new one
            raise Crash(f"{when} {what}")

    def _port(self, what: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            self._at(what, "before")
            result = call(*args, **kwargs)
            self._at(what, "after")
            return result
        return wrapped

    def ports(self, settings: Settings | None = None) -> flow.Ports:
        settings = settings or self.settings
        store = SimpleNamespace(get=self._port("state.get", self.store.get), put=self._port("state.put", self.store.put))
        kube = ClusterKube(self.cluster)
        return flow.Ports(
            settings=settings, state=StateTable(store, lambda: self.cluster.now),
            verify=lambda created: (self.gate or manifest_digest)(created.version),
            live=lambda target, prefix: flow.decide.Live(self.cluster.reads()),
            apply_hyperpod=lambda target, created: pytest.fail("a node-cached target is never repointed at once"),
            start_endpoint=lambda *a: pytest.fail("no endpoint targets"), delete_superseded=lambda *a: [],
            dead_letter=self._port("sqs.send", self.letters.append),
            metric=lambda name, reason=None, target=None, value=1.0, unit="Count": self.metrics.append(
                (name, reason, value)),
            kube=lambda target: kube,
            start_workflow=self._port("states.start", lambda target, version, name: self.executions.append(
                (version, name))))

    def upload(self, version: str, sequencer: int) -> dict[str, Any]:
        return flow.handle(self.ports(), manifest_event(version, sequencer))

    def step(self, version: str, *, abandon: bool = False) -> dict[str, Any]:
        execution = next((name for v, name in reversed(self.executions) if v == version), "")
        step = contract.RolloutStep(TARGET.id, version, abandon=abandon, execution=execution).to_json()
        return flow.on_rollout_step(self.ports(), step)

    def run(self, version: str, *, limit: int = 400, each: Callable[[int], None] | None = None) -> str:
        """The workflow: step, wait the answer's wait_seconds, step again until done or failed."""
        for number in range(limit):
            answer = self.step(version)
            if answer["phase"] in ("done", "failed"):
                return str(answer["phase"])
            if each is not None:
                each(number)
            self.cluster.tick(answer["wait_seconds"])
        raise AssertionError(f"the rollout of {version} never ended")

    def reconcile(self, times: int = 1, every: float = 300) -> None:
        for number in range(times):
            flow.handle(self.ports(), scheduled_event(number))
            self.cluster.tick(every)

    def record(self) -> dict[str, Any]:
        return StateTable(self.store).get(TARGET.id)

    def metric(self, name: str) -> list[float]:
        return [value for n, _, value in self.metrics if n == name]

    def assert_safe(self) -> None:
        """No copy deleted under a reader, no forbidden call, no pod started cold, at most two versions per node."""
        assert self.cluster.violations == []
        assert [(p.node, p.version) for p in self.cluster.cold_starts] == []
        assert self.cluster.peak_gb <= 2 * self.cluster.size_gb
