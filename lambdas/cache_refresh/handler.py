"""Cache refresh Lambda: a complete new model version in S3 moves every configured target to it.

Entry points (one code asset, two EventBridge rules):

- ``hyperwarm.functions.cache_refresh.handler.lambda_handler``: S3 "Object Created" for ``<prefix>/<version>/manifest.json``
  (it also takes a "SageMaker Endpoint State Change", so one function name replays any dead letter).
- ``hyperwarm.functions.cache_refresh.handler.on_schedule``: EventBridge's schedule; the reconciliation settles
  every rollout, unrecorded update and waiting version whose end was never announced.
- ``hyperwarm.functions.cache_refresh.handler.on_rollout_step``: the warm-rollout workflow's task (one
  idempotent step of a HyperPod target's stage -> switch -> retire, :mod:`.rollout`).
- ``hyperwarm.functions.cache_refresh.handler.on_endpoint_state_change``: "SageMaker Endpoint State Change"; finishes
  endpoint rollouts (deletes superseded resources once the new config serves, dead-letters a
  rollback or failure), rolls a version that waited behind the rollout, and dead-letters an endpoint
  found back on a version older than the one it made serve (``moved-back``).

Each is parse -> :mod:`.flow` (decisions in :mod:`.decide`, pure) -> act through :class:`.flow.Ports`,
whose AWS implementation is built here once per container. Outcomes: skipped (``RefreshSkipped`` with
Reason), queued behind a rollout (``RefreshQueued``), transient failure (raised: Lambda retries, then
its on-failure destination), permanent failure (``RefreshFailed`` with Reason and a letter to
``HYPERWARM_DLQ_URL`` with the event to replay; not raised, retrying would only repeat it).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from botocore.exceptions import ClientError

from . import config, contract, flow, gate, letters, quota
from .errors import Skip, TransientError
from .events import event_source, parse_manifest_created
from .state import DynamoStore, StateTable
from .targets import endpoint as endpoint_target, hyperpod

NAMESPACE = contract.METRICS_NAMESPACE
SERVICE = contract.service_name()
logger = Logger(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
_settings: config.Settings | None = None


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


def _metric(name: str, reason: str | None = None, target: str | None = None, value: float = 1.0,
            unit: str = "Count") -> None:
    """The metric with the service dimension only (what the alarms watch) and, with a reason, by Reason;
    a warm rollout's (``contract.ROLLOUT_METRICS``) by service and target, what the dashboard draws per model."""
    if name in contract.ROLLOUT_METRICS and target:
        _metric_by(name, "target", target, value, unit)
        return
    metrics.add_metric(name=name, unit=MetricUnit[unit], value=value)
    if reason:
        _metric_by(name, "Reason", reason, value, unit)
    if unit == "Count":
        (logger.warning if name == "RefreshFailed" else logger.info)(name, extra={"reason": reason, "target": target})


def _metric_by(name: str, dimension: str, key: str, value: float = 1.0, unit: str = "Count") -> None:
    """The metric with the dimensions ``service`` and ``dimension``."""
    with single_metric(name=name, unit=MetricUnit[unit], value=value, namespace=NAMESPACE,
                       default_dimensions={"service": SERVICE}) as metric:
        metric.add_dimension(name=dimension, value=key)


def _dead_letter(letter: dict[str, Any]) -> None:
    """Send a permanent failure with its event to the DLQ; without one, raise (the on-failure destination).
    A refusal an uploader causes by uploading (:data:`.quota.COUNTED`) beyond its prefix's hourly quota is logged in
    full instead and counted in ``DeadLettersSuppressed``; the failure itself is recorded by the caller as always.
    Every other letter (a rollout's, a refused record's, a key's) is sent whatever the count."""
    url = settings().dlq_url
    if not url:
        raise RuntimeError(f"permanent failure and no HYPERWARM_DLQ_URL: {json.dumps(letter)}")
    prefix = _served_prefix(letter) if quota.counted(letter) else None
    if prefix is not None and not _within_quota(prefix):
        metrics.add_metric(name=contract.LETTERS_SUPPRESSED_METRIC, unit=MetricUnit.Count, value=1)
        _metric_by(contract.LETTERS_SUPPRESSED_METRIC, "prefix", prefix)
        logger.warning("dead letter suppressed: the prefix's hourly quota is spent; the failure is recorded, and "
                       "a new upload of the version's manifest.json, once fixed, refreshes it again",
                       extra={"prefix": prefix, "quota": settings().letters_per_hour, "letter": letter})
        return
    letters.send(client("sqs"), url, letter)


def _served_prefix(letter: dict[str, Any]) -> str | None:
    """The configured prefix the letter's targets serve, whose quota it counts against. Not the prefix its event
    names: a refused rollout record's event is whatever its writer put there, and would spend another prefix's
    quota (or a new one's each time). None for a letter naming no configured target: it is sent uncounted."""
    named = set(letter.get("targets") or ())
    return next((p for p, ts in settings().targets.items() if any(t.id in named for t in ts)), None)


def _within_quota(prefix: str) -> bool:
    """The letter is within its prefix's hourly quota, or the count could not be written (then it is sent all the
    same: a letter too many is better than one lost)."""
    s = settings()
    try:
        return quota.take(client("dynamodb").Table(s.state_table), prefix, time.time(), s.letters_per_hour)
    except Exception as exc:  # noqa: BLE001 - fail open, towards keeping the letter
        logger.warning("dead-letter quota not counted; the letter is sent", extra={"prefix": prefix,
                                                                                   "error": repr(exc)})
        return True


def _verify(created: Any) -> str:
    return gate.content(client("s3"), client("kms"), settings(), created)


def _live(target: config.Target, prefix: str) -> Any:
    s = settings()
    if isinstance(target, config.HyperPodTarget):
        return hyperpod.live(target, prefix, s.allowed_buckets, _region())
    return endpoint_target.live(client("sagemaker"), target, prefix, s.allowed_buckets)


def _start_workflow(target: config.HyperPodTarget, version: str, name: str) -> None:
    """StartExecution under the rollout's name: a second start of the same one is a no-op (the running
    execution answers; one that ended is ``ExecutionAlreadyExists``, and the reconciliation steps its rollout)."""
    arn = os.environ[contract.ROLLOUT_STATE_MACHINE]
    try:
        client("stepfunctions").start_execution(stateMachineArn=arn, name=name,
                                                input=json.dumps(contract.RolloutStep(target.id, version).to_json()))
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code")
        if code != "ExecutionAlreadyExists":  # started before (a retry): its steps carry on
            raise TransientError("workflow-unavailable", f"StartExecution {name}: {code}") from None


_RESERVED = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
"""Attributes of a log record: an ``extra`` field so named would make ``logging`` raise (``message`` first)."""


def _log(text: str, /, **fields: Any) -> None:
    """A log line with its fields; one named like a log record's attribute gets a ``field_`` prefix."""
    logger.info(text, extra={f"field_{k}" if k in _RESERVED else k: v for k, v in fields.items()})


def ports(request_id: str) -> flow.Ports:
    s = settings()
    return flow.Ports(
        settings=s, state=StateTable(DynamoStore(client("dynamodb"), s.state_table)), verify=_verify, live=_live,
        apply_hyperpod=lambda target, created: hyperpod.apply(target, created, _region()),
        start_endpoint=lambda target, created, reserve: endpoint_target.start(client("sagemaker"), target, created,
                                                                               reserve),
        delete_superseded=lambda cfg, models, serving: endpoint_target.delete_superseded(
            client("sagemaker"), cfg, models, serving),
        dead_letter=_dead_letter, metric=_metric, log=_log,
        request_id=request_id, kube=lambda target: hyperpod.kube_for(target, _region()),
        start_workflow=_start_workflow if os.environ.get(contract.ROLLOUT_STATE_MACHINE) else None)


@logger.inject_lambda_context(correlation_id_path="id", clear_state=True)
@metrics.log_metrics
def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    """Manifest events (and state changes too, so one function name replays any dead letter)."""
    if isinstance(event, dict) and event_source(event) == "aws.s3":
        try:
            created = parse_manifest_created({k: v for k, v in event.items() if k != flow.REPLAY_KEY})
            logger.append_keys(model_prefix=created.prefix, model_version=created.version, bucket=created.bucket)
        except Skip:
            pass  # the flow answers it
    return _handle(event, context)


@logger.inject_lambda_context(correlation_id_path="id", clear_state=True)
@metrics.log_metrics
def on_endpoint_state_change(event: Any, context: Any) -> dict[str, Any]:
    return _handle(event, context)


@logger.inject_lambda_context(correlation_id_path="id", clear_state=True)
@metrics.log_metrics
def on_schedule(event: Any, context: Any) -> dict[str, Any]:
    """The scheduled reconciliation: settles what waits on an event that never came (:func:`.flow.reconcile`)."""
    return _handle(event, context)


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def on_rollout_step(event: Any, context: Any) -> dict[str, Any]:
    """The warm-rollout workflow's task: one step of (target, version), answered as ``contract.RolloutStep``."""
    metrics.add_metric(name="EventsReceived", unit=MetricUnit.Count, value=1)
    logger.append_keys(target=event.get("target") if isinstance(event, dict) else None)
    return flow.on_rollout_step(ports(getattr(context, "aws_request_id", None) or "local"), event)


def _handle(event: Any, context: Any) -> dict[str, Any]:
    # Every invocation counts, so each one publishes at least one metric (and Powertools has no empty flush).
    metrics.add_metric(name="EventsReceived", unit=MetricUnit.Count, value=1)
    try:
        return flow.handle(ports(getattr(context, "aws_request_id", None) or "local"), event)
    except TransientError as exc:
        logger.warning("transient failure: raised for a retry", extra={"reason": exc.reason, "error": exc.message})
        raise
