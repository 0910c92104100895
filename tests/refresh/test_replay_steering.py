"""``hyperwarm refresh replay`` driven as an attacker would: crafted messages in the dead-letter queue (nested
bombs, malformed and huge bodies, forged letter ids, answers that skip) never crash the run, never delete a real
letter, and never count a skip as done; ``--dry-run`` changes nothing."""

from __future__ import annotations

import io
import json
from typing import Any

import boto3
import pytest
from moto import mock_aws
from refresh_world import PREFIX, s3_event
from test_replay_and_properties import InvokeHandler, queue_counts

from hyperwarm.functions.cache_refresh import handler, letters
from hyperwarm.refresh import cli as refresh_cli

REGION = "us-west-2"


class AnsweringLambda:
    """The refresh function as replay invokes it: records each event and gives one answer."""

    def __init__(self, answer: Any = None, error: bool = False) -> None:
        self.answer, self.error, self.events = answer or {"status": "refreshed"}, error, []

    def invoke(self, **request: Any) -> dict[str, Any]:
        self.events.append(json.loads(request["Payload"]))
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(self.answer).encode()),
                **({"FunctionError": "Unhandled"} if self.error else {})}


class NoLambda:
    def invoke(self, **request: Any) -> dict[str, Any]:
        raise AssertionError("a dry run invokes nothing")


class NoWait:
    """An SQS client whose receives do not long-poll (moto waits the whole WaitTimeSeconds on an empty queue)."""

    def __init__(self, sqs: Any) -> None:
        self.sqs = sqs

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sqs, name)

    def receive_message(self, **request: Any) -> dict[str, Any]:
        return self.sqs.receive_message(**{**request, "WaitTimeSeconds": 0})


@pytest.fixture
def queue():
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        yield NoWait(sqs), sqs.create_queue(QueueName="dlq")["QueueUrl"]


def send(queue, body: str | dict[str, Any]) -> str:
    sqs, url = queue
    return sqs.send_message(QueueUrl=url, MessageBody=body if isinstance(body, str) else json.dumps(body))["MessageId"]


def letter(version: str = "v2", reason: str = "manifest-mismatch", sequencer: str = "0A") -> dict[str, Any]:
    return letters.envelope(s3_event(f"{PREFIX}/{version}/manifest.json", sequencer), reason, "m",
                            ["endpoint:llama-prod"], request_id="r")


def visible(queue) -> list[str]:
    """The bodies of the visible messages (looked at, then visible again)."""
    sqs, url = queue
    found: list[dict[str, Any]] = []
    while page := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30).get("Messages"):
        found += page
    refresh_cli._release(sqs, url, found)
    return [m["Body"] for m in found]


BOMBS = {
    "nested lists": "[" * 200_000 + "]" * 200_000,  # json.loads alone raises RecursionError on it
    "nested objects": '{"a":' * 5_000 + "1" + "}" * 5_000,
    "nested event in a letter": json.dumps({**letter(), "event": {"source": "aws.s3", "detail": json.loads(
        "[" * 30 + "]" * 30)}}),
    "malformed": '{"format": "hyperwarm.refresh.hook-dlq/v1", "event": ',
    "a number too long to read": '{"source": "aws.s3", "n": 1' + "0" * 5_000 + "}",
    "huge event": json.dumps({"source": "aws.s3", "detail": {"pad": "x" * 300_000}}),
    "no event": json.dumps({"hello": "world"}),
    "a list": json.dumps([1, 2, 3]),
    "another source": json.dumps({"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}),
    "a record without its event": json.dumps({"requestContext": {"condition": "RetriesExhausted"},
                                              "requestPayload": {"source": "evil"}}),
    "a letter without a reason": json.dumps({k: v for k, v in letter().items() if k != "reason"}),
}


def test_bombs_malformed_and_huge_messages_are_reported_and_left_while_the_run_goes_on(queue) -> None:
    for body in BOMBS.values():
        send(queue, body)
    good = letter()
    send(queue, good)
    function = AnsweringLambda()
    results = refresh_cli.replay(queue[1], "fn", sqs=queue[0], lambda_client=function, max_messages=20)
    statuses = sorted(r["status"] for r in results)
    assert statuses == ["replayed"] + ["unreadable"] * len(BOMBS)
    assert [e["detail"] for e in function.events] == [good["event"]["detail"]]  # only the good one was invoked
    assert sorted(visible(queue)) == sorted(BOMBS.values())  # every bad one is still there, visible at once
    nested = next(r["error"] for r in results if "deeper" in r.get("error", ""))
    assert f"nests deeper than {refresh_cli.MAX_DEPTH} levels" in nested


def test_the_nesting_bound_is_read_without_parsing_and_ignores_brackets_in_strings() -> None:
    assert refresh_cli._nesting('{"a": "[[[[[[[[[[[[[[[[[[[[[[[[", "b": [1, {"c": "\\"]]]"}]}') == 3
    with pytest.raises(refresh_cli.Unreadable, match="deeper"):
        refresh_cli.read("[" * 200_000)


@pytest.mark.parametrize("answer, done", [
    ({"status": "refreshed", "targets": {"a": {"status": "started"}}}, True),
    ({"status": "queued", "targets": {"a": {"status": "queued", "reason": "target-busy"}}}, True),
    ({"status": "skipped", "targets": {"a": {"status": "skipped", "reason": "duplicate"},
                                       "b": {"status": "skipped", "reason": "older-version"}}}, True),
    ({"status": "ignored", "reason": "no-rollout"}, True),  # a state change whose rollout was settled
    ({"status": "dead-lettered", "reason": "moved-back"}, True),  # the failure is in a new letter
    ({"status": "skipped", "targets": {"a": {"status": "skipped", "reason": "duplicate"},
                                       "b": {"status": "skipped", "reason": "already-dead-lettered"}}}, False),
    ({"status": "skipped", "reason": "unknown-prefix"}, False),
    ({"status": "skipped", "reason": "unknown-bucket"}, False),
    ({"status": "skipped", "reason": "malformed-event"}, False),
    ({"status": "ignored", "reason": "unknown-endpoint"}, False),
    ({"status": "skipped"}, False),
    ({"status": "skipped", "targets": {}}, False),
    ({"status": "failed", "reason": "manifest-mismatch"}, False),
    ({"status": "dry-run"}, False),
    ({"status": "something a newer function answers"}, False),
    ("refreshed", False),
    (None, False),
])
def test_only_answers_that_leave_nothing_to_do_settle_a_letter(answer: Any, done: bool) -> None:
    assert refresh_cli.settled(answer) is done


@pytest.mark.parametrize("answer", [{"status": "skipped", "reason": "unknown-prefix"},
                                    {"status": "ignored", "reason": "unknown-endpoint"}])
def test_a_skipped_answer_is_not_a_success_and_leaves_the_letter(queue, answer) -> None:
    send(queue, letter())
    (result,) = refresh_cli.replay(queue[1], "fn", sqs=queue[0], lambda_client=AnsweringLambda(answer))
    assert (result["status"], result["result"]) == ("skipped", answer)
    assert len(visible(queue)) == 1


def test_a_letter_of_a_prefix_no_longer_refreshed_stays_after_the_real_function_skips_it(world, context) -> None:
    """A crafted (or stale) letter naming a prefix the function does not refresh: it answers skipped
    (unknown-prefix), which used to delete the letter as replayed."""
    event = s3_event("models/other/v9/manifest.json", "0B")
    world.sqs.send_message(QueueUrl=world.dlq_url, MessageBody=json.dumps(
        letters.envelope(event, "manifest-mismatch", "m", [], request_id="r")))
    (result,) = refresh_cli.replay(world.dlq_url, "fn", sqs=NoWait(world.sqs), lambda_client=InvokeHandler(context))
    assert (result["status"], result["result"]["reason"]) == ("skipped", "unknown-prefix")
    assert queue_counts(world) == (1, 0)


def test_a_letter_whose_version_now_serves_is_done(world, context) -> None:
    """v2's first upload was incomplete (dead-lettered); it was uploaded again, whole, and serves: replaying the old
    letter answers skipped (duplicate) on every target, which settles it."""
    handler.lambda_handler(world.upload("v2", listed={"extra.bin": 3}), context)
    handler.lambda_handler(world.upload("v2"), context)  # the fixed upload: a new event, v2 serves
    assert world.served_hyperpod() == f"{PREFIX}/v2"
    (result,) = refresh_cli.replay(world.dlq_url, "fn", sqs=NoWait(world.sqs), lambda_client=InvokeHandler(context))
    assert result["status"] == "replayed"
    assert {t["reason"] for t in result["result"]["targets"].values()} == {"duplicate"}
    assert queue_counts(world) == (0, 0)


def test_a_forged_letter_id_is_reported_tampered_and_never_deletes_the_real_letter(queue) -> None:
    """The forgery claims the real letter's id for another event: replay used to invoke the forgery and then
    delete the real letter as its duplicate, unseen."""
    real = letter("v2")
    forged = {**letter("v3"), "letter_id": real["letter_id"]}
    edited = {**real, "event": {**real["event"], "detail": {**real["event"]["detail"], "object": {
        **real["event"]["detail"]["object"], "key": f"{PREFIX}/v9/manifest.json"}}}}  # the id kept, the event changed
    forged_id, edited_id = send(queue, forged), send(queue, edited)
    send(queue, real)
    function = AnsweringLambda()
    results = {r["message_id"]: r for r in refresh_cli.replay(queue[1], "fn", sqs=queue[0], lambda_client=function)}
    assert results[forged_id]["status"] == results[edited_id]["status"] == "tampered"
    assert "is not the id of its event and reason" in results[forged_id]["error"]
    assert [e["detail"]["object"]["key"] for e in function.events] == [f"{PREFIX}/v2/manifest.json"]
    assert sorted(json.loads(b)["event"]["detail"]["object"]["key"] for b in visible(queue)) == [
        f"{PREFIX}/v3/manifest.json", f"{PREFIX}/v9/manifest.json"]


def test_a_letter_without_its_id_is_tampered_and_the_message_attribute_is_never_read(queue) -> None:
    sqs, url = queue
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({k: v for k, v in letter().items() if k != "letter_id"}),
                     MessageAttributes={"letter-id": {"DataType": "String", "StringValue": letter()["letter_id"]}})
    (result,) = refresh_cli.replay(url, "fn", sqs=sqs, lambda_client=AnsweringLambda())
    assert result["status"] == "tampered"


def test_a_letter_with_the_same_identity_but_another_event_is_not_deleted_as_its_duplicate(queue) -> None:
    """Same manifest object, sequencer and reason (so the same derived id, stated correctly), another event
    (a version-id the real upload never had): both are invoked, neither is deleted unseen."""
    real = letter("v2")
    other_event = {**real["event"], "detail": {**real["event"]["detail"], "object": {
        **real["event"]["detail"]["object"], "version-id": "an-older-object"}}}
    other = letters.envelope(other_event, real["reason"], "m", [], request_id="r")
    assert other["letter_id"] == real["letter_id"]
    send(queue, other)
    send(queue, real)
    function = AnsweringLambda()
    results = refresh_cli.replay(queue[1], "fn", sqs=queue[0], lambda_client=function)
    assert [r["status"] for r in results] == ["replayed", "replayed"] and len(function.events) == 2
    assert not any("duplicate_of" in r for r in results)


def test_copies_of_one_letter_are_invoked_once_and_deleted_only_when_the_first_is_done(queue) -> None:
    for _ in range(2):
        send(queue, letter())
    skipped = AnsweringLambda({"status": "skipped", "reason": "unknown-prefix"})
    first, copy = refresh_cli.replay(queue[1], "fn", sqs=queue[0], lambda_client=skipped)
    assert (first["status"], copy["status"], copy["duplicate_of"]) == ("skipped", "skipped", first["message_id"])
    assert len(skipped.events) == 1 and len(visible(queue)) == 2
    done = AnsweringLambda()
    assert [r["status"] for r in refresh_cli.replay(queue[1], "fn", sqs=queue[0], lambda_client=done)] == \
        ["replayed", "replayed"]
    assert len(done.events) == 1 and visible(queue) == []


def test_dry_run_lists_what_would_be_replayed_and_changes_nothing(queue) -> None:
    state = {"version": "0", "id": "s1", "source": "aws.sagemaker", "detail-type": "SageMaker Endpoint State Change",
             "detail": {"EndpointName": "llama-prod", "EndpointStatus": "InService"}}
    record = {"version": "1.0", "requestContext": {"condition": "RetriesExhausted"}, "requestPayload": state}
    bodies = [letter("v2"), letter("v2"), record, s3_event(f"{PREFIX}/v4/manifest.json", "0C"), "[" * 100]
    ids = [send(queue, b if isinstance(b, str) else json.dumps(b)) for b in bodies]
    results = {r["message_id"]: r for r in refresh_cli.replay(queue[1], "fn", sqs=queue[0], lambda_client=NoLambda(),
                                                               dry_run=True)}
    assert {k: results[ids[0]][k] for k in ("status", "key", "version", "reason", "targets")} == {
        "status": "would-replay", "key": f"{PREFIX}/v2/manifest.json", "version": "v2",
        "reason": "manifest-mismatch", "targets": ["endpoint:llama-prod"]}
    assert (results[ids[1]]["status"], results[ids[1]]["duplicate_of"]) == ("would-replay", ids[0])
    assert {k: results[ids[2]][k] for k in ("key", "reason", "targets")} == {
        "key": None, "reason": "RetriesExhausted", "targets": ["endpoint:llama-prod"]}
    assert (results[ids[3]]["version"], results[ids[3]]["reason"]) == ("v4", "undelivered")
    assert results[ids[4]]["status"] == "unreadable"
    assert len(visible(queue)) == 5  # nothing deleted, everything visible again at once


def test_replay_cli_takes_dry_run() -> None:
    from hyperwarm.cli import build_parser
    args = build_parser("refresh").parse_args(["refresh", "replay", "--queue-url", "https://q", "--function-name", "f",
                                               "--dry-run"])
    assert args.dry_run is True


def test_an_answer_that_is_not_json_leaves_the_letter(queue) -> None:
    class Garbled:
        def invoke(self, **request: Any) -> dict[str, Any]:
            return {"StatusCode": 200, "Payload": io.BytesIO(b"[" * 100_000)}

    send(queue, letter())
    (result,) = refresh_cli.replay(queue[1], "fn", sqs=queue[0], lambda_client=Garbled())
    assert result["status"] == "failed-again" and len(visible(queue)) == 1

