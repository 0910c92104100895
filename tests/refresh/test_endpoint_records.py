"""An endpoint's rollout record is read back from the state table, which is no authority. Driven as the table writer:
a crafted ``pending`` or ``starting`` record (another version, a config that is not the one a refresh of its upload
creates, models or configs of someone else to delete) commits nothing, deletes nothing and ends as one
``refused-record`` letter, whichever event comes to settle it (a state change or the reconciliation)."""

from __future__ import annotations

import json
from typing import Any

import moto_ext
import pytest
from refresh_world import BUCKET, ENDPOINT, PREFIX, ROLE, TABLE, s3_event

from hyperwarm.functions.cache_refresh import handler
from hyperwarm.functions.cache_refresh.state import DynamoStore, StateTable

TARGET = f"endpoint:{ENDPOINT}"
SCHEDULE = {"version": "0", "id": "schedule-1", "detail-type": "Scheduled Event", "source": "aws.events",
            "account": "123456789012", "time": "2026-11-29T13:00:00Z", "region": "us-west-2", "resources": [],
            "detail": {}}


def _state(world: Any) -> StateTable:
    return StateTable(DynamoStore(world.ddb, TABLE))


def _write(world: Any, **fields: Any) -> None:
    """The table writer's PutItem: the target's item with ``fields`` changed."""
    state = _state(world)
    item = state.get(TARGET)
    rev = int(item.get("rev", 0))
    assert state.store.put(state.key(TARGET), {**item, **fields, "rev": rev + 1}, rev)


def _resources(world: Any) -> tuple[list[str], list[str]]:
    return (sorted(m["ModelName"] for m in world.sm.list_models()["Models"]),
            sorted(c["EndpointConfigName"] for c in world.sm.list_endpoint_configs()["EndpointConfigs"]))


def _record(version: str, config: str, *, event_version: str | None = None, models: list[str] | None = None,
            sequencer: str = "5F00000000000000E1") -> dict[str, Any]:
    event = s3_event(f"{PREFIX}/{event_version or version}/manifest.json", sequencer)
    return {"version": version, "sequencer": sequencer, "location": f"{PREFIX}/{version}", "bucket": BUCKET,
            "config": config, "created_models": models or [], "previous_config": "llama-prod-cfn",
            "started": 1, "event": json.dumps(event)}


def _settle(world: Any, context: Any, trigger: str) -> None:
    if trigger == "state-change":
        handler.on_endpoint_state_change(moto_ext.state_change_event(world.sm, ENDPOINT), context)
    else:
        handler.on_schedule(SCHEDULE, context)


def _refused(world: Any, before: tuple[list[str], list[str]], current: str | None) -> None:
    item = _state(world).get(TARGET)
    assert item.get("current_version") == current and not item.get("pending") and not item.get("starting")
    assert item["last_failed"]["reason"] == "refused-record"
    assert _resources(world) == before  # nothing deleted
    assert [letter["reason"] for letter in world.dead_letters()] == ["refused-record"]


@pytest.mark.parametrize("trigger", ["state-change", "schedule"])
@pytest.mark.parametrize("record", [
    # the serving config claimed for a far version (its event agrees): the config is not v999...'s
    _record("v999999999", "llama-prod-cfn"),
    # a version its event does not name
    _record("v999999999", "llama-prod-cfn", event_version="v2"),
    # a config of another endpoint, and models that are not this endpoint's
    _record("v2", "other-endpoint-cfg", models=["embedder"]),
], ids=["serving-config-for-another-version", "event-disagrees", "foreign-names"])
def test_a_crafted_pending_record_commits_and_deletes_nothing(world: Any, context: Any, trigger: str,
                                                               record: dict[str, Any]) -> None:
    _write(world, pending=record, lock_owner="rollout:x", lock_expires=0)
    before = _resources(world)
    _settle(world, context, trigger)
    _refused(world, before, None)
    assert world.served_endpoint() == f"s3://{BUCKET}/{PREFIX}/v1/"


def test_a_crafted_starting_record_deletes_nothing(world: Any, context: Any) -> None:
    """An update "never started" (the endpoint unchanged since) has what it created deleted: not what a writer names."""
    world.sm.create_model(ModelName="other-model", ExecutionRoleArn=ROLE, PrimaryContainer={"Image": "i"})
    _write(world, starting={**_record("v2", "llama-prod-cfn-2", models=["other-model", "llama-v1"]),
                            "endpoint_modified": 0})
    before = _resources(world)
    handler.on_schedule(SCHEDULE, context)
    _refused(world, before, None)


def test_foreign_owned_names_are_not_deleted_when_a_real_rollout_ends(world: Any, context: Any) -> None:
    """A real rollout of v2 is in flight; the table writer adds models of someone else as what the previous refresh
    owned, to be deleted once v2 serves. The record is refused (nothing committed, nothing deleted), the owned names
    are forgotten, and the next upload moves the endpoint on."""
    world.sm.create_model(ModelName="other-model", ExecutionRoleArn=ROLE, PrimaryContainer={"Image": "i"})
    assert handler.lambda_handler(world.upload("v2"), context)["status"] == "refreshed"
    _write(world, owned_models=["other-model"], owned_config="llama-prod-cfn")
    moto_ext.settle(moto_ext.backend(), ENDPOINT)
    before = _resources(world)
    _settle(world, context, "state-change")
    _refused(world, before, None)
    item = _state(world).get(TARGET)
    assert "owned_models" not in item and "owned_config" not in item
    assert handler.lambda_handler(world.upload("v3"), context)["status"] == "refreshed"
    moto_ext.settle(moto_ext.backend(), ENDPOINT)
    handler.on_endpoint_state_change(moto_ext.state_change_event(world.sm, ENDPOINT), context)
    assert world.served_endpoint() == f"s3://{BUCKET}/{PREFIX}/v3/" and "other-model" in _resources(world)[0]


def test_a_real_rollout_still_commits_and_cleans_up(world: Any, context: Any) -> None:
    """The checks pass what the function itself wrote: v2 then v3 commit, and v2's resources go once v3 serves."""
    for version in ("v2", "v3"):
        handler.lambda_handler(world.upload(version), context)
        moto_ext.settle(moto_ext.backend(), ENDPOINT)
        answer = handler.on_endpoint_state_change(moto_ext.state_change_event(world.sm, ENDPOINT), context)
        assert answer["status"] == "refreshed", answer
    assert _state(world).get(TARGET)["current_version"] == "v3" and world.dead_letters() == []
    assert any("v2" in name for name in answer["deleted"])
