"""Every format hyperwarm persists, each version ever written, and the readers that take them all.

What hyperwarm writes outlives the release that wrote it: a dead letter waits in its queue across an
upgrade, a state item is read by every later function and deploy guard, CloudFormation hands a guard
the properties an earlier release wrote when it rolls a stack back, and uploaders keep writing
manifests. So each carries its format, ``<name>/v<N>``, and the readers here accept every version in
:data:`WRITTEN`; one they do not know (written by a newer hyperwarm, then downgraded) is refused with
:class:`UnknownFormat`, which says so, rather than misread. A change of a format is a new version:
add it to :data:`WRITTEN` with how to read the previous one, a sample under ``tests/formats/`` and a
CHANGELOG line (``tests/test_formats.py`` checks all three).

Standard library only: the function, the deploy guard and ``hyperwarm refresh replay`` import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MANIFEST = "hyperwarm.manifest/v1"
"""A version folder's ``manifest.json``, written by uploaders (``manifest.py`` reads it)."""
LETTER = "hyperwarm.refresh.hook-dlq/v1"
"""The function's and the deploy guard's dead letters (``letters.py`` writes them, replay reads them)."""
STATE = "hyperwarm.refresh.state/v1"
"""A target's state item (``state.py`` writes it; the function and the deploy guard read it)."""
QUOTA = "hyperwarm.refresh.letter-quota/v2"
"""A dead-letter quota item in the state table (``quota.py`` writes and counts it)."""
DEPLOYED = "hyperwarm.refresh.deployed/v1"
"""What a deploy set on a target no refresh moves (``deployed.py``: the deploy guard writes and reads it)."""
GUARD = "hyperwarm.refresh.guard/v2"
"""The properties of a ``Custom::RefreshGuard`` (``hyperwarm.refresh.guard`` writes them, the guard reads them)."""
UNVERSIONED = "(no format field)"
"""How :data:`WRITTEN` names what was written before a record carried its format."""

WRITTEN: Mapping[str, Mapping[str, str]] = {
    "manifest": {MANIFEST: "since the first release"},
    "letter": {
        "hyperwarm.refresh-dlq/v1": "until 2026-12-01, when the format was renamed: the same envelope (letters "
                                    "written before 2026-11-29 have no letter_id; replay derives every letter's "
                                    "identity from its event)",
        LETTER: "since 2026-12-01",
    },
    "state": {
        UNVERSIONED: "items written before the format field (the same attributes; those added since, such as "
                     "current_bucket, are optional for every reader)",
        STATE: "since 2026-12-03: `format` on every item (and `pinned`, the deliberate pin of a deploy); a warm "
               "rollout's `pending` in the node cache's shape (`serving` a source, `previous` a version)",
    },
    "quota": {
        "hyperwarm.refresh.letter-quota/v1": "2026-12-03, first: one item per model prefix and clock hour (pk "
                                             "letters#<prefix>#<hour>, letters, expiration). No longer read: its "
                                             "hour's key could be written ahead of the hour; the count of the hour of "
                                             "the upgrade starts over (at most one hour's quota more)",
        QUOTA: "since 2026-12-03: one item per model prefix (pk letters#<prefix>): the clock hour it counts (hour), "
               "letters, expiration; a count of any other hour, later ones too, is started over",
    },
    "guard": {
        UNVERSIONED: "guard properties written before the Format property (Table, Targets[Id, Version, Field, Value], "
                     "optionally Fingerprint, DeadLetterQueue, Bucket)",
        "hyperwarm.refresh.guard/v1": "2026-12-03: Format, and Targets[].Pinned and Targets[].Location for pinned "
                                      "targets",
        GUARD: "since 2026-12-03 (later): Targets[].Recorded and DeployedTable for targets only a deploy moves; Table "
               "only where a target is not Recorded (v1's targets read as not Recorded)",
    },
    "deployed": {
        DEPLOYED: "since 2026-12-03, first: one item per target only a deploy moves (pk as a state item): "
                  "current_version, current_location, history, previous, at",
    },
}
"""Every version of every persisted format that a release of hyperwarm has written, and when."""


class UnknownFormat(ValueError):
    """A record in a format this release does not read: written by a newer hyperwarm, or not hyperwarm's."""

    def __init__(self, kind: str, found: Any) -> None:
        known = ", ".join(WRITTEN[kind])
        super().__init__(f"{kind} format {found!r} is not one this hyperwarm reads ({known}): it was written by a "
                         "newer hyperwarm; run that release (or a later one) to read it")
        self.kind = kind
        self.found = found


def version_of(kind: str, record: Mapping[str, Any], field: str = "format") -> str:
    """The format ``record`` says it is in (:data:`UNVERSIONED` without the field), if one of ``kind``'s;
    :class:`UnknownFormat` otherwise."""
    found = record.get(field, UNVERSIONED)
    if found not in WRITTEN[kind]:
        raise UnknownFormat(kind, found)
    return str(found)


def is_letter(doc: Any) -> bool:
    """True for the function's own envelope, in any format ever written; a record that names another
    ``hyperwarm.refresh*`` format raises :class:`UnknownFormat` (a newer release's letter)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("format"), str):
        return False
    if doc["format"] in WRITTEN["letter"]:
        return True
    if doc["format"].startswith("hyperwarm.refresh") and doc["format"].split("/")[0].endswith("-dlq"):
        raise UnknownFormat("letter", doc["format"])
    return False


def state_item(item: dict[str, Any]) -> dict[str, Any]:
    """A stored state item as this release reads it; :class:`UnknownFormat` for an item a newer release wrote.
    Every version reads as it is, but for a warm rollout an unversioned item has in flight: it staged in stand-alone
    caches (``staged``), which this release does not use, so its ``pending`` is marked ``legacy`` and the rollout
    ends at its next step (dead-lettered for a replay, the cluster untouched)."""
    if version_of("state", item) == UNVERSIONED:
        pending = item.get("pending") or {}
        if pending.get("kind") == "hyperpod" and "staged" in pending:
            return {**item, "pending": {**pending, "legacy": True}}
    return item


def guard_properties(properties: Mapping[str, Any]) -> Mapping[str, Any]:
    """A guard's properties, from this release or an earlier one (CloudFormation sends the earlier ones
    back during a rollback); :class:`UnknownFormat` for a newer release's."""
    version_of("guard", properties, "Format")
    return properties


def deployed_item(item: dict[str, Any]) -> dict[str, Any]:
    """A deploy record as this release reads it; :class:`UnknownFormat` for one a newer release wrote."""
    version_of("deployed", item)
    return item
