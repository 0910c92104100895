"""Deploy-time guard: a deploy never moves a refresh target back to a version older than it serves.

After the refresh function moved a target to a new version, ``cdk.json`` still names the old one.
A later deploy that changes the target's resources would put the old version back. This function
backs a CloudFormation custom resource that every such resource depends on: it reads the refresh
function's state for each target and fails the deployment, before anything changed, when the
deploy sets a version older than the one served (or rolling out), naming the target, the served
version and the configuration field to update.

Resource properties (Create and Update; Delete always succeeds), format ``formats.GUARD`` (an earlier
release's, without ``Format``, is read too: CloudFormation sends those back during a rollback)::

    {"Format": "hyperwarm.refresh.guard/v2", "Table": "<state table name>", "DeployedTable": "<its own table>",
     "Targets": [{"Id": "<target id>", "Version": "<version this deploy sets>",
                  "Field": "<config field that sets it>", "Value": "<field value, with {version}>",
                  "Pinned": true, "Location": "<prefix>/<version>", "Recorded": true}]}

A ``Recorded`` target is one only a deploy moves (a Hugging Face revision, an FSx version folder, a JumpStart
model version: no refresh function records it): the guard keeps its record in ``DeployedTable`` itself and orders
its versions as :mod:`.deployed` says; ``Table`` is needed only for the others. A rollback puts back the record the
failed deploy replaced, so a recorded target is never reported moved back.

A table or item that does not exist means the target was never refreshed: the deploy proceeds.
A pinned target (``Pinned``, a deliberate rollback or pin) may be set to an older version: once every
check passed, the guard records it as the target's current version (``state.StateTable.pin``) before
anything moves it, so neither the guard nor the function takes the move for a move back; a target no
longer pinned keeps that version and follows refreshes from it. When the deploy rolls back, the record
its pins replaced is put back.
Every AWS read is retried with back-off (throttling, 5xx) within the function's time.
While CloudFormation rolls the stack back it sends an Update with the previous properties: the
guard then passes, since failing would leave the stack in UPDATE_ROLLBACK_FAILED (so it does when
the stack's state cannot be read at all: it may be a rollback); but every target
whose previous properties name a version older than the one it serves may now be moved back, so it
is reported as a failure of the refresh (``moved-back``): the ``RefreshFailed`` metric (an embedded
metric format log line, which the refresh alarm watches) and, with ``"DeadLetterQueue": "<queue URL>"``
among the properties, a letter whose event is the manifest event of the served version
(``"Bucket"`` names the model bucket where the state item does not): replaying it moves the target
forward again, and does nothing where the rollback did not move it.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from ..cfn_response import respond
from ..metric_publishing.emf import emf_line
from . import contract, deployed, formats, letters
from .contract import state_pk
from .state import DynamoStore, StateTable
from .versions import compare

_ANSWER_MARGIN_S = 30.0
"""Of the function's time, what is kept for answering CloudFormation after the last retried read."""
_FIRST_DELAY_S, _MAX_DELAY_S = 0.5, 16.0
_RETRYABLE = {"Throttling", "ThrottlingException", "ThrottledException", "RequestLimitExceeded",
              "ProvisionedThroughputExceededException", "TooManyRequestsException", "RequestThrottled",
              "InternalFailure", "InternalServerError", "ServiceUnavailable", "RequestTimeout"}
_sleep: Callable[[float], None] = time.sleep
T = TypeVar("T")


class Patience:
    """One back-off budget shared by every read of an invocation (seconds of waiting left): the reads
    together, not each one, must leave the function time to answer CloudFormation."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.left = seconds


def _patiently(call: Callable[[], T], patience: Patience) -> T:
    """``call`` (one AWS read), retried with jittered exponential back-off while it is throttled or
    fails on AWS's side, while ``patience`` lasts; then its last error is raised."""
    delay = _FIRST_DELAY_S
    while True:
        try:
            return call()
        except ClientError as exc:
            error = exc.response.get("Error", {})
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if error.get("Code") not in _RETRYABLE and status < 500:
                raise
            if delay > patience.left:
                raise
        except BotoCoreError:  # a connection or read timeout
            if delay > patience.left:
                raise
        pause = delay * random.uniform(0.5, 1.0)
        _sleep(pause)
        patience.left -= pause
        delay = min(delay * 2, _MAX_DELAY_S)


def _patience(context: Any) -> Patience:
    """The back-off the remaining invocation time allows, less the time to answer (60 s without a context)."""
    remaining = context.get_remaining_time_in_millis() / 1000 if context is not None else 60.0 + _ANSWER_MARGIN_S
    return Patience(max(0.0, remaining - _ANSWER_MARGIN_S))
NAMESPACE = contract.METRICS_NAMESPACE
SERVICE = contract.service_name()
"""The refresh function's metric dimension: its ``RefreshFailed`` alarm counts the guard's too."""


def is_older(version: str, than: str) -> bool:
    """``version`` is strictly before ``than`` in the refresh function's version order
    (:mod:`.versions`; its UnorderableVersion, a ValueError, when the order cannot compare them)."""
    return compare(version, than) < 0


def _served(item: dict[str, Any]) -> list[tuple[str, str]]:
    """(version, how) the target serves (``current_version``) or is rolling out (``pending.version``)."""
    return [(v, how) for v, how in ((item.get("current_version"), "serves"),
                                    ((item.get("pending") or {}).get("version"), "is rolling out")) if v]


def stale_targets(table: Any, targets: list[dict[str, str]], patience: Patience | None = None) -> list[str]:
    """A message for every target this deploy would move back to an older version."""
    problems = []
    for target in targets:
        item = _item(table, target["Id"], patience)  # no table yet (None): nothing was ever refreshed
        rolling = ((item or {}).get("pending") or {}).get("version")
        if rolling:  # any change now would collide with the rollout (an Updating endpoint rejects updates)
            value = target["Value"].replace("{version}", rolling)
            problems.append(f"{target['Id']} is rolling out {rolling} (started by the cache refresh function): "
                            f"deploy again after it ends, with {target['Field']} set to {value!r} or newer")
            continue
        if target.get("Pinned"):  # deliberately older: recorded as current once every check passed
            continue
        for served, how in _served(item or {}):
            fix = f"set {target['Field']} to {target['Value'].replace('{version}', served)!r}"
            try:
                older = is_older(target["Version"], served)
            except ValueError as exc:
                problems.append(f"{target['Id']} {how} {served}; this deploy's {target['Version']!r} cannot be "
                                f"ordered against it ({exc}): {fix}")
                break
            if older:
                problems.append(f"{target['Id']} {how} {served} (moved there by the cache refresh function) but "
                                f"this deploy would set {target['Version']}: {fix} (or newer) and deploy again")
                break
    return problems


def _item(table: Any, target_id: str, patience: Patience | None = None) -> dict[str, Any] | None:
    """The target's state item; None when it or the table does not exist (never refreshed)."""
    try:
        item: dict[str, Any] | None = _patiently(
            lambda: table.get_item(Key={"pk": state_pk(target_id)}, ConsistentRead=True),
            patience or Patience()).get("Item")
        return formats.state_item(item) if item else item
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ResourceNotFoundException":
            return None
        raise


def moved_back(table: Any, properties: dict[str, Any], request_id: str, patience: Patience | None = None) -> list[dict[str, Any]]:
    """A ``moved-back`` letter for every target whose rolled-back properties name a version older than
    (or not comparable with) the one it serves."""
    found = []
    for target in _split(properties)[0]:  # a recorded target's record is put back with its version (undo_deployed)
        item = _item(table, target["Id"], patience) or {}
        served = item.get("current_version")
        if not served:
            continue
        try:
            older = is_older(target["Version"], served)
        except ValueError:
            older = True
        if not older:
            continue
        value = target["Value"].replace("{version}", served)
        message = (f"{target['Id']} serves {served} (moved there by the cache refresh function) and this stack's "
                   f"rollback restores {target['Field']} to {target['Version']}: if the rollback moved the target "
                   f"back, replaying this letter moves it to {served} again (a no-op if it did not move); deploy "
                   f"with {target['Field']} set to {value!r}")
        letter = letters.moved_back(target["Id"], item, properties.get("Bucket"), message, request_id)
        found.append(letter or {"targets": [target["Id"]], "reason": letters.MOVED_BACK, "message": message})
    return found


def _metric(target_id: str) -> None:
    """``RefreshFailed`` (Reason ``moved-back``) in the embedded metric format: Lambda's log line becomes
    the metric, with no CloudWatch permission (the dimensions the refresh function's alarm watches)."""
    print(emf_line(NAMESPACE, [["service"], ["service", "Reason"]], {"RefreshFailed": 1},
                   service=SERVICE, Reason=letters.MOVED_BACK, target=target_id))


def report_moved_back(event: dict[str, Any], patience: Patience | None = None) -> str:
    """During a rollback: count and dead-letter every target it may move back; never raises."""
    properties = {**event.get("OldResourceProperties", {}), **event.get("ResourceProperties", {})}
    if not _split(properties)[0]:
        return ""
    try:
        found = moved_back(boto3.resource("dynamodb").Table(properties["Table"]), properties,
                           event.get("RequestId", ""), patience)
    except Exception as exc:  # noqa: BLE001 - a rollback must go on; the log says what was not checked
        return f"; could not check for targets moved back: {type(exc).__name__}: {exc}"
    queue = properties.get("DeadLetterQueue")
    sent = []
    for letter in found:
        _metric(letter["targets"][0])
        try:
            if queue and "letter_id" in letter:
                letters.send(boto3.client("sqs"), queue, letter)
                sent.append(letter["letter_id"])
        except Exception as exc:  # noqa: BLE001
            print(json.dumps({"letter": letter, "error": f"{type(exc).__name__}: {exc}"}))
    if not found:
        return ""
    return (f"; may be moved back (RefreshFailed moved-back, {len(sent)} dead letter(s) to replay): "
            + "; ".join(letter["message"] for letter in found))


def rolling_back(stack_id: str, patience: Patience | None = None) -> bool:
    """True while CloudFormation rolls the stack back (it then sends the previous properties)."""
    cloudformation = boto3.client("cloudformation")
    (stack,) = _patiently(lambda: cloudformation.describe_stacks(StackName=stack_id),
                          patience or Patience())["Stacks"]
    return str(stack["StackStatus"]).endswith("ROLLBACK_IN_PROGRESS")


def _split(properties: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(targets a refresh function records, targets this guard records: only a deploy moves them)."""
    targets = list(properties.get("Targets", []))
    return [t for t in targets if not t.get("Recorded")], [t for t in targets if t.get("Recorded")]


def check(properties: dict[str, Any], patience: Patience | None = None) -> list[str]:
    formats.guard_properties(properties)
    refreshed, recorded = _split(properties)
    problems = stale_targets(boto3.resource("dynamodb").Table(properties["Table"]), refreshed, patience) \
        if refreshed else []
    return problems + [p for t in recorded if (p := deployed.move_back(t, _record(properties, t["Id"], patience)))]


def _record(properties: dict[str, Any], target_id: str, patience: Patience | None = None) -> dict[str, Any]:
    """What the guard recorded for a target only a deploy moves; with no record, what the refresh function's state
    table (``Table``) says it serves, for a model a refresh prefix named until now (its version moved past cdk.json's
    without a deploy); empty: nothing known."""
    table = boto3.resource("dynamodb").Table(properties["DeployedTable"])
    item = _patiently(lambda: table.get_item(Key={"pk": state_pk(target_id)}, ConsistentRead=True),
                      patience or Patience()).get("Item")
    if item:
        return formats.deployed_item(item)
    refreshed = _item(boto3.resource("dynamodb").Table(properties["Table"]), target_id, patience) \
        if properties.get("Table") else None
    served = (refreshed or {}).get("current_version")
    return deployed.seeded(state_pk(target_id), served, (refreshed or {}).get("current_location"))


def _write_record(properties: dict[str, Any], target_id: str, item: dict[str, Any],
                  patience: Patience | None = None) -> None:
    """Store ``item`` as the target's record (an empty one deletes it)."""
    table = boto3.resource("dynamodb").Table(properties["DeployedTable"])
    if item:
        _patiently(lambda: table.put_item(Item=item), patience or Patience())
    else:
        _patiently(lambda: table.delete_item(Key={"pk": state_pk(target_id)}), patience or Patience())


def record_deployed(properties: dict[str, Any], patience: Patience | None = None,
                    replaced: dict[str, Any] | None = None) -> None:
    """A deploy that passed: each target only a deploy moves is recorded at the version it sets; with ``replaced``
    (the properties this deploy replaces), the record of a target it no longer names (its model removed) is dropped."""
    recorded = _split(properties)[1]
    for target in recorded:
        item = deployed.recorded(target, _record(properties, target["Id"], patience), int(time.time()))
        if item is not None:
            _write_record(properties, target["Id"], item, patience)
    kept = {t["Id"] for t in recorded}
    for target in _split(replaced or {})[1]:
        if target["Id"] not in kept and (replaced or {}).get("DeployedTable") == properties.get("DeployedTable"):
            _write_record(properties, target["Id"], {}, patience)


def undo_deployed(event: dict[str, Any], patience: Patience | None = None) -> list[str]:
    """During a rollback (or an update that may be one): each record the failed deploy wrote gives way to the record
    before it (:func:`deployed.undone`); the ids of the targets undone. Raises on a failed read or write."""
    old, restored = event.get("OldResourceProperties", {}), event.get("ResourceProperties", {})
    if not old.get("DeployedTable"):
        return []
    back = {t["Id"]: t for t in _split(restored)[1]}
    undone = []
    for target in _split(old)[1]:
        item = deployed.undone(target, back.get(target["Id"]), _record(old, target["Id"], patience))
        if item is not None:
            _write_record(old, target["Id"], item, patience)
            undone.append(target["Id"])
    return undone


def settle_deployed(event: dict[str, Any], patience: Patience | None = None, *, known_rollback: bool) -> str:
    """An update CloudFormation sends while it rolls back (``known_rollback``), or whose stack state could not be
    read: the failed deploy's records are undone; with the state unknown, each other recorded target that would move
    back is counted (``RefreshFailed`` moved-back) and named, and the rest recorded. Never raises (a rollback must
    go on); the reason says what was not done."""
    try:
        undone = set(undo_deployed(event, patience))
        if known_rollback:
            return ""
        properties = event.get("ResourceProperties", {})
        back = [(t, p) for t in _split(properties)[1] if t["Id"] not in undone
                and (p := deployed.move_back(t, _record(properties, t["Id"], patience)))]
        for target, _ in back:
            _metric(target["Id"])
        moving = {t["Id"] for t, _ in back}
        record_deployed({**properties, "Targets": [t for t in properties.get("Targets", []) if t["Id"] not in moving]},
                        patience)
        return "".join(f"; may be moved back (RefreshFailed moved-back): {p}" for _, p in back)
    except Exception as exc:  # noqa: BLE001 - a rollback must go on; the reason says what was not undone
        return f"; could not restore the deploy records it replaced: {type(exc).__name__}: {exc}"


def record_pins(properties: dict[str, Any], patience: Patience | None = None) -> None:
    """A deploy that passed: each pinned target's version is recorded as what serves; a target no longer
    pinned loses its pin (and keeps the version). Targets never refreshed (no item) have nothing to record."""
    refreshed = _split(properties)[0]
    if not refreshed:
        return
    state = StateTable(DynamoStore(boto3.resource("dynamodb"), properties["Table"]))
    table = boto3.resource("dynamodb").Table(properties["Table"])
    for target in refreshed:
        item = _item(table, target["Id"], patience)
        if item is not None and target.get("Pinned"):
            state.pin(target["Id"], version=target["Version"], location=target["Location"],
                      bucket=properties.get("Bucket", ""))
        elif item and item.get("pinned"):
            state.unpin(target["Id"])


def undo_pins(event: dict[str, Any], patience: Patience | None = None) -> str:
    """During a rollback: the pins of the deploy that failed give way to the restored properties (pinned
    again where they pin, else the record from before the pin); never raises."""
    restored = event.get("ResourceProperties", {})
    restored_pins = [t for t in _split(restored)[0] if t.get("Pinned")]
    failed_pins = [t for t in _split(event.get("OldResourceProperties", {}))[0] if t.get("Pinned")]
    if not restored_pins and not failed_pins:
        return ""
    try:
        state = StateTable(DynamoStore(boto3.resource("dynamodb"), restored["Table"]))
        for target in failed_pins:
            if target["Id"] not in {t["Id"] for t in restored_pins}:
                state.unpin(target["Id"], restore=True)
        record_pins({**restored, "Targets": restored_pins}, patience)
    except Exception as exc:  # noqa: BLE001 - a rollback must go on; the reason says what was not undone
        return f"; could not restore the records its pins replaced: {type(exc).__name__}: {exc}"
    return ""


def _rollback_state(stack_id: str, patience: Patience) -> bool | str:
    """Whether the stack rolls back, or why that could not be read (after the back-off)."""
    try:
        return rolling_back(stack_id, patience)
    except Exception as exc:  # noqa: BLE001 - unknown is answered by the caller, never raised
        return f"{type(exc).__name__}: {exc}"


def on_event(event: dict[str, Any], context: Any) -> None:
    """CloudFormation custom resource handler: always answers, so a deploy never hangs on it.

    AWS reads are retried with back-off within the function's time. A Delete always succeeds; so does
    an Update while its stack rolls back, and one whose stack state cannot be read even then: it may be
    a rollback, and failing one leaves the stack in UPDATE_ROLLBACK_FAILED. Such an Update is reported
    as a rollback is (every target it may move back counted and dead-lettered), so nothing moves back
    unseen.
    """
    status, reason = "SUCCESS", "no refresh target would move to an older version"
    patience = _patience(context)  # one budget for every read of this request
    try:
        rollback = _rollback_state(event["StackId"], patience) if event["RequestType"] == "Update" else False
        if rollback is True:
            reason = ("stack rollback: CloudFormation restores the previous properties, not blocked"
                      + undo_pins(event, patience) + settle_deployed(event, patience, known_rollback=True)
                      + report_moved_back(event, patience))
        elif rollback is not False:
            reason = (f"the stack's state could not be read ({rollback}): this update may be a rollback, so it "
                      "is not blocked" + settle_deployed(event, patience, known_rollback=False)
                      + report_moved_back(event, patience))
        elif event["RequestType"] in ("Create", "Update"):
            problems = check(event["ResourceProperties"], patience)
            if problems:
                status = "FAILED"
                reason = "this deploy would roll back refreshed models; nothing was changed. " + "; ".join(problems)
            else:
                record_pins(event["ResourceProperties"], patience)
                record_deployed(event["ResourceProperties"], patience, event.get("OldResourceProperties"))
    except Exception as exc:  # noqa: BLE001 (any failure must still answer CloudFormation)
        status, reason = "FAILED", f"could not check the cache refresh state: {type(exc).__name__}: {exc}"
    print(json.dumps({"request": event.get("RequestType"), "status": status, "reason": reason,
                      "function": os.environ.get("AWS_LAMBDA_FUNCTION_NAME")}))
    respond(event, status, reason, "refresh-guard")
