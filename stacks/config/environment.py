"""Per-environment configuration: the ``environments`` object in ``cdk.json`` context.

Every environment (dev, staging, prod, ...) is parsed into a frozen, validated
:class:`EnvironmentConfig`. A bad value fails synth before anything deploys, with one
:class:`ConfigError` that lists every problem as ``environments.<env>.<field path>: <value> -- <rule>``.
An environment given as ``{}`` is the small embedded default (an ml.c5.4xlarge system group for
the operator and add-ons beside one ml.g5.xlarge cache group). Every node must hold the pods placed
on it (:mod:`hyperwarm.cluster.node_capacity`).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import aws_cdk as cdk
from pydantic import Field, ValidationError, field_validator, model_validator

from hyperwarm.caches import VPC_ID, ExporterTrigger, ModelSource, is_jumpstart, jumpstart_gpus
from hyperwarm.cluster import (
    ADDON_WORKLOADS,
    DEFAULT_KUBERNETES_VERSION,
    EBS_VOLUME,
    GROUP_NAME_PATTERN,
    GROUP_NAME_WORDS,
    INFERENCE_OPERATOR_ADDON,
    DeepHealthCheck,
    GroupInstanceCount,
    InstanceGroupSpec,
    KubernetesVersion,
    NodeGroup,
    NodeTaint,
    Requests,
    TaintEffect,
    ThreadsPerCore,
    Workload,
    addon_build_problem,
    addon_workloads,
    hyperpod_dependencies,
    instance_type_problem,
    node_problems,
    nvme_problem,
    pod,
    pods_per_node_problem,
    taints_problem,
    workloads_from_objects,
)
from hyperwarm.functions.cache_refresh import contract
from hyperwarm.observability import creates_enrichment, enrichment_problem

from .alarms import AlarmsConfig, alarm_problems
from .caches import CachesConfig, cache_problems
from .endpoints import RENAMED_KEYS, Endpoints, endpoint_name, serving_problems
from .library import config_location
from .observability import ObservabilityConfig
from .refresh import RefreshConfig, refresh_problems, signing_problems
from .regional import regional_problems
from .strict import (
    KMS_KEY,
    PRINCIPAL,
    REGION,
    StrictModel,
    by_rule,
    described,
    library_default,
    pattern_in_words,
    repeated,
)

_NAME = described(GROUP_NAME_PATTERN, GROUP_NAME_WORDS)
_VPC_ID = described(VPC_ID.pattern, VPC_ID.words)  # the library's (an FSx source names its file system's VPC)
_SUBNET_ID = described(r"^subnet-[0-9a-f]{8,17}$",
                       "a subnet id, e.g. subnet-0123456789abcdef0")
_ZONE = described(r"^[a-z]{2}(-[a-z]+)+-\d[a-z]$",
                  "an availability zone name, e.g. us-west-2a")
_CIDR = described(r"^\d{1,3}(\.\d{1,3}){3}/(1[6-9]|2[0-4])$",
                  "an IPv4 CIDR block with a /16 to /24 mask, e.g. 10.0.0.0/16")
_ACCOUNT = described(r"^\d{12}$",
                     "a 12-digit AWS account id, e.g. 123456789012")
class ConfigError(ValueError):
    """A configuration problem, reported with the environment and the field path."""


class Taint(StrictModel):
    key: str = Field(min_length=1, max_length=253)
    value: str = Field(default="", max_length=63)
    effect: TaintEffect  # one list of what is allowed, in hyperwarm.cluster.rules


class InstanceGroupConfig(StrictModel):
    """One HyperPod instance group (``ClusterInstanceGroup``)."""

    name: str = Field(pattern=_NAME, description="instance group name, 1..63 letters, digits or hyphens")
    instance_type: str = Field(description="an ml.* type from hyperwarm's instance catalog")
    instance_count: GroupInstanceCount = library_default(InstanceGroupSpec, "instance_count")
    threads_per_core: ThreadsPerCore = 1
    deep_health_checks: tuple[DeepHealthCheck, ...] = ()
    labels: dict[str, str] = Field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    ebs_volume_gb: Annotated[cdk.Size, EBS_VOLUME] | None = Field(
        default=None, description="GB: extra EBS volume mounted at /opt/sagemaker; none by default"
    )
    holds_caches: bool = Field(
        default=False, description="whether model weights and images are cached on this group's NVMe"
    )

    _known_type = field_validator("instance_type")(by_rule(instance_type_problem))

    def to_spec(self) -> InstanceGroupSpec:
        """The construct library's props for this group."""
        return InstanceGroupSpec(
            name=self.name, instance_type=self.instance_type, instance_count=self.instance_count,
            threads_per_core=self.threads_per_core, deep_health_checks=self.deep_health_checks,
            labels=dict(self.labels), taints=tuple(NodeTaint(t.key, t.effect, t.value) for t in self.taints),
            ebs_volume=self.ebs_volume_gb, holds_caches=self.holds_caches,
        )

    @model_validator(mode="after")
    def _rules(self) -> InstanceGroupConfig:
        problem = (nvme_problem(self.name, self.instance_type, self.holds_caches)
                   or taints_problem(self.name, bool(self.taints), bool(self.deep_health_checks)))
        if problem:
            raise ValueError(problem)
        return self


_AZ_ID = re.compile(r"^[a-z]{2,4}\d+-az\d+$")


class ModelBucketConfig(StrictModel):
    """A bucket models are read from: created by hyperwarm, or existing before the environment deploys."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
                      description="the global bucket name (see docs/operating-guide.md: Model buckets)")
    create: bool = Field(default=False, description="true: the stack hyperwarm-<env>-buckets creates it, before "
                                                    "every reader; false: it exists already")
    kms_key_arn: str | None = Field(
        default=None, pattern=KMS_KEY,
        description="an existing bucket's customer-managed KMS key (SSE-KMS): every reader gets kms:Decrypt on "
                    "it; default: none (S3-managed or AWS-managed encryption needs no grant)")

    @model_validator(mode="after")
    def _own_buckets_need_no_key(self) -> ModelBucketConfig:
        if self.create and self.kms_key_arn:
            raise ValueError(f"bucket {self.name!r}: kms_key_arn is for existing buckets; a bucket hyperwarm creates "
                             "is encrypted with S3-managed keys")
        return self


class VpcConfig(StrictModel):
    """A new VPC (the default) or an existing one named by id with its private subnets."""

    vpc_id: str | None = Field(default=None, pattern=_VPC_ID)
    private_subnet_ids: tuple[Annotated[str, Field(pattern=_SUBNET_ID)], ...] = ()
    availability_zones: tuple[Annotated[str, Field(pattern=_ZONE)], ...] = Field(
        default=(), description="AZs to use; empty means Fn::GetAZs picks max_azs of the region's zones"
    )
    cidr: str = Field(default="10.0.0.0/16", pattern=_CIDR)
    max_azs: int = Field(default=2, ge=2, le=6)
    nat_gateways: int = Field(default=1, ge=1, le=6)

    @field_validator("availability_zones", mode="before")
    @classmethod
    def _zone_names(cls, value: Any) -> Any:
        ids = [z for z in value or () if isinstance(z, str) and _AZ_ID.match(z)]
        if ids:
            raise ValueError(
                f"{', '.join(ids)} {'is an AZ ID' if len(ids) == 1 else 'are AZ IDs'}; give zone names. Names map "
                "to different physical zones in each account, IDs (what capacity reservations and AWS quote) do "
                "not: find your name with aws ec2 describe-availability-zones --zone-ids "
                f"{' '.join(ids)} --query 'AvailabilityZones[].ZoneName'")
        return tuple(value) if isinstance(value, list) else value  # strict mode takes a tuple, not a list

    @model_validator(mode="after")
    def _existing(self) -> VpcConfig:
        if self.vpc_id and not self.private_subnet_ids:
            raise ValueError("an existing vpc_id needs private_subnet_ids (one per availability zone)")
        if self.vpc_id and len(self.availability_zones) != len(self.private_subnet_ids):
            raise ValueError("an existing vpc_id needs one availability_zones entry per private subnet")
        if not self.vpc_id and self.private_subnet_ids:
            raise ValueError("private_subnet_ids are only used with an existing vpc_id")
        return self


def _default_groups() -> tuple[InstanceGroupConfig, ...]:
    # The operator and add-ons run about 23 pods: one ml.g5.xlarge holds 14 in all. The system
    # group takes them (AWS recommends ml.c5.4xlarge or larger for the inference operator); the
    # GPU group keeps both threads per core so a model pod's CPU request fits beside the daemonsets.
    return (InstanceGroupConfig(name="system", instance_type="ml.c5.4xlarge"),
            InstanceGroupConfig(name="inference", instance_type="ml.g5.xlarge", threads_per_core=2,
                                holds_caches=True))


class EnvironmentConfig(StrictModel):
    """Everything one deployment environment needs; ``{}`` is a small, working dev default."""

    account: str | None = Field(default=None, pattern=_ACCOUNT, description="none: environment-agnostic")
    region: str = Field(default="us-west-2", pattern=REGION)
    production: bool = Field(
        default=False, description="termination protection on every stack, the EKS and HyperPod clusters "
                                   "retained, cluster_admins and an alarm destination required; `make deploy` also "
                                   "sets the stack policy (docs/operations.md: Protecting production); default: true for an "
                                   "environment named prod or production, else false")
    vpc: VpcConfig = Field(default_factory=VpcConfig)
    kubernetes_version: KubernetesVersion = DEFAULT_KUBERNETES_VERSION
    endpoint_public_access: bool = Field(
        default=False, description="expose the EKS API publicly (private-only by default)"
    )
    instance_groups: tuple[InstanceGroupConfig, ...] = Field(
        default_factory=_default_groups,
        description="HyperPod instance groups; [] (the default of an endpoints-only environment) means no cluster")
    caches: CachesConfig = Field(default_factory=CachesConfig,
                                 description="models cached on instance groups' NVMe; none by default")
    endpoints: Endpoints = Field(default=(), description="SageMaker real-time endpoints; none by default")
    refresh: RefreshConfig = Field(default_factory=RefreshConfig,
                                   description="new model versions in S3 refresh caches and endpoints; off by default")
    observability: ObservabilityConfig = Field(
        default_factory=ObservabilityConfig,
        description="dashboard, alarms and the cache metrics exporter (hyperwarm-<env>-observability); on by default")
    alarms: AlarmsConfig = Field(default_factory=AlarmsConfig,
                                 description="where every alarm notifies; default: a new topic, no subscribers")
    model_buckets: tuple[ModelBucketConfig, ...] = Field(
        default=(), description="every bucket models are read from, created by hyperwarm or existing")
    addon_versions: dict[str, str] = Field(
        default_factory=dict, description="pinned EKS add-on builds by name; default: EKS's default build. Model "
                                          "caches need amazon-sagemaker-hyperpod-inference pinned")
    pods_per_node: dict[str, int] = Field(
        default_factory=dict, description="pods one HyperPod node holds, by instance type, where it differs from "
                                          "hyperwarm's estimate (AWS publishes no figure); default: the estimates")
    cluster_admins: tuple[Annotated[str, Field(pattern=PRINCIPAL)], ...] = Field(
        default=(), description="IAM roles or users given cluster-admin access to the EKS cluster; default: the "
        "deploying identity, the CDK bootstrap's deploy role (cdk-<qualifier>-deploy-role-<account>-<region>); "
        "required in production")
    image_registry_accounts: tuple[Annotated[str, Field(pattern=_ACCOUNT)], ...] = Field(
        default=(), description="further accounts whose ECR repositories the HyperPod nodes pull from (the "
        "accounts of the cached models' images are added); default: none")

    @field_validator("addon_versions")
    @classmethod
    def _operator_build(cls, value: dict[str, str]) -> dict[str, str]:
        problem = addon_build_problem(value.get(INFERENCE_OPERATOR_ADDON))
        if problem:
            raise ValueError(f"[{INFERENCE_OPERATOR_ADDON!r}] = {value[INFERENCE_OPERATOR_ADDON]!r} -- {problem}")
        return value

    @field_validator("pods_per_node")
    @classmethod
    def _pods_per_node(cls, value: dict[str, int]) -> dict[str, int]:
        problems = [f"[{t!r}] = {n!r} -- {problem}" for t, n in value.items()
                    for problem in [pods_per_node_problem(t, n)] if problem]
        if problems:
            raise ValueError("; ".join(problems))
        return value

    def bucket_keys(self) -> dict[str, str]:
        """Bucket name -> its customer-managed KMS key ARN, for the buckets that have one."""
        return {b.name: b.kms_key_arn for b in self.model_buckets if b.kms_key_arn}


    @model_validator(mode="after")
    def _something_to_deploy(self) -> EnvironmentConfig:
        if not self.instance_groups and not self.endpoints:
            raise ValueError("nothing to deploy: give instance_groups (a HyperPod cluster), endpoints, or both")
        return self

    @model_validator(mode="after")
    def _region_serves_each_part(self) -> EnvironmentConfig:
        if self.endpoints and self.region not in sagemaker_regions():
            raise ValueError(f"region {self.region}: SageMaker endpoints are not offered there (botocore's "
                             f"endpoint data lists {', '.join(sagemaker_regions())})")
        if self.instance_groups and self.region not in hyperpod_dependencies.HEALTH_AGENT_ACCOUNTS:
            raise ValueError(
                f"region {self.region}: the HyperPod cluster needs a region where HyperPod's health monitoring "
                f"agent is published ({', '.join(sorted(hyperpod_dependencies.HEALTH_AGENT_ACCOUNTS))}); endpoints alone "
                "(instance_groups []) work in more regions")
        return self

    @model_validator(mode="after")
    def _unique_groups(self) -> EnvironmentConfig:
        names = [g.name for g in self.instance_groups]
        dupes = repeated(names)
        if dupes:
            raise ValueError(f"instance group names must be unique; repeated: {', '.join(dupes)}")
        if len(self.vpc.availability_zones) not in (0, *range(2, 7)):
            raise ValueError("vpc.availability_zones needs 2..6 zones (or none for Fn::GetAZs)")
        foreign = [zone for zone in self.vpc.availability_zones if zone[:-1] != self.region]
        if foreign:
            raise ValueError(f"vpc.availability_zones {', '.join(foreign)} are not zones of the environment's "
                             f"region {self.region}; use zones such as {self.region}a, {self.region}b")
        return self

    @model_validator(mode="after")
    def _caches_fit_groups(self) -> EnvironmentConfig:
        problems = cache_problems(self.caches, self.instance_groups, self.refresh.cached_models, self.vpc.vpc_id)
        if problems:
            raise ValueError("\n  ".join(problems))
        return self

    @model_validator(mode="after")
    def _nodes_hold_their_pods(self) -> EnvironmentConfig:
        if not self.instance_groups:  # no HyperPod cluster: nothing runs on nodes
            return self
        groups = [NodeGroup(g.name, g.instance_type, g.instance_count, g.threads_per_core,
                            self.pods_per_node.get(g.instance_type)) for g in self.instance_groups]
        problems = node_problems(groups, node_workloads(self))
        if problems:
            raise ValueError("\n  ".join(problems))
        return self

    @model_validator(mode="after")
    def _servers_are_told_what_to_serve(self) -> EnvironmentConfig:
        problems = serving_problems(self.endpoints)
        if problems:
            raise ValueError("\n  ".join(problems))
        return self

    @model_validator(mode="after")
    def _exporter_triggers_have_an_exporter(self) -> EnvironmentConfig:
        if self.observability.enabled:
            return self
        problems = [f"caches.models[{i}].autoscaling.trigger.exporter: {m.autoscaling.trigger.metric} -- "
                    "the cache metrics exporter publishes it only with observability.enabled true; enable it or "
                    "use a cloudwatch or prometheus trigger"
                    for i, m in enumerate(self.caches.models)
                    if m.autoscaling and isinstance(m.autoscaling.trigger, ExporterTrigger)]
        if problems:
            raise ValueError("\n  ".join(problems))
        return self

    @model_validator(mode="after")
    def _refresh_targets_exist(self) -> EnvironmentConfig:
        problems = refresh_problems(self.refresh, self.caches, self.endpoints)
        if problems:
            raise ValueError("\n  ".join(problems))
        return self

    @model_validator(mode="after")
    def _buckets_declared(self) -> EnvironmentConfig:
        problems = []
        dupes = repeated(b.name for b in self.model_buckets)
        if dupes:
            problems.append(f"model_buckets names must be unique; repeated: {', '.join(dupes)}")
        declared = {b.name for b in self.model_buckets}
        for bucket, paths in self.bucket_readers().items():
            if bucket not in declared:
                problems += [f"{path}: {bucket!r} -- not declared in model_buckets; add "
                             f'{{"name": "{bucket}"}} if it exists already, or {{"name": "{bucket}", "create": true}} '
                             "to have hyperwarm create it before anything reads it" for path in paths]
        if problems:
            raise ValueError("\n  ".join(problems))
        return self

    def bucket_readers(self) -> dict[str, list[str]]:
        """Every bucket a model is read from -> the config paths that read it."""
        readers: dict[str, list[str]] = {}
        for i, model in enumerate(self.caches.models):
            if isinstance(model.source, ModelSource):
                readers.setdefault(model.source.bucket, []).append(f"caches.models[{i}].source.bucket")
        for i, endpoint in enumerate(self.endpoints):
            for j, variant in enumerate(endpoint.variants):
                if variant.model_data:
                    bucket = variant.model_data.removeprefix("s3://").split("/", 1)[0]
                    readers.setdefault(bucket, []).append(f"endpoints[{i}].variants[{j}].model_data")
        if self.refresh.models and self.refresh.bucket:
            readers.setdefault(self.refresh.bucket, []).append("refresh.bucket")
        return readers

    def instance_group(self, name: str) -> InstanceGroupConfig:
        for group in self.instance_groups:
            if group.name == name:
                return group
        raise KeyError(name)


def node_workloads(config: EnvironmentConfig) -> list[Workload]:
    """Every pod the stacks place on the HyperPod nodes: HyperPod's dependencies, the EKS add-ons
    and the inference operator, image pre-pull DaemonSets and the cached models' deployments."""
    # Regions only change image URIs, never what a node holds.
    region = config.region if config.region in hyperpod_dependencies.HEALTH_AGENT_ACCOUNTS else "us-west-2"
    workloads = workloads_from_objects(hyperpod_dependencies.objects(region))
    workloads += addon_workloads(ADDON_WORKLOADS)
    prepull: dict[str, set[str]] = {}
    for model in config.caches.models:
        for group in model.instance_groups:
            prepull.setdefault(group, set()).update(model.daemonset_images)
        # A JumpStart model's pod is sized by its hub content for the instance type (unknown at synth): counted
        # as holding every GPU of a node, its CPU and memory not counted.
        requests = (pod(gpus=jumpstart_gpus(model, config.instance_groups)) if is_jumpstart(model)
                    else pod(model.resources.cpu, model.resources.memory, model.resources.gpus))
        workloads.append(Workload(
            f"model {model.name}" + (f" at max_replicas {model.max_replicas}" if model.autoscaling else ""),
            requests,
            replicas=model.max_replicas, groups=frozenset(model.instance_groups),
            preference=model.instance_groups))
    for group, images in prepull.items():
        if images:  # one keep-alive container per image (hyperwarm.caches.objects): 1m CPU, 8Mi each
            workloads.append(Workload(f"prepull-{group}", Requests(1, len(images), 8 * len(images)),
                                      daemonset=True, groups=frozenset({group})))
    return workloads


@functools.cache
def sagemaker_regions() -> tuple[str, ...]:
    """Regions of every partition where SageMaker is offered, from botocore's offline endpoint data: the regional
    endpoints of its ``api.sagemaker`` service (SageMaker's endpoint prefix), as boto3's ``get_available_regions``
    lists them. Read from botocore's file, without importing boto3 (a third of a second of every synth)."""
    spec = importlib.util.find_spec("botocore")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the app checks regions against botocore's endpoint data: install hyperwarm[dev]")
    data = json.loads(Path(next(iter(spec.submodule_search_locations)), "data", "endpoints.json").read_text())
    return tuple(sorted({region for partition in data["partitions"]
                         for region in partition["services"].get("api.sagemaker", {}).get("endpoints", {})
                         if region in partition["regions"]}))


_ENV_NAME = re.compile(r"^[a-z][a-z0-9-]{0,20}$")


def _format(env: str, error: Mapping[str, Any]) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in config_location(error["loc"]))
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] in ("extra_forbidden", "unexpected_keyword_argument"):  # a model's, a props dataclass's
        renamed = RENAMED_KEYS.get(str(error["loc"][-1]))
        message = f"unknown key; it is now {renamed}" if renamed else "unknown key"
    elif error["type"] == "string_pattern_mismatch":
        message = pattern_in_words(error["ctx"]["pattern"])
    value = error.get("input")
    if isinstance(value, (Mapping, list, tuple)):  # a rule over an object: name the place, not the whole object
        return f"environments.{env}{path}: {message}"
    return f"environments.{env}{path}: {value!r} -- {message}"


def _consequential(error: Mapping[str, Any], errors: Sequence[Mapping[str, Any]]) -> bool:
    """A "too short" list whose items failed: only the items' own errors say anything."""
    loc = tuple(error["loc"])
    return error["type"] == "too_short" and any(
        len(other["loc"]) > len(loc) and tuple(other["loc"][:len(loc)]) == loc for other in errors)


PRODUCTION_NAMES = ("prod", "production")
"""Environments that are production unless they say ``"production": false``."""


def parse_environment(name: str, raw: Any) -> EnvironmentConfig:
    """Validate one environment; raises :class:`ConfigError` listing every problem."""
    if not _ENV_NAME.match(name):
        raise ConfigError(f"environments.{name}: environment names are 1..21 lower-case letters, digits or hyphens")
    if not isinstance(raw, Mapping):
        raise ConfigError(f"environments.{name}: {raw!r} -- must be an object")
    if raw.get("endpoints") and not {"instance_groups", "caches"} & set(raw):
        raw = {**raw, "instance_groups": []}  # endpoints alone need no HyperPod cluster (81 unused resources)
    if name in PRODUCTION_NAMES and "production" not in raw:  # a prod named so is protected unless it says not
        raw = {**raw, "production": True}
    try:
        # JSON mode: strict about types, yet JSON arrays become tuples as they should.
        config = EnvironmentConfig.model_validate_json(json.dumps(raw))
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        lines = [_format(name, e) for e in errors if not _consequential(e, errors)]
        raise ConfigError(f"invalid configuration for environment {name!r}:\n  " + "\n  ".join(lines)) from None
    group_types = [g.instance_type for g in config.instance_groups]
    lines = (_endpoint_name_problems(name, config)
             + regional_problems(name, config.region, group_types, config.caches.models, config.endpoints)
             + alarm_problems(name, config.production, config.alarms, config.region) + _admin_problems(name, config)
             + signing_problems(name, config.production, config.refresh) + _enrichment_undeclared(name, config))
    if lines:
        raise ConfigError(f"invalid configuration for environment {name!r}:\n  " + "\n  ".join(lines))
    return config




def _promql_endpoints(config: EnvironmentConfig) -> list[str]:
    """The endpoints the observability stack's PromQL TTFT alarms read (none without the stack)."""
    return [e.name for e in config.endpoints if e.detailed_observability] if config.observability.enabled else []


def creates_otel_enrichment(config: EnvironmentConfig) -> bool:
    """Whether the environment's observability stack creates the account's OTel enrichment (the library's rule)."""
    return creates_enrichment(config.observability.otel_enrichment, _promql_endpoints(config))


def _enrichment_undeclared(env: str, config: EnvironmentConfig) -> list[str]:
    """The library's rule (a PromQL alarm without the account's OTel enrichment never fires, and the library
    creates none unasked), before anything is built, under the cdk.json field's name."""
    problem = enrichment_problem(config.observability.otel_enrichment, _promql_endpoints(config))
    return [f"environments.{env}.observability.otel_enrichment: missing -- {problem}"] if problem else []


def _enrichment_problems(environments: Mapping[str, EnvironmentConfig]) -> list[str]:
    """OTel enrichment is one resource per account and region: CloudFormation cannot create it twice, so two
    environments that may share an account (the same one, or either left to the CLI's credentials) and a
    region cannot both create it."""
    problems = []
    creators = [(n, c) for n, c in environments.items() if creates_otel_enrichment(c)]
    for i, (name, config) in enumerate(creators):
        for first, other in creators[:i]:
            if other.region == config.region and (other.account is None or config.account is None
                                                   or other.account == config.account):
                account = config.account or other.account or "the CLI's (no account set)"
                problems.append(
                    f"environments.{name}.observability.otel_enrichment: 'create' -- environment {first} creates "
                    f"the OTel enrichment of the same account ({account}) and region ({config.region}) already, "
                    "and it is one per account and region: set \"existing\" here, or give both environments "
                    "their different accounts")
                break
    return problems


def _admin_problems(env: str, config: EnvironmentConfig) -> list[str]:
    """A production cluster names its administrators."""
    if config.production and config.instance_groups and not config.cluster_admins:
        return [(f"environments.{env}.cluster_admins: [] -- a production environment names the IAM roles or users "
                 "that administer its EKS cluster; without them its administrator would be whoever may deploy "
                 "(the CDK bootstrap's deploy role)")]
    return []


def _endpoint_name_problems(env: str, config: EnvironmentConfig) -> list[str]:
    """The environment's name is part of each endpoint's SageMaker name, which has at most 63 characters."""
    problems = []
    for i, endpoint in enumerate(config.endpoints):
        full = endpoint_name(env, endpoint)
        problem = contract.endpoint_name_problem(full)
        if problem:
            room = contract.NAME_MAX - (len(full) - len(endpoint.name))
            problems.append(f"environments.{env}.endpoints[{i}].name: {endpoint.name!r} -- SageMaker endpoint name "
                            f"{full!r}: {problem}; in environment {env!r} a name may have at most "
                            f"{room} characters")
    return problems


def parse_environments(raw: Any) -> dict[str, EnvironmentConfig]:
    """Validate the whole ``environments`` context object; raises :class:`ConfigError`."""
    if raw is None:
        raise ConfigError("environments: missing -- cdk.json's context needs an \"environments\" object of "
                          "environment name -> settings, e.g. {\"dev\": {}}")
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError(f"environments: {raw!r} -- must be a non-empty object of environment name -> settings")
    environments = {name: parse_environment(name, value) for name, value in raw.items()}
    problems = _enrichment_problems(environments)
    if problems:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems))
    return environments


def load_context(path: str | Path = "cdk.json") -> dict[str, Any]:
    """The ``context`` object of cdk.json; a malformed file is a ConfigError naming file, line and column."""
    path = Path(path)
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: not found -- run from the project folder (where cdk.json is)") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}:{exc.colno}: {exc.msg}") from None
    context = document.get("context") if isinstance(document, dict) else None
    if not isinstance(context, dict):
        raise ConfigError(f"{path}: needs a \"context\" object holding \"environments\"")
    nulls = _nulls(context.get("environments"), "environments")
    if nulls:  # the CDK CLI drops null context values: caught here, as the file is read
        raise ConfigError("\n  ".join(f"{path}: {where}: null -- give a value or remove the key; the cdk CLI "
                                       "drops null context values, so it would be silently ignored" for where in nulls))
    return context


def _nulls(value: Any, where: str) -> list[str]:
    """Paths of the nulls in ``value``."""
    if value is None:
        return [where]
    if isinstance(value, Mapping):
        return [n for key, item in value.items() for n in _nulls(item, f"{where}.{key}")]
    if isinstance(value, list):
        return [n for i, item in enumerate(value) for n in _nulls(item, f"{where}[{i}]")]
    return []
