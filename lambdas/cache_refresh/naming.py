"""Names shared by the refresh function and the CDK app: one definition, so IAM never drifts.

The function creates Models and EndpointConfigs with generated names; the construct grants the
function's role exactly those names (``<stem>-*``); the deploy-time guard reads the function's
state by target id. All three import this module, which uses the standard library only (the
function's package must import without aws_cdk).

SageMaker limits (botocore ``sagemaker`` model, shapes ``EndpointName``, ``EndpointConfigName``,
``ModelName``): at most 63 characters matching ``^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}``. SageMaker
writes resource names lower-case in ARNs, and IAM compares ARNs case-sensitively, so grants use
:func:`arn_name`.
"""

from __future__ import annotations

import hashlib
import re

NAME_MAX = 63
"""Longest SageMaker endpoint, endpoint-config and model name."""
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}\Z")
"""A valid SageMaker endpoint, endpoint-config or model name."""

_MODEL_STEM = 24  # endpoint part of a model name: 24 + 1 + 10 + 1 + 16 + 1 + 8 <= 63
_VARIANT = 10
_CONFIG_STEM = 36  # endpoint part of a config name: 36 + 1 + 16 + 1 + 8 <= 63
_VERSION = 16
_DIGEST = 8
_NOT_NAME = re.compile(r"[^a-zA-Z0-9]+")
_NOT_EXECUTION_NAME = re.compile(r"[^0-9A-Za-z_-]+")


def _clean(text: str) -> str:
    return _NOT_NAME.sub("-", text).strip("-")


def model_stem(endpoint: str) -> str:
    """The fixed start of every Model name a refresh of ``endpoint`` creates (before ``-``)."""
    return _clean(endpoint[:_MODEL_STEM])


def endpoint_config_stem(endpoint: str) -> str:
    """The fixed start of every EndpointConfig name a refresh of ``endpoint`` creates (before ``-``)."""
    return _clean(endpoint[:_CONFIG_STEM])


def _name(stem: str, parts: tuple[str, ...], digest_of: str) -> str:
    digest = hashlib.sha256(digest_of.encode()).hexdigest()[:_DIGEST]
    return "-".join([stem, *(p for p in map(_clean, parts) if p), digest])


def model_name(endpoint: str, variant: str, version: str, salt: str) -> str:
    """The new Model of ``variant`` for ``version``: the same on a retry of the same refresh (``salt``)."""
    base = f"{endpoint[:_MODEL_STEM]}-{variant[:_VARIANT]}"
    return _name(model_stem(endpoint), (variant[:_VARIANT], version[:_VERSION]), f"{base}|{version}|{salt}")


def endpoint_config_name(endpoint: str, version: str, salt: str) -> str:
    """The new EndpointConfig of ``endpoint`` for ``version``: the same on a retry of the same refresh."""
    return _name(endpoint_config_stem(endpoint), (version[:_VERSION],), f"{endpoint}|{version}|{salt}")


def arn_name(name: str) -> str:
    """``name`` as it appears in a SageMaker ARN (lower case) and so in an IAM policy's Resource."""
    return name.lower()


def endpoint_target_id(endpoint: str) -> str:
    """The id under which the function records a SageMaker endpoint target's state."""
    return f"endpoint:{endpoint}"


def hyperpod_target_id(cluster: str, namespace: str, resource: str, name: str) -> str:
    """The id under which the function records a HyperPod deployment target's state."""
    return f"hyperpod:{cluster}/{namespace}/{resource}/{name}"


_EXECUTION_MAX = 80
"""Step Functions execution names: at most 80 characters of [0-9A-Za-z_-] (StartExecution, ``name``)."""


def rollout_execution_name(target_id: str, version: str, attempt: str = "") -> str:
    """The Step Functions execution of one attempt (``attempt``: when the rollout was recorded) at rolling one
    target out to ``version``: the same name for the same attempt, so a second StartExecution of it is a no-op,
    and another for a replay of the version (a name is taken for 90 days, even by an execution that ended)."""
    digest = hashlib.sha256(f"{target_id}|{version}|{attempt}".encode()).hexdigest()[:_DIGEST * 2]
    name = _NOT_EXECUTION_NAME.sub("-", target_id.rsplit("/", 1)[-1])[:40].strip("-")
    slug = _NOT_EXECUTION_NAME.sub("-", version)[:_EXECUTION_MAX - len(name) - len(digest) - 2].strip("-")
    return "-".join(p for p in (name, slug, digest) if p)


def dead_letter_sender_path(queue_name: str) -> str:
    """The IAM path of a role outside the refresh stack that may send to the refresh dead-letter queue
    ``queue_name`` (a deploy guard's): the queue's policy admits the roles under it, and no other principal of the
    account besides the refresh functions' roles and the event rules."""
    return f"/hyperwarm/dead-letter-senders/{queue_name}/"


LETTER_QUOTA_PK = "letters#"
"""Start of the partition key of every dead-letter quota item (``<this><prefix>``; ``<this><prefix>#<hour>`` in the
format's first version)."""


def letter_quota_pk(prefix: str) -> str:
    """The partition key of the count of dead letters of model prefix ``prefix`` (in the clock hour it names) in the
    state table; target items' keys start ``target#``."""
    return f"{LETTER_QUOTA_PK}{prefix}"


def state_pk(target_id: str) -> str:
    """The partition key ``pk`` of one target's item in the state table."""
    return f"target#{target_id}"


def endpoint_name_problem(name: str) -> str | None:
    """Why ``name`` is not a valid SageMaker endpoint name, or None."""
    if len(name) > NAME_MAX:
        return f"{len(name)} characters; SageMaker allows at most {NAME_MAX}"
    if not NAME_PATTERN.match(name):
        return "allowed: letters, digits and hyphens, starting and ending with a letter or digit"
    return None
