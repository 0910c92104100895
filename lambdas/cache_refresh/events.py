"""Parse the EventBridge events the Lambda receives into small, typed records.

S3 "Object Created" events for ``<model prefix>/<version>/manifest.json`` start a refresh; SageMaker
"Endpoint State Change" events finish (or abandon) an endpoint rollout. Anything else is a
:class:`~.errors.Skip` with reason ``malformed-event`` or ``not-a-manifest``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from aws_lambda_powertools.utilities.data_classes import EventBridgeEvent, S3EventBridgeNotificationEvent

from .errors import Skip

MANIFEST_NAME = "manifest.json"
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_PREFIX = re.compile(r"^[A-Za-z0-9_.=-]+(/[A-Za-z0-9_.=-]+)*$")


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


def split_manifest_key(key: str) -> tuple[str, str]:
    """``a/b/v3/manifest.json`` -> (``a/b``, ``v3``); Skip when the key is not a version's manifest."""
    parts = key.split("/")
    if len(parts) < 3 or parts[-1] != MANIFEST_NAME:
        raise Skip("not-a-manifest", f"{key!r} is not <model>/<version>/{MANIFEST_NAME}")
    prefix, version = "/".join(parts[:-2]), parts[-2]
    if not _PREFIX.match(prefix) or not _VERSION.match(version):
        raise Skip("malformed-event", f"{key!r}: prefix or version has characters outside [A-Za-z0-9_.=-]")
    return prefix, version


def parse_manifest_created(event: Mapping[str, Any]) -> ManifestCreated:
    try:
        parsed = S3EventBridgeNotificationEvent(dict(event))
        if parsed.source != "aws.s3" or parsed.detail_type != "Object Created":
            raise Skip("malformed-event", f"expected aws.s3 Object Created, got {parsed.source}/{parsed.detail_type}")
        obj = parsed.detail.object
        bucket, key, sequencer = parsed.detail.bucket.name, obj.key, obj.sequencer
        version_id = obj.get("version-id") or None
        time = parsed.time
    except (KeyError, TypeError, AttributeError) as exc:
        raise Skip("malformed-event", f"not an S3 EventBridge event: missing {exc}") from None
    if not (isinstance(bucket, str) and isinstance(key, str) and isinstance(sequencer, str)
            and re.fullmatch(r"[0-9A-Fa-f]{1,64}", sequencer)):
        raise Skip("malformed-event", "bucket, key or sequencer missing or invalid")
    prefix, version = split_manifest_key(key)
    return ManifestCreated(bucket, key, sequencer, version_id, prefix, version, time)


def parse_endpoint_state_change(event: Mapping[str, Any]) -> EndpointStateChange:
    try:
        parsed = EventBridgeEvent(dict(event))
        if parsed.source != "aws.sagemaker" or parsed.detail_type != "SageMaker Endpoint State Change":
            raise Skip("malformed-event", f"expected SageMaker Endpoint State Change, got {parsed.detail_type}")
        detail = parsed.detail
        return EndpointStateChange(endpoint=detail["EndpointName"], config=detail.get("EndpointConfigName", ""),
                                   status=detail["EndpointStatus"], failure_reason=detail.get("FailureReason"))
    except (KeyError, TypeError, AttributeError) as exc:
        raise Skip("malformed-event", f"not a SageMaker endpoint state change: missing {exc}") from None


def sequencer_key(sequencer: str) -> str:
    """S3 sequencers compare as hex strings after right-padding the shorter one with zeros."""
    return sequencer.upper().ljust(64, "0")
