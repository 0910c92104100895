"""What a deploy set on a target only configuration moves, and the order its versions go in.

A Hugging Face revision, an FSx version folder or a JumpStart model version changes by ``cdk deploy`` alone: no
refresh function moves or records it. So the deploy guard keeps the record (a table of its own, one item per target,
format :data:`formats.DEPLOYED`) and holds each deploy to a refresh's rule: never move a target back, unless pinned on
purpose. Two versions both in the refresh order (:mod:`.versions`: v3, 2.4.0, dates) compare in it; any other pair
(a commit SHA carries no order of its own) goes in the order deploys set them: a version that served before the
current one is older, one never deployed is newer.

Item: ``{"pk", "format", "current_version", "current_location", "history": [versions that served before, oldest
first], "previous": {the fields before this record, empty for the first}, "at": epoch seconds}``. ``previous`` puts
the record back when CloudFormation rolls the deploy back. Standard library only, pure: the guard does the I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import formats
from .versions import UnorderableVersion, compare

HISTORY_KEPT = 100
"""Versions remembered before the current one (a commit SHA older than these reads as never deployed)."""
_FIELDS = ("current_version", "current_location", "history", "at")


def move_back(target: Mapping[str, Any], item: Mapping[str, Any]) -> str | None:
    """Why this deploy's ``target`` (a guard property) would move it back from what ``item`` records; None when it
    would not: nothing recorded, the same version, a newer one, or a pinned target."""
    current, version = item.get("current_version"), target["Version"]
    if not current or version == current or target.get("Pinned"):
        return None
    try:
        if compare(version, current) > 0:
            return None
        how = "an older version"
    except UnorderableVersion:
        if version not in (item.get("history") or []):
            return None
        how = f"which served before {current}"
    value = target["Value"].replace("{version}", current)
    by = "moved there by the cache refresh function" if item.get("seeded") else "set by the last deploy"
    return (f"{target['Id']} is at {current} ({by}) but this deploy would set {version}, {how}: "
            f"set {target['Field']} to {value!r} (or a version not deployed before), or pin the target to roll it back "
            "on purpose")


def recorded(target: Mapping[str, Any], item: Mapping[str, Any], now: int) -> dict[str, Any] | None:
    """The item recording this deploy's version of ``target`` (None: already recorded): the version served so far
    joins the history, and the record it replaces is kept for a rollback (:func:`undone`)."""
    current, version = item.get("current_version"), target["Version"]
    if current == version:
        return None
    history = [v for v in [*(item.get("history") or []), *([current] if current else [])] if v != version]
    return {"pk": item.get("pk"), "format": formats.DEPLOYED, "current_version": version,
            "current_location": target.get("Location") or target["Value"].replace("{version}", version),
            "history": history[-HISTORY_KEPT:], "at": now,
            "previous": {} if item.get("seeded") else {k: item[k] for k in _FIELDS if k in item}}


def undone(failed: Mapping[str, Any], restored: Mapping[str, Any] | None, item: Mapping[str, Any]
           ) -> dict[str, Any] | None:
    """During a rollback of the deploy that set ``failed``: the record before it (an empty dict: no record at all),
    when ``item`` is exactly what that deploy wrote over the version the rollback restores (``restored``; None where
    the restored properties lack the target, so only a first record is forgotten); None: nothing to undo. Any other
    record (a later deploy's, or one a late request rewrote) is left: it can only block a version, never admit one."""
    if item.get("current_version") != failed["Version"] or item.get("seeded"):
        return None
    previous = item.get("previous") or {}
    before = previous.get("current_version")
    if (restored["Version"] if restored is not None else None) != before:
        return None
    return {"pk": item.get("pk"), "format": formats.DEPLOYED, **previous} if previous else {}


def seeded(pk: str, served: str | None, location: str | None) -> dict[str, Any]:
    """The record of a target the guard has none of: empty, or (``served``) the version the refresh function's
    state says it serves, for a model a refresh prefix named until now; recording over it keeps it in the history."""
    if not served:
        return {"pk": pk}
    return {"pk": pk, "current_version": served, "current_location": location or served, "history": [], "seeded": True}
