"""The record follows what a target serves, odd versions are dead-lettered, and a state
table error at the lock is one target's retry (on the in-memory fakes of model_world.py)."""

from __future__ import annotations

import random

import model_world as mw
import pytest
from botocore.exceptions import ClientError

from hyperwarm.functions.cache_refresh import deploy_guard, state as state_mod
from hyperwarm.functions.cache_refresh.errors import TransientError


def _record(world, target_id):
    return world.store.item(state_mod.StateTable.key(target_id))


class _Table:
    def __init__(self, world):
        self.world = world

    def get_item(self, Key, ConsistentRead):  # noqa: N803 - boto3's spelling
        return {"Item": self.world.store.item(Key["pk"]) or None}


def _fail_first(monkeypatch, name):
    original = getattr(state_mod.StateTable, name)
    calls = {"n": 0}

    def failing(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise TransientError("injected", f"{name} failed")
        return original(self, *args, **kwargs)
    monkeypatch.setattr(state_mod.StateTable, name, failing)


def _v2_after_a_lost(monkeypatch, name):
    """A world where v2's upload went through but the state table's ``name`` failed: its event and the world."""
    world = mw.World(random.Random(1))
    world.files["v2"] = "complete"
    _fail_first(monkeypatch, name)
    event = mw.manifest_event("v2", 0x101)
    with pytest.raises(TransientError):
        world.invoke(event)
    return world, event


def test_lost_hyperpod_commit_is_recorded_from_the_live_read_on_retry(monkeypatch):
    world, event = _v2_after_a_lost(monkeypatch, "commit")
    assert world.served()[mw.HYPERPOD.id] == "v2"
    world.sm.settle(True)
    for change in list(world.sm.emitted):
        world.invoke(change)
    world.sm.emitted.clear()
    world.invoke(event)  # Lambda's retry: the target already serves v2
    record = _record(world, mw.HYPERPOD.id)
    assert record.get("current_version") == "v2"
    assert record.get("current_location") == f"{mw.PREFIX}/v2"
    assert "lock_owner" not in record
    # a deploy of the old version is now refused for the HyperPod target
    stale = deploy_guard.stale_targets(_Table(world), [{"Id": mw.HYPERPOD.id, "Version": "v1", "Field": "f",
                                                        "Value": "{version}"}])
    assert stale


def test_lost_endpoint_rollout_record_is_recorded_from_the_live_read_on_retry(monkeypatch):
    world, event = _v2_after_a_lost(monkeypatch, "start_rollout")
    world.sm.settle(True)
    world.sm.emitted.clear()  # its state change finds no rollout recorded
    assert world.served()[mw.ENDPOINT.id] == "v2"
    world.invoke(event)  # Lambda's retry
    record = _record(world, mw.ENDPOINT.id)
    assert record.get("current_version") == "v2"
    assert record.get("current_location") == f"{mw.PREFIX}/v2"


def test_skip_of_an_older_event_does_not_move_the_record_back(monkeypatch):
    world = mw.World(random.Random(1))
    world.files["v2"] = "complete"
    world.invoke(mw.manifest_event("v2", 0x101))
    world.files["v1"] = "complete"
    world.invoke(mw.manifest_event("v1", 0x102))
    assert _record(world, mw.HYPERPOD.id)["current_version"] == "v2"


@pytest.mark.parametrize("version", ["1.0.0+build", "2026-11-01T12:00:00Z", "v" + "1" * 70],
                         ids=["plus", "colons", "71-chars"])
def test_a_version_outside_the_folder_alphabet_under_a_configured_prefix_is_dead_lettered(version):
    world = mw.World(random.Random(1))
    world.files[version] = "complete"
    before = world.served()
    _, result = world.invoke(mw.manifest_event(version, 0x101))
    assert result["status"] == "failed" and result["reason"] == "unorderable-version"
    assert [letter["reason"] for _, letter in world.sqs.sent] == ["unorderable-version"]
    assert world.sqs.sent[0][1]["event"]["detail"]["object"]["key"].endswith(f"/{version}/manifest.json")
    assert ("RefreshFailed", "unorderable-version") in [(m[0], m[1]) for m in world.metrics]
    assert world.served() == before


def test_an_odd_version_under_an_unknown_prefix_is_still_skipped_as_malformed():
    world = mw.World(random.Random(1))
    event = mw.manifest_event("1.0.0+build", 0x101)
    event["detail"]["object"]["key"] = "other/model/1.0.0+build/manifest.json"
    _, result = world.invoke(event)
    assert result == {"status": "skipped", "reason": "malformed-event"}
    assert world.sqs.sent == []


def _throttled(operation):
    return ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}},
                       operation)


def test_a_state_table_error_at_one_targets_lock_is_its_retry_not_the_events_abort():
    """The endpoint fails permanently (it is missing); the HyperPod target's lock hits throttling:
    the endpoint's failure is still dead-lettered and counted, then the event is raised for a retry."""
    world = mw.World(random.Random(1))
    world.files["v2"] = "complete"
    world.sm.describe_endpoint = lambda EndpointName: (_ for _ in ()).throw(  # noqa: N803
        ClientError({"Error": {"Code": "ValidationException", "Message": "Could not find endpoint"}},
                    "DescribeEndpoint"))
    original, calls = world.store.put, {"n": 0}

    def put(pk, item, rev):
        if pk.endswith(mw.HYPERPOD.id) and calls["n"] == 0:
            calls["n"] += 1
            raise _throttled("PutItem")
        return original(pk, item, rev)
    world.store.put = put
    with pytest.raises(TransientError):
        world.invoke(mw.manifest_event("v2", 0x101))
    assert [letter["targets"] for _, letter in world.sqs.sent] == [[mw.ENDPOINT.id]]
    assert ("RefreshFailed", mw.ENDPOINT.id) in [(m[0], m[2]) for m in world.metrics]
    assert ("RefreshRetried",) in [(m[0],) for m in world.metrics]


class _FailingTable:
    def __init__(self, code):
        self.code = code

    def get_item(self, **_):
        raise ClientError({"Error": {"Code": self.code, "Message": "x"}}, "GetItem")

    def put_item(self, **_):
        raise ClientError({"Error": {"Code": self.code, "Message": "x"}}, "PutItem")


class _Dynamo:
    def __init__(self, code):
        self.code = code

    def Table(self, name):  # noqa: N802 - boto3's spelling
        return _FailingTable(self.code)


@pytest.mark.parametrize("code", ["ProvisionedThroughputExceededException", "ThrottlingException",
                                  "InternalServerError", "RequestLimitExceeded"])
def test_dynamo_store_errors_are_transient_state_unavailable(code):
    store = state_mod.DynamoStore(_Dynamo(code), "t")
    with pytest.raises(TransientError) as got:
        store.get("pk")
    assert got.value.reason == "state-unavailable"
    with pytest.raises(TransientError) as got:
        store.put("pk", {"rev": 1}, 0)
    assert got.value.reason == "state-unavailable"
