"""Deploy-time guard: a deploy never moves a refresh target back to a version older than it serves.

After the refresh function moved a target to a new version, ``cdk.json`` still names the old one.
A later deploy that changes the target's resources would put the old version back. This function
backs a CloudFormation custom resource that every such resource depends on: it reads the refresh
function's state for each target and fails the deployment, before anything changed, when the
deploy sets a version older than the one served (or rolling out), naming the target, the served
version and the configuration field to update.

Resource properties (Create and Update; Delete always succeeds)::

    {"Table": "<state table name>",
     "Targets": [{"Id": "<target id>", "Version": "<version this deploy sets>",
                  "Field": "<config field that sets it>", "Value": "<field value, with {version}>"}]}

A table or item that does not exist means the target was never refreshed: the deploy proceeds.
While CloudFormation rolls the stack back it sends an Update with the previous properties: the
guard then passes, since failing would leave the stack in UPDATE_ROLLBACK_FAILED.
"""

from __future__ import annotations

import json
import os
import urllib.request
from typing import Any

import boto3
from botocore.exceptions import ClientError

from .naming import state_pk
from .versions import compare

_REASON_MAX = 3000  # the whole response is limited to 4 KB


def is_older(version: str, than: str) -> bool:
    """``version`` is strictly before ``than`` in the refresh function's version order
    (:mod:`.versions`; its UnorderableVersion, a ValueError, when the order cannot compare them)."""
    return compare(version, than) < 0


def _served(item: dict[str, Any]) -> list[tuple[str, str]]:
    """(version, how) the target serves (``current_version``) or is rolling out (``pending.version``)."""
    return [(v, how) for v, how in ((item.get("current_version"), "serves"),
                                    ((item.get("pending") or {}).get("version"), "is rolling out")) if v]


def stale_targets(table: Any, targets: list[dict[str, str]]) -> list[str]:
    """A message for every target this deploy would move back to an older version."""
    problems = []
    for target in targets:
        try:
            item = table.get_item(Key={"pk": state_pk(target["Id"])}, ConsistentRead=True).get("Item")
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ResourceNotFoundException":
                return []  # no state table yet: nothing was ever refreshed
            raise
        rolling = ((item or {}).get("pending") or {}).get("version")
        if rolling:  # any change now would collide with the rollout (an Updating endpoint rejects updates)
            value = target["Value"].replace("{version}", rolling)
            problems.append(f"{target['Id']} is rolling out {rolling} (started by the cache refresh function): "
                            f"deploy again after it ends, with {target['Field']} set to {value!r} or newer")
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


def rolling_back(stack_id: str) -> bool:
    """True while CloudFormation rolls the stack back (it then sends the previous properties)."""
    (stack,) = boto3.client("cloudformation").describe_stacks(StackName=stack_id)["Stacks"]
    return stack["StackStatus"].endswith("ROLLBACK_IN_PROGRESS")


def check(properties: dict[str, Any]) -> list[str]:
    table = boto3.resource("dynamodb").Table(properties["Table"])
    return stale_targets(table, list(properties.get("Targets", [])))


def _respond(event: dict[str, Any], status: str, reason: str) -> None:
    body = json.dumps({
        "Status": status, "Reason": reason[:_REASON_MAX],
        "PhysicalResourceId": event.get("PhysicalResourceId") or f"refresh-guard-{event['LogicalResourceId']}",
        "StackId": event["StackId"], "RequestId": event["RequestId"], "LogicalResourceId": event["LogicalResourceId"],
    }).encode()
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT",
                                     headers={"Content-Type": "", "Content-Length": str(len(body))})
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (CloudFormation's presigned URL)
        response.read()


def on_event(event: dict[str, Any], context: Any) -> None:
    """CloudFormation custom resource handler: always answers, so a deploy never hangs on it."""
    status, reason = "SUCCESS", "no refresh target would move to an older version"
    try:
        if event["RequestType"] == "Update" and rolling_back(event["StackId"]):
            reason = "stack rollback: CloudFormation restores the previous properties, not checked"
        elif event["RequestType"] in ("Create", "Update"):
            problems = check(event["ResourceProperties"])
            if problems:
                status = "FAILED"
                reason = "this deploy would roll back refreshed models; nothing was changed. " + "; ".join(problems)
    except Exception as exc:  # noqa: BLE001 (any failure must still answer CloudFormation)
        status, reason = "FAILED", f"could not check the cache refresh state: {type(exc).__name__}: {exc}"
    print(json.dumps({"request": event.get("RequestType"), "status": status, "reason": reason,
                      "function": os.environ.get("AWS_LAMBDA_FUNCTION_NAME")}))
    _respond(event, status, reason)
