"""At most so many dead letters per model prefix and clock hour for the failures an uploader causes by uploading: a
flood of bad uploads under one prefix writes a bounded number of letters (and of replays to run), whatever its size.

Only those letters are counted (:data:`COUNTED`: a new upload's name, order, signature and manifest refusals). A
rollout's failure, a refused rollout record, a publisher key that cannot be used, a target that refuses and a
moved-back endpoint always get their letter: nobody outside the function triggers them by uploading, and suppressing
them would hide what an operator must see.

The count is one item per prefix in the state table (``pk`` ``letters#<prefix>``, format :data:`.formats.QUOTA`: the
clock ``hour`` it counts and its ``letters``; gone two days after its hour through the table's TTL attribute
``expiration``). One conditional ``UpdateItem`` counts a letter in the item's hour, below ``limit``; another starts
the hour's count over an item of any other hour, earlier or later: a count for an hour after the current one is not
this function's (it never writes one) and is never honoured, so a table writer cannot fill hours ahead. DynamoDB
applies each update atomically, so however many invocations send at once, no more than ``limit`` of them are counted
in; a count above ``limit`` in the current hour only means the quota is spent. What a full quota stops is only the
letter: the failure is recorded as always (the target's state, ``RefreshFailed``), and the caller logs the letter
itself and counts ``DeadLettersSuppressed``. A count that cannot be written stops nothing: the caller sends the letter.

Standard library and botocore only.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from . import formats, naming

HOUR = 3600
KEEP_HOURS = 48
"""How long a count outlives its hour (DynamoDB's TTL deletes it within days after)."""
COUNTED = frozenset({
    "unorderable-version", "version-not-allowed", "version-jump", "signature-missing", "signature-invalid",
    "signature-mismatch", "manifest-missing", "corrupt-manifest", "manifest-object-missing", "manifest-mismatch",
    "manifest-unverifiable",
})
"""The letters' reasons an uploader triggers by uploading (gate steps 1 to 3 refusing a version): the only ones
counted. Every other letter is sent whatever the count."""
_ATTEMPTS = 3
_NAMES = {"#letters": "letters", "#hour": "hour", "#format": "format", "#expiration": "expiration"}


def counted(letter: dict[str, Any]) -> bool:
    """Does this letter count against its prefix's quota (:data:`COUNTED`)?"""
    return letter.get("reason") in COUNTED


def take(table: Any, prefix: str, now: float, limit: int) -> bool:
    """Count one letter of ``prefix`` in the hour of ``now``: True when it is within the hour's ``limit``, False
    when the quota is spent (nothing written). Raises what DynamoDB raises otherwise (``table``: a boto3 Table),
    and :class:`.formats.UnknownFormat` for a count a newer release wrote (left as it is)."""
    hour = int(now // HOUR)
    values = {":one": 1, ":hour": hour, ":format": formats.QUOTA, ":expiration": (hour + 1 + KEEP_HOURS) * HOUR}
    key = {"pk": naming.letter_quota_pk(prefix)}
    for _ in range(_ATTEMPTS):
        stored = _update(table, key, "ADD #letters :one SET #expiration = :expiration",
                         "#hour = :hour AND #format = :format AND #letters < :limit", {**values, ":limit": limit})
        if stored is None:
            return True
        if _this_hour(stored, hour):
            return False  # spent (or, above the limit, a count that only means spent)
        readable = " OR ".join(f"#format = :written{i}" for i in range(len(formats.WRITTEN["quota"])))
        stored = _update(table, key, "SET #letters = :one, #hour = :hour, #format = :format, #expiration = :expiration",
                         f"(attribute_not_exists(#hour) OR #hour <> :hour) AND (attribute_not_exists(#format) OR "
                         f"{readable})",
                         {**values, **{f":written{i}": v for i, v in enumerate(formats.WRITTEN["quota"])}})
        if stored is None:
            return True
        # another invocation started this hour's count first: count in it
    return False


def _update(table: Any, key: dict[str, str], update: str, condition: str, values: dict[str, Any]) -> dict[str, Any] | None:
    """One conditional UpdateItem: None when it landed; the item as stored when its condition failed (an item a newer
    release wrote raises :class:`.formats.UnknownFormat`)."""
    names = {k: v for k, v in _NAMES.items() if k in update or k in condition}
    try:
        table.update_item(Key=key, UpdateExpression=update, ConditionExpression=condition,
                          ExpressionAttributeNames=names, ExpressionAttributeValues=values,
                          ReturnValuesOnConditionCheckFailure="ALL_OLD")
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
            raise
        stored = exc.response.get("Item") or {}
        if "format" in stored:
            formats.version_of("quota", {"format": stored["format"].get("S")})
        return stored
    return None


def _this_hour(stored: dict[str, Any], hour: int) -> bool:
    """The stored count is this release's, of ``hour``."""
    return (stored.get("format") or {}).get("S") == formats.QUOTA and (stored.get("hour") or {}).get("N") == str(hour)
