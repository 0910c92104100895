"""Version order and the per-target state in DynamoDB: never roll back, never run twice at once.

One item per target, partition key ``pk = "target#<target id>"``:

- ``current_version``, ``current_sequencer``, ``current_location``: what the target serves (for an
  endpoint: what it serves once SageMaker reported InService on the new config);
- ``lock_owner``, ``lock_expires`` (epoch seconds): held for the duration of one refresh, and for
  an endpoint until its rollout ends; an expired lock may be taken over (a crashed invocation);
- ``pending``: an endpoint rollout in flight (version, sequencer, config, created models, the
  previous config, start time);
- ``owned_config``, ``owned_models``: the EndpointConfig and Models a refresh created and that now
  serve: deleted once a later refresh is InService (never the ones CloudFormation created).

Every write is conditional on the lock, so a version decided under the lock is the one recorded.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from .errors import Skip, TransientError
from .events import sequencer_key

_TOKEN = re.compile(r"\d+|[^\d]+")
_NUMERIC_CORE = re.compile(r"^[vV]?\d+(\.\d+)*$")


def _natural(text: str) -> tuple[tuple[int, int | str], ...]:
    return tuple((0, int(t)) if t.isdigit() else (1, t.lower()) for t in _TOKEN.findall(text))


def version_key(version: str) -> tuple[Any, ...]:
    """Sort key: natural order (v9 < v10, 1.9.0 < 1.10.0); semver pre-releases sort before the release.

    ``1.2.0-rc1 < 1.2.0``; dates (``2026-11-01``) sort by date; a leading ``v`` is ignored.
    """
    core, _, pre = version.partition("-")
    if _NUMERIC_CORE.match(core):
        core_key = tuple(int(n) for n in core.lstrip("vV").split("."))
        return (0, core_key, (0, _natural(pre)) if pre else (1, ()))
    return (1, _natural(version), (1, ()))


def is_newer(version: str, sequencer: str, than_version: str | None, than_sequencer: str | None) -> bool:
    """True when (version, sequencer) is strictly after the recorded one; ties go to the later sequencer."""
    if than_version is None:
        return True
    a, b = version_key(version), version_key(than_version)
    if a != b:
        return a > b
    if version == than_version:
        return False  # same version again: a new location is the only change the operator notices
    return sequencer_key(sequencer) > sequencer_key(than_sequencer or "")


@dataclass(frozen=True)
class TargetState:
    item: dict[str, Any]

    @property
    def current_version(self) -> str | None:
        return self.item.get("current_version")

    @property
    def current_sequencer(self) -> str | None:
        return self.item.get("current_sequencer")

    @property
    def pending(self) -> dict[str, Any] | None:
        return self.item.get("pending")

    def check_newer(self, version: str, sequencer: str) -> None:
        """Skip ``duplicate`` or ``older-version`` unless (version, sequencer) moves the target forward."""
        if version == self.current_version:
            raise Skip("duplicate", f"already at {version}")
        if not is_newer(version, sequencer, self.current_version, self.current_sequencer):
            raise Skip("older-version", f"{version} is not newer than the current {self.current_version}")
        pending = self.pending
        if pending and pending.get("version") == version:
            raise Skip("duplicate", f"rollout of {version} already in progress")


class StateTable:
    def __init__(self, dynamodb: Any, table: str) -> None:
        self._ddb = dynamodb
        self._table = table

    @staticmethod
    def key(target_id: str) -> dict[str, Any]:
        return {"pk": f"target#{target_id}"}

    def get(self, target_id: str) -> TargetState:
        item = self._ddb.Table(self._table).get_item(Key=self.key(target_id), ConsistentRead=True).get("Item")
        return TargetState(item or {})

    def acquire(self, target_id: str, owner: str, seconds: int) -> TargetState:
        """Take the target's lock (free or expired) and return the state read atomically with it."""
        now = int(time.time())
        try:
            result = self._ddb.Table(self._table).update_item(
                Key=self.key(target_id),
                UpdateExpression="SET lock_owner = :me, lock_expires = :exp",
                ConditionExpression="attribute_not_exists(lock_owner) OR lock_expires < :now",
                ExpressionAttributeValues={":me": owner, ":exp": now + seconds, ":now": now},
                ReturnValues="ALL_NEW")
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise TransientError("target-busy", f"{target_id} is being refreshed by another invocation") from None
            raise
        return TargetState(result["Attributes"])

    def release(self, target_id: str, owner: str) -> None:
        """Drop the lock if still ours (no state change)."""
        self._update(target_id, owner, "REMOVE lock_owner, lock_expires", {})

    def commit(self, target_id: str, owner: str, *, version: str, sequencer: str, location: str) -> None:
        """Record the version as served and release the lock."""
        self._update(target_id, owner,
                     "SET current_version = :v, current_sequencer = :s, current_location = :l, updated_at = :t "
                     "REMOVE lock_owner, lock_expires",
                     {":v": version, ":s": sequencer, ":l": location, ":t": int(time.time())})

    def start_rollout(self, target_id: str, owner: str, pending: dict[str, Any], seconds: int) -> None:
        """Keep the lock for the rollout (owner ``rollout:<config>``) and remember what it replaces."""
        self._update(target_id, owner, "SET pending = :p, lock_owner = :o, lock_expires = :e, updated_at = :t",
                     {":p": pending, ":o": f"rollout:{pending['config']}", ":e": int(time.time()) + seconds,
                      ":t": int(time.time())})

    def finish_rollout(self, target_id: str, config: str, *, succeeded: bool) -> dict[str, Any]:
        """End the rollout of ``config``: on success the pending version becomes current.

        Returns the item as it was before, so the caller knows what was superseded.
        """
        owner = f"rollout:{config}"
        if succeeded:
            expr = ("SET current_version = #p.#v, current_sequencer = #p.#s, current_location = #p.#l, "
                    "owned_config = #p.#c, owned_models = #p.#m, updated_at = :t REMOVE #p, lock_owner, lock_expires")
            names = {"#p": "pending", "#v": "version", "#s": "sequencer", "#l": "location", "#c": "config",
                     "#m": "created_models"}
        else:
            expr = "SET last_failed = #p, updated_at = :t REMOVE #p, lock_owner, lock_expires"
            names = {"#p": "pending"}
        try:
            result = self._ddb.Table(self._table).update_item(
                Key=self.key(target_id), UpdateExpression=expr, ConditionExpression="lock_owner = :me",
                ExpressionAttributeValues={":me": owner, ":t": int(time.time())},
                ExpressionAttributeNames=names, ReturnValues="ALL_OLD")
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise Skip("no-rollout", f"{target_id}: no rollout of {config} in progress") from None
            raise
        return result["Attributes"]

    def _update(self, target_id: str, owner: str, expr: str, values: dict[str, Any]) -> None:
        try:
            self._ddb.Table(self._table).update_item(
                Key=self.key(target_id), UpdateExpression=expr, ConditionExpression="lock_owner = :me",
                ExpressionAttributeValues={":me": owner, **values})
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise TransientError("lock-lost", f"{target_id}: lock expired and was taken over") from None
            raise
