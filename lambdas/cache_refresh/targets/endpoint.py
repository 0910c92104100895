"""SageMaker endpoint targets: a blue/green UpdateEndpoint onto a clone of the live configuration.

Every variant whose Model reads from the refreshed prefix gets a new Model, identical but for the
model data location (``S3DataSource.S3Uri`` = ``s3://bucket/<prefix>/<version>/``, or for a
compressed ``ModelDataUrl`` the same file name in the new version folder). The new EndpointConfig
copies every field of the live one that CreateEndpointConfig accepts (variant routing, weights,
instance types and counts, data capture, KMS key, async and shadow settings); only the variants'
ModelName changes. UpdateEndpoint runs with ``RetainAllVariantProperties=True`` (instance counts
and weights the autoscaler set stay) and a blue/green policy with optional auto-rollback alarms.

The old config and models serve until SageMaker reports InService on the new config
(:func:`finish`); only resources a previous refresh created are ever deleted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from .. import naming
from ..config import BlueGreen, EndpointTarget
from ..decide import Live
from ..errors import PermanentError, TransientError
from ..events import ManifestCreated, s3_uri_version
from ..versions import UnorderableVersion, compare

TAG = {"Key": "hyperwarm:created-by", "Value": "cache-refresh"}
_THROTTLE = {"ThrottlingException", "Throttling", "ServiceUnavailable", "InternalFailure", "RequestLimitExceeded"}


def _accepted(sm: Any, operation: str, described: dict[str, Any]) -> dict[str, Any]:
    """The fields of a Describe* answer that the Create* call takes (everything else is read-only).

    Empty values are dropped: an absent optional structure is not the same as an empty one.
    """
    members = sm.meta.service_model.operation_model(operation).input_shape.members
    return {k: v for k, v in described.items() if k in members and v not in (None, {}, [])}


def _fail(exc: ClientError, what: str) -> Exception:
    code = exc.response["Error"]["Code"]
    if code in _THROTTLE:
        return TransientError("sagemaker-unavailable", f"{what}: {code}")
    message = exc.response["Error"].get("Message", "")
    if code == "ResourceInUse" or "in-progress" in message or "in progress" in message:
        return TransientError("endpoint-busy", f"{what}: {code} {message}")  # an update runs: try again later
    if "Could not find" in message or code == "ResourceNotFound":
        return PermanentError("target-not-found", f"{what}: {message}")
    return PermanentError("target-rejected", f"{what}: {code} {message}")


def repointed_container(container: dict[str, Any], event: ManifestCreated) -> dict[str, Any] | None:
    """A copy of ``container`` reading the event's version, or None if it does not read the model prefix."""
    root = f"s3://{event.bucket}/{event.prefix}/"
    new = dict(container)
    source = container.get("ModelDataSource", {}).get("S3DataSource")
    if source and source.get("S3Uri", "").startswith(root):
        new["ModelDataSource"] = {**container["ModelDataSource"],
                                  "S3DataSource": {**source, "S3Uri": f"s3://{event.bucket}/{event.location}/"}}
        return new
    url = container.get("ModelDataUrl", "")
    if url.startswith(root):
        new["ModelDataUrl"] = f"s3://{event.bucket}/{event.location}/{url.rsplit('/', 1)[-1]}"
        return new
    return None


def model_copy(sm: Any, model_name: str, name: str, event: ManifestCreated) -> dict[str, Any] | None:
    """The CreateModel request for the new-version copy of ``model_name`` named ``name``; None when the
    model does not use the prefix. Reads only."""
    try:
        live = sm.describe_model(ModelName=model_name)
    except ClientError as exc:
        raise _fail(exc, f"DescribeModel {model_name}") from None
    spec = _accepted(sm, "CreateModel", live)
    changed = False
    if "PrimaryContainer" in spec:
        new = repointed_container(spec["PrimaryContainer"], event)
        if new:
            spec["PrimaryContainer"], changed = new, True
    if "Containers" in spec:
        containers = []
        for c in spec["Containers"]:
            new = repointed_container(c, event)
            containers.append(new or c)
            changed = changed or new is not None
        spec["Containers"] = containers
    if not changed:
        return None
    return {**spec, "ModelName": name, "Tags": [TAG, {"Key": "hyperwarm:model-version", "Value": event.version}]}


def _create(create: Callable[..., Any], spec: dict[str, Any], what: str) -> None:
    """A Create* call that takes "already exists" as done: a retry of the same refresh asks again (same names)."""
    try:
        create(**spec)
    except ClientError as exc:
        if "already exist" not in exc.response["Error"].get("Message", ""):
            raise _fail(exc, what) from None


def deployment_config(bg: BlueGreen) -> dict[str, Any]:
    routing: dict[str, Any] = {"Type": bg.traffic, "WaitIntervalInSeconds": bg.wait_seconds}
    step = {"Type": "CAPACITY_PERCENT", "Value": bg.step_percent}
    if bg.traffic == "CANARY":
        routing["CanarySize"] = step
    elif bg.traffic == "LINEAR":
        routing["LinearStepSize"] = step
    config: dict[str, Any] = {"BlueGreenUpdatePolicy": {
        "TrafficRoutingConfiguration": routing, "TerminationWaitInSeconds": bg.termination_wait_seconds,
        "MaximumExecutionTimeoutInSeconds": bg.max_execution_seconds}}
    if bg.rollback_alarms:
        config["AutoRollbackConfiguration"] = {"Alarms": [{"AlarmName": a} for a in bg.rollback_alarms]}
    return config


def rollout_seconds(bg: BlueGreen) -> int:
    """How long the target stays locked for a rollout: SageMaker's own timeout plus a margin."""
    return bg.max_execution_seconds + bg.termination_wait_seconds + 900


def _salt(target: EndpointTarget, event: ManifestCreated) -> str:
    return f"{target.endpoint}|{event.sequencer}"


def config_name(target: EndpointTarget, event: ManifestCreated) -> str:
    """The EndpointConfig a refresh of ``target`` to ``event``'s upload creates: the same on every retry of it, and
    what a rollout record read back from the table must name (:func:`.flow._endpoint_record_problem`)."""
    return naming.endpoint_config_name(target.endpoint, event.version, _salt(target, event))


def start(sm: Any, target: EndpointTarget, event: ManifestCreated,
          reserve: Callable[[dict[str, Any]], object] = lambda rollout: None) -> dict[str, Any]:
    """Clone models and config for ``event`` and start the update; returns the rollout record.

    ``reserve`` gets that record after the reads and before anything is created: whatever this call
    creates is named in the state first, so a lost answer, a failed write after it or a crash leaves
    names to clean up or adopt, never resources nobody knows about.
    """
    try:
        endpoint = sm.describe_endpoint(EndpointName=target.endpoint)
    except ClientError as exc:
        raise _fail(exc, f"DescribeEndpoint {target.endpoint}") from None
    if endpoint["EndpointStatus"] != "InService":
        raise TransientError("endpoint-busy", f"{target.endpoint} is {endpoint['EndpointStatus']}")
    live_name = endpoint["EndpointConfigName"]
    try:
        live = sm.describe_endpoint_config(EndpointConfigName=live_name)
    except ClientError as exc:
        raise _fail(exc, f"DescribeEndpointConfig {live_name}") from None
    spec = _accepted(sm, "CreateEndpointConfig", live)
    salt = _salt(target, event)
    models: list[dict[str, Any]] = []
    variants = []
    for variant in spec.get("ProductionVariants", []):
        if "ModelName" not in variant:
            raise PermanentError("target-rejected", f"{target.endpoint}: variant {variant['VariantName']} uses "
                                 "inference components, which cache refresh does not update")
        model = model_copy(sm, variant["ModelName"],
                           naming.model_name(target.endpoint, variant["VariantName"], event.version, salt), event)
        if model:
            models.append(model)
            variant = {**variant, "ModelName": model["ModelName"]}
        variants.append(variant)
    if not models:
        raise PermanentError("target-rejected", f"{target.endpoint}: no variant reads s3://{event.bucket}/{event.prefix}/")
    new_config = config_name(target, event)
    rollout = {"version": event.version, "sequencer": event.sequencer, "location": event.location,
               "config": new_config, "created_models": [m["ModelName"] for m in models],
               "previous_config": live_name, "started": int(time.time()), "event_time": event.time,
               "endpoint_modified": _timestamp(endpoint.get("LastModifiedTime"))}
    reserve(rollout)
    for model in models:
        _create(sm.create_model, model, f"CreateModel {model['ModelName']}")
    spec.update(EndpointConfigName=new_config, ProductionVariants=variants,
                Tags=[TAG, {"Key": "hyperwarm:model-version", "Value": event.version}])
    _create(sm.create_endpoint_config, spec, f"CreateEndpointConfig {new_config}")
    try:
        sm.update_endpoint(EndpointName=target.endpoint, EndpointConfigName=new_config,
                           RetainAllVariantProperties=True, DeploymentConfig=deployment_config(target.blue_green))
    except ClientError as exc:
        raise _fail(exc, f"UpdateEndpoint {target.endpoint}") from None
    return rollout


def _container_uris(model: dict[str, Any]) -> list[str]:
    uris = []
    for container in [model.get("PrimaryContainer") or {}, *(model.get("Containers") or [])]:
        source = (container.get("ModelDataSource") or {}).get("S3DataSource") or {}
        uris += [u for u in (source.get("S3Uri"), container.get("ModelDataUrl")) if u]
    return uris


def live(sm: Any, target: EndpointTarget, prefix: str, buckets: frozenset[str]) -> Live:
    """The endpoint's status, current config and the newest version folder its models read."""
    try:
        endpoint = sm.describe_endpoint(EndpointName=target.endpoint)
        config_name = endpoint["EndpointConfigName"]
        config = sm.describe_endpoint_config(EndpointConfigName=config_name)
        found = set()
        for variant in config.get("ProductionVariants", []):
            if "ModelName" in variant:
                model = sm.describe_model(ModelName=variant["ModelName"])
                found |= {v for v in (s3_uri_version(u, buckets, prefix) for u in _container_uris(model)) if v}
    except ClientError as exc:
        raise _fail(exc, f"reading {target.endpoint}") from None
    newest = None
    for version in sorted(found):
        try:
            if newest is None or compare(version, newest) > 0:
                newest = version
        except UnorderableVersion as exc:
            raise PermanentError("unorderable-version", f"{target.endpoint} serves {sorted(found)}: {exc}") from None
    return Live(newest, endpoint["EndpointStatus"], config_name,
                updating_to=(endpoint.get("PendingDeploymentSummary") or {}).get("EndpointConfigName"),
                modified=_timestamp(endpoint.get("LastModifiedTime")))


def _timestamp(value: Any) -> int | None:
    """DescribeEndpoint's ``LastModifiedTime`` (a datetime) in epoch milliseconds (an integer: DynamoDB
    stores no floats)."""
    return round(value.timestamp() * 1000) if hasattr(value, "timestamp") else None


def delete_superseded(sm: Any, config: str | None, models: list[str], serving: str | None = None) -> list[str]:
    """Delete a config and models a refresh created and nothing serves any more; returns what went.

    ``serving``: the endpoint's current config; it and its models are never deleted (checked here,
    not assumed: the record may lag the endpoint).
    """
    keep: set[str] = set()
    if serving:
        keep.add(serving)
        try:
            keep |= {v["ModelName"] for v in sm.describe_endpoint_config(EndpointConfigName=serving)
                     .get("ProductionVariants", []) if "ModelName" in v}
        except ClientError as exc:
            raise _fail(exc, f"DescribeEndpointConfig {serving}") from None
    deleted = []
    for kind, name in ([("EndpointConfig", config)] if config else []) + [("Model", m) for m in models]:
        if name in keep:
            continue
        try:
            if kind == "EndpointConfig":
                sm.delete_endpoint_config(EndpointConfigName=name)
            else:
                sm.delete_model(ModelName=name)
            deleted.append(f"{kind}/{name}")
        except ClientError as exc:
            if "Could not find" not in exc.response["Error"].get("Message", ""):
                raise TransientError("sagemaker-unavailable", f"Delete{kind} {name}: {exc}") from None
    return deleted
