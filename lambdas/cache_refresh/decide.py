"""The refresh decisions, as pure functions of the event's version, the target's state item and what
the target itself serves. No I/O here: the handler reads, calls these, then acts.

The target's own answer wins over the record: an endpoint's current EndpointConfig and an operator
object's live spec say what serves (a deploy may have moved it, a state-change event may have been
lost); the record adds what only it knows (a rollout in flight, a version waiting, a version that
failed and was dead-lettered).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .versions import UnorderableVersion, compare

ENDPOINT_FAILED = ("Failed", "UpdateRollbackFailed", "OutOfService")
ROLLOUT = "rollout:"  # lock owner prefix of a running endpoint rollout


@dataclass(frozen=True)
class Live:
    """What a target serves now, read from the target.

    ``version``: the version folder its model location names (None: it reads no version folder of
    the prefix). ``status``/``config``: the endpoint's status and current EndpointConfig; a HyperPod
    object is always ``InService`` (the operator rolls pods itself). ``updating_to``: the config an
    update in progress deploys (DescribeEndpoint's ``PendingDeploymentSummary``); ``modified``: when
    the endpoint last changed (epoch milliseconds).
    """

    version: str | None
    status: str = "InService"
    config: str | None = None
    updating_to: str | None = None
    modified: int | None = None


@dataclass(frozen=True)
class Decision:
    action: str  # skip | start | queue | fail
    reason: str = ""
    message: str = ""


def _skip(reason: str, message: str) -> Decision:
    return Decision("skip", reason, message)


def _not_ahead(version: str, of: str | None, what: str) -> Decision | None:
    """A skip when ``version`` is not strictly after ``of`` (raises UnorderableVersion)."""
    if of is None:
        return None
    order = compare(version, of)
    if order == 0:
        return _skip("duplicate", f"{version} equals the {what} {of}")
    if order < 0:
        return _skip("older-version", f"{version} is older than the {what} {of}")
    return None


def dead_lettered(item: dict[str, Any], version: str, sequencer: str) -> bool:
    """This very upload (version and S3 sequencer) failed and waits in the dead-letter queue.

    A retry of the same event skips it; a replay, or a new upload of the version's manifest, does not.
    """
    failed = item.get("failed") or {}
    return failed.get("version") == version and failed.get("sequencer") == sequencer


def manifest(version: str, item: dict[str, Any], live: Live, *, sequencer: str = "", replay: bool = False) -> Decision:
    """Under the target's lock, with any ended rollout already settled: skip, start, queue or fail."""
    recorded = item.get("current_version")
    served = live.version if live.version is not None else recorded
    pending = item.get("pending")
    try:
        skip = (_not_ahead(version, served, "served version")
                or _not_ahead(version, (pending or {}).get("version"), "version rolling out"))
        if not skip and recorded and served != recorded and compare(version, recorded) < 0:
            # Moved back (a stack rollback...) from the recorded version: its moved-back letter rolls that
            # one again; an older one would only make the record forget it.
            skip = _skip("older-version", f"{version} is older than {recorded}, which served before the target "
                                          f"was moved back to {served}")
    except UnorderableVersion as exc:
        return Decision("fail", "unorderable-version", str(exc))
    if skip:
        return skip
    if dead_lettered(item, version, sequencer) and not replay:
        return _skip("already-dead-lettered", f"{version} failed ({item['failed'].get('reason')}) and waits for a replay")
    if pending or live.status != "InService":
        return Decision("queue", "target-busy", f"rolls when the current rollout ends ({live.status})")
    return Decision("start")


def busy(version: str, item: dict[str, Any], *, sequencer: str = "", replay: bool = False) -> Decision:
    """Another invocation or a rollout holds the lock: skip what it already covers, else queue. Without
    a target read, a version equal to the recorded one is not skipped (the target may have been moved
    back since: the holder, or this event's retry, reads it).

    Only a rollout is sure to roll the queued version (its end is an event); an invocation holding the
    lock may have died, so an event equal to the queued one is not skipped then: its retry keeps it alive.
    """
    waiting = (item.get("queued") or {}).get("version") if str(item.get("lock_owner", "")).startswith(ROLLOUT) else None
    try:
        recorded = item.get("current_version")  # equal: not skipped, the target may have been moved back
        skip = ((recorded and compare(version, recorded) < 0
                 and _skip("older-version", f"{version} is older than the recorded version {recorded}"))
                or _not_ahead(version, (item.get("pending") or {}).get("version"), "version rolling out")
                or _not_ahead(version, waiting, "waiting version"))
    except UnorderableVersion as exc:
        return Decision("fail", "unorderable-version", str(exc))
    if skip:
        return skip
    if dead_lettered(item, version, sequencer) and not replay:
        return _skip("already-dead-lettered", f"{version} failed and waits for a replay")
    return Decision("queue", "target-busy", f"{version} rolls when {item.get('lock_owner')} ends")


def rollout(pending: dict[str, Any], live: Live) -> tuple[str, str]:
    """How a recorded rollout stands, from the endpoint itself: (state, reason).

    ``succeeded``: InService on the new config. ``failed``: InService on another config (rolled
    back, reason ``rolled-back``; or replaced by someone else, ``endpoint-failed``) or a failed
    status. ``in-progress``: anything else (Updating, SystemUpdating...): a state-change event that
    says otherwise is stale (a duplicate or a late delivery) and is not believed.
    """
    if live.status in ENDPOINT_FAILED:
        return "failed", "endpoint-failed"
    if live.status != "InService":
        return "in-progress", ""
    if live.config == pending.get("config"):
        return "succeeded", ""
    if live.config == pending.get("previous_config"):
        return "failed", "rolled-back"
    return "failed", "endpoint-failed"
