"""What the refresh made serve, read at synth: a deploy after a refresh sets the version that serves.

After the refresh function moved a target to a new version, ``cdk.json`` still names the version first
deployed. So synth reads each refreshed target's ``current_version`` from the environment's refresh
state table and deploys the newer of the two: ``cdk.json``'s version is the floor (what a target never
refreshed gets, or a newer version you set on purpose), the refresh moves it up. A deploy after a
refresh then neither rolls the model back nor fails, and the templates say what serves.

A deliberate rollback or pin is explicit: ``refresh.models[].pinned`` deploys the versions ``cdk.json``
names for that prefix as they are, even older ones; the deploy guard records them as what serves
(:mod:`hyperwarm.refresh.guard`) and the refresh function leaves the prefix alone until it is unpinned.

When it reads (context key ``served_versions``):

- ``auto`` (default): when the app runs under the CDK CLI with credentials (the CLI then sets
  ``CDK_DEFAULT_ACCOUNT``), for every environment of that account or of none. The tests, with no CLI,
  read nothing and synthesize ``cdk.json``'s versions, as CDK's own lookups give their dummy values
  there; ``make synth`` sets ``config``.
- ``read``: always; an environment whose state cannot be read fails synth.
- ``config``: never: ``cdk.json``'s versions (the deploy guard still stops a deploy that would move a
  target back).

Not cached in ``cdk.context.json``: CDK keeps a cached lookup until ``cdk context --reset``, and a cached
served version goes stale at the next refresh, which is the very failure this avoids. The read is a
few GetItems (and a DescribeStacks for the cluster's name) with the default credentials
(``AWS_PROFILE``: ``cdk --profile`` does not reach the app).
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from hyperwarm.caches import ModelSource
from hyperwarm.functions.cache_refresh import contract, formats, recheck, versions
from hyperwarm.functions.cache_refresh.errors import TransientError
from stacks.config import ConfigError, EnvironmentConfig, parse_environment
from stacks.config.endpoints import endpoint_name

CONTEXT_KEY = "served_versions"
SETTINGS = ("auto", "read", "config")
CLUSTER_NAME_OUTPUT = "EksClusterName"
"""The cluster stack's output naming its EKS cluster (a HyperPod target's id contains it)."""


@dataclasses.dataclass(frozen=True)
class Refreshed:
    """A refreshed target as ``cdk.json`` sets it: its id, the version there, and where."""

    target_id: str
    version: str
    field: str
    value: str = "{version}"
    """The field's value with ``{version}`` where the version goes."""
    location: str = ""
    """The version's key prefix, ``<prefix>/<version>``, with ``{version}``."""
    pinned: bool = False
    endpoint: str | None = None
    """The ``endpoints[].name`` a variant belongs to (None: a cached model)."""

    @property
    def pinned_location(self) -> str | None:
        """Where a pinned target's version is (the deploy guard records it); None when not pinned."""
        return self.location.replace("{version}", self.version) if self.pinned else None


def refreshed_targets(env_name: str, config: EnvironmentConfig, cluster_name: str | None) -> Iterator[Refreshed]:
    """Every refreshed target of the environment with what ``cdk.json`` sets on it. HyperPod targets need the EKS
    cluster's name (``None``: not known, they are left out)."""
    pinned = {name for entry in config.refresh.models if entry.pinned for name in (*entry.caches, *entry.endpoints)}
    refreshed = set(config.refresh.cached_models)
    for i, model in enumerate(config.caches.models):
        source = model.source
        if model.name in refreshed and cluster_name is not None and isinstance(source, ModelSource):
            yield Refreshed(contract.hyperpod_target_id(cluster_name, config.caches.namespace,
                                                        contract.HyperPodTarget.resource, model.name),
                            source.version, f"environments.{env_name}.caches.models[{i}].source.version",
                            location=f"{source.prefix}/{{version}}", pinned=model.name in pinned)
    for entry in config.refresh.models:
        root = f"s3://{config.refresh.bucket}/{entry.prefix}/"
        for i, endpoint in enumerate(config.endpoints):
            if endpoint.name not in entry.endpoints:
                continue
            for j, variant in enumerate(endpoint.variants):
                if (variant.model_data or "").startswith(root):
                    version, _, rest = variant.model_data[len(root):].partition("/")  # type: ignore[index]
                    yield Refreshed(contract.endpoint_target_id(endpoint_name(env_name, endpoint)), version,
                                    f"environments.{env_name}.endpoints[{i}].variants[{j}].model_data",
                                    f"{root}{{version}}/{rest}", f"{entry.prefix}/{{version}}", entry.pinned,
                                    endpoint.name)


def follow(env_name: str, config: EnvironmentConfig, raw: Mapping[str, Any], served: dict[str, str],
           cluster_name: str | None) -> EnvironmentConfig:
    """``config`` (parsed from ``raw``, the environment's cdk.json object) with each refreshed, unpinned target
    at the newer of its ``cdk.json`` version and the one ``served`` records for it: parsed again as if cdk.json
    named it. A ConfigError where the two cannot be ordered."""
    chosen: dict[str, str] = {}
    for target in refreshed_targets(env_name, config, cluster_name):
        now = served.get(target.target_id)
        if target.pinned or now is None:
            continue
        try:
            newer = versions.compare(now, target.version) > 0
        except versions.UnorderableVersion as exc:
            raise ConfigError(f"{target.field}: {target.version!r} -- the refresh made {now!r} serve, and the two "
                              f"cannot be ordered ({exc}): set it to {target.value.replace('{version}', now)!r}, or "
                              "pin the prefix (refresh.models[].pinned) to deploy it as it is") from None
        if newer:
            chosen[target.field] = target.value.replace("{version}", now)
    if not chosen:
        return config
    patched = copy.deepcopy(dict(raw))
    for field, value in chosen.items():
        steps = [int(s) if s.isdigit() else s for s in _STEP.findall(field.removeprefix(f"environments.{env_name}."))]
        place: Any = patched
        for step in steps[:-1]:
            place = place[step]
        place[steps[-1]] = value
    return parse_environment(env_name, patched)


_STEP = re.compile(r"[^.\[\]]+")


def setting(context: Callable[[str], Any]) -> str:
    """The ``served_versions`` context value, checked."""
    value = context(CONTEXT_KEY) or "auto"
    if value not in SETTINGS:
        raise ConfigError(f"-c {CONTEXT_KEY}={value}: allowed: {', '.join(SETTINGS)}")
    return str(value)


def should_read(value: str, config: EnvironmentConfig) -> bool:
    """Whether to read the state of an environment (see the module docstring)."""
    if value != "auto":
        return value == "read"
    cli_account = os.environ.get("CDK_DEFAULT_ACCOUNT")
    return bool(config.refresh.models) and cli_account is not None and config.account in (None, cli_account)


def read(env_name: str, config: EnvironmentConfig, table: str, cluster_stack: str,
         function: str) -> tuple[dict[str, str], str | None]:
    """(target id -> the version its state item records as serving, the EKS cluster's name), read from AWS in
    the environment's region. A table, item or cluster stack that does not exist: never refreshed, or never
    deployed. Every version read must pass the deployed refresh ``function``'s gate (:mod:`.recheck`): the table
    is not the publisher. Any other failure is a ConfigError saying how to go on."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        cluster = _cluster_name(boto3.client("cloudformation", region_name=config.region), cluster_stack) \
            if config.caches.models else None
        dynamodb = boto3.client("dynamodb", region_name=config.region)
        served = {}
        for target in refreshed_targets(env_name, config, cluster):
            version = _current_version(dynamodb, table, target.target_id)
            if version is not None:
                served[target.target_id] = version
        if served:
            _admitted(env_name, config, served, function)
        return served, cluster
    except (ClientError, BotoCoreError, formats.UnknownFormat, TransientError) as exc:
        raise ConfigError(
            f"environment {env_name!r}: cannot read what the refresh made serve (table {table}): "
            f"{type(exc).__name__}: {exc}. Set AWS_PROFILE to credentials of the environment's account that may "
            f"dynamodb:GetItem it (cdk --profile does not reach the app), or synthesize cdk.json's versions with "
            f"-c {CONTEXT_KEY}=config (the deploy guard then stops a deploy that would move a target back)") from None


def _admitted(env_name: str, config: EnvironmentConfig, served: Mapping[str, str], function: str) -> None:
    """Each version the table records passes the deployed refresh function's gate, or synth fails naming it."""
    import boto3

    settings = recheck.deployed_settings(boto3.client("lambda", region_name=config.region), function)
    if settings is None:
        raise ConfigError(f"environment {env_name!r}: the refresh state table records versions "
                          f"({', '.join(sorted(set(served.values())))}) but the refresh function {function} is not "
                          "deployed, so nothing can check them: deploy the refresh stack first, or synthesize "
                          f"cdk.json's versions with -c {CONTEXT_KEY}=config")
    s3, kms = boto3.client("s3", region_name=config.region), boto3.client("kms", region_name=config.region)
    problems = {}
    for target_id, version in sorted(served.items()):
        problem = recheck.served_problem(settings, target_id, version, config.refresh.bucket or "", s3, kms)
        if problem is not None:
            problems[target_id] = f"{target_id}: {version} -- {problem}"
    if problems:
        raise ConfigError(f"environment {env_name!r}: the refresh state table records versions its gate refuses "
                          "(someone wrote the table, or the version's files changed since):\n  "
                          + "\n  ".join(problems.values())
                          + "\n  check what each target really serves, then `hyperwarm refresh reset` the record; "
                          f"or synthesize cdk.json's versions with -c {CONTEXT_KEY}=config")


def _cluster_name(cloudformation: Any, stack: str) -> str | None:
    from botocore.exceptions import ClientError

    try:
        (described,) = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as exc:
        if "does not exist" in str(exc):
            return None
        raise
    outputs = {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}
    if CLUSTER_NAME_OUTPUT not in outputs:
        print(f"served versions: {stack} has no {CLUSTER_NAME_OUTPUT} output yet (deployed by an earlier hyperwarm): "
              "this deploy sets cdk.json's versions on the cached models (the deploy guard stops a move back); "
              "later ones follow the refresh", file=sys.stderr)
    return outputs.get(CLUSTER_NAME_OUTPUT)


def _current_version(dynamodb: Any, table: str, target_id: str) -> str | None:
    from boto3.dynamodb.types import TypeDeserializer
    from botocore.exceptions import ClientError

    try:
        raw = dynamodb.get_item(TableName=table, Key={"pk": {"S": contract.state_pk(target_id)}},
                                ConsistentRead=True).get("Item")
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            return None
        raise
    if not raw:
        return None
    item = formats.state_item({k: TypeDeserializer().deserialize(v) for k, v in raw.items()})
    version = item.get("current_version")
    return str(version) if version else None
