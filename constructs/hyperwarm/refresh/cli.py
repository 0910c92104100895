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
instead of writing a second letter.

**What a message can steer.** Nothing but the event it holds, which the function checks as it checks any event.
Each message is read on its own: one that is not JSON, nests deeper than :data:`MAX_DEPTH` levels, holds an event
larger than EventBridge's largest (:data:`MAX_EVENT_BYTES`) or none of the shapes above is reported ``unreadable``
and left in the queue, and the run goes on. A letter's identity is derived from its event (the envelope's: the
manifest object's bucket, key and sequencer and the reason, as :func:`~hyperwarm.functions.cache_refresh.letters.
letter_id`; with a digest of the event itself), never from the message's own ``letter_id``: an envelope whose
``letter_id`` is not the one its event and reason give is reported ``tampered`` and left (the queue accepts
letters from the refresh roles alone; a tampered one was written, or changed, by something else: look at it
before deleting it by hand). Envelopes of the format before the rename are not checked: their ids were derived
three ways over its two days.

**When a letter is done.** It is deleted only when the function's answer says nothing is left to do
(:func:`settled`): the version was applied or handed to what applies it (``refreshed``, an endpoint update
``started``, ``queued`` behind a rollout that rolls it when it ends), the version already serves or was superseded
by a newer one (a skip for ``duplicate`` or ``older-version`` on every target), a state change found its rollout
settled or still running (the reconciliation ends it), or the failure moved into a new letter
(``dead-lettered``, ``rollout-failed``). Every other answer leaves it, visible again at once: a failure
(``failed-again``), a function in dry run (``dry-run``), and a skip that does not settle it (``skipped``: an
event the function does not take, such as a prefix, bucket or endpoint no longer configured, is not a success;
a person decides, then deletes it by hand).

Letters are idempotent: one failure written twice (a crash between the letter and the state write that
marks it sent, a move back reported by both the deploy guard and the function) has one identity. A replay run
invokes each identity once: a later message with an identity already settled in the run is deleted without an
invocation, one whose first replay did not settle it stays. ``--dry-run`` lists what would be replayed (key,
reason, version, targets) and changes nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from hyperwarm._internal.aws_cli import run_aws
from hyperwarm.functions.cache_refresh import formats, letters
from hyperwarm.functions.cache_refresh.contract import REPLAY_KEY, endpoint_target_id
from hyperwarm.refresh import reset
from hyperwarm.refresh.reset import add_record_arguments

SCAN_VISIBILITY = 120
"""Seconds a scanned message stays hidden; the scan releases the ones it does not replay at the end."""
REPLAY_VISIBILITY = 960
"""Lambda's longest timeout (900 s) and a margin."""
MAX_SCAN = 1000
"""Messages ``--message-id`` looks at before giving up (a bound, not a guess: it is reported)."""
MAX_DEPTH = 16
"""Deepest nesting of a message: the function takes events nesting at most 12 levels, in a letter or record a
level deeper; deeper is a bomb, read by no one."""
MAX_EVENT_BYTES = 262_144
"""EventBridge's largest event (256 KB): a message holding a larger one holds no event EventBridge delivered."""
SETTLED = frozenset({"refreshed", "queued", "settled", "rollout-failed", "start-abandoned", "dead-lettered"})
"""The function's answers (``status``) after which a letter has nothing left to do (see the module's docstring)."""
SETTLED_SKIPS = frozenset({"duplicate", "older-version", "no-rollout", "in-progress", "endpoint-busy"})
"""Reasons of a skipped or ignored answer that settle a letter: the version serves or a newer one does, a state
change whose rollout ended, runs on, or is someone else's (the reconciliation ends it)."""
_SOURCES = ("aws.s3", "aws.sagemaker")
_QUEUE_URL = re.compile(r"^https://sqs[.-](?P<region>[a-z]{2}(-[a-z]+)+-\d)\.")
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')


class Unreadable(ValueError):
    """A message replay does not invoke; ``status`` is ``unreadable`` or ``tampered``."""

    def __init__(self, message: str, status: str = "unreadable") -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Letter:
    """A dead-letter queue message as replay reads it."""

    event: dict[str, Any]
    """The event to invoke the function with."""
    identity: str
    """Derived from the event (and an envelope's reason), never from the message's own fields."""
    reason: str | None
    targets: list[str]

    def summary(self) -> dict[str, Any]:
        """What ``--dry-run`` lists: the manifest key and its version, the reason and the targets."""
        key = letters.manifest_key(self.event)
        parts = key.split("/") if isinstance(key, str) else []
        return {"key": key, "version": parts[-2] if len(parts) >= 3 else None, "reason": self.reason,
                "targets": self.targets}


def _nesting(body: str) -> int:
    """How deep a JSON text nests, read without parsing it (so a bomb never reaches the parser)."""
    skeleton = _STRINGS.sub("", body)
    return max(accumulate((c in "[{") - (c in "]}") for c in skeleton), default=0)


def read(body: str) -> Letter:
    """The letter in a DLQ message body, whichever path dead-lettered it; :class:`Unreadable` otherwise."""
    if _nesting(body) > MAX_DEPTH:
        raise Unreadable(f"nests deeper than {MAX_DEPTH} levels")
    try:
        doc = json.loads(body)
        envelope = formats.is_letter(doc)
    except (ValueError, RecursionError) as exc:  # not JSON, a number too long to read, a newer release's letter
        raise Unreadable(f"not a letter this hyperwarm reads: {exc}") from None
    if envelope:
        return _envelope(doc)
    record = isinstance(doc, dict) and isinstance(doc.get("requestPayload"), dict)  # on-failure destination record
    event = {k: v for k, v in doc["requestPayload"].items() if k != REPLAY_KEY} if record else doc
    if not isinstance(event, dict) or event.get("source") not in _SOURCES:
        raise Unreadable("message holds no cache refresh event")
    context = doc.get("requestContext") if record else None
    condition = context.get("condition") if isinstance(context, dict) else None
    detail = event.get("detail")
    endpoint = detail.get("EndpointName") if isinstance(detail, dict) and event["source"] == "aws.sagemaker" else None
    return Letter(event, "event:" + _digest(event),
                  (condition if isinstance(condition, str) else "on-failure") if record else "undelivered",
                  [endpoint_target_id(endpoint)] if isinstance(endpoint, str) else [])


def _envelope(doc: dict[str, Any]) -> Letter:
    event, reason = doc.get("event"), doc.get("reason")
    if not (isinstance(event, dict) and event.get("source") == "aws.s3" and isinstance(reason, str)):
        raise Unreadable("a letter without an S3 event and a reason")
    derived = letters.event_letter_id(event, reason)
    if doc["format"] == formats.LETTER and doc.get("letter_id") != derived:
        raise Unreadable(f"letter_id {doc.get('letter_id')!r} is not the id of its event and reason ({derived}): "
                         "written or changed by something other than hyperwarm", "tampered")
    targets = doc.get("targets")
    return Letter(event, f"letter:{derived}:{_digest(event)}", reason,
                  [t for t in targets if isinstance(t, str)] if isinstance(targets, list) else [])


def _digest(event: dict[str, Any]) -> str:
    """The event without what differs between deliveries of one event or copies of one letter (id, time)."""
    if len(json.dumps(event)) > MAX_EVENT_BYTES:
        raise Unreadable(f"holds an event larger than EventBridge's largest ({MAX_EVENT_BYTES} bytes)")
    text = json.dumps({k: v for k, v in event.items() if k not in ("id", "time")}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def original_event(body: str) -> dict[str, Any]:
    """The event inside a DLQ message body, whichever path dead-lettered it (:func:`read`)."""
    return read(body).event


def settled(answer: Any) -> bool:
    """True when the function's answer to a replayed letter leaves nothing to do: a :data:`SETTLED` status, or a
    skip whose reasons (every target's, else the answer's) are all :data:`SETTLED_SKIPS`."""
    if not isinstance(answer, dict):
        return False
    if answer.get("status") in SETTLED:
        return True
    if answer.get("status") not in ("skipped", "ignored"):
        return False
    targets = answer.get("targets")
    reasons = [t.get("reason") if isinstance(t, dict) else None for t in targets.values()] \
        if isinstance(targets, dict) and targets else [answer.get("reason")]
    return all(r in SETTLED_SKIPS for r in reasons)


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


def _answer(response: dict[str, Any]) -> Any:
    """The function's answer (None when it raised or answered what is not JSON)."""
    try:
        return json.loads(response["Payload"].read() or b"null")
    except (ValueError, RecursionError):
        return None


def _replay_one(sqs: Any, lambda_client: Any, queue_url: str, function_name: str, message: dict[str, Any],
                letter: Letter) -> dict[str, Any]:
    # Hidden for as long as the (synchronous) invocation may run: no one else replays it meanwhile.
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"],
                                  VisibilityTimeout=REPLAY_VISIBILITY)
    payload_in = {**letter.event, REPLAY_KEY: {"message_id": message["MessageId"]}}
    response = lambda_client.invoke(FunctionName=function_name, InvocationType="RequestResponse",
                                    Payload=json.dumps(payload_in).encode())
    answer = _answer(response)
    status = answer.get("status") if isinstance(answer, dict) else None
    if "FunctionError" not in response and settled(answer):
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        outcome = "replayed"
    else:
        _release(sqs, queue_url, [message])  # the letter stays, visible again; the function wrote no new one
        outcome = ("failed-again" if "FunctionError" in response or status not in ("dry-run", "skipped", "ignored")
                   else "dry-run" if status == "dry-run" else "skipped")
    return {"message_id": message["MessageId"], "status": outcome, "result": answer}


def replay(queue_url: str, function_name: str, message_id: str | None = None, *, sqs: Any = None,
           lambda_client: Any = None, max_messages: int = 10, dry_run: bool = False) -> list[dict[str, Any]]:
    """Invoke ``function_name`` with each selected letter's event; one result per letter looked at.

    ``message_id``: that letter only, wherever it is in the queue (up to :data:`MAX_SCAN` messages are
    looked at; the others are made visible again afterwards). Otherwise up to ``max_messages`` letters.
    ``dry_run``: list what would be replayed (``would-replay`` with its key, reason, version and targets);
    nothing is invoked or deleted, and every message is visible again at once.
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
    first: dict[str, dict[str, Any]] = {}  # letter identity -> result of its replay in this run
    try:
        for message in chosen:
            try:
                letter = read(message["Body"])
            except Unreadable as exc:
                _release(sqs, queue_url, [message])
                results.append({"message_id": message["MessageId"], "status": exc.status, "error": str(exc)})
                continue
            earlier = first.get(letter.identity)
            if earlier is not None and earlier["status"] == "replayed" and not dry_run:  # the same letter, done
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
                result = {"message_id": message["MessageId"], "status": "replayed"}
            elif earlier is not None or dry_run:  # its first replay left it (it stays, like that one), or a dry run
                _release(sqs, queue_url, [message])
                result = {"message_id": message["MessageId"], "status": earlier["status"] if earlier else
                          "would-replay", **({} if earlier else letter.summary())}
            else:
                result = _replay_one(sqs, lambda_client, queue_url, function_name, message, letter)
            if earlier is not None:
                result["duplicate_of"] = earlier["message_id"]
            else:
                first[letter.identity] = result
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
        results = replay(args.queue_url, args.function_name, args.message_id, dry_run=args.dry_run)
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
    return 0 if all(r["status"] == ("would-replay" if args.dry_run else "replayed") for r in results) else 1


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
    record, code = run_aws("hyperwarm refresh abort", lambda: abort(
        args.table, args.target, args.function_name, args.state_machine_arn, region=args.region), failed=(RuntimeError,))
    if record is None:
        return code
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
    rp.add_argument("--dry-run", action="store_true",
                    help="list what would be replayed (key, reason, version, targets); invoke and delete nothing")
    rp.set_defaults(func=_run)
    ab = commands.add_parser("abort", help="end a warm version change in flight: the old version keeps serving and "
                                           "the staged copy is dropped")
    add_record_arguments(ab)
    ab.add_argument("--function-name", required=True, help="the refresh function (RefreshFunctionName output)")
    ab.add_argument("--state-machine-arn", help="the rollout workflow (RolloutStateMachineArn output): its execution "
                                                "is stopped first (default: its next step applies the abort)")
    ab.add_argument("--region", default=None, help="the environment's region (default: boto3's)")
    ab.set_defaults(func=_run_abort)
    reset.add_parser(commands)
