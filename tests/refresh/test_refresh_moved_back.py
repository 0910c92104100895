"""Moves back, idempotent letters, per-target state errors and equal-rank spellings, on the in-memory
fakes of model_world.py: a stack rollback or someone's update that puts an
older version back is reported like any failure, and replaying its letter moves the target forward."""

from __future__ import annotations

import json
import random

import model_world as mw
import pytest

from hyperwarm.functions.cache_refresh import deploy_guard, letters, state as state_mod
from hyperwarm.functions.cache_refresh.errors import TransientError


class _Table:
    """The state items as the deploy guard reads them (boto3's Table.get_item)."""

    def __init__(self, world: mw.World) -> None:
        self.world = world

    def get_item(self, Key, ConsistentRead):  # noqa: N803 - boto3's spelling
        return {"Item": self.world.store.item(Key["pk"]) or None}


def _record(world: mw.World, target_id: str) -> dict:
    return world.store.item(state_mod.StateTable.key(target_id))


def _refreshed_to(version: str, sequencer: int = 0x101) -> mw.World:
    """Both targets moved from v1 to ``version`` by the function (the endpoint's rollout ended)."""
    world = mw.World(random.Random(1))
    world.files[version] = "complete"
    world.invoke(mw.manifest_event(version, sequencer))
    world.sm.settle(True)
    world.deliver_state_changes()
    assert world.served() == {mw.HYPERPOD.id: version, mw.ENDPOINT.id: version}
    return world


def _moved_back_letters(world: mw.World) -> list[dict]:
    return [json.loads(m["Body"]) for m in world.sqs.messages.values()
            if json.loads(m["Body"]).get("reason") == letters.MOVED_BACK]


def _settle_and_deliver(world: mw.World) -> None:
    world.sm.settle(True)
    world.deliver_state_changes()


# -- item 1: a move back is reported, and its letter moves the target forward again -------------------

def test_an_endpoint_moved_back_is_dead_lettered_counted_and_its_replay_moves_it_forward():
    world = _refreshed_to("v3")
    world.sm.restore("cfn-config")  # a stack rollback (or a manual update) puts CloudFormation's v1 config back
    answers = world.deliver_state_changes()
    assert answers[-1]["status"] == "dead-lettered" and answers[-1]["reason"] == "moved-back"
    assert world.served()[mw.ENDPOINT.id] == "v1"
    (letter,) = _moved_back_letters(world)
    assert letter["targets"] == [mw.ENDPOINT.id] and "serves v1 (cfn-config), older than v3" in letter["message"]
    assert letter["event"]["detail"]["object"]["key"] == f"{mw.PREFIX}/v3/manifest.json"
    assert ("RefreshFailed", "moved-back", mw.ENDPOINT.id) in [m[:3] for m in world.metrics]
    assert [r["status"] for r in world.replay()] == ["replayed"]
    _settle_and_deliver(world)
    assert world.sm.served_variants() == {"main": "v3", "second": "v3"}
    assert not world.sqs.messages and not world.sm.violations


def test_a_stale_in_service_event_of_a_served_newer_version_is_no_move_back():
    world = _refreshed_to("v3")
    assert world.invoke({**mw.manifest_event("v3", 0x101), "source": "aws.sagemaker",
                         "detail-type": "SageMaker Endpoint State Change",
                         "detail": {"EndpointName": mw.ENDPOINT.endpoint, "EndpointConfigName": "cfn-config",
                                    "EndpointStatus": "InService"}})[1] == {"status": "ignored", "reason": "no-rollout"}
    assert not world.sqs.messages


def test_a_hyperpod_target_a_rollback_moved_back_is_moved_forward_by_the_guards_letter():
    """The guard writes the letter during the rollback; the record still says v3, and the replayed v3
    event is decided from what the objects serve (v1), not skipped as a duplicate of the record."""
    world = _refreshed_to("v3")
    world.kube.restore("v1")  # the rollback re-applies the caches manifest of v1
    props = {"Targets": [{"Id": mw.HYPERPOD.id, "Version": "v1", "Field": "caches.models[0].source.version",
                          "Value": "{version}"}]}
    (letter,) = deploy_guard.moved_back(_Table(world), props, "cfn-request")
    world.sqs.send(letter)
    (result,) = world.replay()
    assert result["status"] == "replayed"
    assert result["result"]["targets"][mw.HYPERPOD.id] == {"status": "refreshed"}
    assert result["result"]["targets"][mw.ENDPOINT.id] == {"status": "skipped", "reason": "duplicate"}
    assert {o: v for o, v in world.served_objects().items() if o.startswith("hyperpod")} == {
        f"{mw.HYPERPOD.id}#InferenceEndpointConfig/llama": "v3"}


def test_the_guard_and_the_function_write_one_letter_for_one_move_back_and_replay_runs_it_once():
    world = _refreshed_to("v3")
    world.sm.restore("cfn-config")
    props = {"Targets": [{"Id": mw.ENDPOINT.id, "Version": "v1", "Field": "f", "Value": "{version}"}]}
    (from_guard,) = deploy_guard.moved_back(_Table(world), props, "cfn-request")
    world.sqs.send(from_guard)
    world.deliver_state_changes()
    first, second = _moved_back_letters(world)
    assert first["letter_id"] == second["letter_id"]
    invoked = len(world.metrics)
    results = world.replay()
    assert [r["status"] for r in results] == ["replayed", "replayed"] and results[1]["duplicate_of"] == "m1"
    assert not world.sqs.messages
    assert len([m for m in world.metrics[invoked:] if m[0] == "RefreshStarted"]) == 1  # one invocation


def test_an_older_version_is_not_rolled_onto_a_target_moved_back_from_a_newer_one():
    """Rolling v2 onto a target moved back from v3 would make the record forget v3 (whose letter waits)."""
    world = _refreshed_to("v3")
    world.sm.restore("cfn-config")
    world.deliver_state_changes()
    world.files["v2"] = "complete"
    result = world.invoke(mw.manifest_event("v2", 0x102))[1]
    assert result["targets"][mw.ENDPOINT.id] == {"status": "skipped", "reason": "older-version"}
    assert _record(world, mw.ENDPOINT.id)["current_version"] == "v3"


# -- item 2: state-table errors in draining and marking are one target's outcome -------------------------

def test_a_state_error_while_draining_one_target_still_concludes_the_others(monkeypatch):
    """The HyperPod target is refreshed, then reading its queue fails: the missing endpoint's permanent
    failure is still dead-lettered and counted, and the event is raised for a retry."""
    world = mw.World(random.Random(1))
    world.files["v2"] = "complete"
    def missing(EndpointName):  # noqa: N803 - the endpoint cannot be read: target-not-found (permanent)
        raise mw._not_found(f"endpoint {EndpointName}")
    world.sm.describe_endpoint = missing
    original, reads = state_mod.StateTable.get, {"n": 0}

    def get(self, target_id):
        if target_id == mw.HYPERPOD.id:
            reads["n"] += 1
            if reads["n"] == 2:  # the first look, then the drain after the commit
                raise TransientError("state-unavailable", "GetItem throttled")
        return original(self, target_id)
    monkeypatch.setattr(state_mod.StateTable, "get", get)
    with pytest.raises(TransientError) as raised:
        world.invoke(mw.manifest_event("v2", 0x101))
    assert raised.value.reason == "state-unavailable"
    assert world.served()[mw.HYPERPOD.id] == "v2"
    assert [letter["targets"] for _, letter in world.sqs.sent] == [[mw.ENDPOINT.id]]
    assert ("RefreshFailed", "target-not-found", mw.ENDPOINT.id) in [m[:3] for m in world.metrics]


def test_a_failure_mark_that_cannot_be_written_leaves_the_letter_and_the_other_marks(monkeypatch):
    world = mw.World(random.Random(1))
    world.files["v2"] = "corrupt"  # both targets fail permanently
    original = state_mod.StateTable.mark_failed

    def mark_failed(self, target_id, *args):
        if target_id == mw.HYPERPOD.id:
            raise TransientError("state-unavailable", "PutItem throttled")
        return original(self, target_id, *args)
    monkeypatch.setattr(state_mod.StateTable, "mark_failed", mark_failed)
    result = world.invoke(mw.manifest_event("v2", 0x101))[1]
    assert (result["status"], result["reason"]) == ("failed", "corrupt-manifest")
    assert [letter["targets"] for _, letter in world.sqs.sent] == [[mw.HYPERPOD.id, mw.ENDPOINT.id]]
    assert _record(world, mw.ENDPOINT.id)["failed"]["reason"] == "corrupt-manifest"


# -- item 3: a letter written twice is one letter -------------------------------------------------------

def test_a_crash_between_the_letter_and_its_mark_writes_the_same_letter_and_replay_runs_it_once(monkeypatch):
    world = mw.World(random.Random(1))
    world.files["v2"] = "corrupt"
    original, calls = state_mod.StateTable.mark_failed, {"n": 0}

    def crash_once(self, *args):
        calls["n"] += 1
        if calls["n"] == 1:
            raise mw.Crash("after the letter, before the mark")
        return original(self, *args)
    monkeypatch.setattr(state_mod.StateTable, "mark_failed", crash_once)
    event = mw.manifest_event("v2", 0x101)
    with pytest.raises(mw.Crash):
        world.invoke(event)
    world.invoke(event)  # Lambda's retry fails the same way and writes the letter again
    first, second = (json.loads(m["Body"]) for m in world.sqs.messages.values())
    assert first["letter_id"] == second["letter_id"] and first["request_id"] != second["request_id"]
    world.files["v2"] = "complete"  # fixed, then replayed
    results = world.replay()
    assert [r.get("duplicate_of") for r in results] == [None, "m1"]
    assert [m[0] for m in world.metrics].count("RefreshStarted") == 2  # two targets, one replay


# -- item 4: two spellings of one rank --------------------------------------------------------------

def test_an_equal_rank_in_another_folder_is_unorderable_dead_lettered_and_counted():
    world = mw.World(random.Random(1), initial="v2")
    world.files["2.0"] = "complete"
    event = mw.manifest_event("2.0", 0x101)
    result = world.invoke(event)[1]
    assert (result["status"], result["reason"]) == ("failed", "unorderable-version")
    assert world.served() == {mw.HYPERPOD.id: "v2", mw.ENDPOINT.id: "v2"}
    ((_, letter),) = world.sqs.sent
    assert letter["event"] == event and "spell one rank in different folders" in letter["message"]
    assert {m[2] for m in world.metrics if m[:2] == ("RefreshFailed", "unorderable-version")} == {
        mw.HYPERPOD.id, mw.ENDPOINT.id}
    world.files["v2"] = "complete"
    assert world.invoke(mw.manifest_event("v2", 0x102))[1]["reason"] == "duplicate"  # the very same folder


def test_a_failure_next_to_a_drained_version_that_must_be_retried_is_still_dead_lettered():
    """2.0 fails (unorderable next to v2) on both targets; freeing the HyperPod target drains a waiting
    v3 whose patch fails transiently: 2.0's letter is written, v3 still waits, and the event is raised."""
    world = mw.World(random.Random(1), initial="v2")
    world.files.update({"v3": "complete", "2.0": "complete"})
    table = state_mod.StateTable(world.store, world.clock)
    table.acquire(mw.HYPERPOD.id, "died", 60)  # v3 waits behind an invocation that died holding the lock
    table.enqueue(mw.HYPERPOD.id, "v3", "102", mw.manifest_event("v3", 0x102), behind="died")
    world.clock.now += 120
    patch = world.kube.merge_patch

    def flaky(kind, namespace, name, body):
        if body["spec"].get("modelVersion") == "v3":
            raise TransientError("target-unavailable", "API server 503")
        return patch(kind, namespace, name, body)
    world.kube.merge_patch = flaky
    with pytest.raises(TransientError) as raised:
        world.invoke(mw.manifest_event("2.0", 0x103))
    assert raised.value.reason == "target-unavailable"
    ((_, letter),) = world.sqs.sent
    assert letter["reason"] == "unorderable-version" and sorted(letter["targets"]) == sorted([mw.HYPERPOD.id, mw.ENDPOINT.id])
    assert _record(world, mw.HYPERPOD.id)["queued"]["version"] == "v3"
    world.kube.merge_patch = patch
    world.invoke(mw.manifest_event("2.0", 0x103))  # Lambda's retry: 2.0 is marked failed, the release drains v3
    assert world.served()[mw.HYPERPOD.id] == "v3"
