"""Parse the EventBridge events the Lambda receives into small, typed records.

S3 "Object Created" events for ``<model prefix>/<version>/manifest.json`` start a refresh; SageMaker
"Endpoint State Change" events finish (or abandon) an endpoint rollout. Anything else is a
:class:`~.errors.Skip` with reason ``malformed-event`` or ``not-a-manifest``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aws_lambda_powertools.utilities.data_classes import EventBridgeEvent, S3EventBridgeNotificationEvent

from .errors import Skip

MANIFEST_NAME = "manifest.json"
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}\Z")
_PREFIX = re.compile(r"^[A-Za-z0-9_.=-]+(/[A-Za-z0-9_.=-]+)*\Z")
_SEQUENCER = re.compile(r"[0-9A-Fa-f]{1,64}")
MAX_DEPTH = 12
"""EventBridge events nest a few levels; anything deeper is not an event we handle."""


@dataclass(frozen=True)
class ManifestCreated:
    """A version marked complete: ``s3://bucket/<prefix>/<version>/manifest.json`` was written."""

    bucket: str
    key: str
    sequencer: str
    version_id: str | None
    prefix: str
    version: str
    time: str

    @property
    def location(self) -> str:
        """Key prefix of this version's files (the operator's ``modelLocation``)."""
        return f"{self.prefix}/{self.version}"


@dataclass(frozen=True)
class EndpointStateChange:
    endpoint: str
    config: str
    status: str
    failure_reason: str | None


def valid_version(version: str) -> bool:
    """A version folder name this function can act on: ``[A-Za-z0-9][A-Za-z0-9_.-]``, at most 63 characters."""
    return bool(_VERSION.match(version))


def split_manifest_key(key: str) -> tuple[str, str]:
    """``a/b/v3/manifest.json`` -> (``a/b``, ``v3``); Skip when the key is not a version's manifest.

    A version folder outside :func:`valid_version` is returned as it is: under a configured prefix the
    flow fails it as ``unorderable-version`` (dead-lettered), elsewhere it skips it as ``malformed-event``.
    """
    parts = key.split("/")
    if len(parts) < 3 or parts[-1] != MANIFEST_NAME:
        raise Skip("not-a-manifest", f"{key!r} is not <model>/<version>/{MANIFEST_NAME}")
    prefix, version = "/".join(parts[:-2]), parts[-2]
    if not _PREFIX.match(prefix):
        raise Skip("malformed-event", f"{key!r}: prefix has characters outside [A-Za-z0-9_.=-]")
    return prefix, version


def _depth_ok(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True when ``value`` nests at most ``limit`` levels (iterative: never a RecursionError)."""
    stack = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth >= limit:
                return False
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return True


def _event(event: Any) -> dict[str, Any]:
    """The event as a dict, or Skip ``malformed-event`` (a string, a list, a nested bomb...)."""
    if not isinstance(event, Mapping):
        raise Skip("malformed-event", f"an EventBridge event is a JSON object, got {type(event).__name__}")
    if not _depth_ok(event):
        raise Skip("malformed-event", f"the event nests deeper than {MAX_DEPTH} levels")
    return dict(event)


def _time(value: Any) -> str:
    """EventBridge's ``time`` (ISO 8601 text); checked here so nothing fails on it after a target moved."""
    if not isinstance(value, str):
        raise Skip("malformed-event", f"time {value!r} is not an ISO 8601 string")
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise Skip("malformed-event", f"time {value!r} is not an ISO 8601 string") from None
    return value


def event_source(event: Any) -> str | None:
    """``source`` of a dict event (for dispatch), else None."""
    return event.get("source") if isinstance(event, Mapping) and isinstance(event.get("source"), str) else None


def parse_manifest_created(event: Any) -> ManifestCreated:
    try:
        parsed = S3EventBridgeNotificationEvent(_event(event))
        if parsed.source != "aws.s3" or parsed.detail_type != "Object Created":
            raise Skip("malformed-event", f"expected aws.s3 Object Created, got {parsed.source}/{parsed.detail_type}")
        obj = parsed.detail.object
        bucket, key, sequencer = parsed.detail.bucket.name, obj.key, obj.sequencer
        version_id = obj.get("version-id") or None
        time = _time(parsed.get("time"))
    except (KeyError, TypeError, AttributeError) as exc:
        raise Skip("malformed-event", f"not an S3 EventBridge event: missing {exc}") from None
    if not (isinstance(bucket, str) and isinstance(key, str) and isinstance(sequencer, str)
            and _SEQUENCER.fullmatch(sequencer)):
        raise Skip("malformed-event", "bucket, key or sequencer missing or invalid")
    if version_id is not None and not isinstance(version_id, str):
        raise Skip("malformed-event", "version-id is not a string")
    prefix, version = split_manifest_key(key)
    return ManifestCreated(bucket, key, sequencer, version_id, prefix, version, time)


def parse_endpoint_state_change(event: Any) -> EndpointStateChange:
    try:
        parsed = EventBridgeEvent(_event(event))
        if parsed.source != "aws.sagemaker" or parsed.detail_type != "SageMaker Endpoint State Change":
            raise Skip("malformed-event", f"expected SageMaker Endpoint State Change, got {parsed.detail_type}")
        detail = parsed.detail
        change = EndpointStateChange(endpoint=detail["EndpointName"], config=detail.get("EndpointConfigName", ""),
                                     status=detail["EndpointStatus"], failure_reason=detail.get("FailureReason"))
    except (KeyError, TypeError, AttributeError) as exc:
        raise Skip("malformed-event", f"not a SageMaker endpoint state change: missing {exc}") from None
    if not all(isinstance(v, str) for v in (change.endpoint, change.config, change.status)):
        raise Skip("malformed-event", "EndpointName, EndpointConfigName and EndpointStatus must be strings")
    return change


def location_version(location: str, prefix: str) -> str | None:
    """``<prefix>/<version>[/...]`` -> version; None when the location names no version folder of ``prefix``."""
    if not isinstance(location, str) or not location.startswith(prefix + "/"):
        return None
    version = location[len(prefix) + 1:].split("/", 1)[0]
    return version if _VERSION.match(version) else None


def s3_uri_version(uri: str, buckets: frozenset[str], prefix: str) -> str | None:
    """``s3://<allowed bucket>/<prefix>/<version>/...`` -> version, else None."""
    if not isinstance(uri, str) or not uri.startswith("s3://"):
        return None
    bucket, _, key = uri[5:].partition("/")
    return location_version(key, prefix) if bucket in buckets else None
