"""The refresh Lambda against moto and the fake Kubernetes API: late, lost and stale events, busy and
failing targets, bad input. Each test names the behaviour; the model tests cover the combinations."""

from __future__ import annotations

import json

import moto_ext
import pytest
from refresh_world import BUCKET, ENDPOINT, NAMESPACE, PREFIX, TABLE, s3_event

from hyperwarm.functions.cache_refresh import handler
from hyperwarm.functions.cache_refresh.errors import TransientError

HYPERPOD_ID = "hyperpod:hyperwarm-test/hyperwarm-models/InferenceEndpointConfig/llama"
ENDPOINT_ID = f"endpoint:{ENDPOINT}"


def refresh(event, context):
    return handler.lambda_handler(event, context)


def state_change(world, context):
    return handler.on_endpoint_state_change(moto_ext.state_change_event(world.sm, ENDPOINT), context)


def finish(world, context, succeed=True):
    moto_ext.settle(moto_ext.backend(), ENDPOINT, succeed=succeed)
    return state_change(world, context)


def metrics(capsys) -> list[tuple[str, str | None]]:
    """(metric, Reason) of every EMF record the function printed."""
    out = []
    for line in capsys.readouterr().out.splitlines():
        if '"_aws"' in line:
            doc = json.loads(line)
            out += [(m["Name"], doc.get("Reason")) for d in doc["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]]
    return out


def endpoint_status(status):
    moto_ext.backend().endpoints[ENDPOINT].endpoint_status = status


def test_a_late_prerelease_never_replaces_the_release(world, context):
    refresh(world.upload("v10"), context)
    finish(world, context)
    result = refresh(world.upload("v9b"), context)  # v9 beta: before v9, before v10
    assert result["status"] == "skipped" and result["reason"] == "older-version"
    assert world.served_hyperpod() == f"{PREFIX}/v10"
    assert world.served_endpoint() == f"s3://{BUCKET}/{PREFIX}/v10/"


def test_an_unorderable_version_is_rejected_dead_lettered_and_alarmed(world, context, capsys):
    capsys.readouterr()
    event = world.upload("latest")
    result = refresh(event, context)
    assert (result["status"], result["reason"]) == ("failed", "unorderable-version")
    assert world.served_hyperpod() == f"{PREFIX}/v1" and moto_ext.UPDATES == []
    [letter] = world.dead_letters()
    assert letter["event"] == event and letter["reason"] == "unorderable-version"
    assert ("RefreshFailed", None) in metrics(capsys)  # the alarm's metric: service dimension only


def test_update_in_progress_is_transient_and_the_version_rolls_after_it(world, context):
    endpoint_status("Updating")  # someone else's update (a deploy)
    event = world.upload("v2")
    with pytest.raises(TransientError) as raised:
        refresh(event, context)
    assert raised.value.reason == "endpoint-busy"
    assert world.dead_letters() == []
    assert world.served_hyperpod() == f"{PREFIX}/v2"
    endpoint_status("InService")
    assert state_change(world, context)["next"] == ["started"]  # the end of that update rolls v2
    assert moto_ext.UPDATES[-1]["EndpointConfigName"].startswith(f"{ENDPOINT}-v2-")


def test_a_permanent_failure_next_to_a_transient_one_is_dead_lettered_once_and_counted(world, context, capsys):
    world.kube.objects.pop(("inferenceendpointconfigs", NAMESPACE, "llama"))
    endpoint_status("Updating")
    event = world.upload("v2")
    capsys.readouterr()
    with pytest.raises(TransientError):
        refresh(event, context)
    [letter] = world.dead_letters()
    assert (letter["targets"], letter["reason"]) == ([HYPERPOD_ID], "target-not-found")
    assert ("RefreshFailed", "target-not-found") in metrics(capsys)
    with pytest.raises(TransientError):  # Lambda's retry: the dead-lettered target is not tried again
        refresh(event, context)
    assert len(world.dead_letters()) == 1


def test_a_stale_in_service_event_of_the_old_config_does_not_end_the_rollout(world, context):
    refresh(world.upload("v2"), context)
    finish(world, context)
    stale = moto_ext.state_change_event(world.sm, ENDPOINT)  # InService on v2's config
    refresh(world.upload("v3"), context)
    result = handler.on_endpoint_state_change(stale, context)  # delivered again during v3's rollout
    assert (result["status"], result["reason"]) == ("ignored", "in-progress")
    assert world.dead_letters() == []
    item = world.ddb.Table(TABLE).get_item(Key={"pk": f"target#{ENDPOINT_ID}"})["Item"]
    assert item["pending"]["version"] == "v3" and item["lock_owner"].startswith("rollout:")
    finish(world, context)
    assert world.served_endpoint() == f"s3://{BUCKET}/{PREFIX}/v3/"


def test_a_late_version_after_a_lost_state_change_and_an_expired_lock_does_not_roll_back(world, context):
    v2 = world.upload("v2")
    refresh(v2, context)
    finish(world, context)
    refresh(world.upload("v3"), context)
    moto_ext.settle(moto_ext.backend(), ENDPOINT)  # v3 serves; its state-change event is lost
    world.ddb.Table(TABLE).update_item(Key={"pk": f"target#{ENDPOINT_ID}"},
                                       UpdateExpression="SET lock_expires = :past", ExpressionAttributeValues={":past": 0})
    again = {**v2, "detail": {**v2["detail"], "object": {**v2["detail"]["object"], "sequencer": "FF"}}}
    assert refresh(again, context)["targets"][ENDPOINT_ID]["status"] == "skipped"
    assert world.served_endpoint() == f"s3://{BUCKET}/{PREFIX}/v3/"
    assert len(moto_ext.UPDATES) == 2
    v2_config = moto_ext.UPDATES[0]["EndpointConfigName"]
    assert refresh(world.upload("v4"), context)["targets"][ENDPOINT_ID]["status"] == "started"
    item = world.ddb.Table(TABLE).get_item(Key={"pk": f"target#{ENDPOINT_ID}"})["Item"]
    assert item["current_version"] == "v3" and item["pending"]["version"] == "v4"  # the lost ending was settled
    names = {c["EndpointConfigName"] for c in world.sm.list_endpoint_configs()["EndpointConfigs"]}
    assert v2_config not in names  # superseded once v3 was seen serving, not before


def test_with_no_state_a_late_version_never_replaces_what_a_deploy_put_in_place(world, context):
    obj = world.kube.objects[("inferenceendpointconfigs", NAMESPACE, "llama")]
    obj["spec"]["modelSourceConfig"]["modelLocation"] = f"{PREFIX}/v5"  # deployed from cdk.json
    result = refresh(world.upload("v2"), context)
    assert result["targets"][HYPERPOD_ID] == {"status": "skipped", "reason": "older-version"}
    assert world.served_hyperpod() == f"{PREFIX}/v5"


def _nested(depth: int) -> dict:
    event: dict = {}
    for _ in range(depth):
        event = {"detail": event}
    return {"source": "aws.s3", "detail-type": "Object Created", **event}


@pytest.mark.parametrize("event", ["just a string", ["a", "list"], 42, None, _nested(50_000)],
                         ids=["string", "list", "number", "null", "nested"])
def test_an_event_that_is_not_an_event_object_is_skipped(world, context, event):
    assert refresh(event, context) == {"status": "skipped", "reason": "malformed-event"}


@pytest.mark.parametrize("time", [1732880000, {"at": "noon"}, "yesterday"])
def test_a_bad_time_is_rejected_before_any_target_moves(world, context, time):
    event = {**world.upload("v2"), "time": time}
    assert refresh(event, context) == {"status": "skipped", "reason": "malformed-event"}
    assert world.kube.patches == [] and moto_ext.UPDATES == []


def test_a_deeply_nested_manifest_is_a_corrupt_manifest(world, context):
    key = f"{PREFIX}/v2/manifest.json"
    put = world.s3.put_object(Bucket=BUCKET, Key=key, Body=b"[" * 100_000 + b"]" * 100_000)
    result = refresh(s3_event(key, "AC", put["VersionId"]), context)
    assert (result["status"], result["reason"]) == ("failed", "corrupt-manifest")
    assert world.dead_letters()[0]["reason"] == "corrupt-manifest"
