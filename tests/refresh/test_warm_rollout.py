"""A new model version goes live on HyperPod without a cold pod: whole refreshes driven through the
refresh function and the workflow's steps (``flow.on_rollout_step``) against the operator model.

What every path must leave: no pod of the new version starts on a node without that version cached; the
serving version's cache is never deleted while read; the end is the old version serving or the newest
version serving, never a lost or rolled-back version; one letter per permanent failure.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import model_world as mw
import pytest
from model_world import BUCKET, PREFIX, Faults, MemStore, manifest_event, scheduled_event
from operator_model import CACHE, Crash, Operator

from hyperwarm.functions.cache_refresh import contract, flow
from hyperwarm.functions.cache_refresh.config import HyperPodTarget, Settings
from hyperwarm.functions.cache_refresh.errors import TransientError
from hyperwarm.functions.cache_refresh.state import StateTable

TARGET = HyperPodTarget(cluster="c", namespace="models", name="llama", caches=("llama-weights",),
                        staging_timeout_seconds=1800, switch_timeout_seconds=600)
SETTINGS = Settings(targets={PREFIX: (TARGET,)}, state_table="t", allowed_buckets=frozenset({BUCKET}), dlq_url="q")


@dataclass
class WarmWorld:
    operator: Operator = field(default_factory=Operator)
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

    def __post_init__(self) -> None:
        self.store = MemStore(Faults(random.Random(0), 0.0))
        self.operator.deploy("llama", "llama-weights", BUCKET, f"{PREFIX}/v1", "v1")
        self.operator.on_call = self._before

    def _before(self, what: str) -> None:
        self._at(what, "before")

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

    def ports(self) -> flow.Ports:
        store = SimpleNamespace(get=self._port("state.get", self.store.get), put=self._port("state.put", self.store.put))
        return flow.Ports(
            settings=SETTINGS, state=StateTable(store, lambda: self.operator.now), verify=lambda created: None,
            live=lambda target, prefix: flow.decide.Live(self.operator.serving()),
            apply_hyperpod=lambda target, created: pytest.fail("a warm target is never repointed at once"),
            start_endpoint=lambda *a: pytest.fail("no endpoint targets"), delete_superseded=lambda *a: [],
            dead_letter=self._port("sqs.send", self.letters.append),
            metric=lambda name, reason=None, target=None, value=1.0, unit="Count": self.metrics.append(
                (name, reason, value)),
            kube=lambda target: self.operator,
            start_workflow=self._port("states.start", lambda target, version, name: self.executions.append(
                (version, name))))

    def upload(self, version: str, sequencer: int) -> dict[str, Any]:
        return flow.handle(self.ports(), manifest_event(version, sequencer))

    def step(self, version: str, *, abandon: bool = False) -> str:
        step = contract.RolloutStep(TARGET.id, version, abandon=abandon).to_json()
        answer = contract.RolloutStep.from_json(flow.on_rollout_step(self.ports(), step))
        return answer.phase

    def run(self, version: str, *, poll: float = contract.ROLLOUT_POLL_SECONDS, limit: int = 200) -> str:
        """The workflow: step, wait, step again until the step says done or failed."""
        for _ in range(limit):
            phase = self.step(version)
            if phase in ("done", "failed"):
                return phase
            self.operator.tick(poll)
        raise AssertionError(f"the rollout of {version} never ended")

    def record(self) -> dict[str, Any]:
        return StateTable(self.store).get(TARGET.id)

    def metric(self, name: str) -> list[float]:
        return [value for n, _, value in self.metrics if n == name]

    def assert_safe(self) -> None:
        assert self.operator.violations == []
        assert [(p.node, p.version) for p in self.operator.cold_starts] == []


def test_a_new_version_is_staged_on_every_node_switched_with_no_cold_pod_and_the_old_cache_retired() -> None:
    world = WarmWorld()
    assert world.upload("v2", 1)["targets"][TARGET.id]["status"] == "started"
    started = world.record()["pending"]["started"]
    assert world.executions == [("v2", contract.rollout_execution_name(TARGET.id, "v2", str(started)))]
    assert world.operator.serving() == "v1", "nothing serving changes before the new version is staged"

    assert world.run("v2") == "done"

    staged = contract.staged_cache_name("llama-weights", "v2")
    assert world.operator.serving() == "v2"
    assert {p.version for p in world.operator.pods} == {"v2"}
    assert world.operator.caches() == {staged: "v2"}, "the previous version's cache is retired"
    world.assert_safe()
    assert world.letters == []
    record = world.record()
    assert (record["current_version"], record["current_caches"]) == ("v2", [staged])
    assert "pending" not in record and "lock_owner" not in record
    fill = world.operator.fill_seconds * len(world.operator.node_names)
    assert fill <= world.metric("TimeToWarm")[0] <= fill + contract.ROLLOUT_POLL_SECONDS
    assert world.metric("StagingTargetNodes")[-1] == len(world.operator.node_names)
    assert world.metric("TimeToSwitch") and world.metric("RefreshSucceeded") == [1.0]


def test_the_next_version_stages_beside_the_staged_one_that_serves_and_retires_it() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    world.run("v2")
    world.upload("v3", 2)
    assert world.run("v3") == "done"
    assert world.operator.caches() == {contract.staged_cache_name("llama-weights", "v3"): "v3"}
    world.assert_safe()


def test_without_a_workflow_a_cache_target_is_repointed_at_once_as_before() -> None:
    world = WarmWorld()
    repointed: list[str] = []
    ports = world.ports()
    ports.start_workflow = None
    ports.apply_hyperpod = lambda target, created: repointed.append(created.version) or []
    assert flow.handle(ports, manifest_event("v2", 1))["status"] == "refreshed"
    assert repointed == ["v2"] and world.executions == []


def test_a_failed_cache_leaves_the_old_version_serving_with_one_letter_and_no_staged_cache() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    world.operator.fail_caches.add(contract.staged_cache_name("llama-weights", "v2"))
    assert world.run("v2") == "failed"
    assert world.operator.serving() == "v1"
    assert world.operator.caches() == {"llama-weights": "v1"}
    assert [(letter["reason"], letter["targets"]) for letter in world.letters] == [("staging-failed", [TARGET.id])]
    assert "AccessDenied" in world.letters[0]["message"]
    assert world.letters[0]["event"] == manifest_event("v2", 1), "the letter replays the upload"
    world.assert_safe()
    record = world.record()
    assert record.get("current_version") is None and record["failed"]["version"] == "v2"
    assert "pending" not in record and "lock_owner" not in record


def test_a_staging_past_its_timeout_fails_and_the_old_version_serves() -> None:
    world = WarmWorld(Operator(fill_seconds=900))  # 4 nodes x 15 minutes > the 30-minute timeout
    world.upload("v2", 1)
    assert world.run("v2") == "failed"
    assert [letter["reason"] for letter in world.letters] == ["staging-timeout"]
    assert "ready on 2 of 4 nodes" in world.letters[0]["message"]
    assert world.operator.serving() == "v1" and world.operator.caches() == {"llama-weights": "v1"}
    world.assert_safe()


def test_a_failed_deployment_rollout_points_back_at_the_old_version_and_keeps_its_cache() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    world.operator.fail_rollouts = True
    assert world.run("v2") == "failed"
    assert world.operator.serving() == "v1"
    assert {p.version for p in world.operator.pods} == {"v1"}
    assert world.operator.caches() == {"llama-weights": "v1"}, "the staged cache goes once nothing reads it"
    assert [letter["reason"] for letter in world.letters] == ["switch-failed"]
    world.assert_safe()


def test_a_newer_version_during_staging_waits_and_then_rolls_warm() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    world.operator.tick(120)
    world.step("v2")
    assert world.upload("v3", 2)["targets"][TARGET.id]["status"] == "queued"
    assert world.run("v2") == "done", "the version staged first finishes (the queue rules are unchanged)"
    assert world.executions[-1][0] == "v3", "its end started v3"
    assert world.run("v3") == "done"
    assert world.operator.serving() == "v3"
    assert world.operator.caches() == {contract.staged_cache_name("llama-weights", "v3"): "v3"}
    world.assert_safe()
    assert world.letters == []


def test_a_duplicate_upload_during_the_rollout_is_skipped_and_starts_the_same_execution_again() -> None:
    """A retry of the event (its first start may have failed after the record): the same name, a no-op if it runs."""
    world = WarmWorld()
    world.upload("v2", 1)
    assert world.upload("v2", 1)["status"] == "skipped"
    assert len(world.executions) == 2 and len(set(world.executions)) == 1


def test_the_workflow_giving_up_while_switching_points_back_and_the_reconciliation_finishes() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    while world.step("v2") == "staging":
        world.operator.tick(60)
    assert world.step("v2", abandon=True) == "failed"
    assert [letter["reason"] for letter in world.letters] == ["switch-failed"]
    for number in range(20):  # the schedule settles the revert nobody polls any more
        world.operator.tick(60)
        flow.handle(world.ports(), scheduled_event(number))
    assert world.operator.serving() == "v1" and {p.version for p in world.operator.pods} == {"v1"}
    assert "pending" not in world.record()
    world.assert_safe()


def test_a_lost_execution_is_settled_by_the_reconciliation() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    for number in range(40):
        world.operator.tick(60)
        flow.handle(world.ports(), scheduled_event(number))
    assert world.operator.serving() == "v2" and world.record()["current_version"] == "v2"
    world.assert_safe()


SCENARIOS = {
    # what the operator does -> (what serves at the end, the caches left, the letters' reasons)
    "succeeds": (lambda op: None, "v2", {contract.staged_cache_name("llama-weights", "v2"): "v2"}, []),
    "cache-fails": (lambda op: op.fail_caches.add(contract.staged_cache_name("llama-weights", "v2")),
                    "v1", {"llama-weights": "v1"}, ["staging-failed"]),
    "rollout-fails": (lambda op: setattr(op, "fail_rollouts", True), "v1", {"llama-weights": "v1"}, ["switch-failed"]),
}


def _drive(world: WarmWorld, step: int | None = None) -> None:
    """Lambda's retries of the upload (then a replay) and the workflow's steps, each retried when it dies;
    ``step``: the step attempt to go on from (the upload is done)."""
    if step is None:
        for _ in range(30):  # a dead invocation's lock lapses after HYPERWARM_LOCK_SECONDS
            try:
                world.upload("v2", 1)
                break
            except (Crash, TransientError):
                world.operator.tick(60)
    for attempt in range(step or 0, 200):  # a step that dies is retried (Retry); one that finds the lock held waits
        mw.mark(world, len(world.calls), attempt)
        try:
            phase = world.step("v2")
        except (Crash, TransientError):
            world.operator.tick(60)
            continue
        if phase in ("done", "failed"):
            return
        world.operator.tick(60)


@functools.cache
def _uncrashed(scenario: str) -> WarmWorld:
    """The scenario's whole rollout without a crash: what every crashed run must end as (marked before each step)."""
    world = WarmWorld(marks=[])
    SCENARIOS[scenario][0](world.operator)
    _drive(world)
    return world


@pytest.mark.parametrize(("scenario", "crash_at", "when"), [
    (scenario, n, when) for scenario in SCENARIOS for n in range(len(_uncrashed(scenario).calls))
    for when in ("before", "after")])
def test_a_crash_at_any_call_of_any_port_ends_as_the_same_rollout_without_one(scenario: str, crash_at: int,
                                                                             when: str) -> None:
    """The process dies at one call of a Kubernetes, state-table, dead-letter or StartExecution port, before
    it runs or after it went through; the retries carry on. The end is the one the scenario has without a
    crash: v2 serving warm with its cache alone, or v1 serving with its own, and one letter id per failure."""
    setup, serves, caches, reasons = SCENARIOS[scenario]
    resumed = mw.resume(_uncrashed(scenario).marks or [], crash_at)
    if resumed is None:  # it dies in the upload: from the start
        world, step = WarmWorld(), None
        setup(world.operator)
    else:
        world, step = resumed
    world.crash = (crash_at, when)
    _drive(world, step)
    assert world.operator.serving() == serves, world.letters
    assert {p.version for p in world.operator.pods} == {serves}
    assert world.operator.caches() == caches
    assert sorted({(letter["letter_id"], letter["reason"]) for letter in world.letters}) == sorted(
        {(letter["letter_id"], letter["reason"]) for letter in _uncrashed(scenario).letters}), world.letters
    assert [r for r in dict.fromkeys(letter["reason"] for letter in world.letters)] == reasons
    assert "pending" not in world.record()
    world.assert_safe()


def test_the_staged_cache_is_a_copy_of_the_serving_one_at_the_new_location() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    world.step("v2")
    staged = world.operator.objects[(CACHE, contract.staged_cache_name("llama-weights", "v2"))]
    serving = world.operator.objects[(CACHE, "llama-weights")]
    assert staged["spec"]["nodeSelector"] == serving["spec"]["nodeSelector"]
    assert staged["spec"]["modelSourceConfig"]["modelLocation"] == f"{PREFIX}/v2"
    assert staged["metadata"]["labels"]["hyperwarm.io/staged-version"] == "v2"


def test_a_step_under_dry_run_changes_nothing_and_asks_to_wait() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    before = (dict(world.store.items), list(world.calls))
    ports = world.ports()
    ports.settings = Settings(targets=SETTINGS.targets, state_table="t", allowed_buckets=SETTINGS.allowed_buckets,
                              dlq_url="q", dry_run=True)
    answer = flow.on_rollout_step(ports, contract.RolloutStep(TARGET.id, "v2").to_json())
    assert answer["phase"] == "staging"
    assert dict(world.store.items) == before[0] and world.calls[:len(before[1])] == before[1]
    assert [c for c in world.calls[len(before[1]):] if not c.startswith("state.get")] == []


def _deploy_cache_again(world: WarmWorld, version: str) -> None:
    """A deploy applies the caches manifest again: the deployed cache object is back under its own name."""
    world.operator.create(CACHE, "models", {"metadata": {"name": "llama-weights"}, "spec": {
        "modelSourceConfig": {"modelSourceType": "s3", "s3Storage": {"bucketName": BUCKET},
                              "modelLocation": f"{PREFIX}/{version}"}}})


def test_a_cache_object_a_deploy_recreated_is_retired_by_the_next_rollout() -> None:
    """After v2 serves from its staged cache, a deploy applies the caches manifest again: the deployed
    cache object is back under its own name. The next rollout retires it with v2's staged cache."""
    world = WarmWorld()
    world.upload("v2", 1)
    world.run("v2")
    _deploy_cache_again(world, "v2")
    world.upload("v3", 2)
    assert world.run("v3") == "done"
    assert world.operator.caches() == {contract.staged_cache_name("llama-weights", "v3"): "v3"}
    world.assert_safe()


def test_when_the_target_names_other_caches_the_deployed_ones_are_the_template() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    world.run("v2")
    record = world.record()
    record["current_caches"] = [*record["current_caches"], "b"]  # recorded when the target had two caches
    world.store.write(StateTable.key(TARGET.id), record)
    _deploy_cache_again(world, "v2")
    world.upload("v3", 2)
    assert world.run("v3") == "done"
    assert world.operator.caches() == {contract.staged_cache_name("llama-weights", "v3"): "v3"}, \
        "v2's staged cache, which the record named, is retired too"
    world.assert_safe()


@pytest.mark.parametrize("blind", ["observedGeneration", "terminatingReplicas"])
def test_the_rollout_check_needs_each_of_its_status_fields(blind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator model reports a switch a tick late and keeps the last replaced pod terminating: a rollout
    check blind to either field takes the old generation's or a half-finished rollout for the end, and retires
    the previous version's cache while its pods read it."""
    from hyperwarm.functions.cache_refresh.targets import hyperpod, warm

    real_get = Operator.get

    def stale(self: Operator, kind: str, namespace: str, name: str) -> dict[str, Any]:
        obj = real_get(self, kind, namespace, name)
        status = obj.get("status") or {}
        if kind == "InferenceEndpointConfig" and blind == "observedGeneration":
            status["observedGeneration"] = obj["metadata"]["generation"]
        if blind == "terminatingReplicas":
            ((status.get("deploymentStatus") or {}).get("status") or {}).pop("terminatingReplicas", None)
        return obj
    monkeypatch.setattr(Operator, "get", stale)
    assert hyperpod and warm  # the code under test is unchanged: only what it reads is blinded
    world = WarmWorld()
    world.upload("v2", 1)
    world.run("v2")
    assert world.operator.violations, "the blinded check retired a cache in use"


class _Cluster:
    """Objects and nodes as the API server returns them, for warm.staging's reads alone."""

    def __init__(self, cache: dict[str, Any], nodes: list[dict[str, Any]]) -> None:
        self.cache, self._nodes = cache, nodes

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        return self.cache

    def nodes(self, selector: dict[str, str]) -> list[dict[str, Any]]:
        return self._nodes


def _node(ready: str = "True", unschedulable: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": "n"}, "spec": {"unschedulable": unschedulable},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}}


def _cache(ready_nodes: int, generation: int = 1, observed: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": "c", "generation": generation}, "spec": {"nodeSelector": {"a": "b"}},
            "status": {"state": "Ready", "readyNodes": ready_nodes, "conditions": [
                {"type": "Ready", "status": "True", "observedGeneration": observed}]}}


def test_staging_counts_only_the_nodes_pods_can_run_on() -> None:
    """A node NotReady or cordoned runs no pod: two ready caches on the two schedulable nodes of four is ready."""
    from hyperwarm.functions.cache_refresh.targets import warm

    nodes = [_node(), _node(), _node(ready="False"), _node(unschedulable=True)]
    progress = warm.staging(_Cluster(_cache(ready_nodes=2), nodes), TARGET, ["c"], None)
    assert (progress.ready, progress.ready_nodes, progress.target_nodes) == (True, 2, 2)
    assert not warm.staging(_Cluster(_cache(ready_nodes=1), nodes), TARGET, ["c"], None).ready


def test_staging_is_not_ready_on_a_status_of_an_older_spec() -> None:
    """``Ready`` observed for generation 1 says nothing of generation 2's spec (a cache changed in place)."""
    from hyperwarm.functions.cache_refresh.targets import warm

    nodes = [_node(), _node()]
    assert warm.staging(_Cluster(_cache(ready_nodes=2, generation=2, observed=2), nodes), TARGET, ["c"], None).ready
    assert not warm.staging(_Cluster(_cache(ready_nodes=2, generation=2, observed=1), nodes), TARGET, ["c"], None).ready
