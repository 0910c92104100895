"""What the two entry points do, written against :class:`Ports` so that the same code runs on AWS
and, in the model tests, against in-memory fakes of every external call.

Per target: take its lock (or, if busy, queue the version behind whoever holds it), read what the
target serves, settle a rollout that ended, decide (:mod:`.decide`), act, release, then roll the
queued version if one waits. Per event: every target's outcome is collected first; permanent
failures are dead-lettered with the event (replay context) and counted before a transient one is
raised for Lambda to retry, so one target's retry never hides another target's failure.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from . import contract, decide, gate, letters, naming, rollout
from .config import EndpointTarget, HyperPodTarget, Target
from .errors import PermanentError, RefreshError, Skip, TransientError
from .events import (
    EndpointStateChange,
    ManifestCreated,
    event_source,
    parse_endpoint_state_change,
    parse_manifest_created,
    valid_version,
)
from .ports import Ports as Ports
from .state import Busy, Freed, held_by_rollout, lock_held
from .targets.endpoint import config_name as endpoint_config_name, rollout_seconds
from .versions import UnorderableVersion, compare

_T = TypeVar("_T")
DLQ_FORMAT = letters.FORMAT
REPLAY_KEY = contract.REPLAY_KEY
"""Top-level key ``hyperwarm refresh replay`` adds: the run replays a letter, so it writes no second one."""
DRAIN_DEPTH = 3
LOCK_ATTEMPTS = 3
"""Tries to take a target's lock when its holder lets go between our look and our queue write."""


@dataclass
class Outcome:
    target: str
    status: str  # refreshed | started | queued | skipped | failed | retry
    reason: str = ""
    message: str = ""


def _owner(ports: Ports) -> str:
    return f"{ports.request_id}:{uuid.uuid4().hex[:8]}"


def _letter(ports: Ports, event: dict[str, Any], reason: str, message: str, targets: list[str]) -> dict[str, Any]:
    return letters.envelope(event, reason, message, targets, request_id=ports.request_id,
                            failed_at=ports.state.clock())


def handle(ports: Ports, event: Any) -> dict[str, Any]:
    """Either event kind: parse, then the manifest or state-change flow. Skips are answers; a
    transient failure is raised (Lambda retries it, then its on-failure destination keeps it)."""
    replay = isinstance(event, dict) and isinstance(event.get(REPLAY_KEY), dict)
    if replay:
        event = {k: v for k, v in event.items() if k != REPLAY_KEY}
    try:
        if event_source(event) == "aws.events" and event.get("detail-type") == "Scheduled Event":
            return reconcile(ports)
        if event_source(event) == "aws.sagemaker":
            try:
                return on_state_change(ports, parse_endpoint_state_change(event))
            except Skip as skip:  # most state changes end nothing: not counted
                ports.log("state change ignored", reason=skip.reason, detail=skip.message)
                return {"status": "ignored", "reason": skip.reason}
        return on_manifest(ports, event, parse_manifest_created(event), replay=replay)
    except Skip as skip:
        ports.metric("RefreshSkipped", reason=skip.reason)
        ports.log("event skipped", reason=skip.reason, detail=skip.message)
        return {"status": "skipped", "reason": skip.reason}


# -- manifest events ------------------------------------------------------------------------------

def on_manifest(ports: Ports, event: dict[str, Any], created: ManifestCreated, *, replay: bool = False) -> dict[str, Any]:
    s = ports.settings
    refusal = gate.name_problem(s, created.bucket, created.prefix, created.version)
    if refusal is not None and not refusal.ours:  # not ours: a malformed name is told as such, not as unknown
        if not valid_version(created.version):
            raise Skip("malformed-event", f"{created.key!r}: version has characters outside [A-Za-z0-9_.-] or more "
                                          "than 63")
        raise Skip(refusal.reason, refusal.message)
    targets = s.targets_for(created.prefix)
    if refusal is not None:  # under a configured prefix: a version no target may take
        if s.dry_run:
            return {"status": "dry-run", "version": created.version, "reason": refusal.reason,
                    "message": refusal.message, "decisions": {}}
        return _conclude(ports, event, created,
                         [Outcome(t.id, "failed", refusal.reason, refusal.message) for t in targets], replay)
    # First look without the lock: which targets might move at all? (Saves verifying a duplicate.)
    due, outcomes, waiting = [], [], []
    for target in targets:
        first, item = _first_look(ports, target, created, replay)
        if first.action == "skip":
            outcomes.append(_ensure_workflow(ports, target, item, created.version,
                                             Outcome(target.id, "skipped", first.reason, first.message)))
            if item.get("queued"):
                waiting.append(target)
        elif (too_far := _too_far(ports, target, created, item)) is not None and not s.dry_run:
            outcomes.append(too_far)
        else:
            due.append(target)
    if s.dry_run:
        return _dry_run(ports, created, due, outcomes)
    if due:
        try:
            admitted = ports.verify(created)
        except PermanentError as exc:  # unsigned, incomplete or corrupt: nothing moves, nothing queues
            outcomes += [Outcome(t.id, "failed", exc.reason, exc.message) for t in due]
            return _conclude(ports, event, created, outcomes, replay)
        for target in due:
            outcomes += _target(ports, target, created, event, admitted, replay=replay)
    for target in waiting:  # skipped here, but a version waits for it: roll it if the target is free
        outcomes += [o for o in _drain(ports, target, 0) if o.status == "retry"]
    return _conclude(ports, event, created, outcomes, replay)


def _ensure_workflow(ports: Ports, target: Target, item: dict[str, Any], version: str, outcome: Outcome) -> Outcome:
    """A retry of the event that started a warm rollout: start its execution again (a no-op when it runs), in
    case the first start failed after the rollout was recorded. A failure here is this event's retry."""
    pending = item.get("pending") or {}
    if (ports.settings.dry_run or pending.get("kind") != "hyperpod" or pending.get("version") != version
            or not isinstance(target, HyperPodTarget) or not rollout.is_warm(ports, target)):
        return outcome
    try:
        rollout.ensure_workflow(ports, target, pending)
    except TransientError as exc:
        return Outcome(target.id, "retry", exc.reason, exc.message)
    return outcome


def _first_look(ports: Ports, target: Target, created: ManifestCreated,
                replay: bool) -> tuple[decide.Decision, dict[str, Any]]:
    """The record's decision (and the record); a record that says the target already serves this version
    or a newer one is checked against the target itself (a stack rollback may have moved it back since).
    Any error here only means "look again under the lock", where it is read again and classified."""
    item: dict[str, Any] = {}
    try:
        item = ports.state.get(target.id)
        first = decide.manifest(created.version, item, decide.Live(None), sequencer=created.sequencer, replay=replay)
        if first.action == "skip" and first.reason in ("duplicate", "older-version"):
            first = decide.manifest(created.version, item, ports.live(target, created.prefix),
                                    sequencer=created.sequencer, replay=replay)
    except Exception as exc:  # noqa: BLE001 - decided again, under the lock
        ports.log("first look failed; deciding under the lock", target=target.id, error=repr(exc))
        return decide.Decision("start"), item
    return first, item


def _too_far(ports: Ports, target: Target, created: ManifestCreated, item: dict[str, Any]) -> Outcome | None:
    """The gate's step 2 before its step 3: a version too far past what the target serves fails before its manifest,
    signature and files are read (no S3 or KMS call for a far jump). Decided again under the lock (:func:`_decide`);
    a target that cannot be read now is left to that."""
    try:
        serving = ports.live(target, created.prefix).version or item.get("current_version")
        problem = gate.move_problem(ports.settings, created.prefix, created.version, serving, ports.state.clock())
    except Exception as exc:  # noqa: BLE001 - decided again, under the lock
        ports.log("move check failed; deciding under the lock", target=target.id, error=repr(exc))
        return None
    return None if problem is None else Outcome(target.id, "failed", "version-jump", problem)


def _dry_run(ports: Ports, created: ManifestCreated, due: list[Target], outcomes: list[Outcome]) -> dict[str, Any]:
    """Verify and decide with reads only: no lock, no state, no target change, no letter."""
    decisions: dict[str, dict[str, str | None]] = {o.target: {"action": "skip", "reason": o.reason} for o in outcomes}
    try:
        if due:
            ports.verify(created)
    except PermanentError as exc:
        return {"status": "dry-run", "version": created.version, "verified": False, "reason": exc.reason,
                "message": exc.message, "decisions": decisions}
    for target in due:
        live = ports.live(target, created.prefix)
        d = decide.manifest(created.version, ports.state.get(target.id), live, sequencer=created.sequencer)
        decisions[target.id] = {"action": d.action, "reason": d.reason, "serves": live.version}
    ports.log("dry run: decided, changed nothing", decisions=decisions)
    return {"status": "dry-run", "version": created.version, "verified": True, "decisions": decisions}


def _target(ports: Ports, target: Target, created: ManifestCreated, event: dict[str, Any], admitted: str, *,
            replay: bool, depth: int = 0) -> list[Outcome]:
    """One target under its lock, for a version the gate admitted (``admitted``: its manifest's SHA-256); failures
    become outcomes (a crash of the runtime passes through).

    The first outcome is this event's; a version that waited behind the lock and must be retried adds
    its retry (so this event is retried too, and its retry rolls it)."""
    state, owner = ports.state, _owner(ports)
    item = _take_lock(ports, target, created, event, owner, replay)
    if isinstance(item, Outcome):
        return [item]
    try:
        live = ports.live(target, created.prefix)
        item = _settle(ports, target, item, live, owner)
        d = _decide(ports, created, item, live, replay)
        if d.action == "queue":
            state.enqueue(target.id, created.version, created.sequencer, event, behind=owner)
            if item.get("pending"):  # our rollout still runs: it rolls the queued version when it ends
                state.keep_rollout(target.id, owner, _rollout_seconds(target))
                return [Outcome(target.id, "queued", d.reason, d.message)]
            state.release(target.id, owner)  # someone else's update: retry, and the state change rolls it
            return [Outcome(target.id, "retry", "endpoint-busy", f"{target.id}: {d.message}")]
        if d.action == "skip" and live.version is not None:
            # The target serves this version or a newer one: record what it serves when the record is
            # behind (a commit or rollout record lost after the target moved), so deploy guards see it.
            state.observe(target.id, owner, version=live.version, location=f"{created.prefix}/{live.version}",
                          sequencer=created.sequencer if live.version == created.version else "",
                          bucket=created.bucket)
            outcome = Outcome(target.id, "skipped", d.reason, d.message)
        elif d.action != "start":
            state.release(target.id, owner)
            outcome = Outcome(target.id, "skipped" if d.action == "skip" else "failed", d.reason, d.message)
        elif rollout.is_warm(ports, target):
            assert isinstance(target, HyperPodTarget)
            ports.metric("RefreshStarted", target=target.id)
            rollout.start(ports, target, created, event, owner, item, admitted)
            return [Outcome(target.id, "started")]
        elif isinstance(target, HyperPodTarget):
            outcome = _repoint(ports, target, created, owner)
        else:
            return [_start_rollout(ports, target, created, event, owner)]
    except Exception as exc:  # noqa: BLE001 - every failure is classified; an unknown one is retried
        _release_quietly(ports, target, owner)
        if isinstance(exc, PermanentError):
            return [Outcome(target.id, "failed", exc.reason, exc.message)]
        if isinstance(exc, TransientError):
            return [Outcome(target.id, "retry", exc.reason, exc.message)]
        ports.log("unexpected error", target=target.id, error=repr(exc))
        return [Outcome(target.id, "retry", "unexpected", f"{target.id}: {exc!r}")]
    # The target is free: a version that waited behind the lock goes now (concluded with its own event).
    return [outcome, *(o for o in _drain(ports, target, depth) if o.status == "retry")]


def _take_lock(ports: Ports, target: Target, created: ManifestCreated, event: dict[str, Any], owner: str,
               replay: bool) -> dict[str, Any] | Outcome:
    """The target's item, read as ``owner`` took its lock; else the outcome that ends this event's turn at the
    target (queued behind the holder, or a retry)."""
    for _ in range(LOCK_ATTEMPTS):
        try:
            return ports.state.acquire(target.id, owner, ports.settings.lock_seconds)
        except Busy as busy:
            queued = _queue_behind(ports, target, created, event, busy.item, replay)
            if queued is not None:
                return queued
        except TransientError as exc:
            return Outcome(target.id, "retry", exc.reason, exc.message)
        except Exception as exc:  # noqa: BLE001 - the state table failed: this target's retry, not the event's abort
            ports.log("could not take lock", target=target.id, error=repr(exc))
            return Outcome(target.id, "retry", "state-unavailable", f"{target.id}: {exc!r}")
    return Outcome(target.id, "retry", "target-busy", f"{target.id}: the lock changed hands {LOCK_ATTEMPTS} times")


def _decide(ports: Ports, created: ManifestCreated, item: dict[str, Any], live: decide.Live,
            replay: bool) -> decide.Decision:
    """:func:`.decide.manifest`, and a start only as far past what serves as the gate allows (:func:`.gate.move_problem`:
    what the target serves, else what the record says)."""
    d = decide.manifest(created.version, item, live, sequencer=created.sequencer, replay=replay)
    if d.action != "start":
        return d
    too_far = gate.move_problem(ports.settings, created.prefix, created.version,
                                live.version or item.get("current_version"), ports.state.clock())
    return d if too_far is None else decide.Decision("fail", "version-jump", too_far)


def _repoint(ports: Ports, target: HyperPodTarget, created: ManifestCreated, owner: str) -> Outcome:
    """Patch the HyperPod objects, then record the version and free the target."""
    ports.metric("RefreshStarted", target=target.id)
    changed = ports.apply_hyperpod(target, created)
    ports.state.commit(target.id, owner, version=created.version, sequencer=created.sequencer,
                       location=created.location, bucket=created.bucket)
    ports.metric("RefreshSucceeded", target=target.id)
    ports.metric("TimeToRefresh", value=_since(created.time, ports.state.clock()), unit="Seconds")
    ports.log("hyperpod target repointed", target=target.id, version=created.version, changed=changed)
    return Outcome(target.id, "refreshed")


def _start_rollout(ports: Ports, target: EndpointTarget, created: ManifestCreated, event: dict[str, Any],
                   owner: str) -> Outcome:
    """Start the endpoint update and hand the lock to the rollout (its end is a state change)."""
    ports.metric("RefreshStarted", target=target.id)
    known = {"bucket": created.bucket, "event": json.dumps(event), "started": int(ports.state.clock())}
    pending = {**ports.start_endpoint(target, created, lambda rollout: ports.state.reserve(
        target.id, owner, {**rollout, **known})), **known}
    ports.state.start_rollout(target.id, owner, pending, _rollout_seconds(target))
    ports.log("endpoint update started", target=target.id, config=pending["config"])
    return Outcome(target.id, "started")


def _queue_behind(ports: Ports, target: Target, created: ManifestCreated, event: dict[str, Any],
                  item: dict[str, Any], replay: bool) -> Outcome | None:
    """Wait behind the lock's holder, or None when it let go meanwhile (then take the lock and roll)."""
    d = decide.busy(created.version, item, sequencer=created.sequencer, replay=replay)
    if d.action == "skip":
        return Outcome(target.id, "skipped", d.reason, d.message)
    if d.action == "fail":
        return Outcome(target.id, "failed", d.reason, d.message)
    try:
        ports.state.enqueue(target.id, created.version, created.sequencer, event, behind=item["lock_owner"])
    except Freed:
        return None
    except PermanentError as exc:
        return Outcome(target.id, "failed", exc.reason, exc.message)
    except Exception as exc:  # noqa: BLE001 - the state table failed: this target's retry
        reason = exc.reason if isinstance(exc, TransientError) else "state-unavailable"
        return Outcome(target.id, "retry", reason, f"{target.id}: {exc}")
    if held_by_rollout(item):
        return Outcome(target.id, "queued", d.reason, d.message)
    # Another invocation holds it: it rolls the queued version when it releases; if it died instead,
    # this event's retries (and at last the dead-letter queue) bring the version back.
    return Outcome(target.id, "retry", "target-busy", f"{target.id}: {d.message}")


def _holding(ports: Ports, target: Target, owner: str, work: Callable[[], _T]) -> _T:
    """``work()`` under ``owner``'s lock of ``target``: on any failure the lock is released and the failure
    raised classified (an unknown one as transient: retried)."""
    try:
        return work()
    except (PermanentError, TransientError):
        _release_quietly(ports, target, owner)
        raise
    except Exception as exc:  # noqa: BLE001
        _release_quietly(ports, target, owner)
        raise TransientError("unexpected", f"{target.id}: {exc!r}") from None


def _release_quietly(ports: Ports, target: Target, owner: str) -> None:
    try:
        ports.state.release(target.id, owner)
    except Exception as exc:  # noqa: BLE001 - the lock expires on its own; keep the original error
        ports.log("could not release lock", target=target.id, error=repr(exc))


def _since(iso_time: str, now: float) -> float:
    return max(0.0, now - datetime.fromisoformat(iso_time.replace("Z", "+00:00")).timestamp())


def _rollout_seconds(target: Target) -> int:
    return rollout_seconds(target.blue_green) if isinstance(target, EndpointTarget) else rollout.lock_seconds(target)


def _settle(ports: Ports, target: Target, item: dict[str, Any], live: decide.Live, owner: str) -> dict[str, Any]:
    """Finish a recorded rollout that the endpoint says has ended (its state-change event may be lost).

    The returned item carries ``settled``: (state, reason) of :func:`.decide.rollout`, for the caller.
    An update whose start was never recorded (``starting``: its answer was lost, or the function died
    after it) is settled first: adopted when its config serves, its resources deleted when it never ran.
    """
    if (item.get("pending") or {}).get("kind") == "hyperpod" and isinstance(target, HyperPodTarget):
        return rollout.advance(ports, target, item, owner)
    if isinstance(target, EndpointTarget):
        refused = _refuse_endpoint_record(ports, target, item, owner)
        if refused is not None:
            return refused
    record = "pending"
    if item.get("starting") and not item.get("pending"):
        item, record = _settle_start(ports, target, item, live, owner)
    pending = item.get(record) if record else None
    if not pending:
        return item
    status, reason = decide.rollout(pending, live)
    if status == "in-progress":
        return item
    if status == "succeeded":
        deleted = ports.delete_superseded(item.get("owned_config"), list(item.get("owned_models") or []), live.config)
        item = ports.state.finish_rollout(target.id, owner, succeeded=True, keep_lock=True, record=record)
        started = float(pending.get("started", ports.state.clock()))
        ports.metric("TimeToRefresh", value=max(0.0, ports.state.clock() - started), unit="Seconds")
        ports.metric("RefreshSucceeded", target=target.id)
        ports.log("endpoint refreshed", target=target.id, version=pending["version"], deleted=deleted)
        return {**item, "settled": ("refreshed", "", deleted)}
    message = f"{target.id}: rollout of {pending['version']} ended {live.status} on {live.config}"
    ports.metric("RefreshFailed", reason=reason, target=target.id)
    ports.dead_letter(_letter(ports, json.loads(pending["event"]), reason, message, [target.id]))
    # The previous config and models serve; what the failed rollout created goes (a replay creates it again).
    deleted = ports.delete_superseded(pending["config"], list(pending["created_models"]), live.config)
    ports.log("endpoint refresh failed; previous config and models kept", target=target.id, reason=reason,
              deleted=deleted)
    item = ports.state.finish_rollout(target.id, owner, succeeded=False, reason=reason, keep_lock=True, record=record)
    return {**item, "settled": ("rollout-failed", reason, deleted)}  # dead-lettered: this event itself is done


def _endpoint_record_problem(ports: Ports, target: EndpointTarget, held: Any) -> str | None:
    """An endpoint rollout record (``pending`` or ``starting``) is read back from the table, which is no authority:
    before anything commits, rolls back or deletes by it, its upload is the one its fields name and passes the gate's
    name rules (:func:`.gate.recorded_event`, as a warm rollout's step does), its config is exactly the one a refresh
    of that upload creates (so a record cannot claim the config that serves for another version), and the models it
    would delete are the endpoint's own (``<model stem>-*``). None, or why not."""
    if not isinstance(held, dict):
        return f"the record is {type(held).__name__}, not a map"
    try:
        created = gate.recorded_event(ports.settings, ports.settings.prefix_of(target), held)
    except PermanentError as exc:
        return exc.message
    expected = endpoint_config_name(target, created)
    if held.get("config") != expected:
        return f"config {held.get('config')!r} is not {expected}, the one a refresh to {created.version} creates"
    return _foreign_names(target, None, held.get("created_models"), "created_models")


def _foreign_names(target: EndpointTarget, config: Any, models: Any, what: str) -> str | None:
    """Names a refresh would delete that are not under the endpoint's own stems (:mod:`.naming`, what the role may
    delete): why, or None."""
    stem = naming.model_stem(target.endpoint) + "-"
    if not isinstance(models, list) or not all(isinstance(m, str) and m.startswith(stem) for m in models):
        return f"{what} {models!r}: a refresh of {target.endpoint} deletes only models named {stem}*"
    config_stem = naming.endpoint_config_stem(target.endpoint) + "-"
    if config is not None and not (isinstance(config, str) and config.startswith(config_stem)):
        return f"owned_config {config!r}: a refresh of {target.endpoint} deletes only configs named {config_stem}*"
    return None


def _refuse_endpoint_record(ports: Ports, target: EndpointTarget, item: dict[str, Any],
                            owner: str) -> dict[str, Any] | None:
    """The item with a rollout record the gate refuses ended as ``refused-record`` (one letter; nothing committed,
    nothing deleted), or None when every record passes. Owned names not the endpoint's refuse the record they would
    be deleted with, and are forgotten."""
    owned = _foreign_names(target, item.get("owned_config"), list(item.get("owned_models") or []), "owned_models")
    for record in ("pending", "starting"):
        if not item.get(record):
            continue
        why = _endpoint_record_problem(ports, target, item[record]) or owned
        if why is None:
            continue
        ports.log("endpoint rollout record refused by the gate; nothing it names is acted on", target=target.id,
                  record=record, detail=why)
        rollout.refused_letter(ports, target, item[record], why)
        item = ports.state.refuse(target.id, owner, record=record, reason=rollout.REFUSED, message=why,
                                  forget_owned=owned is not None)
        return {**item, "settled": ("rollout-failed", rollout.REFUSED, [])}
    return None


def _settle_start(ports: Ports, target: Target, item: dict[str, Any], live: decide.Live,
                  owner: str) -> tuple[dict[str, Any], str]:
    """An update whose start was never recorded: (the item, which record now settles as a rollout, or "").

    SageMaker deploying its config: it is the rollout in flight. The endpoint serving its config, or
    failed, or changed since it was read before the update (``LastModifiedTime``) without serving it
    (rolled back): it ran, and ends as any rollout ends. Unchanged since: it never ran, and what it
    created is deleted. Another update running: decided when that one ends.
    """
    starting = item["starting"]
    if live.updating_to == starting["config"]:
        return ports.state.promote_start(target.id, owner), "pending"
    before = starting.get("endpoint_modified")
    changed = live.modified is None or before is None or live.modified != int(before)  # unknown: it may have run
    if live.config == starting["config"] or live.status in decide.ENDPOINT_FAILED or (
            live.status == "InService" and changed):
        return item, "starting"
    if live.status != "InService":
        return item, ""
    deleted = ports.delete_superseded(starting["config"], list(starting["created_models"]), live.config)
    ports.log("unstarted endpoint update cleaned up", target=target.id, deleted=deleted)
    return {**ports.state.drop_start(target.id, owner), "settled": ("start-abandoned", "", deleted)}, ""


def _drain(ports: Ports, target: Target, depth: int) -> list[Outcome]:
    """Roll the version that waited behind the lock just released (bounded), through the gate again: the table
    that kept it is no authority. Never raises: the drained event's failures are recorded with that event, and a
    retry comes back as an outcome."""
    try:
        item = ports.state.get(target.id)
        queued = item.get("queued")
        if not queued or depth >= DRAIN_DEPTH or lock_held(item, ports.state.clock()):
            return []
        event = json.loads(queued["event"])
        created = parse_manifest_created(event)
    except Exception as exc:  # noqa: BLE001 - the state table failed, or holds what is no manifest event
        ports.log("could not read the queued version", target=target.id, error=repr(exc))
        reason = exc.reason if isinstance(exc, RefreshError) else "state-unavailable"
        return [Outcome(target.id, "retry", reason, f"{target.id}: queued version not read: {exc}")]
    refusal = gate.name_problem(ports.settings, created.bucket, created.prefix, created.version)
    if refusal is None and target not in ports.settings.targets_for(created.prefix):
        refusal = gate.Refusal("refused-record", f"{target.id} does not serve {created.prefix}")
    try:
        if refusal is not None:
            raise PermanentError(refusal.reason, refusal.message)
        admitted = ports.verify(created)
    except PermanentError as exc:
        ports.log("queued version refused by the gate", target=target.id, version=created.version, reason=exc.reason)
        _record(ports, event, created, [Outcome(target.id, "failed", exc.reason, exc.message)], replay=False)
        try:  # whatever the queued entry says of itself, it goes (a failure marked as it names it)
            ports.state.mark_failed(target.id, str(queued.get("version")), str(queued.get("sequencer", "")), exc.reason)
        except Exception as error:  # noqa: BLE001 - the letter is safe; the next drain refuses it again
            ports.log("could not drop the refused queued version", target=target.id, error=repr(error))
        return []
    except TransientError as exc:
        return [Outcome(target.id, "retry", exc.reason, exc.message)]
    outcomes = _target(ports, target, created, event, admitted, replay=False, depth=depth + 1)
    _record(ports, event, created, outcomes[:1], replay=False)
    return outcomes


def _record(ports: Ports, event: dict[str, Any], created: ManifestCreated, outcomes: list[Outcome],
            replay: bool) -> None:
    """Count every outcome and dead-letter the permanent failures (one letter, with the event)."""
    for o in outcomes:
        if o.status in ("skipped", "queued"):
            ports.metric("RefreshSkipped" if o.status == "skipped" else "RefreshQueued", reason=o.reason or None,
                         target=o.target)
    failed = [o for o in outcomes if o.status == "failed"]
    for o in failed:
        ports.metric("RefreshFailed", reason=o.reason, target=o.target)
    if failed and not replay:  # a replay keeps its own letter until it succeeds: no second one
        for reason in dict.fromkeys(o.reason for o in failed):  # one letter (and id) per failure
            alike = [o for o in failed if o.reason == reason]
            ports.dead_letter(_letter(ports, event, reason, "; ".join(f"{o.target}: {o.message}" for o in alike),
                                      [o.target for o in alike]))
        for o in failed:  # after the letters are safe: a retry of this event skips them, a replay does not
            try:
                ports.state.mark_failed(o.target, created.version, created.sequencer, o.reason)
            except Exception as exc:  # noqa: BLE001 - the letter is safe; a retry's second one has its id
                ports.log("could not mark the failure", target=o.target, error=repr(exc))


def _conclude(ports: Ports, event: dict[str, Any], created: ManifestCreated, outcomes: list[Outcome],
              replay: bool) -> dict[str, Any]:
    """Record every outcome (:func:`_record`), then raise a transient one for Lambda to retry."""
    _record(ports, event, created, outcomes, replay)
    failed = [o for o in outcomes if o.status == "failed"]
    retry = [o for o in outcomes if o.status == "retry"]
    if retry:
        ports.metric("RefreshRetried")
        raise TransientError(retry[0].reason, "; ".join(o.message for o in retry))
    statuses = {o.status for o in outcomes}
    status = ("failed" if failed else "refreshed" if statuses & {"refreshed", "started"}
              else "queued" if "queued" in statuses else "skipped")
    result: dict[str, Any] = {"status": status, "version": created.version, "targets": {
        o.target: {"status": o.status, **({"reason": o.reason} if o.reason else {})} for o in outcomes}}
    if failed:
        result["reason"] = failed[0].reason
    elif status == "skipped" and len({o.reason for o in outcomes}) == 1:
        result["reason"] = outcomes[0].reason
    return result


# -- endpoint state changes -----------------------------------------------------------------------

def on_state_change(ports: Ports, change: EndpointStateChange) -> dict[str, Any]:
    """A trigger only: the endpoint's own description decides whether its rollout ended."""
    target = ports.settings.endpoint_target(change.endpoint)
    if target is None:
        raise Skip("unknown-endpoint", f"{change.endpoint} is not a refresh target")
    item = ports.state.get(target.id)
    if not any(item.get(k) for k in ("pending", "starting", "queued")):
        return _moved_back(ports, target, item, change)
    if ports.settings.dry_run:  # a rollout a live run started ends while dry run is on: keep the event
        raise TransientError("dry-run", f"{target.id}: dry run changes nothing; replay this state change "
                             "after turning dry run off")
    item, live, outcomes = _revisit(ports, target)
    if item.get("pending"):
        return {"status": "ignored", "reason": "in-progress", "detail": f"{target.id}: {live.status} on {live.config}"}
    if live.status != "InService":  # someone else's update: its end is another state change
        return {"status": "ignored", "reason": "endpoint-busy", "detail": f"{target.id}: {live.status}"}
    status, reason, deleted = item.get("settled", ("settled", "", []))
    retry = [o for o in outcomes if o.status == "retry"]
    if retry:  # the version waiting is still waiting: this state change's retry rolls it
        raise TransientError(retry[0].reason, retry[0].message)
    return {"status": status, "target": target.id, "version": item.get("current_version"), "deleted": deleted,
            **({"reason": reason} if reason else {}), "next": [o.status for o in outcomes]}


def _revisit(ports: Ports, target: Target) -> tuple[dict[str, Any], decide.Live, list[Outcome]]:
    """Under the target's lock (taken over a rollout, whose end may never be announced): settle what
    ended, give a rollout still running its lock back, else release and roll the version that waits.
    Returns the item, what the target serves and the waiting version's outcomes."""
    owner = _owner(ports)
    try:
        item = ports.state.acquire(target.id, owner, ports.settings.lock_seconds, over_rollout=True)
    except Busy:
        raise TransientError("target-busy", f"{target.id}: another invocation holds the target") from None
    def settle() -> tuple[dict[str, Any], decide.Live, bool]:
        live = ports.live(target, ports.settings.prefix_of(target))
        settled = _settle(ports, target, item, live, owner)
        if settled.get("pending"):
            ports.state.keep_rollout(target.id, owner, _rollout_seconds(target))
            return settled, live, True
        ports.state.release(target.id, owner)
        return settled, live, False
    item, live, running = _holding(ports, target, owner, settle)
    if running:
        return item, live, []
    if live.status != "InService":
        return item, live, []
    return item, live, _drain(ports, target, 0)


# -- warm rollout steps (the Step Functions workflow's task) ----------------------------------------

def on_rollout_step(ports: Ports, raw: Any) -> dict[str, Any]:
    """Advance one target's warm rollout by one step (:mod:`.rollout`) and answer the workflow
    (``contract.RolloutStep``: ``phase`` staging or switching -> wait ``wait_seconds`` and step again;
    done or failed -> end). Idempotent: a step of a rollout that has ended (settled by another step or by
    the reconciliation) only answers how it ended. The cluster's transient failures are retried at the next poll
    until the phase's deadline (:func:`.rollout.advance`); what still raises (the state table, a crash) is the
    workflow's to retry."""
    step = contract.RolloutStep.from_json(raw)
    target = next((t for ts in ports.settings.targets.values() for t in ts if t.id == step.target), None)
    if not isinstance(target, HyperPodTarget):
        ports.log("rollout step for a target not configured", target=step.target)
        return step._replace(phase="failed").to_json()
    waiting = step._replace(abandon=False, failures=0, wait_seconds=rollout.wait_seconds(target, step.phase))
    if ports.settings.dry_run:  # a rollout a live run started waits, unchanged, until dry run is off
        ports.log("dry run: rollout step changes nothing", target=target.id, version=step.version)
        return waiting.to_json()
    owner = _owner(ports)
    try:
        item = ports.state.acquire(target.id, owner, ports.settings.lock_seconds, over_rollout=True)
    except Busy:  # an invocation is at work on the target: look again after the wait
        return waiting.to_json()
    def advance() -> tuple[dict[str, Any], str | None]:
        pending, stepped = item.get("pending") or {}, item
        ours = pending.get("kind") == "hyperpod" and pending.get("version") == step.version
        if ours and step.execution != pending.get("config"):  # not the rollout's own execution: act on nothing
            ports.log("rollout step of another execution ignored", target=target.id, execution=step.execution,
                      rollout=pending.get("config"))
            ports.state.keep_rollout(target.id, owner, rollout.lock_seconds(target))
            return stepped, "failed"
        if ours:
            stepped = rollout.advance(ports, target, item, owner, abandon=step.abandon)
        if not stepped.get("pending"):
            ports.state.release(target.id, owner)
            return stepped, None
        ports.state.keep_rollout(target.id, owner, rollout.lock_seconds(target))
        if stepped["pending"].get("version") != step.version:
            return stepped, _ended(stepped, step.version)
        # Abandoned: the workflow ends here; a revert still under way is the reconciliation's to settle.
        return stepped, "failed" if step.abandon else rollout.PHASE_ANSWER[stepped["pending"]["phase"]]
    item, phase = _holding(ports, target, owner, advance)
    if phase is not None:
        return step._replace(phase=phase, abandon=False, failures=0,
                             wait_seconds=rollout.wait_seconds(target, phase)).to_json()
    ended = _ended(item, step.version)
    retry = [o for o in _drain(ports, target, 0) if o.status == "retry"]
    if retry:  # the version that waited behind the rollout is still waiting: the step's retry rolls it
        raise TransientError(retry[0].reason, retry[0].message)
    return step._replace(phase=ended, abandon=False, failures=0).to_json()


def _ended(item: dict[str, Any], version: str) -> str:
    """How the rollout of ``version`` ended, from the record: failed (and dead-lettered) or done."""
    last = item.get("last_rollout") or {}
    if last.get("version") == version:
        return str(last["outcome"])
    failed = {(item.get(k) or {}).get("version") for k in ("failed", "last_failed")}
    return "failed" if version in failed and item.get("current_version") != version else "done"


# -- the scheduled reconciliation -----------------------------------------------------------------

RECONCILED = contract.RECONCILED_METRIC
"""With Reason: rollout-ended (a rollout, or an unrecorded update, whose end was never announced),
start-abandoned (an update that never ran: its resources deleted), queued-rolled (a version that
waited for an event that never came), node-cache-swept (a version no deployment reads dropped from the nodes)."""


def reconcile(ports: Ports) -> dict[str, Any]:
    """Settle every recorded rollout, unrecorded update or waiting version whose target says it can
    move on, so that no state waits on an event that may never come (a state change lost to an
    undeliverable target or a disabled rule, a lock whose holder died). Raises after visiting every
    target when one could not be reconciled (the function's Errors), the next schedule tries again."""
    if ports.settings.dry_run:
        return {"status": "dry-run", "repaired": {}}
    repaired: dict[str, list[str]] = {}
    problems = []
    for target in (t for targets in ports.settings.targets.values() for t in targets):
        try:
            fixed = _reconcile(ports, target)
        except Exception as exc:  # noqa: BLE001 - every target is visited
            problems.append(f"{target.id}: {exc}")
            ports.log("could not reconcile", target=target.id, error=repr(exc))
            continue
        for reason in fixed:
            ports.metric(RECONCILED, reason=reason, target=target.id)
        if fixed:
            repaired[target.id] = fixed
    if problems:
        raise TransientError("reconcile-incomplete", "; ".join(problems))
    return {"status": "reconciled", "repaired": repaired}


def _reconcile(ports: Ports, target: Target) -> list[str]:
    item = ports.state.get(target.id)
    if not any(item.get(k) for k in ("pending", "starting", "queued")):
        return _sweep(ports, target, item)
    if lock_held(item, ports.state.clock()) and not held_by_rollout(item):
        return []  # an invocation is at work: it settles and rolls what waits itself
    if isinstance(target, EndpointTarget) and item.get("pending") and decide.rollout(item["pending"], ports.live(
            target, ports.settings.prefix_of(target)))[0] == "in-progress":
        return []  # still running: nothing to write
    if isinstance(target, HyperPodTarget) and (item.get("pending") or {}).get("kind") == "hyperpod" \
            and rollout.is_warm(ports, target):
        try:  # its execution may never have started, or have ended early: start it (a no-op when it runs)
            rollout.ensure_workflow(ports, target, item["pending"])
        except TransientError as exc:
            ports.log("could not start the rollout's execution", target=target.id, error=exc.message)
    try:
        item, _, outcomes = _revisit(ports, target)
    except TransientError as exc:
        if exc.reason == "target-busy":
            return []
        raise
    settled = item.get("settled", ("", "", []))[0]
    fixed = {"refreshed": ["rollout-ended"], "rollout-failed": ["rollout-ended"],
             "start-abandoned": ["start-abandoned"]}.get(settled, [])
    if any(o.status in ("refreshed", "started") for o in outcomes):
        fixed.append("queued-rolled")
    retry = [o for o in outcomes if o.status == "retry"]
    if retry:
        raise TransientError(retry[0].reason, retry[0].message)
    return fixed


def _sweep(ports: Ports, target: Target, item: dict[str, Any]) -> list[str]:
    """A node-cached target with nothing in flight: its filler keeps only what the deployment reads (what a
    failed, given-up or aborted rollout left; never a version a pod still mounts)."""
    if not isinstance(target, HyperPodTarget) or not rollout.is_warm(ports, target) \
            or lock_held(item, ports.state.clock()):
        return []
    dropped = rollout.sweep(ports, target)
    if dropped:
        ports.log("node cache swept", target=target.id, dropped=dropped)
    return ["node-cache-swept"] if dropped else []


def _moved_back(ports: Ports, target: EndpointTarget, item: dict[str, Any], change: EndpointStateChange) -> dict[str, Any]:
    """No rollout of ours: is the endpoint back on a version older than the one this function made
    serve (a stack rollback or someone's update restored an older EndpointConfig)? Then it is a
    failure like any other: ``RefreshFailed`` (``moved-back``) and a letter whose event is the manifest
    event of the recorded version, so its replay moves the endpoint forward again."""
    current = item.get("current_version")
    if change.status != "InService" or not current:
        raise Skip("no-rollout", f"{target.id}: no rollout in progress and no version waiting")
    try:
        live = ports.live(target, ports.settings.prefix_of(target))
        behind = live.status == "InService" and live.version is not None and compare(live.version, current) < 0
    except (UnorderableVersion, PermanentError):
        behind = False  # nothing this function can order or read: a deploy's business, not a move back
    except TransientError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise TransientError("unexpected", f"{target.id}: {exc!r}") from None
    if not behind:
        raise Skip("no-rollout", f"{target.id}: no rollout in progress, serves {live.version}")
    message = (f"{target.id} serves {live.version} ({live.config}), older than {current}, which the cache refresh "
               f"function made serve (a stack rollback or another update moved it back): replay this letter to "
               f"move it to {current} again, or deploy with the configuration at {current}")
    if ports.settings.dry_run:  # keep the event: the on-failure destination holds it for a replay
        raise TransientError("dry-run", f"{message}; dry run writes no letter")
    buckets = sorted(ports.settings.allowed_buckets)
    letter = letters.moved_back(target.id, item, buckets[0] if len(buckets) == 1 else None, message,
                                ports.request_id, ports.state.clock())
    ports.metric("RefreshFailed", reason=letters.MOVED_BACK, target=target.id)
    if letter is None:  # a record written before it named the bucket: the on-failure record keeps this event
        raise TransientError(letters.MOVED_BACK, f"{message}; the record names no bucket to replay from")
    ports.dead_letter(letter)
    ports.log("endpoint moved back", target=target.id, serves=live.version, recorded=current)
    return {"status": "dead-lettered", "reason": letters.MOVED_BACK, "target": target.id, "version": live.version,
            "recorded": current}
