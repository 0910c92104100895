"""``hyperwarm refresh replay``: re-drive dead-lettered cache refresh events; ``hyperwarm refresh abort``: end a warm
version change in flight.

A letter in the refresh dead-letter queue is one of:

- the function's own envelope (a failure it decided: ``event`` inside), in any format ever written
  (``hyperwarm.refresh.hook-dlq/v1``, and ``hyperwarm.refresh-dlq/v1`` from before its rename: see
  :mod:`hyperwarm.functions.cache_refresh.formats`); a newer release's is reported unreadable, saying so;
- a Lambda asynchronous-invocation record from the functions' on-failure destination
  (``requestContext.condition`` e.g. ``RetriesExhausted``; the original event in ``requestPayload``);
- a raw EventBridge event the rule could not deliver (S3 "Object Created" or SageMaker "Endpoint
  State Change").

Each is invoked synchronously on the refresh function (its handler takes both event kinds) with the
top-level key ``hyperwarm-replay``: the function then reports a repeated failure in its answer
instead of writing a second letter. The letter is deleted only after the replay succeeded; after a
failure, or when the function runs in dry run, it stays and becomes visible again at once.

Letters are idempotent: the function's envelope carries ``letter_id`` (the same for the same failure
written twice, e.g. after a crash between the letter and the state write that marks it sent, or a
move back reported by both the deploy guard and the function); the other shapes are keyed by their
event's EventBridge ``id``. A replay run invokes each key once: a later message with a key already
replayed in the run is deleted without an invocation, one whose first replay failed stays.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any

from hyperwarm.functions.cache_refresh import formats
from hyperwarm.functions.cache_refresh.contract import REPLAY_KEY

SCAN_VISIBILITY = 120
"""Seconds a scanned message stays hidden; the scan releases the ones it does not replay at the end."""
REPLAY_VISIBILITY = 960
"""Lambda's longest timeout (900 s) and a margin."""
MAX_SCAN = 1000
"""Messages ``--message-id`` looks at before giving up (a bound, not a guess: it is reported)."""
_SOURCES = ("aws.s3", "aws.sagemaker")
_QUEUE_URL = re.compile(r"^https://sqs[.-](?P<region>[a-z]{2}(-[a-z]+)+-\d)\.")


def original_event(body: str) -> dict[str, Any]:
    """The EventBridge event inside a DLQ message body, whichever path dead-lettered it."""
    doc = json.loads(body)
    if formats.is_letter(doc) and isinstance(doc.get("event"), dict):
        event: dict[str, Any] = doc["event"]
        return event
    if isinstance(doc, dict) and isinstance(doc.get("requestPayload"), dict):  # on-failure destination record
        return {k: v for k, v in doc["requestPayload"].items() if k != REPLAY_KEY}
    if isinstance(doc, dict) and doc.get("source") in _SOURCES:  # EventBridge target DLQ: the event itself
        return doc
    raise ValueError("message holds no cache refresh event")


def letter_key(body: str) -> str | None:
    """What makes two messages the same letter: the envelope's ``letter_id``, else the event's ``id``."""
    doc = json.loads(body)
    if formats.is_letter(doc) and isinstance(doc.get("letter_id"), str):
        return "letter:" + str(doc["letter_id"])
    event_id = original_event(body).get("id")
    return f"event:{event_id}" if isinstance(event_id, str) else None


def _receive(sqs: Any, queue_url: str, count: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = sqs.receive_message(
        QueueUrl=queue_url, MaxNumberOfMessages=min(10, count), VisibilityTimeout=SCAN_VISIBILITY,
        WaitTimeSeconds=1).get("Messages", [])
    return messages


def _release(sqs: Any, queue_url: str, messages: list[dict[str, Any]]) -> None:
    """Make scanned messages visible again now (not after the scan's visibility timeout)."""
    for i in range(0, len(messages), 10):
        entries = [{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                   for n, m in enumerate(messages[i:i + 10])]
        sqs.change_message_visibility_batch(QueueUrl=queue_url, Entries=entries)


def _select(sqs: Any, queue_url: str, message_id: str | None, limit: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(messages to replay, messages scanned past): pages through the queue, bounded by MAX_SCAN."""
    chosen: list[dict[str, Any]] = []
    passed: list[dict[str, Any]] = []
    seen: set[str] = set()
    while len(seen) < MAX_SCAN and len(chosen) < (1 if message_id else limit):
        page = _receive(sqs, queue_url, 10 if message_id else limit - len(chosen))
        fresh = [m for m in page if m["MessageId"] not in seen]
        if not fresh:
            break
        for message in fresh:
            seen.add(message["MessageId"])
            (chosen if message_id in (None, message["MessageId"]) else passed).append(message)
    return chosen, passed


def _replay_one(sqs: Any, lambda_client: Any, queue_url: str, function_name: str,
                message: dict[str, Any]) -> dict[str, Any]:
    try:
        event = original_event(message["Body"])
    except (ValueError, KeyError) as exc:
        _release(sqs, queue_url, [message])
        return {"message_id": message["MessageId"], "status": "unreadable", "error": str(exc)}
    # Hidden for as long as the (synchronous) invocation may run: no one else replays it meanwhile.
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"],
                                  VisibilityTimeout=REPLAY_VISIBILITY)
    payload_in = {**event, REPLAY_KEY: {"message_id": message["MessageId"]}}
    response = lambda_client.invoke(FunctionName=function_name, InvocationType="RequestResponse",
                                    Payload=json.dumps(payload_in).encode())
    payload = json.loads(response["Payload"].read() or b"null")
    status = payload.get("status") if isinstance(payload, dict) else None
    ok = "FunctionError" not in response and status not in ("failed", "dry-run")  # a dry run did nothing
    if ok:
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    else:
        _release(sqs, queue_url, [message])  # the letter stays, visible again; the function wrote no new one
    outcome = "replayed" if ok else "dry-run" if status == "dry-run" else "failed-again"
    return {"message_id": message["MessageId"], "status": outcome, "result": payload}


def replay(queue_url: str, function_name: str, message_id: str | None = None, *, sqs: Any = None,
           lambda_client: Any = None, max_messages: int = 10) -> list[dict[str, Any]]:
    """Invoke ``function_name`` with each selected letter's event; one result per letter replayed.

    ``message_id``: that letter only, wherever it is in the queue (up to :data:`MAX_SCAN` messages are
    looked at; the others are made visible again afterwards). Otherwise up to ``max_messages`` letters.
    """
    import boto3
    from botocore.config import Config

    region = queue_region(queue_url)
    sqs = sqs or boto3.client("sqs", region_name=region)
    # A replay runs as long as a refresh (up to Lambda's 900 s): botocore's 60 s read timeout and its
    # retries would invoke the same letter again while the first invocation still runs.
    lambda_client = lambda_client or boto3.client("lambda", region_name=region, config=Config(
        read_timeout=REPLAY_VISIBILITY, retries={"total_max_attempts": 1}))
    chosen, passed = _select(sqs, queue_url, message_id, max_messages)
    results: list[dict[str, Any]] = []
    first: dict[str, dict[str, Any]] = {}  # letter key -> result of its replay in this run
    try:
        for message in chosen:
            try:
                key = letter_key(message["Body"])
            except (ValueError, KeyError):
                key = None  # unreadable: _replay_one reports it
            earlier = first.get(key) if key else None
            if earlier is None:
                result = _replay_one(sqs, lambda_client, queue_url, function_name, message)
                if key:
                    first[key] = result
            elif earlier["status"] == "replayed":  # the same letter again: already done
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
                result = {"message_id": message["MessageId"], "status": "replayed",
                          "duplicate_of": earlier["message_id"]}
            else:  # its first replay failed: it stays, like that one
                _release(sqs, queue_url, [message])
                result = {"message_id": message["MessageId"], "status": earlier["status"],
                          "duplicate_of": earlier["message_id"]}
            results.append(result)
        return results
    finally:
        _release(sqs, queue_url, passed)


def queue_region(queue_url: str) -> str | None:
    """The region an SQS queue URL names (``https://sqs.<region>.amazonaws.com/<account>/<name>``).

    The function sits in the queue's region, so both clients use it: boto3 itself reads only
    AWS_DEFAULT_REGION or the profile, not AWS_REGION. ``None`` leaves it to boto3.
    """
    match = _QUEUE_URL.match(queue_url)
    if match:
        return match["region"]
    return os.environ.get("AWS_REGION") or None


def _run(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

    try:
        results = replay(args.queue_url, args.function_name, args.message_id)
    except NoRegionError:
        print(f"hyperwarm refresh replay: no AWS region: {args.queue_url!r} names none; give the queue URL the "
              "stack printed (https://sqs.<region>.amazonaws.com/...) or set AWS_REGION", file=sys.stderr)
        return 2
    except NoCredentialsError:
        print("hyperwarm refresh replay: no AWS credentials found; set AWS_PROFILE or run `aws configure` "
              "(the replay reads the dead-letter queue and invokes the refresh function)", file=sys.stderr)
        return 2
    except (ClientError, BotoCoreError) as exc:
        print(f"hyperwarm refresh replay: {exc}", file=sys.stderr)
        return 2
    for result in results:
        print(json.dumps(result, default=str))
    if not results:
        print(f"message {args.message_id} not found (looked at up to {MAX_SCAN})" if args.message_id else "no messages")
        return 1 if args.message_id else 0
    return 0 if all(r["status"] == "replayed" for r in results) else 1


def abort(table: str, target: str, function_name: str, state_machine_arn: str | None = None, *,
          region: str | None = None, clients: Any = None) -> dict[str, Any]:
    """End the warm version change of ``target`` that is in flight, with the old version serving and the staged copy
    dropped: the abort is recorded in the state table (who asked, when), the execution is stopped (so its next step
    does not race the cleanup; Step Functions counts it in ``ExecutionsAborted``), and the refresh function runs its
    reconciliation, which steps the rollout to the abort: the deployment pointed back where it was switched, the
    filler's list back to the serving version, the record marked ``aborted`` (no letter: a person asked). Without
    the workflow's ARN the execution's next step does the same. Returns the target's record as it ends."""
    from hyperwarm.functions.cache_refresh.state import DynamoStore, StateTable

    def make(service: str) -> Any:
        """A client (the state table: a boto3 resource, as the function reads it)."""
        if clients is not None:
            return clients(service)
        import boto3
        if service == "dynamodb":
            return boto3.resource(service, region_name=region)
        return boto3.client(service, region_name=region)

    who = make("sts").get_caller_identity()["Arn"]
    state = StateTable(DynamoStore(make("dynamodb"), table))
    item = state.request_abort(target, by=who)
    execution = item["pending"]["config"]
    if state_machine_arn:
        arn = state_machine_arn.replace(":stateMachine:", ":execution:") + f":{execution}"
        try:
            make("stepfunctions").stop_execution(executionArn=arn, cause=f"hyperwarm refresh abort by {who}")
        except make("stepfunctions").exceptions.ExecutionDoesNotExist:
            pass  # never started, or ended: the reconciliation settles the record all the same
    answer = make("lambda").invoke(FunctionName=function_name, Payload=json.dumps(_RECONCILE).encode())
    if answer.get("FunctionError"):
        raise RuntimeError(f"the reconciliation failed: {answer['Payload'].read()[:500]!r}; the abort is recorded "
                           "and the next scheduled run applies it")
    return state.get(target)


_RECONCILE = {"version": "0", "id": "hyperwarm-refresh-abort", "detail-type": "Scheduled Event", "source": "aws.events",
              "time": "2026-01-01T00:00:00Z", "detail": {}}
"""The scheduled event the refresh function reconciles on (its ``time`` is not read)."""


def _run_abort(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

    try:
        record = abort(args.table, args.target, args.function_name, args.state_machine_arn, region=args.region)
    except ValueError as exc:
        print(f"hyperwarm refresh abort: {exc}", file=sys.stderr)
        return 1
    except (NoRegionError, NoCredentialsError, ClientError, BotoCoreError, RuntimeError) as exc:
        print(f"hyperwarm refresh abort: {exc}", file=sys.stderr)
        return 2
    last = record.get("last_rollout") or {}
    if record.get("pending"):
        print(f"abort recorded; the rollout of {record['pending']['version']} is at {record['pending']['phase']} and "
              "ends at its next step (pointing back can take the switch's time)")
    else:
        print(f"rollout of {last.get('version')} ended {last.get('outcome')} ({last.get('reason')}); "
              f"serving {record.get('current_version') or 'the version first deployed'}")
    return 0


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("refresh", help="operate cache refreshes (replay dead-lettered events, abort a "
                                                   "warm version change)")
    commands = parser.add_subparsers(dest="refresh_command", metavar="COMMAND", required=True)
    rp = commands.add_parser("replay", help="re-drive dead-lettered refresh events through the refresh Lambda")
    rp.add_argument("--queue-url", required=True, help="URL of the refresh dead-letter queue")
    rp.add_argument("--message-id", help=f"replay only this message, found anywhere in the first {MAX_SCAN} "
                                         "(default: up to 10 messages)")
    rp.add_argument("--function-name", required=True,
                    help="refresh function name or ARN: the refresh stack's RefreshFunctionName output, "
                         "hyperwarm-<env>-cache-refresh (it replays both manifest and endpoint-state events)")
    rp.set_defaults(func=_run)
    ab = commands.add_parser("abort", help="end a warm version change in flight: the old version keeps serving and "
                                           "the staged copy is dropped")
    ab.add_argument("--target", required=True,
                    help="the target id, e.g. hyperpod:<cluster>/<namespace>/InferenceEndpointConfig/<model>")
    ab.add_argument("--table", required=True, help="the refresh state table, hyperwarm-<env>-cache-refresh-state")
    ab.add_argument("--function-name", required=True, help="the refresh function (RefreshFunctionName output)")
    ab.add_argument("--state-machine-arn", help="the rollout workflow (RolloutStateMachineArn output): its execution "
                                                "is stopped first (default: its next step applies the abort)")
    ab.add_argument("--region", default=None, help="the environment's region (default: boto3's)")
    ab.set_defaults(func=_run_abort)
    from hyperwarm.refresh import reset
    reset.add_parser(commands)
