"""Per-target state in DynamoDB: what serves, the lock, a rollout in flight, the version waiting behind it.

One item per target, partition key ``pk = "target#<target id>"`` (schema in README.md, "State table"),
in the format :data:`.formats.STATE` (stamped on every write; every format ever written is read).
Every change is read-modify-write of the whole item, conditional on its revision ``rev``: the
transitions below are pure functions of the item, so the same code runs against DynamoDB and
against the in-memory store of the model tests, and two invocations never both win a change.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from . import formats, naming
from .decide import ROLLOUT, dead_lettered
from .errors import PermanentError, TransientError
from .versions import UnorderableVersion, newer

_ATTEMPTS = 5
_CURRENT = ("current_version", "current_location", "current_sequencer", "current_bucket")
"""What serves, as the record says."""


class Busy(Exception):
    """The target's lock is held (and not expired); ``item`` is the state that was read."""

    def __init__(self, item: dict[str, Any]) -> None:
        super().__init__(f"locked by {item.get('lock_owner')}")
        self.item = item


class Freed(TransientError):
    """The lock a version was about to wait behind is no longer held by the same owner: whoever held it
    has released it, and may already have looked for a waiting version. The caller takes the lock itself."""

    def __init__(self, target_id: str, owner: str) -> None:
        super().__init__("lock-lost", f"{target_id}: {owner} no longer holds the lock")


class LockLost(TransientError):
    def __init__(self, target_id: str) -> None:
        super().__init__("lock-lost", f"{target_id}: lock expired and was taken over")


class Store(Protocol):
    """Whole-item get and revision-conditional put (DynamoDB, or a dict in the model tests)."""

    def get(self, pk: str) -> dict[str, Any]: ...

    def put(self, pk: str, item: dict[str, Any], expected_rev: int) -> bool: ...


class DynamoStore:
    def __init__(self, dynamodb: Any, table: str) -> None:
        self._table = dynamodb.Table(table)

    def get(self, pk: str) -> dict[str, Any]:
        try:
            return self._table.get_item(Key={"pk": pk}, ConsistentRead=True).get("Item") or {}
        except (ClientError, BotoCoreError) as exc:
            raise _unavailable("GetItem", pk, exc) from exc

    def put(self, pk: str, item: dict[str, Any], expected_rev: int) -> bool:
        condition = {"ConditionExpression": "attribute_not_exists(pk)"} if expected_rev == 0 else {
            "ConditionExpression": "rev = :rev", "ExpressionAttributeValues": {":rev": expected_rev}}
        try:
            self._table.put_item(Item={**item, "pk": pk}, **condition)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise _unavailable("PutItem", pk, exc) from exc
        except BotoCoreError as exc:
            raise _unavailable("PutItem", pk, exc) from exc
        return True


def _readable(pk: str, item: dict[str, Any]) -> dict[str, Any]:
    """The item, if this release reads its format; one a newer release wrote is left as it is and its event
    retried (a downgrade: it moves again once that release runs again)."""
    try:
        return formats.state_item(item)
    except formats.UnknownFormat as exc:
        raise TransientError("state-format", f"{pk}: {exc}") from None


def _unavailable(operation: str, pk: str, exc: Exception) -> TransientError:
    """Throttling, a 5xx or any other DynamoDB error: the state table may answer later (retried)."""
    code = exc.response.get("Error", {}).get("Code") if isinstance(exc, ClientError) else type(exc).__name__
    return TransientError("state-unavailable", f"{pk}: DynamoDB {operation} failed ({code}): {exc}")


# -- pure views of an item ---------------------------------------------------------------------

def lock_held(item: dict[str, Any], now: float) -> bool:
    return bool(item.get("lock_owner")) and float(item.get("lock_expires", 0)) >= now


def held_by_rollout(item: dict[str, Any]) -> bool:
    return str(item.get("lock_owner", "")).startswith(ROLLOUT)


def tidy(item: dict[str, Any]) -> dict[str, Any]:
    """Drop a queued version that is no longer ahead of what serves or is rolling out, or that failed."""
    queued = item.get("queued")
    if not queued:
        return item
    ahead = [v for v in (item.get("current_version"), (item.get("pending") or {}).get("version")) if v]
    try:
        stale = any(not newer(queued["version"], v) for v in ahead)
    except UnorderableVersion:
        stale = True
    if stale or dead_lettered(item, queued["version"], queued.get("sequencer", "")):
        item = {k: v for k, v in item.items() if k != "queued"}
    return item


RESETS_KEPT = 10
"""``hyperwarm refresh reset`` records kept in a target's item (who, when, from, to, why)."""


class _TargetItem:
    """Reading and the conditional write of a target's item, every transition's ground; ``clock`` is injectable so
    lock expiry can be modelled."""

    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock

    @staticmethod
    def key(target_id: str) -> str:
        return naming.state_pk(target_id)

    def get(self, target_id: str) -> dict[str, Any]:
        return _readable(self.key(target_id), self.store.get(self.key(target_id)))

    def _change(self, target_id: str, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> dict[str, Any]:
        """Apply ``change`` (None: no write) with optimistic concurrency; returns the item now stored."""
        pk = self.key(target_id)
        for _ in range(_ATTEMPTS):
            item = _readable(pk, self.store.get(pk))
            rev = int(item.get("rev", 0))
            new = change(dict(item))
            if new is None:
                return item
            new = tidy(new)
            new.update(pk=pk, rev=rev + 1, updated_at=int(self.clock()), format=formats.STATE)
            if self.store.put(pk, new, rev):
                return new
        raise TransientError("state-conflict", f"{target_id}: state changed concurrently {_ATTEMPTS} times")


class _OutsideTransitions(_TargetItem):
    """The transitions made outside a refresh and without its lock: a deploy's pin and unpin (the deploy guard),
    an operator's reset and abort (``hyperwarm refresh``)."""

    def request_abort(self, target_id: str, *, by: str) -> dict[str, Any]:
        """Ask the warm rollout in flight to end (``hyperwarm refresh abort``): its next step, or the reconciliation,
        points the deployment back where it was switched and drops the staged copy. No lock is needed: the mark
        is a conditional write like any other, and the rollout reads it at every step. ValueError without a
        warm rollout in flight."""
        def mark(item: dict[str, Any]) -> dict[str, Any] | None:
            pending = item.get("pending") or {}
            if pending.get("kind") != "hyperpod":
                raise ValueError(f"{target_id}: no rollout in flight to abort")
            if pending.get("abort"):
                return None
            return {**item, "pending": {**pending, "abort": {"by": by, "at": int(self.clock())}}}
        return self._change(target_id, mark)

    def pin(self, target_id: str, *, version: str, location: str, bucket: str) -> dict[str, Any]:
        """A deploy pins the target at ``version``: recorded as what serves before the deploy moves it there, so
        nothing takes the move for a move back; the record it replaces is kept (``pinned.previous``) for a
        rollback of that deploy (:meth:`unpin`)."""
        def pinned(item: dict[str, Any]) -> dict[str, Any] | None:
            held = item.get("pinned") or {}
            if held.get("version") == version:
                return None
            previous = held.get("previous", {k: item[k] for k in _CURRENT if k in item})
            return {**item, "current_version": version, "current_location": location, "current_bucket": bucket,
                    "current_sequencer": "0", "pinned": {"version": version, "previous": previous}}
        return self._change(target_id, pinned)

    def reset(self, target_id: str, *, version: str, by: str, reason: str) -> dict[str, Any]:
        """Record ``version`` as what the target serves, on purpose (``hyperwarm refresh reset``): a record a bad
        upload moved ahead of what serves (whose later versions it would skip as older) is put back without editing
        the table by hand. Who, when, from what and why are kept (``resets``, the last :data:`RESETS_KEPT`).
        ValueError while anything is in flight or locked (abort it first), or without a recorded location."""
        now = self.clock()

        def reset(item: dict[str, Any]) -> dict[str, Any] | None:
            if any(item.get(k) for k in ("pending", "starting")) or lock_held(item, now):
                raise ValueError(f"{target_id}: a refresh or rollout is in flight; let it end (or hyperwarm refresh "
                                 "abort it) first")
            location, bucket = item.get("current_location"), item.get("current_bucket")
            if not location or not bucket or "/" not in str(location):
                raise ValueError(f"{target_id}: the record names no served location to reset from")
            prefix = str(location).rsplit("/", 1)[0]
            entry = {"by": by, "at": int(now), "from": item.get("current_version"), "to": version, "reason": reason}
            return {**item, "current_version": version, "current_location": f"{prefix}/{version}",
                    "current_sequencer": "0", "resets": [*(item.get("resets") or []), entry][-RESETS_KEPT:]}
        return self._change(target_id, reset)

    def unpin(self, target_id: str, *, restore: bool = False) -> dict[str, Any]:
        """The target is no longer pinned (it follows refreshes from the pinned version on); ``restore``: the
        deploy that pinned it rolled back, so the record it replaced is put back."""
        def unpinned(item: dict[str, Any]) -> dict[str, Any] | None:
            held = item.get("pinned")
            if held is None:
                return None
            rest = {k: v for k, v in item.items() if k != "pinned" and not (restore and k in _CURRENT)}
            return {**rest, **held.get("previous", {})} if restore else rest
        return self._change(target_id, unpinned)


class StateTable(_OutsideTransitions):
    """The transitions of a target's item: a refresh's, under the target's lock (:meth:`acquire`), and the ones
    made without it; ``clock`` is injectable so lock expiry can be modelled."""

    def acquire(self, target_id: str, owner: str, seconds: int, *, over_rollout: bool = False) -> dict[str, Any]:
        """Take the lock (free or expired) and return the item read with it; :class:`Busy` otherwise.

        ``over_rollout``: also take it from a running rollout (the state-change handler checks on it and
        hands it back with :meth:`keep_rollout` while the rollout runs).
        """
        now = self.clock()

        def take(item: dict[str, Any]) -> dict[str, Any]:
            if lock_held(item, now) and not (over_rollout and held_by_rollout(item)):
                raise Busy(item)
            return {**item, "lock_owner": owner, "lock_expires": int(now) + seconds}
        return self._change(target_id, take)

    def _owned(self, target_id: str, owner: str, change: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
        def guarded(item: dict[str, Any]) -> dict[str, Any]:
            if item.get("lock_owner") != owner:
                raise LockLost(target_id)
            return change(item)
        return self._change(target_id, guarded)

    @staticmethod
    def _unlocked(item: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in item.items() if k not in ("lock_owner", "lock_expires")}

    def release(self, target_id: str, owner: str) -> dict[str, Any]:
        """Drop our lock."""
        return self._owned(target_id, owner, self._unlocked)

    def commit(self, target_id: str, owner: str, *, version: str, sequencer: str, location: str,
               bucket: str) -> dict[str, Any]:
        """Record the version as served and release the lock."""
        return self._owned(target_id, owner, lambda item: {
            **self._unlocked(item), "current_version": version, "current_sequencer": sequencer,
            "current_location": location, "current_bucket": bucket})

    def observe(self, target_id: str, owner: str, *, version: str, sequencer: str, location: str,
                bucket: str) -> dict[str, Any]:
        """Release the lock, recording ``version`` as served when it is newer than the recorded one
        (what the target was read to serve: a commit or rollout record that was lost)."""
        def seen(item: dict[str, Any]) -> dict[str, Any]:
            item = self._unlocked(item)
            current = item.get("current_version")
            try:
                ahead = current is None or newer(version, current)
            except UnorderableVersion:
                ahead = False
            if not ahead:
                return item
            return {**item, "current_version": version, "current_sequencer": sequencer, "current_location": location,
                    "current_bucket": bucket}
        return self._owned(target_id, owner, seen)

    def reserve(self, target_id: str, owner: str, rollout: dict[str, Any]) -> dict[str, Any]:
        """Name what an endpoint update is about to create (``starting``), before it creates anything."""
        return self._owned(target_id, owner, lambda item: {**item, "starting": rollout})

    def promote_start(self, target_id: str, owner: str) -> dict[str, Any]:
        """A ``starting`` update SageMaker is deploying (its answer was lost) becomes the rollout in flight."""
        return self._owned(target_id, owner, lambda item: {
            **{k: v for k, v in item.items() if k != "starting"}, "pending": item["starting"]})

    def drop_start(self, target_id: str, owner: str) -> dict[str, Any]:
        """Forget a ``starting`` record whose update never ran (its resources are deleted)."""
        return self._owned(target_id, owner, lambda item: {k: v for k, v in item.items() if k != "starting"})

    def start_rollout(self, target_id: str, owner: str, pending: dict[str, Any], seconds: int) -> dict[str, Any]:
        """Hand our lock to the rollout (owner ``rollout:<config>``) until SageMaker ends it."""
        return self._owned(target_id, owner, lambda item: {
            **{k: v for k, v in item.items() if k != "starting"}, "pending": pending,
            "lock_owner": ROLLOUT + pending["config"], "lock_expires": int(self.clock()) + seconds})

    def update_rollout(self, target_id: str, owner: str, **changes: Any) -> dict[str, Any]:
        """Record a warm rollout's progress (its phase and what it did) in its ``pending`` record."""
        return self._owned(target_id, owner, lambda item: {**item, "pending": {**item["pending"], **changes}})

    def keep_rollout(self, target_id: str, owner: str, seconds: int) -> dict[str, Any]:
        """A rollout whose lock expired is still running: give the lock back to it."""
        return self._owned(target_id, owner, lambda item: {
            **item, "lock_owner": ROLLOUT + item["pending"]["config"], "lock_expires": int(self.clock()) + seconds})

    def finish_rollout(self, target_id: str, owner: str, *, succeeded: bool, reason: str = "",
                       keep_lock: bool = False, record: str = "pending", serves_new: bool = False) -> dict[str, Any]:
        """End the rollout under ``owner``'s lock: the new version serves, or it failed. ``record``:
        ``starting`` for an update whose start was never recorded (its answer was lost) but that serves.
        ``serves_new``: a failed warm rollout whose deployment reads the new version all the same (the cluster
        refused to be read past the switch): the record says what serves. A warm rollout's outcome stays as
        ``last_rollout`` (version, outcome, reason, the cold pods it saw)."""
        def finish(item: dict[str, Any]) -> dict[str, Any]:
            pending = item[record]
            rest = {k: v for k, v in (item if keep_lock else self._unlocked(item)).items() if k != record}
            if pending.get("kind") == "hyperpod":
                rest["last_rollout"] = {"version": pending["version"], "outcome": "done" if succeeded else "failed",
                                        "reason": reason, "cold_pods": int(pending.get("cold_pods", 0)),
                                        "ended": int(self.clock())}
            served = {"current_version": pending["version"], "current_sequencer": pending["sequencer"],
                      "current_location": pending["location"], "current_bucket": pending["bucket"]}
            if succeeded:
                owned = ({} if pending.get("kind") == "hyperpod" else
                         {"owned_config": pending["config"], "owned_models": pending["created_models"]})
                return {**rest, **served, **owned}
            failed = {"failed": {"version": pending["version"], "sequencer": pending["sequencer"], "reason": reason},
                      "last_failed": pending}
            return {**rest, **(served if serves_new else {}), **failed}
        return self._owned(target_id, owner, finish)

    def refuse(self, target_id: str, owner: str, *, record: str, reason: str, message: str,
               forget_owned: bool = False) -> dict[str, Any]:
        """Drop an endpoint rollout record (``record``: pending or starting) the gate refused when read back, under
        ``owner``'s lock (kept): nothing it names is committed or deleted; it stays as ``last_failed`` with why.
        ``forget_owned``: ``owned_config``/``owned_models`` not the endpoint's own go too (nothing deletes by them)."""
        def refuse(item: dict[str, Any]) -> dict[str, Any]:
            held = item.get(record)
            drop = {record, *(("owned_config", "owned_models") if forget_owned else ())}
            return {**{k: v for k, v in item.items() if k not in drop},
                    "last_failed": {**(held if isinstance(held, dict) else {}), "reason": reason, "message": message}}
        return self._owned(target_id, owner, refuse)

    def enqueue(self, target_id: str, version: str, sequencer: str, event: dict[str, Any], *, behind: str) -> bool:
        """Remember ``version`` to roll when the target is free, unless an equal or newer one waits.

        ``behind``: the lock owner whose release rolls it. The write lands only while that owner still
        holds the lock (else :class:`Freed`): an owner releases before it looks for a waiting version,
        so a version written after that look would wait for nobody.
        A failure mark of the same version goes: only a replay queues a version that failed.
        """
        queued_now = False

        def put(item: dict[str, Any]) -> dict[str, Any] | None:
            nonlocal queued_now
            if item.get("lock_owner") != behind or not lock_held(item, self.clock()):
                raise Freed(target_id, behind)
            waiting = item.get("queued")
            try:
                if waiting and not newer(version, waiting["version"]):
                    return None
            except UnorderableVersion as exc:
                raise PermanentError("unorderable-version", f"{target_id}: {exc}") from None
            queued_now = True
            if (item.get("failed") or {}).get("version") == version:
                item = {k: v for k, v in item.items() if k != "failed"}
            return {**item, "queued": {"version": version, "sequencer": sequencer, "event": json.dumps(event)}}
        self._change(target_id, put)
        return queued_now

    def mark_failed(self, target_id: str, version: str, sequencer: str, reason: str) -> None:
        """Record a dead-lettered upload without holding the lock (a retry of its event then skips it)."""
        self._change(target_id, lambda item: {**item, "failed": {"version": version, "sequencer": sequencer,
                                                                 "reason": reason}})
