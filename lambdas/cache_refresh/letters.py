"""Dead letters the refresh function and the deploy guard write: one envelope, one deterministic id.

A letter is ``{"format": "hyperwarm.refresh.hook-dlq/v1", "letter_id", "event", "reason", "message",
"targets", "request_id", "failed_at"}``. ``letter_id`` depends only on what identifies the failure:
the version's manifest object (bucket and key), its S3 sequencer and the reason. Not on which targets are named: a crash
between marking one target failed and the next makes Lambda's retry dead-letter the rest alone, and a move back is
seen by the deploy guard and the refresh function, target by target; each is still one failure with
one id, which ``hyperwarm refresh replay`` replays once (the letter's event moves every target of the
prefix that is behind).

Standard library only: the deploy guard imports it too.
"""

from __future__ import annotations

import hashlib
import json
import time
from datetime import UTC, datetime
from typing import Any

from . import contract

FORMAT = contract.LETTER_FORMAT
MOVED_BACK = "moved-back"
"""Reason of a target found serving an older version than the one the function made serve."""


def letter_id(bucket: str, key: str, sequencer: str, reason: str) -> str:
    """The same for the same failure (the manifest object, its S3 sequencer, the reason), whoever writes
    it, however often and for whichever targets; versions named alike under two prefixes differ."""
    text = json.dumps([bucket, key, sequencer, reason])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, dict) else None


def manifest_key(event: Any) -> Any:
    """``detail.object.key`` of an S3 event (None where the event has none)."""
    return _field(_field(_field(event, "detail"), "object"), "key")


def event_letter_id(event: Any, reason: str) -> str:
    """:func:`letter_id` of the manifest object ``event`` names (an S3 event's bucket, key and sequencer):
    what the writers stamp on a letter, and what ``hyperwarm refresh replay`` derives again from the letter's
    event (a letter's own ``letter_id`` is never trusted)."""
    detail = _field(event, "detail")
    return letter_id(str(_field(_field(detail, "bucket"), "name")), str(manifest_key(event)),
                     str(_field(_field(detail, "object"), "sequencer")), reason)


def envelope(event: dict[str, Any], reason: str, message: str, targets: list[str], *, request_id: str,
             failed_at: float | None = None) -> dict[str, Any]:
    """A letter whose event is the S3 manifest event of the version that failed."""
    return {"format": FORMAT, "letter_id": event_letter_id(event, reason), "event": event, "reason": reason,
            "message": message, "targets": targets, "request_id": request_id,
            "failed_at": int(time.time() if failed_at is None else failed_at)}


def manifest_event(bucket: str, location: str, sequencer: str, event_id: str) -> dict[str, Any]:
    """An S3 "Object Created" event for ``s3://bucket/<location>/manifest.json`` (what replays a version)."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"version": "0", "id": event_id, "detail-type": "Object Created", "source": "aws.s3", "time": now,
            "resources": [f"arn:aws:s3:::{bucket}"],
            "detail": {"version": "0", "bucket": {"name": bucket}, "reason": "hyperwarm-moved-back",
                       "object": {"key": f"{location}/manifest.json", "sequencer": sequencer or "0"}}}


def moved_back(target: str, item: dict[str, Any], bucket: str | None, message: str, request_id: str,
               failed_at: float | None = None) -> dict[str, Any] | None:
    """The letter for ``target`` serving less than the record's ``current_version``: its event is the
    manifest event of that version, so a replay moves the target forward again. None when the record
    lacks the version's location or bucket (a record older than these fields)."""
    version, location = item.get("current_version"), item.get("current_location")
    bucket = item.get("current_bucket") or bucket
    if not (version and location and bucket):
        return None
    sequencer = str(item.get("current_sequencer") or "0")
    ident = letter_id(bucket, f"{location}/manifest.json", sequencer, MOVED_BACK)
    return envelope(manifest_event(bucket, location, sequencer, f"hyperwarm-moved-back-{ident}"), MOVED_BACK,
                    message, [target], request_id=request_id, failed_at=failed_at)


def send(sqs: Any, queue_url: str, letter: dict[str, Any]) -> None:
    """Send one letter with its reason and id as message attributes."""
    sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(letter), MessageAttributes={
        "reason": {"DataType": "String", "StringValue": letter["reason"]},
        "letter-id": {"DataType": "String", "StringValue": letter["letter_id"]}})
