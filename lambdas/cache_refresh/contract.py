"""The refresh function's wire contract: what the construct writes and the function reads, defined once.

Environment variable names, the targets JSON (:class:`HyperPodTarget`, :class:`EndpointTarget` with
``to_json`` and :func:`parse_targets`), the generated names (:mod:`.naming`, re-exported here), the
metrics namespace and service, the handler entry points, and the checks both sides run: the
construct turns a problem into a synth-time ``ValueError``, the function into a cold-start
:class:`ConfigError`. Standard library only: the function imports it without aws_cdk, the
construct without Powertools. README.md ("Environment") documents the same contract for people.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from ..node_cache import layout
from .formats import LETTER as LETTER_FORMAT
from .naming import (
    NAME_MAX,
    NAME_PATTERN,
    arn_name,
    endpoint_config_name,
    endpoint_config_stem,
    endpoint_name_problem,
    endpoint_target_id,
    hyperpod_target_id,
    model_name,
    model_stem,
    rollout_execution_name,
    state_pk,
)

__all__ = [
    "ALLOWED_BUCKETS", "BlueGreen", "ConfigError", "DEFAULT_LOCK_SECONDS", "DEFAULT_STAGING_TIMEOUT_SECONDS",
    "DEFAULT_SWITCH_TIMEOUT_SECONDS", "DEPLOY_GUARD_HANDLER", "DLQ_URL",
    "DEFAULT_LETTERS_PER_HOUR", "DRY_RUN", "EndpointTarget", "HYPERPOD_KINDS", "HyperPodTarget", "LETTERS_PER_HOUR",
    "LETTERS_PER_HOUR_RANGE", "LETTERS_SUPPRESSED_METRIC", "LETTER_FORMAT", "LOCK_SECONDS",
    "MAX_EXECUTION_SECONDS_RANGE", "METRICS_NAMESPACE", "METRICS_NAMESPACE_VARIABLE", "NAME_MAX", "NAME_PATTERN",
    "PACKAGE", "Problem", "RECONCILED_METRIC", "RECONCILE_HANDLER", "REFRESH_HANDLER", "REFRESH_TARGETS",
    "REPLAY_KEY", "ROLLOUT_HANDLER", "ROLLOUT_METRICS", "ROLLOUT_PHASES", "ROLLOUT_POLL_SECONDS",
    "ROLLOUT_STATE_MACHINE", "RolloutStep", "SERVICE", "SERVICE_VARIABLE", "SHIFT_PERCENT", "STATE_HANDLER",
    "STATE_TABLE", "TIMEOUT_SECONDS_RANGE", "TRAFFIC_TYPES", "Target", "WAIT_SECONDS_RANGE", "arn_name",
    "blue_green_problems", "endpoint_config_name", "endpoint_config_stem", "endpoint_name_problem",
    "endpoint_target_id", "hyperpod_target_id", "k8s_name_problem", "model_name", "model_stem", "parse_targets",
    "ADMISSION", "Admission", "NodeCache", "admission_problems", "admissions_json",
    "parse_admissions", "poll_seconds", "prefix_problem", "rollout_execution_name", "service_name",
    "shift_percent_problem", "state_pk", "target_problems", "targets_json",
]

# -- environment (README.md, "Environment") ------------------------------------------------------
REFRESH_TARGETS = "HYPERWARM_REFRESH_TARGETS"
STATE_TABLE = "HYPERWARM_STATE_TABLE"
ALLOWED_BUCKETS = "HYPERWARM_ALLOWED_BUCKETS"
DLQ_URL = "HYPERWARM_DLQ_URL"
DRY_RUN = "HYPERWARM_DRY_RUN"
LOCK_SECONDS = "HYPERWARM_LOCK_SECONDS"
DEFAULT_LOCK_SECONDS = 900
LETTERS_PER_HOUR = "HYPERWARM_LETTERS_PER_PREFIX_HOUR"
"""Most dead letters the functions send per model prefix and clock hour (:mod:`.quota`)."""
DEFAULT_LETTERS_PER_HOUR = 20
LETTERS_PER_HOUR_RANGE = (1, 1000)
LETTERS_SUPPRESSED_METRIC = "DeadLettersSuppressed"
"""A letter not sent because its prefix's hourly quota was spent (dimensions ``service``, and ``service, prefix``)."""
SERVICE_VARIABLE = "POWERTOOLS_SERVICE_NAME"
METRICS_NAMESPACE_VARIABLE = "POWERTOOLS_METRICS_NAMESPACE"

ADMISSION = "HYPERWARM_ADMISSION"
"""JSON: prefix -> :class:`Admission`, what a version must be to move anything (unset or a prefix left out: the
default :class:`Admission`, unsigned versions admitted)."""

ROLLOUT_STATE_MACHINE = "HYPERWARM_ROLLOUT_STATE_MACHINE"
"""ARN of the warm-rollout state machine the refresh function starts (unset: HyperPod targets repoint at once)."""

# -- metrics: the function publishes, the construct's alarms watch ------------------------------
METRICS_NAMESPACE = "Hyperwarm"
SERVICE = "hyperwarm-cache-refresh"
"""The metrics' ``service`` dimension (and the log's service), unless ``POWERTOOLS_SERVICE_NAME`` says otherwise."""


def service_name(env: Mapping[str, str] | None = None) -> str:
    """The ``service`` dimension the function and the deploy guard publish under (the alarms watch it)."""
    return (os.environ if env is None else env).get(SERVICE_VARIABLE) or SERVICE

# -- entry points: the asset mirrors the wheel (``hyperwarm/functions/cache_refresh/``) ----------
PACKAGE = "hyperwarm.functions.cache_refresh"
REFRESH_HANDLER = f"{PACKAGE}.handler.lambda_handler"
STATE_HANDLER = f"{PACKAGE}.handler.on_endpoint_state_change"
RECONCILE_HANDLER = f"{PACKAGE}.handler.on_schedule"
RECONCILED_METRIC = "RefreshReconciled"
"""What the scheduled reconciliation repaired (Reason: rollout-ended, start-abandoned, queued-rolled)."""
DEPLOY_GUARD_HANDLER = f"{PACKAGE}.deploy_guard.on_event"
ROLLOUT_HANDLER = f"{PACKAGE}.handler.on_rollout_step"
"""The warm-rollout state machine's one task: advance a target's staged rollout by one idempotent step."""

# -- warm version change on HyperPod (README.md, "Warm version changes") ------------------------------
# A node-cached HyperPod deployment (``node_cache``) moves in stages, driven by a Step Functions Standard workflow
# (one execution per target and version attempt, :func:`rollout_execution_name`): its filler stages the new version
# on every node beside the serving one, the deployment is repointed once the nodes that can host its pods hold it,
# its pods move, and the filler drops the previous version.
ROLLOUT_POLL_SECONDS = 60
"""The shortest Wait between two steps (:func:`poll_seconds` lengthens it for long phases)."""
MAX_POLLS_PER_PHASE = 240
"""A phase polls at most this many times, whatever its timeout (:func:`poll_seconds`)."""
EVENTS_PER_POLL = 10
"""Execution history events of one Step, Choice and Wait round (a task: scheduled, started, succeeded, and each
state's entered and exited): what :func:`history_events` counts."""
HISTORY_LIMIT = 25_000
"""Step Functions Standard: an execution's history holds at most 25,000 events (service quotas)."""
DEFAULT_STAGING_TIMEOUT_SECONDS = 3600
"""A staging that is not ready on the nodes within this fails (dead-lettered; the old version serves)."""
DEFAULT_SWITCH_TIMEOUT_SECONDS = 1800
"""A deployment rollout not finished within this fails: the deployment is pointed back at the old version."""
TIMEOUT_SECONDS_RANGE = (300, 86400)
"""Staging and switch timeouts: 5 minutes to a day (a Standard workflow's Wait states bound neither)."""
ROLLOUT_PHASES = ("staging", "switching", "done", "failed")
"""A step's answer: staging and switching ask the workflow to wait and step again; done and failed end it."""
ROLLOUT_METRICS = {
    "StagingReadyNodes": ("Count", "nodes that can host the deployment's pods and hold the new version (per step)"),
    "StagingTargetNodes": ("Count", "nodes that can host the deployment's pods, read from the cluster (per step)"),
    "TimeToWarm": ("Seconds", "staging start to the switch"),
    "TimeToSwitch": ("Seconds", "deployment repointed to its pods all on the new version"),
    "RolloutInProgress": ("Count", "1 per step while a target stages or switches"),
    "RefreshColdPods": ("Count", "pods of a refresh's new version found on a node without its ready label (once per "
                                 "refresh, also 0)"),
    "RolloutAborted": ("Count", "rollouts ended by `hyperwarm refresh abort`"),
}
"""Name -> (unit, meaning). Published with the dimensions ``service`` and ``target`` (the target id), beside the
refresh's own metrics
(``RefreshFailed`` with Reason ``staging-timeout``, ``staging-failed``, ``switch-timeout``, ``switch-failed``)."""


def poll_seconds(phase_timeout: int) -> int:
    """The Wait between two steps of a phase: a minute, or longer so a phase polls at most
    :data:`MAX_POLLS_PER_PHASE` times (the execution history stays far below its limit)."""
    return max(ROLLOUT_POLL_SECONDS, -(-phase_timeout // MAX_POLLS_PER_PHASE))


def history_events(staging_timeout: int, switch_timeout: int, extra_seconds: int = 0) -> int:
    """The most history events one execution can write: a staging, a switch and a revert, each polled to its
    timeout, and ``extra_seconds`` more of the shortest polls (the workflow's backstop margin, where failed steps
    are retried a poll apart), each poll a round of :data:`EVENTS_PER_POLL`."""
    polls = sum(t // poll_seconds(t) + 1 for t in (staging_timeout, switch_timeout, switch_timeout))
    return (polls + extra_seconds // ROLLOUT_POLL_SECONDS + 1) * EVENTS_PER_POLL


class RolloutStep(NamedTuple):
    """The workflow's input to a step and the step's answer (``phase``, ``wait_seconds``): JSON objects with
    these keys. ``abandon``: set by the workflow after steps failed past its limit; the step ends the rollout as
    failed (dead letter, old version serving). What a step does never depends on ``phase``, ``wait_seconds`` or
    ``failures`` of its input: the record says where the rollout stands, and the step says how long to wait."""

    target: str
    version: str
    phase: str = "staging"
    wait_seconds: int = ROLLOUT_POLL_SECONDS
    abandon: bool = False
    failures: int = 0
    """Steps failed in a row, counted by the workflow (a step's answer resets it)."""
    execution: str = ""
    """The name of the execution that runs the step (the workflow passes ``$$.Execution.Name``): a step acts only
    for the execution its rollout record names, so an execution someone else started, with whatever input, changes
    nothing."""

    def to_json(self) -> dict[str, Any]:
        return self._asdict()

    @classmethod
    def from_json(cls, raw: Any) -> RolloutStep:
        if not isinstance(raw, dict) or not isinstance(raw.get("target"), str) or not isinstance(raw.get("version"), str):
            raise ConfigError(f"a rollout step needs the string fields target and version, got {raw!r}")
        fields = {"phase": str, "wait_seconds": int, "failures": int, "execution": str}
        known = {k: raw[k] for k, kind in fields.items() if isinstance(raw.get(k), kind)}
        return cls(target=raw["target"], version=raw["version"], abandon=raw.get("abandon") is True, **known)

# -- dead letters and replays (README.md, "Dead letters") ----------------------------------------
# LETTER_FORMAT (formats.LETTER): the ``format`` of the function's own dead letters (replay reads every version).
REPLAY_KEY = "hyperwarm-replay"
"""The top-level event key ``hyperwarm refresh replay`` adds: the event is a replay."""

# -- what targets may say -------------------------------------------------------------------------
HYPERPOD_KINDS = ("InferenceEndpointConfig", "JumpStartModel")
# SageMaker's TrafficRoutingConfig and BlueGreenUpdatePolicy (API reference): the endpoint's own deployments
# and the refresh's UpdateEndpoint share them.
TRAFFIC_TYPES = ("ALL_AT_ONCE", "CANARY", "LINEAR")
SHIFT_PERCENT = {"CANARY": (1, 50), "LINEAR": (10, 50)}
"""Canary size and linear step, in percent of the variant's instances: CanarySize at most 50 %, LinearStepSize
10..50 %."""
WAIT_SECONDS_RANGE = (0, 3600)
"""WaitIntervalInSeconds and TerminationWaitInSeconds."""
MAX_EXECUTION_SECONDS_RANGE = (600, 28800)
"""MaximumExecutionTimeoutInSeconds."""
_PREFIX = re.compile(r"^[A-Za-z0-9_.=-]+(/[A-Za-z0-9_.=-]+)*\Z")
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")


class ConfigError(ValueError):
    """The environment is wrong: a deployment bug, reported at cold start."""


class Problem(NamedTuple):
    """One broken rule: the target's ``field`` (JSON path), its ``value`` and the ``rule`` it breaks."""

    field: str
    value: Any
    rule: str

    def __str__(self) -> str:
        return f"{self.field} = {self.value!r} -- {self.rule}"


_KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]{1,128}\Z")


@dataclass(frozen=True)
class Admission:
    """What a new version of one prefix must be before anything moves to it (:mod:`.gate`), besides a known bucket,
    a version folder name and a complete, verified manifest."""

    publisher_key: str | None = None
    """ARN of the asymmetric KMS key (``ECC_NIST_P256``, ``SIGN_VERIFY``) whose holder publishes versions: each
    needs ``model.sig``, the publisher's signature over its files and manifest. Default: none, unsigned versions
    move (a production hook refuses that at synth)."""
    versions: str | None = None
    """A regular expression every version folder name must match whole (``v\\d+``). Default: any orderable one."""
    max_step: int | None = None
    """How far a numeric version may move past the one that serves, in the first part that differs (``v7`` to
    ``v9`` is 2). Default: no bound beyond the one always kept: at most one digit more in that part."""

    def to_json(self) -> dict[str, Any]:
        return {"publisher_key": self.publisher_key, "versions": self.versions, "max_step": self.max_step}


def admission_problems(admission: Admission, is_token: Any = lambda value: False) -> list[Problem]:
    """Every broken rule of one prefix's :class:`Admission`; ``is_token`` values are not checked."""
    problems = []
    key = admission.publisher_key
    if key is not None and not is_token(key) and not (isinstance(key, str) and _KMS_KEY_ARN.match(key)):
        problems.append(Problem("publisher_key", key, "allowed: a KMS key ARN, arn:aws:kms:<region>:<account>:key/<id>"))
    if admission.versions is not None:
        try:
            re.compile(admission.versions)
        except (re.error, TypeError) as exc:
            problems.append(Problem("versions", admission.versions, f"allowed: a regular expression ({exc})"))
    step = admission.max_step
    if step is not None and not (isinstance(step, int) and not isinstance(step, bool) and step >= 1):
        problems.append(Problem("max_step", step, "allowed: a whole number >= 1, or none"))
    return problems


def admissions_json(admissions: Mapping[str, Admission]) -> dict[str, dict[str, Any]]:
    """The value of :data:`ADMISSION` (before JSON encoding): prefix -> admission."""
    return {prefix: a.to_json() for prefix, a in admissions.items()}


def parse_admissions(text: str) -> dict[str, Admission]:
    """:data:`ADMISSION` parsed and checked; raises :class:`ConfigError` naming the field."""
    try:
        raw = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{ADMISSION} is not JSON: {exc}") from None
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise ConfigError(f"{ADMISSION} must be a JSON object of prefix -> admission object")
    out = {}
    for prefix, fields in raw.items():
        unknown = set(fields) - {"publisher_key", "versions", "max_step"}
        if unknown:
            raise ConfigError(f"{ADMISSION}[{prefix!r}]: unknown field(s) {sorted(unknown)}")
        admission = Admission(**fields)
        problems = admission_problems(admission)
        if problems:
            raise ConfigError("; ".join(f"{ADMISSION}[{prefix!r}].{p}" for p in problems))
        out[prefix] = admission
    return out


@dataclass(frozen=True)
class NodeCache:
    """A deployment whose model lies in hyperwarm's node cache (:mod:`hyperwarm.functions.node_cache.layout`)."""

    model: str
    """The model's name in the cache: its directories, its filler and its ready labels."""
    host_path: str = layout.DEFAULT_HOST_PATH
    """The instance store's mount. Default: /opt/dlami/nvme."""

    def to_json(self) -> dict[str, str]:
        return {"model": self.model, "host_path": self.host_path}


@dataclass(frozen=True)
class HyperPodTarget:
    """An operator deployment on a HyperPod EKS cluster; with ``node_cache``, one that changes version warm."""

    cluster: str
    namespace: str
    name: str
    resource: str = "InferenceEndpointConfig"
    node_cache: NodeCache | None = None
    """Its model is node-cached: a new version is staged on the nodes before the deployment moves (a warm
    version change, driven by the rollout workflow). Default: none (the deployment is repointed at once)."""
    staging_timeout_seconds: int = DEFAULT_STAGING_TIMEOUT_SECONDS
    """Warm version change: the new version ready on the nodes that can host the pods within this."""
    switch_timeout_seconds: int = DEFAULT_SWITCH_TIMEOUT_SECONDS
    """Warm rollout: the deployment's rollout to the staged version finished within this."""
    kind: str = "hyperpod"

    @cached_property  # of frozen fields: the flow reads it at every step
    def id(self) -> str:
        return hyperpod_target_id(self.cluster, self.namespace, self.resource, self.name)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "cluster": self.cluster, "namespace": self.namespace, "resource": self.resource,
                "name": self.name, "node_cache": self.node_cache.to_json() if self.node_cache else None,
                "staging_timeout_seconds": self.staging_timeout_seconds,
                "switch_timeout_seconds": self.switch_timeout_seconds}


@dataclass(frozen=True)
class BlueGreen:
    """``DeploymentConfig.BlueGreenUpdatePolicy`` of UpdateEndpoint; defaults: all at once after 5 min."""

    traffic: str = "ALL_AT_ONCE"
    step_percent: int = 10
    wait_seconds: int = 300
    termination_wait_seconds: int = 300
    max_execution_seconds: int = 3600
    rollback_alarms: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"traffic": self.traffic, "step_percent": self.step_percent, "wait_seconds": self.wait_seconds,
                "termination_wait_seconds": self.termination_wait_seconds,
                "max_execution_seconds": self.max_execution_seconds, "rollback_alarms": list(self.rollback_alarms)}


@dataclass(frozen=True)
class EndpointTarget:
    """A SageMaker real-time endpoint whose variants serve the model from S3."""

    endpoint: str
    blue_green: BlueGreen = field(default_factory=BlueGreen)
    kind: str = "endpoint"

    @cached_property  # of a frozen field: the flow reads it at every step
    def id(self) -> str:
        return endpoint_target_id(self.endpoint)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "endpoint": self.endpoint, "blue_green": self.blue_green.to_json()}


Target = HyperPodTarget | EndpointTarget


def prefix_problem(prefix: str) -> str | None:
    """Why ``prefix`` is not a model prefix (``models/name``: no leading or trailing slash), or None."""
    if _PREFIX.match(prefix):
        return None
    return "allowed: an S3 key prefix like models/llama (letters, digits, _ . = -; no leading or trailing slash)"


def k8s_name_problem(name: str) -> str | None:
    """Why ``name`` is not a Kubernetes object name (RFC 1123 subdomain), or None."""
    if _K8S_NAME.match(name):
        return None
    return "allowed: a Kubernetes object name (lower-case letters, digits, '-' and '.', at most 253)"


def target_problems(target: Target, is_token: Any = lambda value: False) -> list[Problem]:
    """Every broken rule of one target. ``is_token(value)`` marks values that resolve only at deploy
    time (the construct passes ``cdk.Token.is_unresolved``): they are not checked."""
    problems = [Problem(f, v, p) for f, v in _named_values(target) if not is_token(v)
                for p in [_name_problem(f, v)] if p]
    if isinstance(target, HyperPodTarget) and target.resource not in HYPERPOD_KINDS:
        problems.append(Problem("resource", target.resource, f"allowed: {', '.join(HYPERPOD_KINDS)}"))
    if isinstance(target, HyperPodTarget) and target.node_cache is not None:
        problems += _node_cache_problems(target, is_token)
    if isinstance(target, HyperPodTarget):
        low, high = TIMEOUT_SECONDS_RANGE
        problems += [Problem(name, value, f"allowed: {low}..{high} seconds")
                     for name in ("staging_timeout_seconds", "switch_timeout_seconds")
                     for value in [getattr(target, name)]
                     if not is_token(value) and not (isinstance(value, int) and low <= value <= high)]
    if isinstance(target, EndpointTarget):
        problems += [Problem(f"blue_green.{f}", v, p) for f, v, p in blue_green_problems(target.blue_green)]
    return problems


def shift_percent_problem(traffic: str, percent: Any) -> str | None:
    """What is allowed when ``percent`` cannot be ``traffic``'s canary size or linear step, else None
    (also for ALL_AT_ONCE, which takes no percent)."""
    if traffic not in SHIFT_PERCENT:
        return None
    low, high = SHIFT_PERCENT[traffic]
    if isinstance(percent, int) and not isinstance(percent, bool) and low <= percent <= high:
        return None
    return f"{traffic} allowed: {low}..{high}"


def blue_green_problems(bg: BlueGreen) -> list[tuple[str, Any, str]]:
    """(field, value, what is allowed) of every setting UpdateEndpoint would reject."""
    problems: list[tuple[str, Any, str]] = []
    if bg.traffic not in TRAFFIC_TYPES:
        problems.append(("traffic", bg.traffic, f"allowed: {', '.join(TRAFFIC_TYPES)}"))
    if problem := shift_percent_problem(bg.traffic, bg.step_percent):
        problems.append(("step_percent", bg.step_percent, problem))
    for name, (low, high) in (("wait_seconds", WAIT_SECONDS_RANGE), ("termination_wait_seconds", WAIT_SECONDS_RANGE),
                              ("max_execution_seconds", MAX_EXECUTION_SECONDS_RANGE)):
        value = getattr(bg, name)
        if not (isinstance(value, int) and low <= value <= high):
            problems.append((name, value, f"allowed: {low}..{high}"))
    return problems


def _node_cache_problems(target: HyperPodTarget, is_token: Any) -> list[Problem]:
    assert target.node_cache is not None
    problems = []
    if target.resource != "InferenceEndpointConfig":
        problems.append(Problem("resource", target.resource, "a node-cached model is served by an "
                                "InferenceEndpointConfig (kubernetesVolume source)"))
    host_path = target.node_cache.host_path
    if not is_token(host_path) and not (isinstance(host_path, str) and host_path.startswith("/")):
        problems.append(Problem("node_cache.host_path", host_path, "allowed: an absolute path, e.g. /opt/dlami/nvme"))
    return problems


def _name_problem(field: str, value: Any) -> str | None:
    if not isinstance(value, str):
        return "allowed: a string"
    return (endpoint_name_problem if field == "endpoint" else k8s_name_problem)(value)


def _named_values(target: Target) -> list[tuple[str, Any]]:
    """The names a target carries, by field: checked as Kubernetes or SageMaker names."""
    if isinstance(target, EndpointTarget):
        return [("endpoint", target.endpoint)]
    model = [("node_cache.model", target.node_cache.model)] if target.node_cache else []
    return [("namespace", target.namespace), ("name", target.name), *model]


def targets_json(targets: Mapping[str, list[Target]]) -> dict[str, list[dict[str, Any]]]:
    """The value of ``HYPERWARM_REFRESH_TARGETS`` (before JSON encoding): prefix -> targets."""
    return {prefix: [t.to_json() for t in ts] for prefix, ts in targets.items()}


def parse_targets(text: str) -> dict[str, tuple[Target, ...]]:
    """``HYPERWARM_REFRESH_TARGETS`` parsed and checked; raises :class:`ConfigError` naming the field."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{REFRESH_TARGETS} is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{REFRESH_TARGETS} must be a JSON object of prefix -> [targets]")
    targets: dict[str, tuple[Target, ...]] = {}
    for prefix, items in raw.items():
        if prefix_problem(prefix):
            raise ConfigError(f"{REFRESH_TARGETS}: prefix {prefix!r} must look like models/name "
                              "(no leading or trailing slash)")
        if not isinstance(items, list) or not items:
            raise ConfigError(f"{REFRESH_TARGETS}[{prefix!r}] must be a non-empty list of targets")
        targets[prefix] = tuple(_parse_target(f"{REFRESH_TARGETS}[{prefix!r}][{i}]", item)
                                for i, item in enumerate(items))
    return targets


def _parse_target(where: str, raw: Any) -> Target:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected an object, got {raw!r}")
    kind = raw.get("kind")
    target: Target
    try:
        if kind == "hyperpod":
            node_cache = raw.get("node_cache")
            target = HyperPodTarget(cluster=raw["cluster"], namespace=raw["namespace"], name=raw["name"],
                                    resource=raw.get("resource", "InferenceEndpointConfig"),
                                    node_cache=NodeCache(**node_cache) if isinstance(node_cache, dict) else None,
                                    staging_timeout_seconds=raw.get("staging_timeout_seconds",
                                                                    DEFAULT_STAGING_TIMEOUT_SECONDS),
                                    switch_timeout_seconds=raw.get("switch_timeout_seconds",
                                                                   DEFAULT_SWITCH_TIMEOUT_SECONDS))
        elif kind == "endpoint":
            options: dict[str, Any] = {k: tuple(v) if k == "rollback_alarms" else v
                                       for k, v in raw.get("blue_green", {}).items()}
            bg = BlueGreen(**options)
            target = EndpointTarget(endpoint=raw["endpoint"], blue_green=bg)
        else:
            raise ConfigError(f"{where}.kind: {kind!r} is not one of hyperpod, endpoint")
    except KeyError as exc:
        raise ConfigError(f"{where}: missing field {exc.args[0]!r}") from None
    except TypeError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    problems = target_problems(target)
    if problems:
        raise ConfigError("; ".join(f"{where}.{p}" for p in problems))
    return target
