"""Faults at the API boundary that once lost a version, leaked resources or split one failure in two
(on the in-memory stand-ins of model_world.py, driven as Lambda drives the function)."""

from __future__ import annotations

import json
import random
from typing import Any

import model_world as mw
import pytest

from hyperwarm.functions.cache_refresh import letters
from hyperwarm.functions.cache_refresh.state import StateTable


def _world(*complete: str) -> tuple[mw.World, mw.AsyncLambda]:
    world = mw.World(random.Random(0))
    for version in complete:
        world.files[version] = "complete"
    return world, mw.AsyncLambda(world)


def _record(world: mw.World, target_id: str) -> dict[str, Any]:
    return world.store.item(StateTable.key(target_id))


def _refresh_resources(world: mw.World) -> tuple[set[str], set[str]]:
    """The configs and models that exist beyond what CloudFormation created and what serves."""
    serving = world.sm.configs[world.sm.config]
    keep_models = {v["ModelName"] for v in serving["ProductionVariants"]}
    configs = {c for c in world.sm.configs if c != world.sm.config and not c.startswith("cfn-config")}
    models = {m for m in world.sm.models if m not in keep_models and not m.startswith("cfn-")}
    return configs, models


def test_a_version_queued_while_its_rollout_ends_is_rolled_not_lost(monkeypatch):
    """v3 reads the endpoint's item (locked by v2's rollout) and decides to queue; before it writes,
    v2 ends and the state change settles it and finds nothing queued. The queue write must not land."""
    world, aws = _world("v2", "v3")
    aws.deliver(mw.manifest_event("v2", 0x101))
    aws.drain()  # the "Updating" state change
    assert _record(world, mw.ENDPOINT.id)["pending"]["version"] == "v2"
    world.sm.settle(True)
    changes, world.sm.emitted = world.sm.emitted, []
    enqueue = StateTable.enqueue

    def the_rollout_ends_first(self, *args, **kwargs):
        monkeypatch.setattr(StateTable, "enqueue", enqueue)
        for change in changes:
            aws.deliver(change)
        return enqueue(self, *args, **kwargs)
    monkeypatch.setattr(StateTable, "enqueue", the_rollout_ends_first)
    aws.deliver(mw.manifest_event("v3", 0x102))
    monkeypatch.setattr(StateTable, "enqueue", enqueue)
    aws.drain()
    while world.sm.status == "Updating":
        aws.settle()
        aws.drain()
    assert world.served() == {mw.HYPERPOD.id: "v3", mw.ENDPOINT.id: "v3"}
    assert not world.sqs.messages


@pytest.mark.parametrize("fault", ["lost", "crash-after"])
def test_a_lost_answer_to_update_endpoint_leaks_no_config_or_model(fault):
    """UpdateEndpoint went through, but the function never recorded the rollout: the version is adopted
    from what serves, and its config and models are still deleted once a later version serves."""
    world, aws = _world("v2", "v3")
    world.faults.on_call["update_endpoint"] = fault
    aws.send(mw.manifest_event("v2", 0x101))
    aws.quiesce()
    assert world.served()[mw.ENDPOINT.id] == "v2"
    assert _record(world, mw.ENDPOINT.id)["current_version"] == "v2"
    aws.send(mw.manifest_event("v3", 0x102))
    aws.quiesce()
    assert world.served()[mw.ENDPOINT.id] == "v3"
    assert _refresh_resources(world) == (set(), set())
    assert not world.sqs.messages


def test_a_rolled_back_rollout_leaks_no_config_or_model():
    world, aws = _world("v2")
    aws.deliver(mw.manifest_event("v2", 0x101))
    world.sm.settle(False)  # the blue/green update rolls back
    aws.flush()
    aws.drain()
    assert world.served()[mw.ENDPOINT.id] == "v1"
    assert [json.loads(m["Body"])["reason"] for m in world.sqs.messages.values()] == ["rolled-back"]
    assert _refresh_resources(world) == (set(), set())


def test_one_failure_marked_halfway_carries_one_letter_id(monkeypatch):
    """A crash between marking the first target failed and marking the second: Lambda's retry dead-letters
    the second alone, with the same id, so replay invokes once."""
    world, aws = _world()
    world.files["v2"] = "corrupt"
    mark = StateTable.mark_failed
    calls = {"n": 0}

    def crash_on_the_second(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise mw.Crash("between two failure marks")
        return mark(self, *args, **kwargs)
    monkeypatch.setattr(StateTable, "mark_failed", crash_on_the_second)
    aws.deliver(mw.manifest_event("v2", 0x101))
    aws.drain()
    sent = [letter for _, letter in world.sqs.sent]
    assert len(sent) == 2 and {t for letter in sent for t in letter["targets"]} == {mw.HYPERPOD.id, mw.ENDPOINT.id}
    assert len({letter["letter_id"] for letter in sent}) == 1
    replayed = world.replay()
    assert len(replayed) == 2 and sum("duplicate_of" not in r for r in replayed) == 1  # one invocation


def test_letter_ids_follow_the_failure_not_the_targets_left():
    """The manifest object (bucket, key), its sequencer and the reason: equal versions of two models differ."""
    one = letters.letter_id("b", "llama/v3/manifest.json", "5F01", "corrupt-manifest")
    assert one == letters.letter_id("b", "llama/v3/manifest.json", "5F01", "corrupt-manifest")
    assert len({one, letters.letter_id("b", "llama/v3/manifest.json", "5F02", "corrupt-manifest"),
                letters.letter_id("b", "llama/v4/manifest.json", "5F01", "corrupt-manifest"),
                letters.letter_id("b", "embed/v3/manifest.json", "5F01", "corrupt-manifest"),
                letters.letter_id("c", "llama/v3/manifest.json", "5F01", "corrupt-manifest"),
                letters.letter_id("b", "llama/v3/manifest.json", "5F01", "rolled-back")}) == 6
    item = {"current_version": "2026-11-01", "current_sequencer": "", "current_bucket": "b"}
    chat = letters.moved_back("endpoint:chat", {**item, "current_location": "llama/2026-11-01"}, None, "m", "r")
    embed = letters.moved_back("endpoint:embed", {**item, "current_location": "embed/2026-11-01"}, None, "m", "r")
    assert chat and embed and chat["letter_id"] != embed["letter_id"]
    assert chat["letter_id"] == letters.envelope(chat["event"], "moved-back", "m", [], request_id="r")["letter_id"]


def test_a_lost_state_change_is_settled_by_the_reconciliation():
    """The rollout's end is never announced (an undeliverable target, a disabled rule): the schedule
    settles it, rolls the version that waited, and counts what it repaired."""
    world, aws = _world("v2", "v3")
    aws.deliver(mw.manifest_event("v2", 0x101))
    aws.deliver(mw.manifest_event("v3", 0x102))
    assert _record(world, mw.ENDPOINT.id)["queued"]["version"] == "v3"
    world.sm.settle(True)
    world.sm.emitted = []  # lost
    aws.reconcile()
    assert _record(world, mw.ENDPOINT.id)["current_version"] == "v2"
    assert _record(world, mw.ENDPOINT.id)["pending"]["version"] == "v3"
    world.sm.settle(False)  # v3 rolls back, and that state change is lost too
    world.sm.emitted = []
    aws.reconcile()
    assert "pending" not in _record(world, mw.ENDPOINT.id)
    assert [json.loads(m["Body"])["reason"] for m in world.sqs.messages.values()] == ["rolled-back"]
    repaired = [(reason, target) for name, reason, target, _ in world.metrics if name == "RefreshReconciled"]
    assert repaired == [("rollout-ended", mw.ENDPOINT.id), ("queued-rolled", mw.ENDPOINT.id),
                        ("rollout-ended", mw.ENDPOINT.id)]


def test_the_reconciliation_leaves_a_running_rollout_and_a_quiet_target_alone():
    world, aws = _world("v2")
    aws.reconcile()  # nothing recorded at all
    aws.deliver(mw.manifest_event("v2", 0x101))
    before = world.snapshot()
    aws.reconcile()  # the rollout still runs
    assert world.snapshot() == before
    assert not [m for m in world.metrics if m[0] == "RefreshReconciled"]


def test_an_unrecorded_update_that_rolls_back_is_reported_once_and_not_rolled_again():
    """UpdateEndpoint went through, its answer was lost, then the blue/green update rolled back: a failure
    like any rollback (one letter), and the bad version gets no second canary."""
    world, aws = _world("v2")
    world.faults.on_call["update_endpoint"] = "lost"
    aws.deliver(mw.manifest_event("v2", 0x101))
    aws.drain()  # Lambda's retries see SageMaker deploying the unrecorded config: it is the rollout in flight
    assert _record(world, mw.ENDPOINT.id)["pending"]["version"] == "v2"
    world.sm.settle(False)
    aws.flush()
    aws.drain()
    world.clock.now += 6000  # the retries' locks expire; the reconciliation finds nothing left to roll
    aws.reconcile()
    aws.drain()
    assert world.served()[mw.ENDPOINT.id] == "v1" and world.sm.status == "InService"
    assert [letter["reason"] for _, letter in world.sqs.sent] == ["rolled-back"]
    assert sum(1 for call in world.faults.calls if call == "start.update_endpoint") == 1
    assert _refresh_resources(world) == (set(), set())
