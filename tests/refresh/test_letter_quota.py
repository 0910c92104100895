"""Dead letters per model prefix and hour: a flood of bad uploads writes a bounded number of letters, each failure
is still recorded and every suppressed letter counted and logged; the count holds under concurrent invocations, and
a count that cannot be written never costs a letter."""

from __future__ import annotations

import itertools
import json
import threading
import time
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from refresh_world import BUCKET, PREFIX, TABLE, s3_event, start_world, targets
from stand_ins import pk_table

from hyperwarm.functions.cache_refresh import config, contract, handler, letters, quota
from hyperwarm.functions.cache_refresh.contract import ConfigError
from hyperwarm.functions.cache_refresh.state import DynamoStore, StateTable

REGION = "us-west-2"
NOW = 491328 * quota.HOUR + 120


def table(name: str = "state") -> Any:
    return pk_table(name, REGION)


@mock_aws
def test_a_prefix_gets_its_quota_per_hour_and_no_more() -> None:
    state = table()
    assert [quota.take(state, "models/a", NOW, limit=3) for _ in range(5)] == [True] * 3 + [False] * 2
    item = state.get_item(Key={"pk": "letters#models/a"})["Item"]
    assert (item["letters"], item["hour"], item["format"]) == (3, NOW // quota.HOUR, "hyperwarm.refresh.letter-quota/v2")
    assert item["expiration"] > NOW + 48 * quota.HOUR  # gone through the table's TTL, not kept forever
    assert quota.take(state, "models/b", NOW, limit=3) is True  # another prefix: its own quota
    assert [quota.take(state, "models/a", NOW + quota.HOUR, limit=3) for _ in range(4)] == [True] * 3 + [False]


def _count(state: Any, prefix: str, hour: int, letters: int) -> dict[str, Any]:
    """The table writer's PutItem of a prefix's count."""
    item = {"pk": f"letters#{prefix}", "format": "hyperwarm.refresh.letter-quota/v2", "hour": hour, "letters": letters,
            "expiration": (hour + 49) * quota.HOUR}
    state.put_item(Item=item)
    return item


@mock_aws
@pytest.mark.parametrize("ahead", [1, 5, 10_000])
def test_a_count_written_for_an_hour_ahead_is_never_honoured(ahead: int) -> None:
    """A table writer fills the quota of hours to come: the count is not this function's (it writes only the hour it
    is in) and is started over; the hour gets its whole quota."""
    state = table()
    hour = int(NOW // quota.HOUR)
    _count(state, "models/a", hour + ahead, 1_000_000)
    assert [quota.take(state, "models/a", NOW, limit=3) for _ in range(4)] == [True] * 3 + [False]
    assert state.get_item(Key={"pk": "letters#models/a"})["Item"]["hour"] == hour


@mock_aws
def test_a_count_far_above_the_limit_in_the_hour_only_means_spent() -> None:
    """Written for the hour it is: honoured as a spent quota, and no more than that (the next hour starts over)."""
    state = table()
    hour = int(NOW // quota.HOUR)
    item = _count(state, "models/a", hour, 10**30)
    assert quota.take(state, "models/a", NOW, limit=3) is False
    assert state.get_item(Key={"pk": "letters#models/a"})["Item"] == item  # nothing written
    assert quota.take(state, "models/a", NOW + quota.HOUR, limit=3) is True


@pytest.fixture
def one_request_at_a_time(monkeypatch):
    """DynamoDB applies each request to an item atomically; moto does not under threads. Serialize moto's
    requests (not the calls between them): what stays racy is what a read-then-write count leaves open."""
    from moto.core.botocore_stubber import BotocoreStubber

    lock, call = threading.Lock(), BotocoreStubber.__call__

    def atomic(self: Any, *args: Any, **kwargs: Any) -> Any:
        with lock:
            return call(self, *args, **kwargs)

    monkeypatch.setattr(BotocoreStubber, "__call__", atomic)


@mock_aws
def test_concurrent_invocations_never_take_more_than_the_quota(one_request_at_a_time) -> None:
    """Eight invocations sending at once: one atomic conditional update each, so exactly the quota is taken
    (a read-then-write count lets several read the same count and all go over it)."""
    table()
    taken: list[bool] = []
    start = threading.Barrier(8)

    def invocation() -> None:
        state = boto3.session.Session().resource("dynamodb", region_name=REGION).Table("state")
        start.wait()
        for _ in range(6):
            taken.append(quota.take(state, "models/a", NOW, limit=17))

    threads = [threading.Thread(target=invocation) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (taken.count(True), taken.count(False)) == (17, 31)


def emf(out: str) -> list[tuple[str, dict[str, str]]]:
    """(metric, its dimensions) of every EMF record the function printed."""
    found = []
    for line in out.splitlines():
        if '"_aws"' in line:
            doc = json.loads(line)
            for directive in doc["_aws"]["CloudWatchMetrics"]:
                for metric in directive["Metrics"]:
                    found.append((metric["Name"], {d: doc[d] for dims in directive["Dimensions"] for d in dims}))
    return found


def logged(caplog: pytest.LogCaptureFixture, message: str) -> list[Any]:
    return [r for r in caplog.records if r.getMessage().startswith(message)]


@pytest.fixture
def two_an_hour(world, monkeypatch):
    monkeypatch.setenv(contract.LETTERS_PER_HOUR, "2")
    handler._settings = None
    return world


def test_a_flood_of_bad_uploads_writes_the_quota_of_letters_and_records_every_failure(two_an_hour, context, capsys,
                                                                                       caplog):
    world = two_an_hour
    capsys.readouterr()
    for number in range(2, 6):  # four incomplete versions, one after the other
        result = handler.lambda_handler(world.upload(f"v{number}", listed={"extra.bin": 3}), context)
        assert result["status"] == "failed"
    out = capsys.readouterr().out
    assert sorted(letter["event"]["detail"]["object"]["key"] for letter in world.dead_letters()) == [
        f"{PREFIX}/v2/manifest.json", f"{PREFIX}/v3/manifest.json"]
    metrics = emf(out)
    assert [d for name, d in metrics if name == "RefreshFailed" and set(d) == {"service"}] != []
    assert sum(1 for name, d in metrics if name == "RefreshFailed" and "Reason" in d) == 8  # both targets, 4 times
    suppressed = [d for name, d in metrics if name == "DeadLettersSuppressed"]
    assert suppressed.count({"service": contract.SERVICE}) == 2  # what the alarm watches
    assert suppressed.count({"service": contract.SERVICE, "prefix": PREFIX}) == 2
    lines = logged(caplog, "dead letter suppressed")
    assert [line.letter["event"]["detail"]["object"]["key"] for line in lines] == [
        f"{PREFIX}/v4/manifest.json", f"{PREFIX}/v5/manifest.json"]  # the whole letter is kept in the log
    assert all(line.letter["letter_id"] and line.prefix == PREFIX for line in lines)
    state = StateTable(DynamoStore(world.ddb, TABLE))
    for target in ("endpoint:llama-prod",):
        assert state.get(target)["failed"]["version"] == "v5"  # the failure is recorded: a retry skips it


OTHER = "models/mistral"
_SEQUENCER = itertools.count(0x6F0000000000000001)


@pytest.fixture
def two_prefixes(kube_server, monkeypatch):
    """The world with a second refreshed prefix (an endpoint target) and a quota of two letters an hour."""
    with mock_aws():
        world = start_world(kube_server, monkeypatch,
                            {**targets(), OTHER: [{"kind": "endpoint", "endpoint": "mistral-prod"}]})
        monkeypatch.setenv(contract.LETTERS_PER_HOUR, "2")
        handler._settings = None
        yield world


def crafted(world: Any, prefix: str, version: str) -> dict[str, Any]:
    """An attacker's upload: a manifest under a refreshed prefix whose version folder no rule can order (nothing
    else uploaded), so every target fails it for good (``unorderable-version``) and it is dead-lettered."""
    key = f"{prefix}/{version}/manifest.json"
    put = world.s3.put_object(Bucket=BUCKET, Key=key, Body=b'{"format": "hyperwarm.manifest/v1", "files": []}')
    return s3_event(key, format(next(_SEQUENCER), "X"), put.get("VersionId"))


def letter_keys(world: Any) -> list[str]:
    return sorted(letter["event"]["detail"]["object"]["key"] for letter in world.dead_letters())


def test_a_flooded_prefix_spends_its_own_quota_alone_and_gets_a_new_one_the_next_hour(two_prefixes, context,
                                                                                       monkeypatch, caplog):
    world = two_prefixes
    for n in range(6):
        assert handler.lambda_handler(crafted(world, PREFIX, f"junk-{n}"), context)["status"] == "failed"
    assert letter_keys(world) == [f"{PREFIX}/junk-0/manifest.json", f"{PREFIX}/junk-1/manifest.json"]
    assert len(logged(caplog, "dead letter suppressed")) == 4
    handler.lambda_handler(crafted(world, OTHER, "junk-0"), context)  # another prefix: its own quota, untouched
    assert f"{OTHER}/junk-0/manifest.json" in letter_keys(world)
    later = time.time() + quota.HOUR
    monkeypatch.setattr(handler, "time", SimpleNamespace(time=lambda: later))  # the next clock hour
    handler.lambda_handler(crafted(world, PREFIX, "junk-6"), context)
    assert f"{PREFIX}/junk-6/manifest.json" in letter_keys(world)
    assert len(world.dead_letters()) == 4
    assert len(logged(caplog, "dead letter suppressed")) == 4  # nothing more suppressed


@pytest.fixture
def outside_an_invocation():
    """Calls of the handler's parts outside ``lambda_handler``: the metrics they add are not flushed by one, so
    they are dropped after the test (the next test's invocation would print them)."""
    yield
    handler.metrics.clear_metrics()


def test_a_letter_counts_against_its_targets_prefix_not_the_one_its_event_names(two_prefixes,
                                                                                 outside_an_invocation):
    """A refused rollout record's letter carries the event its writer put in the record: naming another prefix (or
    a new one each time) neither spends that prefix's quota nor escapes its own target's."""
    world = two_prefixes
    (target,) = [t.id for t in handler.settings().targets_for(PREFIX) if t.id.startswith("endpoint:")]
    for n in range(4):
        event = s3_event(f"{OTHER}/forged-{n}/manifest.json", format(next(_SEQUENCER), "X"))
        handler._dead_letter(letters.envelope(event, "signature-missing", f"{target}: forged", [target],
                                              request_id="r"))
    assert len(world.dead_letters()) == 2
    state = world.ddb.Table(TABLE)
    assert state.get_item(Key={"pk": f"letters#{PREFIX}"})["Item"]["letters"] == 2
    assert "Item" not in state.get_item(Key={"pk": f"letters#{OTHER}"})


@pytest.mark.parametrize("reason", ["refused-record", "publisher-key-unusable", "rolled-back", "endpoint-failed",
                                    "staging-failed", "switch-timeout", "moved-back", "target-rejected"])
def test_letters_an_upload_does_not_cause_are_sent_with_the_quota_spent(two_prefixes, outside_an_invocation,
                                                                       reason: str) -> None:
    """A bucket writer spends the prefix's quota with junk uploads; a rollout's failure, a refused record and a
    publisher key that cannot be used still reach the queue, uncounted."""
    world = two_prefixes
    (target,) = [t.id for t in handler.settings().targets_for(PREFIX) if t.id.startswith("endpoint:")]
    for n in range(3):
        handler._dead_letter(letters.envelope(crafted(world, PREFIX, f"junk-{n}"), "unorderable-version", "junk",
                                              [target], request_id="r"))
    assert len(world.dead_letters()) == 2  # spent
    handler._dead_letter(letters.envelope(s3_event(f"{PREFIX}/v2/manifest.json", format(next(_SEQUENCER), "X")),
                                          reason, f"{target}: real", [target], request_id="r"))
    assert [letter["reason"] for letter in world.dead_letters()].count(reason) == 1
    assert world.ddb.Table(TABLE).get_item(Key={"pk": f"letters#{PREFIX}"})["Item"]["letters"] == 2


def test_a_refused_record_is_dead_lettered_after_a_flood_of_junk_uploads(two_prefixes, context) -> None:
    """End to end: the prefix's quota is spent by junk uploads, then a table writer's crafted endpoint record is
    refused when the reconciliation reads it: its letter is sent."""
    world = two_prefixes
    for n in range(3):
        handler.lambda_handler(crafted(world, PREFIX, f"junk-{n}"), context)
    state = StateTable(DynamoStore(world.ddb, TABLE))
    item = state.get("endpoint:llama-prod")
    event = s3_event(f"{PREFIX}/v9/manifest.json", "5F00000000000000E1")
    pending = {"version": "v9", "sequencer": "5F00000000000000E1", "location": f"{PREFIX}/v9", "bucket": BUCKET,
               "config": "llama-prod-cfn", "created_models": [], "started": 1, "event": json.dumps(event)}
    rev = int(item["rev"])
    assert state.store.put(state.key("endpoint:llama-prod"), {**item, "pending": pending, "rev": rev + 1}, rev)
    handler.on_schedule({"source": "aws.events", "detail-type": "Scheduled Event", "id": "s", "detail": {}}, context)
    assert [letter["reason"] for letter in world.dead_letters()].count("refused-record") == 1


def test_a_count_that_cannot_be_written_still_sends_the_letter(two_an_hour, context, capsys, caplog):
    """The state table refuses the count's UpdateItem (throttled): the letter goes to the queue all the same, and
    the failure is recorded; no count is left behind."""
    world = two_an_hour

    def throttled(**kwargs: Any) -> None:
        raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}},
                          "UpdateItem")

    handler.client("dynamodb").meta.client.meta.events.register("before-call.dynamodb.UpdateItem", throttled)
    capsys.readouterr()
    for number in range(2, 5):  # over the quota of 2, if it were counted
        handler.lambda_handler(world.upload(f"v{number}", listed={"extra.bin": 3}), context)
    out = capsys.readouterr().out
    assert len(world.dead_letters()) == 3
    assert not [m for m in emf(out) if m[0] == "DeadLettersSuppressed"]
    assert len(logged(caplog, "dead-letter quota not counted; the letter is sent")) == 3
    assert StateTable(DynamoStore(world.ddb, TABLE)).get("endpoint:llama-prod")["failed"]["version"] == "v4"
    assert [i["pk"] for i in world.ddb.Table(TABLE).scan()["Items"] if i["pk"].startswith("letters#")] == []


def test_a_count_a_newer_release_wrote_is_left_as_it_is_and_the_letter_sent(two_an_hour, context, caplog):
    world = two_an_hour
    hour = int(time.time() // quota.HOUR)
    newer = {"pk": f"letters#{PREFIX}", "letters": 99, "hour": hour, "format": "hyperwarm.refresh.letter-quota/v3",
             "expiration": (hour + 49) * quota.HOUR}
    world.ddb.Table(TABLE).put_item(Item=newer)
    handler.lambda_handler(world.upload("v2", listed={"extra.bin": 3}), context)
    assert len(world.dead_letters()) == 1
    assert world.ddb.Table(TABLE).get_item(Key={"pk": newer["pk"]})["Item"] == newer
    (line,) = logged(caplog, "dead-letter quota not counted; the letter is sent")
    assert "letter-quota/v3" in line.error


@pytest.mark.parametrize("value", ["0", "1001", "-3", "ten", "2.5", ""])
def test_the_quota_setting_is_checked_naming_the_variable_value_and_range(value: str) -> None:
    env = {contract.REFRESH_TARGETS: json.dumps({"m": [{"kind": "endpoint", "endpoint": "e"}]}),
           contract.STATE_TABLE: "t", contract.ALLOWED_BUCKETS: "b", contract.LETTERS_PER_HOUR: value}
    with pytest.raises(ConfigError) as raised:
        config.load(env)
    assert str(raised.value) == f"HYPERWARM_LETTERS_PER_PREFIX_HOUR = {value!r} -- allowed: a whole number, 1..1000"
    assert config.load({**env, contract.LETTERS_PER_HOUR: "1000"}).letters_per_hour == 1000
    del env[contract.LETTERS_PER_HOUR]
    assert config.load(env).letters_per_hour == contract.DEFAULT_LETTERS_PER_HOUR == 20
