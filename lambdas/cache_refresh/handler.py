"""Cache refresh Lambda: a complete new model version in S3 moves every configured target to it.

Entry points (one code asset, two EventBridge rules):

- ``cache_refresh.handler.lambda_handler``: S3 "Object Created" for ``<prefix>/<version>/manifest.json``.
- ``cache_refresh.handler.on_endpoint_state_change``: "SageMaker Endpoint State Change"; finishes
  endpoint rollouts (deletes superseded resources on InService, keeps them on failure or rollback).

Configuration: environment variables documented in :mod:`.config` and README.md. Outcomes:
skipped (logged, ``RefreshSkipped`` with Reason), transient failure (raised: retried, then the
rule's or function's dead-letter queue), permanent failure (``RefreshFailed`` with Reason, sent to
``HYPERWARM_DLQ_URL`` with replay context, not raised so it is not retried pointlessly).
"""

from __future__ import annotations

import functools
import json
import os
import time
import uuid
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.utilities.idempotency import (DynamoDBPersistenceLayer, IdempotencyConfig,
                                                         idempotent_function)

from . import config, manifest
from .errors import PermanentError, RefreshError, Skip, TransientError
from .events import ManifestCreated, parse_endpoint_state_change, parse_manifest_created
from .ordering import StateTable
from .targets import endpoint as endpoint_target
from .targets import hyperpod

NAMESPACE = "Hyperwarm"
SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME", "hyperwarm-cache-refresh")
DLQ_FORMAT = "hyperwarm.refresh-dlq/v1"
logger = Logger(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
_settings: config.Settings | None = None


class TargetFailure(PermanentError):
    """A permanent failure of some of an event's targets: they are named for the replay."""

    def __init__(self, reason: str, message: str, targets: list[str]) -> None:
        super().__init__(reason, message)
        self.targets = targets


def settings() -> config.Settings:
    global _settings
    if _settings is None:
        _settings = config.load()
    return _settings


def _region() -> str:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


@functools.cache
def client(service: str) -> Any:
    """One boto3 client per service for the container's life (warm invocations reuse connections)."""
    if service == "dynamodb":
        return boto3.resource("dynamodb", region_name=_region())
    return boto3.client(service, region_name=_region())


def _count(name: str, reason: str | None = None, target: str | None = None) -> None:
    """The metric without dimensions beyond service (for alarms) and, with a reason, broken down by it."""
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=1)
    if reason:
        with single_metric(name=name, unit=MetricUnit.Count, value=1, namespace=NAMESPACE,
                           default_dimensions={"service": SERVICE}) as metric:
            metric.add_dimension(name="Reason", value=reason)
    log = logger.warning if name in ("RefreshFailed",) else logger.info
    log(name, extra={"reason": reason, "target": target})


def _elapsed_since(iso_time: str | None) -> float | None:
    if not iso_time:
        return None
    try:
        from datetime import datetime
        return max(0.0, time.time() - datetime.fromisoformat(iso_time.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return None


def _dead_letter(event: dict[str, Any], error: PermanentError, targets: list[str], request_id: str) -> None:
    """Send a permanent failure with its event to the DLQ; without a DLQ, raise it (on-failure destination)."""
    url = settings().dlq_url
    if not url:
        raise error
    body = {"format": DLQ_FORMAT, "event": event, "reason": error.reason, "message": error.message,
            "targets": targets, "request_id": request_id, "failed_at": int(time.time())}
    client("sqs").send_message(
        QueueUrl=url, MessageBody=json.dumps(body),
        MessageAttributes={"reason": {"DataType": "String", "StringValue": error.reason}})


def _refresh_target(table: StateTable, target: config.Target, created: ManifestCreated, owner: str) -> None:
    s = settings()
    seconds = s.lock_seconds
    state = table.acquire(target.id, owner, seconds)
    try:
        state.check_newer(created.version, created.sequencer)
        _count("RefreshStarted", target=target.id)
        if s.dry_run:
            logger.info("dry run: would refresh", extra={"target": target.id, "version": created.version})
            table.release(target.id, owner)
            return
        if isinstance(target, config.HyperPodTarget):
            changed = hyperpod.apply(target, created, _region())
            table.commit(target.id, owner, version=created.version, sequencer=created.sequencer,
                         location=created.location)
            elapsed = _elapsed_since(created.time)
            if elapsed is not None:
                metrics.add_metric(name="TimeToRefresh", unit=MetricUnit.Seconds, value=elapsed)
            logger.info("hyperpod target repointed", extra={"target": target.id, "changed": changed})
            _count("RefreshSucceeded", target=target.id)
        else:
            pending = endpoint_target.start(client("sagemaker"), target, created)
            table.start_rollout(target.id, owner, pending, endpoint_target.rollout_seconds(target.blue_green))
            logger.info("endpoint update started", extra={"target": target.id, "config": pending["config"]})
    except BaseException:
        try:
            table.release(target.id, owner)
        except Exception:  # the lock expires on its own; keep the original error
            logger.exception("could not release lock", extra={"target": target.id})
        raise


def _refresh(event: dict[str, Any], created: ManifestCreated, request_id: str) -> dict[str, Any]:
    """Decide, verify, then move each target; raises Transient/Permanent errors after trying every target."""
    s = settings()
    if created.bucket not in s.allowed_buckets:
        raise Skip("unknown-bucket", f"bucket {created.bucket} is not configured")
    targets = s.targets_for(created.prefix)
    if not targets:
        raise Skip("unknown-prefix", f"no targets for prefix {created.prefix}")
    table = StateTable(client("dynamodb"), s.state_table)
    due = []
    for target in targets:
        try:
            table.get(target.id).check_newer(created.version, created.sequencer)
            due.append(target)
        except Skip as skip:
            _count("RefreshSkipped", skip.reason, target.id)
    if not due:
        return {"status": "skipped", "version": created.version}
    s3 = client("s3")
    files = manifest.read(s3, created.bucket, created.key, created.version_id)
    manifest.verify(s3, created.bucket, created.location, files)
    failures: list[tuple[str, RefreshError]] = []
    for target in due:
        try:
            _refresh_target(table, target, created, owner=f"{request_id}:{uuid.uuid4().hex[:8]}")
        except Skip as skip:
            _count("RefreshSkipped", skip.reason, target.id)
        except (TransientError, PermanentError) as exc:
            logger.warning("target failed", extra={"target": target.id, "reason": exc.reason, "error": exc.message})
            failures.append((target.id, exc))
    transient = [f for f in failures if isinstance(f[1], TransientError)]
    if transient:
        raise transient[0][1]
    if failures:
        raise TargetFailure(failures[0][1].reason, "; ".join(f"{t}: {e.message}" for t, e in failures),
                            [t for t, _ in failures])
    return {"status": "refreshed", "version": created.version, "targets": [t.id for t in due]}


def _idempotent_refresh(table_name: str, context: Any):
    """Duplicate deliveries of one S3 event (same bucket, key, sequencer) return the first result."""
    persistence = DynamoDBPersistenceLayer(table_name=table_name, key_attr="pk")
    idempotency = IdempotencyConfig(
        event_key_jmespath="[detail.bucket.name, detail.object.key, detail.object.sequencer]",
        raise_on_no_idempotency_key=True, expires_after_seconds=24 * 3600)
    if hasattr(context, "get_remaining_time_in_millis"):
        idempotency.register_lambda_context(context)
    return idempotent_function(data_keyword_argument="event", persistence_store=persistence, config=idempotency)


@logger.inject_lambda_context(correlation_id_path="id", clear_state=True)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    request_id = getattr(context, "aws_request_id", None) or uuid.uuid4().hex
    try:
        created = parse_manifest_created(event)
    except Skip as skip:
        _count("RefreshSkipped", skip.reason)
        logger.info("event skipped", extra={"reason": skip.reason, "detail": skip.message})
        return {"status": "skipped", "reason": skip.reason}
    logger.append_keys(model_prefix=created.prefix, model_version=created.version, bucket=created.bucket)

    def process(event: dict[str, Any]) -> dict[str, Any]:
        return _refresh(event, created, request_id)

    try:
        return _idempotent_refresh(settings().state_table, context)(process)(event=event)
    except Skip as skip:
        _count("RefreshSkipped", skip.reason)
        return {"status": "skipped", "reason": skip.reason}
    except TransientError as exc:
        logger.warning("transient failure: retrying", extra={"reason": exc.reason, "error": exc.message})
        metrics.add_metric(name="RefreshRetried", unit=MetricUnit.Count, value=1)
        raise
    except PermanentError as exc:
        targets = getattr(exc, "targets", [t.id for t in settings().targets_for(created.prefix)])
        for target in targets:
            _count("RefreshFailed", exc.reason, target)
        logger.error("permanent failure: dead-lettered", extra={"reason": exc.reason, "error": exc.message})
        _dead_letter(event, exc, targets, request_id)
        return {"status": "failed", "reason": exc.reason, "targets": targets}


@logger.inject_lambda_context(correlation_id_path="id", clear_state=True)
@metrics.log_metrics
def on_endpoint_state_change(event: dict[str, Any], context: Any) -> dict[str, Any]:
    try:
        change = parse_endpoint_state_change(event)
        target = settings().endpoint_target(change.endpoint)
        if target is None:
            raise Skip("unknown-endpoint", f"{change.endpoint} is not a refresh target")
        return _finish_rollout(target, change)
    except Skip as skip:
        logger.info("state change ignored", extra={"reason": skip.reason, "detail": skip.message})
        return {"status": "ignored", "reason": skip.reason}


def _finish_rollout(target: config.EndpointTarget, change: Any) -> dict[str, Any]:
    table = StateTable(client("dynamodb"), settings().state_table)
    state = table.get(target.id)
    pending = state.pending
    if not pending:
        raise Skip("no-rollout", f"{target.id}: no rollout in progress")
    succeeded = change.status == "InService" and change.config == pending["config"]
    rolled_back = change.status == "InService" and change.config == pending.get("previous_config")
    failed = change.status in ("Failed", "UpdateRollbackFailed", "OutOfService")
    if not (succeeded or rolled_back or failed):
        raise Skip("in-progress", f"{target.id}: {change.status} on {change.config}")
    if succeeded:
        sm = client("sagemaker")
        deleted = endpoint_target.delete_superseded(sm, state.item.get("owned_config"),
                                                    list(state.item.get("owned_models", [])))
        table.finish_rollout(target.id, pending["config"], succeeded=True)
        metrics.add_metric(name="TimeToRefresh", unit=MetricUnit.Seconds,
                           value=max(0.0, time.time() - float(pending["started"])))
        _count("RefreshSucceeded", target=target.id)
        logger.info("endpoint refreshed", extra={"target": target.id, "version": pending["version"], "deleted": deleted})
        return {"status": "refreshed", "version": pending["version"], "deleted": deleted}
    table.finish_rollout(target.id, pending["config"], succeeded=False)
    reason = "rolled-back" if rolled_back else "endpoint-failed"
    _count("RefreshFailed", reason, target.id)
    logger.error("endpoint refresh failed; previous config and models kept",
                 extra={"target": target.id, "status": change.status, "failure": change.failure_reason})
    return {"status": "failed", "reason": reason}
