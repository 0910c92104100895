"""At most so many dead letters per model prefix and clock hour: a flood of bad uploads under one prefix writes a
bounded number of letters (and of replays to run), whatever its size.

The count is one item per prefix and hour in the state table (``pk`` ``letters#<prefix>#<hour>``, format
:data:`.formats.QUOTA`, gone two days later through the table's TTL attribute ``expiration``), raised by one
conditional ``UpdateItem`` per letter: DynamoDB applies each atomically, so however many invocations send at once,
no more than ``limit`` of them are counted in. What a full quota stops is only the letter: the failure is recorded
as always (the target's state, ``RefreshFailed``), and the caller logs the letter itself and counts
``DeadLettersSuppressed``. A count that cannot be written stops nothing: the caller sends the letter.

Standard library and botocore only.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from . import formats, naming

HOUR = 3600
KEEP_HOURS = 48
"""How long a count outlives its hour (DynamoDB's TTL deletes it within days after)."""


def take(table: Any, prefix: str, now: float, limit: int) -> bool:
    """Count one letter of ``prefix`` in the hour of ``now``: True when it is within the hour's ``limit``, False
    when the quota is spent (nothing written). Raises what DynamoDB raises otherwise (``table``: a boto3 Table),
    and :class:`.formats.UnknownFormat` for a count a newer release wrote (left as it is)."""
    hour = int(now // HOUR)
    try:
        table.update_item(
            Key={"pk": naming.letter_quota_pk(prefix, hour)},
            UpdateExpression="ADD #letters :one SET #format = :format, #expiration = :expiration",
            ConditionExpression="(attribute_not_exists(#letters) OR #letters < :limit) "
                                "AND (attribute_not_exists(#format) OR #format = :format)",
            ExpressionAttributeNames={"#letters": "letters", "#format": "format", "#expiration": "expiration"},
            ExpressionAttributeValues={":one": 1, ":limit": limit, ":format": formats.QUOTA,
                                       ":expiration": (hour + 1 + KEEP_HOURS) * HOUR},
            ReturnValuesOnConditionCheckFailure="ALL_OLD")
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
            raise
        stored = (exc.response.get("Item") or {}).get("format") or {}
        formats.version_of("quota", {"format": stored.get("S", formats.UNVERSIONED)})
        return False
    return True
