"""Every persisted format survives upgrades: a sample of each version ever written is read by today's readers.

The samples are in ``tests/formats/`` (its README); the versions in ``formats.WRITTEN``. A new version needs a
sample and a CHANGELOG line, and a record of a version this release does not know is refused, not misread.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from stand_ins import pk_table

from hyperwarm.functions.cache_refresh import contract, deploy_guard, formats, manifest
from hyperwarm.functions.cache_refresh.errors import TransientError
from hyperwarm.functions.cache_refresh.state import StateTable
from hyperwarm.refresh import cli as replay_cli
from stacks import served

SAMPLES = Path(__file__).parent / "formats"
REPO = Path(__file__).resolve().parent.parent
REGION = "us-east-1"


def samples(kind: str) -> dict[str, list[dict[str, Any]]]:
    """Version -> its samples (``<version with _ for />[.<what>].json``; ``unversioned``: no format field)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((SAMPLES / kind).glob("*.json")):
        stem = path.name.removesuffix(".json").split(".", 1)[0] if path.name.startswith("unversioned") else \
            path.name.removesuffix(".json")
        version = formats.UNVERSIONED if stem == "unversioned" else _version(kind, stem)
        found.setdefault(version, []).append(json.loads(path.read_text()))
    return found


def _version(kind: str, stem: str) -> str:
    """The written version a sample's file name spells (its own label after the version, if any)."""
    for version in formats.WRITTEN[kind]:
        if stem == version.replace("/", "_") or stem.startswith(version.replace("/", "_") + "."):
            return version
    raise AssertionError(f"tests/formats/{kind}/{stem}.json names no version of {kind}: {list(formats.WRITTEN[kind])}")


@pytest.mark.parametrize("kind", sorted(formats.WRITTEN))
def test_every_version_ever_written_has_a_sample_that_says_its_version(kind: str) -> None:
    found = samples(kind)
    assert set(found) == set(formats.WRITTEN[kind])
    field = "Format" if kind == "guard" else "format"
    for version, records in found.items():
        assert all(r.get(field, formats.UNVERSIONED) == version for r in records), version


def test_every_format_version_has_a_changelog_line() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text()
    missing = [v for versions in formats.WRITTEN.values() for v in versions
               if v != formats.UNVERSIONED and v not in changelog]
    assert missing == []


def test_the_functions_readme_lists_every_format_version() -> None:
    """Its table of persisted formats is what an operator reads before a downgrade (a review found it two versions
    behind)."""
    table = (REPO / "lambdas" / "cache_refresh" / "README.md").read_text().split("| Record | Versions |")[1]
    table = table.split("\n\n")[0]
    missing = [v for versions in formats.WRITTEN.values() for v in versions
               if v != formats.UNVERSIONED and f"`{v}`" not in table]
    assert missing == []


class RecordingLambda:
    """The refresh function as replay invokes it: records each payload and succeeds."""

    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []

    def invoke(self, **request: Any) -> dict[str, Any]:
        self.payloads.append(json.loads(request["Payload"]))
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps({"status": "refreshed"}).encode())}


@mock_aws
@pytest.mark.parametrize("version", sorted(formats.WRITTEN["letter"]))
def test_letters_of_every_format_ever_written_are_replayed(version: str) -> None:
    """Letters written before the format's rename (hyperwarm.refresh-dlq/v1) were "unreadable" after it."""
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="hyperwarm-prod-cache-refresh-dead-letters")["QueueUrl"]
    letters = samples("letter")[version]
    for letter in letters:
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps(letter))
    function = RecordingLambda()
    results = replay_cli.replay(url, "hyperwarm-prod-cache-refresh", sqs=sqs, lambda_client=function)
    assert [r["status"] for r in results] == ["replayed"] * len(letters)
    assert sorted(p.pop(contract.REPLAY_KEY) and json.dumps(p, sort_keys=True) for p in function.payloads) == \
        sorted(json.dumps(letter["event"], sort_keys=True) for letter in letters)
    assert sqs.receive_message(QueueUrl=url).get("Messages", []) == []


@mock_aws
def test_a_letter_of_a_newer_release_stays_and_says_so() -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({**samples("letter")[formats.LETTER][0],
                                                            "format": "hyperwarm.refresh.hook-dlq/v2"}))
    (result,) = replay_cli.replay(url, "fn", sqs=sqs, lambda_client=RecordingLambda())
    assert result["status"] == "unreadable"
    assert "'hyperwarm.refresh.hook-dlq/v2' is not one this hyperwarm reads" in result["error"]
    assert "written by a newer hyperwarm" in result["error"]
    assert len(sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)["Messages"]) == 1


class Store:
    """The state table as the model tests keep it: whole items by key, written on their revision."""

    def __init__(self, *items: dict[str, Any]) -> None:
        self.items = {i["pk"]: dict(i) for i in items}

    def get(self, pk: str) -> dict[str, Any]:
        return dict(self.items.get(pk, {}))

    def put(self, pk: str, item: dict[str, Any], expected_rev: int) -> bool:
        if int(self.items.get(pk, {}).get("rev", 0)) != expected_rev:
            return False
        self.items[pk] = dict(item)
        return True


@pytest.mark.parametrize("version", sorted(formats.WRITTEN["state"]))
def test_state_items_of_every_version_are_read_and_rewritten_in_todays(version: str) -> None:
    for item in samples("state")[version]:
        target = item["pk"].removeprefix("target#")
        table = StateTable(Store(item), clock=lambda: 1764800000)
        assert table.get(target)["current_version"] == item["current_version"]
        table.mark_failed(target, "v9", "0067", "manifest-mismatch")
        after = table.get(target)
        assert after["format"] == formats.STATE
        kept = [k for k in item if k not in ("rev", "updated_at", "format", "failed")]  # all else as it was
        # (but an earlier release's warm rollout in flight, which this one ends: formats.state_item)
        legacy = {"pending": {**item["pending"], "legacy": True}} if "staged" in item.get("pending", {}) else {}
        assert ({k: after[k] for k in kept}, after["failed"]["version"]) == ({k: item[k] for k in kept} | legacy, "v9")


@mock_aws
@pytest.mark.parametrize("version", sorted(formats.WRITTEN["state"]))
def test_the_deploy_guard_and_synth_read_state_items_of_every_version(version: str) -> None:
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    table = pk_table("state", REGION)
    for item in samples("state")[version]:
        table.put_item(Item=item)
        target = item["pk"].removeprefix("target#")
        assert served._current_version(dynamodb, "state", target) == item["current_version"]
        (problem,) = deploy_guard.stale_targets(table, [{"Id": target, "Version": "v0", "Field": "f",
                                                         "Value": "{version}"}])
        assert target in problem and ("is rolling out" in problem or f"serves {item['current_version']}" in problem)


def test_a_state_item_of_a_newer_release_is_left_alone_and_its_event_retried() -> None:
    item = {**samples("state")[formats.STATE][0], "format": "hyperwarm.refresh.state/v2"}
    table = StateTable(Store(item))
    target = item["pk"].removeprefix("target#")
    with pytest.raises(TransientError) as raised:
        table.mark_failed(target, "v9", "0067", "manifest-mismatch")
    assert raised.value.reason == "state-format" and "newer hyperwarm" in raised.value.message
    assert Store(item).get(item["pk"]) == item  # nothing written


@pytest.mark.parametrize("version", sorted(formats.WRITTEN["guard"]))
def test_guard_properties_of_every_version_are_read(version: str) -> None:
    """CloudFormation hands a guard the properties an earlier release wrote when it rolls a stack back."""
    for properties in samples("guard")[version]:
        assert formats.guard_properties(properties) is properties
        for target in properties["Targets"]:
            assert {"Id", "Version", "Field", "Value"} <= set(target)
            assert bool(target.get("Pinned")) == ("Location" in target)


def test_guard_properties_of_a_newer_release_fail_the_deploy_saying_so() -> None:
    with pytest.raises(formats.UnknownFormat, match="written by a newer hyperwarm"):
        deploy_guard.check({**samples("guard")[formats.GUARD][0], "Format": "hyperwarm.refresh.guard/v3"})


@mock_aws
@pytest.mark.parametrize("version", sorted(formats.WRITTEN["deployed"]))
def test_the_deploy_guard_reads_deploy_records_of_every_version(version: str) -> None:
    """A record an earlier release's guard wrote still orders the next deploy: its history holds."""
    (item,) = samples("deployed")[version]
    table = pk_table("deployed-versions")  # the guard's region: the default one
    table.put_item(Item=item)
    target = {"Id": item["pk"].removeprefix("target#"), "Field": "f", "Value": "{version}", "Recorded": True}
    properties = {"Format": formats.GUARD, "DeployedTable": "deployed-versions"}
    (problem,) = deploy_guard.check({**properties, "Targets": [{**target, "Version": item["history"][0]}]})
    assert f"is at {item['current_version']} (set by the last deploy)" in problem
    assert deploy_guard.check({**properties, "Targets": [{**target, "Version": item["current_version"]}]}) == []
    table.put_item(Item={**item, "format": "hyperwarm.refresh.deployed/v9"})
    with pytest.raises(formats.UnknownFormat, match="written by a newer hyperwarm"):
        deploy_guard.check({**properties, "Targets": [{**target, "Version": item["current_version"]}]})


def test_manifests_of_every_version_are_read() -> None:
    for version, documents in samples("manifest").items():
        for document in documents:
            assert [f.path for f in manifest.parse(json.dumps(document).encode())][0] == "config.json", version


@mock_aws
@pytest.mark.parametrize("version", sorted(formats.WRITTEN["quota"]))
def test_dead_letter_quota_items_of_every_version_are_counted_on_or_left_alone(version: str) -> None:
    """A count of this release's format still holds in its hour: at its limit, no letter more; below it, one more
    is counted in. A first-version count (one key per hour, which a table writer could write ahead of its hour) is
    not read: it is left to its TTL and the hour's count starts over."""
    from hyperwarm.functions.cache_refresh import quota

    table = pk_table("state", REGION)
    for item in samples("quota")[version]:
        table.put_item(Item=item)
        if version == formats.QUOTA:
            prefix, now = item["pk"].removeprefix("letters#"), int(item["hour"]) * quota.HOUR + 10
            assert quota.take(table, prefix, now, limit=int(item["letters"])) is False
            assert quota.take(table, prefix, now, limit=int(item["letters"]) + 1) is True
            assert table.get_item(Key={"pk": item["pk"]})["Item"]["letters"] == item["letters"] + 1
        else:
            prefix, hour = item["pk"].removeprefix("letters#").rsplit("#", 1)
            assert quota.take(table, prefix, int(hour) * quota.HOUR + 10, limit=1) is True
            assert table.get_item(Key={"pk": item["pk"]})["Item"] == item


@mock_aws
def test_a_quota_item_of_a_newer_release_is_left_alone_and_counts_nothing() -> None:
    from hyperwarm.functions.cache_refresh import quota

    table = pk_table("state", REGION)
    item = {**samples("quota")[formats.QUOTA][0], "format": "hyperwarm.refresh.letter-quota/v3", "letters": 1}
    table.put_item(Item=item)
    with pytest.raises(formats.UnknownFormat, match="written by a newer hyperwarm"):
        quota.take(table, item["pk"].removeprefix("letters#"), int(item["hour"]) * quota.HOUR, limit=20)
    assert table.get_item(Key={"pk": item["pk"]})["Item"] == item
