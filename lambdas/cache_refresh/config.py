"""The refresh Lambda's configuration, read once per container from environment variables.

``HYPERWARM_REFRESH_TARGETS`` (required): JSON object mapping a model prefix (the S3 key prefix in
front of ``<version>/manifest.json``, no leading or trailing slash) to a list of targets::

    {"models/llama-3-8b": [
        {"kind": "hyperpod", "cluster": "hyperwarm-prod", "namespace": "hyperwarm-models",
         "resource": "InferenceEndpointConfig", "name": "llama-3-8b", "caches": ["llama-3-8b-weights"]},
        {"kind": "endpoint", "endpoint": "llama-prod",
         "blue_green": {"traffic": "CANARY", "step_percent": 10, "wait_seconds": 600,
                        "termination_wait_seconds": 300, "max_execution_seconds": 3600,
                        "rollback_alarms": ["llama-prod-5xx"]}}]}

``HYPERWARM_STATE_TABLE`` (required): DynamoDB table (partition key ``pk`` string) holding one state
item per target (README.md, "State table").
``HYPERWARM_ALLOWED_BUCKETS`` (required): comma-separated bucket names events may come from.
``HYPERWARM_DLQ_URL`` (optional): SQS queue that receives permanent failures with replay context;
without it permanent failures are raised (and reach the function's own on-failure destination).
``HYPERWARM_DRY_RUN`` (optional, default ``false``): ``true`` verifies and decides, logs what it
would change, and changes nothing (no target, no state).
``HYPERWARM_LOCK_SECONDS`` (optional, default 900): how long a refresh holds a target's lock.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from . import naming

_PREFIX = re.compile(r"^[A-Za-z0-9_.=-]+(/[A-Za-z0-9_.=-]+)*$")
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
HYPERPOD_KINDS = ("InferenceEndpointConfig", "JumpStartModel")
TRAFFIC_TYPES = ("ALL_AT_ONCE", "CANARY", "LINEAR")


class ConfigError(ValueError):
    """The environment is wrong: a deployment bug, reported at cold start."""


@dataclass(frozen=True)
class HyperPodTarget:
    """An operator deployment (and its stand-alone weight caches) on a HyperPod EKS cluster."""

    cluster: str
    namespace: str
    name: str
    resource: str = "InferenceEndpointConfig"
    caches: tuple[str, ...] = ()
    kind: str = "hyperpod"

    @property
    def id(self) -> str:
        return naming.hyperpod_target_id(self.cluster, self.namespace, self.resource, self.name)


@dataclass(frozen=True)
class BlueGreen:
    """``DeploymentConfig.BlueGreenUpdatePolicy`` of UpdateEndpoint; defaults: all at once after 5 min."""

    traffic: str = "ALL_AT_ONCE"
    step_percent: int = 10
    wait_seconds: int = 300
    termination_wait_seconds: int = 300
    max_execution_seconds: int = 3600
    rollback_alarms: tuple[str, ...] = ()


@dataclass(frozen=True)
class EndpointTarget:
    """A SageMaker real-time endpoint whose variants serve the model from S3."""

    endpoint: str
    blue_green: BlueGreen = field(default_factory=BlueGreen)
    kind: str = "endpoint"

    @property
    def id(self) -> str:
        return naming.endpoint_target_id(self.endpoint)


Target = HyperPodTarget | EndpointTarget


@dataclass(frozen=True)
class Settings:
    targets: Mapping[str, tuple[Target, ...]]
    state_table: str
    allowed_buckets: frozenset[str]
    dlq_url: str | None = None
    dry_run: bool = False
    lock_seconds: int = 900

    def targets_for(self, prefix: str) -> tuple[Target, ...]:
        return self.targets.get(prefix, ())

    def endpoint_target(self, endpoint: str) -> EndpointTarget | None:
        return next((t for ts in self.targets.values() for t in ts
                     if isinstance(t, EndpointTarget) and t.endpoint == endpoint), None)


def _require(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise ConfigError(f"{name} is not set")
    return value


def _target(prefix: str, index: int, raw: Any) -> Target:
    where = f"HYPERWARM_REFRESH_TARGETS[{prefix!r}][{index}]"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected an object, got {raw!r}")
    kind = raw.get("kind")
    try:
        if kind == "hyperpod":
            target = HyperPodTarget(cluster=raw["cluster"], namespace=raw["namespace"], name=raw["name"],
                                    resource=raw.get("resource", "InferenceEndpointConfig"),
                                    caches=tuple(raw.get("caches", ())))
            if target.resource not in HYPERPOD_KINDS:
                raise ConfigError(f"{where}.resource: {target.resource!r} is not one of {', '.join(HYPERPOD_KINDS)}")
            for name in (target.namespace, target.name, *target.caches):
                if not _K8S_NAME.match(name):
                    raise ConfigError(f"{where}: {name!r} is not a Kubernetes object name")
            return target
        if kind == "endpoint":
            bg = BlueGreen(**{k: tuple(v) if k == "rollback_alarms" else v
                              for k, v in raw.get("blue_green", {}).items()})
            target = EndpointTarget(endpoint=raw["endpoint"], blue_green=bg)
            if naming.endpoint_name_problem(target.endpoint):
                raise ConfigError(f"{where}.endpoint: {target.endpoint!r} is not a SageMaker endpoint name")
            if bg.traffic not in TRAFFIC_TYPES:
                raise ConfigError(f"{where}.blue_green.traffic: {bg.traffic!r} is not one of {', '.join(TRAFFIC_TYPES)}")
            return target
    except KeyError as exc:
        raise ConfigError(f"{where}: missing field {exc.args[0]!r}") from None
    except TypeError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    raise ConfigError(f"{where}.kind: {kind!r} is not one of hyperpod, endpoint")


def load(env: Mapping[str, str] | None = None) -> Settings:
    """Parse and validate the environment; raise :class:`ConfigError` naming the variable."""
    env = os.environ if env is None else env
    try:
        raw = json.loads(_require(env, "HYPERWARM_REFRESH_TARGETS"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"HYPERWARM_REFRESH_TARGETS is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError("HYPERWARM_REFRESH_TARGETS must be a JSON object of prefix -> [targets]")
    targets: dict[str, tuple[Target, ...]] = {}
    for prefix, items in raw.items():
        if not _PREFIX.match(prefix):
            raise ConfigError(f"HYPERWARM_REFRESH_TARGETS: prefix {prefix!r} must look like models/name "
                              "(no leading or trailing slash)")
        if not isinstance(items, list) or not items:
            raise ConfigError(f"HYPERWARM_REFRESH_TARGETS[{prefix!r}] must be a non-empty list of targets")
        targets[prefix] = tuple(_target(prefix, i, item) for i, item in enumerate(items))
    buckets = frozenset(b.strip() for b in _require(env, "HYPERWARM_ALLOWED_BUCKETS").split(",") if b.strip())
    dry_run = env.get("HYPERWARM_DRY_RUN", "false").strip().lower()
    if dry_run not in ("true", "false"):
        raise ConfigError(f"HYPERWARM_DRY_RUN: {dry_run!r} is not true or false")
    return Settings(targets=targets, state_table=_require(env, "HYPERWARM_STATE_TABLE"), allowed_buckets=buckets,
                    dlq_url=env.get("HYPERWARM_DLQ_URL") or None, dry_run=dry_run == "true",
                    lock_seconds=int(env.get("HYPERWARM_LOCK_SECONDS", "900")))
