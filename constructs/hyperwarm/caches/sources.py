"""Where a cached model's weights come from: one of the sources the HyperPod inference operator serves.

- :class:`ModelSource`: Amazon S3, ``s3://<bucket>/<prefix>/<version>`` (``modelSourceType: s3``);
- :class:`FsxModelSource`: FSx for Lustre, ``<mount>/<prefix>/<version>`` (``modelSourceType: fsx``);
- :class:`HuggingFaceModelSource`: a Hugging Face Hub repository at a commit (``modelSourceType: huggingface``);
- :class:`JumpStartModelSource`: a SageMaker JumpStart model at a version (a ``JumpStartModel`` object).

The operator does not notice files overwritten in place, so each source names a version that never changes: a
version folder (S3, FSx), a commit SHA (the Hub), a model version (JumpStart). Field rules come from the operator's
CRD (``crds/``) and the services' documented name formats; each is checked when the source is built.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from annotated_types import Interval

from hyperwarm._internal.constraints import Matches, check
from hyperwarm.functions.hub_token.contract import TOKEN_KEY

VERSION = Matches(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$",
                  "1..63 letters, digits, dots, underscores or hyphens, starting with a letter or digit, "
                  "e.g. v2 or 2026-11-29")
BUCKET = Matches(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
                 "an S3 bucket name: 3..63 lower-case letters, digits, dots or hyphens, e.g. my-models")
KEY_PREFIX = Matches(r"^[A-Za-z0-9_.=-]+(/[A-Za-z0-9_.=-]+)*$",
                     "an S3 key prefix without leading or trailing slash, e.g. llama-3.1-8b-instruct")
REGION = Matches(r"^[a-z]{2}(-[a-z]+)+-\d$", "an AWS region name, e.g. us-west-2")
FSX_ID = Matches(r"^fs-[0-9a-f]{8,17}$",
                 "an FSx file system id: fs- and 8 to 17 lower-case hex digits, e.g. fs-0123456789abcdef0")
FSX_MOUNT_NAME = Matches(r"^[A-Za-z0-9_-]{1,8}$",
                         "an FSx for Lustre mount name: 1..8 letters, digits, underscores or hyphens (fsx for "
                         "SCRATCH_1), e.g. abcdef12 (DescribeFileSystems, LustreConfiguration.MountName)")
FSX_PATH = Matches(r"^[A-Za-z0-9_.=-]+(/[A-Za-z0-9_.=-]+)*$",
                   "a directory in the file system without leading or trailing slash, e.g. models/llama-3.1-8b")
HF_REPO = Matches(r"^[a-zA-Z0-9_.-]{1,96}/[a-zA-Z0-9_.-]{1,96}$",
                  "a Hugging Face repository id <owner>/<name>, e.g. meta-llama/Llama-3.1-8B-Instruct")
COMMIT_SHA = Matches(r"^[0-9a-f]{40}$",
                     "a full commit SHA: 40 lower-case hex digits, e.g. a09a35458c702b33eeacc393d103063234e8bc28 "
                     "(the repository's History page lists them); a branch or tag moves, so pods started at "
                     "different times would serve different weights, and the operator's commitSHA takes only a "
                     "full SHA")
JUMPSTART_ID = Matches(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$",
                       "a JumpStart model id: 1..63 letters, digits or hyphens, e.g. meta-textgeneration-llama-3-1-8b")
JUMPSTART_VERSION = Matches(r"^\d{1,4}\.\d{1,4}\.\d{1,4}$", "a JumpStart model version x.y.z, e.g. 2.4.0")
SECRET = Matches(r"^(arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]{1,512}-[A-Za-z0-9]{6}"
                 r"|[A-Za-z0-9/_+=.@-]{1,512})$",
                 "a Secrets Manager secret name, or its complete ARN (ending in - and 6 characters), e.g. "
                 "hyperwarm/hub-token")
KMS_KEY_ARN = Matches(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[a-zA-Z0-9-]{1,128}$",
                      "a KMS key ARN, e.g. arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab")
HUB_NAME = Matches(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$", "a SageMaker hub name, e.g. SageMakerPublicHub")


SourceKind = Literal["s3", "fsx", "huggingface", "jumpstart"]


DeploymentKind = Literal["InferenceEndpointConfig", "JumpStartModel"]
"""The operator's object a cached model is deployed as."""


class _Checked:
    """A source checks itself when built: its fields' constraints, then its own rules across fields."""

    deployment_kind: ClassVar[DeploymentKind] = "InferenceEndpointConfig"
    """The operator's object a model of this source is deployed as."""
    version_field: ClassVar[str] = "version"
    """The field that holds its version (what a configuration names when a version would move back)."""

    def __post_init__(self) -> None:
        check(self, self._rules)

    def _rules(self) -> list[str]:
        return []


class _VersionFolder:
    """A source whose versions are folders ``<prefix>/<version>`` (S3, FSx): what the operator's
    ``modelLocation`` names."""

    prefix: str
    version: str

    @property
    def location(self) -> str:
        return f"{self.prefix}/{self.version}"


@dataclass(frozen=True)
class ModelSource(_Checked, _VersionFolder):
    """Model weights at ``s3://bucket/prefix/version``: a new version is a new location."""

    bucket: Annotated[str, BUCKET]
    prefix: Annotated[str, KEY_PREFIX]
    """Key prefix of the model, without leading or trailing slash."""
    version: Annotated[str, VERSION]
    """The version folder below ``prefix``, e.g. v3 or 2026-11-01."""
    region: Annotated[str | None, REGION] = None
    """The bucket's region. Default: the stack's region."""

    kind: ClassVar[SourceKind] = "s3"


    @property
    def uri(self) -> str:
        """Where the version is, for people: ``s3://bucket/prefix/version``."""
        return f"s3://{self.bucket}/{self.location}"


FSX_DNS = Matches(r"^(fs|fc)i?-[0-9a-f]{8,}\..{4,253}$",
                  "an FSx file system DNS name, e.g. fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com")
SECURITY_GROUP = Matches(r"^sg-[0-9a-f]{8,17}$", "a security group id: sg- and 8 to 17 lower-case hex digits, "
                         "e.g. sg-0123456789abcdef0")
VPC_ID = Matches(r"^vpc-[0-9a-f]{8,17}$", "a VPC id: vpc- and 8 to 17 lower-case hex digits, e.g. vpc-0123456789abcdef0")
LustreThroughput = Literal[12, 40, 50, 100, 125, 200, 250, 500, 1000]
"""MB/s per TiB of storage: PERSISTENT_2 125, 250, 500, 1000; PERSISTENT_1 SSD 50, 100, 200, HDD 12, 40
(``PerUnitStorageThroughput``); SCRATCH_2, which has none, reads 200 from disk."""


@dataclass(frozen=True)
class FsxModelSource(_Checked, _VersionFolder):
    """Model weights in an FSx for Lustre file system at ``<prefix>/<version>``: a new version is a new directory.

    The cluster needs the FSx CSI driver (the inference operator add-on's prerequisite, installed with it) and a
    network path: the file system in the cluster's VPC, its security group admitting the nodes on Lustre's ports
    (TCP 988 and 1018-1023), which :class:`~hyperwarm.caches.CachedModels` opens
    (:mod:`hyperwarm.caches.fsx`). Field rules follow the FSx API (``DescribeFileSystems``)."""

    file_system_id: Annotated[str, FSX_ID]
    mount_name: Annotated[str, FSX_MOUNT_NAME]
    """The file system's Lustre mount name (the console's "Mount name"). Given, the operator mounts without looking
    the file system up."""
    prefix: Annotated[str, FSX_PATH]
    """Directory of the model in the file system, without leading or trailing slash."""
    version: Annotated[str, VERSION]
    """The version directory below ``prefix``, e.g. v3."""
    security_group_id: Annotated[str, SECURITY_GROUP]
    """A security group of the file system's network interfaces: it gets ingress rules admitting the cluster's
    node security group on TCP 988 and 1018-1023, Lustre's ports."""
    dns_name: Annotated[str | None, FSX_DNS] = None
    """The file system's DNS name. Default: ``<file_system_id>.fsx.<region>.amazonaws.com``."""
    vpc_id: Annotated[str | None, VPC_ID] = None
    """The file system's VPC (``DescribeFileSystems``' ``VpcId``), checked against the cluster's VPC where that is
    known at synth (an existing VPC named by id or looked up). Default: not checked."""
    storage_capacity_gib: Annotated[int, Interval(ge=600, le=2_147_483_647)] = 1200
    """The file system's storage capacity, GiB: with ``per_unit_storage_throughput``, its read rate in the cold-start
    estimate. Default: 1200 (HyperPod's smallest, ``FSxLustreConfig.SizeInGiB``)."""
    per_unit_storage_throughput: LustreThroughput = 125
    """Disk throughput per TiB of storage, MB/s (:data:`LustreThroughput`). Default: 125 (HyperPod's smallest,
    ``FSxLustreConfig.PerUnitStorageThroughput``)."""

    kind: ClassVar[SourceKind] = "fsx"

    def _rules(self) -> list[str]:
        dns = self.dns_name
        if dns and re.match(FSX_DNS.pattern, dns) and not dns.startswith(f"{self.file_system_id}."):
            return [f"dns_name = {self.dns_name!r} -- names another file system than {self.file_system_id}; "
                    f"allowed: {self.file_system_id}.fsx.<region>.amazonaws.com"]
        return []

    @property
    def uri(self) -> str:
        return f"fsx://{self.file_system_id}/{self.location}"

    def dns(self, region: str) -> str:
        return self.dns_name or f"{self.file_system_id}.fsx.{region}.amazonaws.com"


@dataclass(frozen=True)
class HuggingFaceModelSource(_Checked):
    """A Hugging Face Hub repository at one commit: a new version is a new commit SHA.

    The operator downloads it in each pod's init container over the internet (the nodes' NAT egress); a gated or
    private repository needs a Hub token, kept in Secrets Manager and copied into the Kubernetes Secret the
    operator reads (:mod:`hyperwarm.caches.hub`)."""

    repo_id: Annotated[str, HF_REPO]
    """``<owner>/<name>``, e.g. Qwen/Qwen2.5-7B-Instruct (the operator's ``modelId``)."""
    revision: Annotated[str, COMMIT_SHA]
    """The commit the pods load: a full 40-hex SHA, never a branch or tag (the operator's ``commitSHA``)."""
    token_secret: Annotated[str | None, SECRET] = None
    """Name or complete ARN of the Secrets Manager secret holding a Hub token (a plain string, not JSON), for
    gated or private repositories. Default: none (a public repository)."""
    token_secret_key_arn: Annotated[str | None, KMS_KEY_ARN] = None
    """The customer managed KMS key encrypting ``token_secret``, if it has one (its readers need kms:Decrypt on it).
    Default: none (the AWS managed key aws/secretsmanager)."""
    gated: bool = False
    """The repository is gated or private: the download needs ``token_secret``. Default: false."""

    kind: ClassVar[SourceKind] = "huggingface"
    version_field: ClassVar[str] = "revision"

    def _rules(self) -> list[str]:
        if self.gated and self.token_secret is None:
            return [f"token_secret = None -- repository {self.repo_id} is gated: give the Secrets Manager secret "
                    "holding a Hub token that was granted access"]
        if self.token_secret_key_arn is not None and self.token_secret is None:
            return [f"token_secret_key_arn = {self.token_secret_key_arn!r} -- a key without token_secret decrypts "
                    "nothing: give token_secret too, or remove the key"]
        return []

    @property
    def version(self) -> str:
        return self.revision

    @property
    def uri(self) -> str:
        return f"hf://{self.repo_id}@{self.revision}"


@dataclass(frozen=True)
class JumpStartModelSource(_Checked):
    """A SageMaker JumpStart model at a version, served as a ``JumpStartModel``: a new version is a new
    ``model_version``."""

    model_id: Annotated[str, JUMPSTART_ID]
    model_version: Annotated[str, JUMPSTART_VERSION]
    accept_eula: bool = False
    """Accept the model's end-user licence agreement; gated models do not deploy without it. Default: false."""
    gated: bool = False
    """The model is gated (its licence must be accepted): then ``accept_eula`` must be true. Default: false."""
    hub_name: Annotated[str, HUB_NAME] = "SageMakerPublicHub"
    """The hub the model comes from. Default: SageMakerPublicHub."""

    kind: ClassVar[SourceKind] = "jumpstart"
    deployment_kind: ClassVar[DeploymentKind] = "JumpStartModel"
    version_field: ClassVar[str] = "model_version"

    def _rules(self) -> list[str]:
        if self.gated and not self.accept_eula:
            return [f"accept_eula = False -- JumpStart model {self.model_id} is gated: set accept_eula true once its "
                    "end-user licence agreement is accepted"]
        return []

    @property
    def version(self) -> str:
        return self.model_version

    @property
    def uri(self) -> str:
        return f"jumpstart://{self.hub_name}/{self.model_id}@{self.model_version}"


AnyModelSource = ModelSource | FsxModelSource | HuggingFaceModelSource | JumpStartModelSource
"""Every source a cached model may read."""


def model_source_config(source: AnyModelSource, region: str, token_secret_name: str | None = None) -> dict[str, Any]:
    """An ``InferenceEndpointConfig``'s ``modelSourceConfig`` for ``source`` (a JumpStart model is a
    ``JumpStartModel`` object instead: none). ``token_secret_name``: the Kubernetes Secret holding the Hub token."""
    if isinstance(source, ModelSource):
        return {"modelSourceType": "s3", "s3Storage": {"bucketName": source.bucket, "region": source.region or region},
                "modelLocation": source.location}
    if isinstance(source, FsxModelSource):
        return {"modelSourceType": "fsx", "fsxStorage": {"fileSystemId": source.file_system_id,
                                                          "dnsName": source.dns(region),
                                                          "mountName": source.mount_name},
                "modelLocation": source.location}
    if isinstance(source, HuggingFaceModelSource):
        model: dict[str, Any] = {"modelId": source.repo_id, "commitSHA": source.revision}
        if token_secret_name is not None:
            model["tokenSecretRef"] = {"name": token_secret_name, "key": TOKEN_KEY}
        return {"modelSourceType": "huggingface", "huggingFaceModel": model}
    raise TypeError(f"{type(source).__name__} has no modelSourceConfig: it is served as a JumpStartModel")
