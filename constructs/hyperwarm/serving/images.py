"""Container images for SageMaker models: an explicit ECR URI, an ECR repository, or an
official serving container (vLLM, LMI, TGI ...) named by framework and version.

Official images live in a per-region AWS account (the Deep Learning Containers registry).
Their URIs are resolved at synth with ``sagemaker-core``'s ``image_uris.retrieve``, which reads
the image catalogue shipped inside the package: no network, no AWS call. ``sagemaker-core``
pulls in pandas and scipy (~450 MB), so it is the optional extra ``hyperwarm[images]``, imported
only when an official image is resolved, and never belongs in a Lambda package.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr, aws_iam as iam
from constructs import IConstruct

from hyperwarm._internal.tokens import unresolved
from hyperwarm._internal.user_cache import cache_root

_ECR_URI = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr(-fips)?\.(?P<region>[a-z]{2}(-[a-z]+)+-\d)\.amazonaws\.com(\.cn)?"
    r"/(?P<repository>[a-z0-9][a-z0-9._/-]*?)(:(?P<tag>[\w][\w.-]{0,127})|@sha256:[0-9a-f]{64})?$"
)


@dataclass(frozen=True)
class EcrImage:
    """A parsed ECR image URI: what the execution role must be allowed to pull."""

    uri: str
    account: str
    region: str
    repository: str

    def repository_arn(self, partition: str = "aws") -> str:
        return f"arn:{partition}:ecr:{self.region}:{self.account}:repository/{self.repository}"


def parse_ecr_uri(uri: str) -> EcrImage:
    """Split ``<account>.dkr.ecr.<region>.amazonaws.com/<repository>[:tag|@digest]``.

    SageMaker pulls model images from ECR only (private registries need VPC mode, which
    hyperwarm does not configure), so anything else is rejected here.
    """
    match = _ECR_URI.match(uri)
    if not match:
        raise ValueError(
            f"{uri!r} is not an ECR image URI; expected <account>.dkr.ecr.<region>.amazonaws.com/<repository>[:tag]"
        )
    return EcrImage(uri, match["account"], match["region"], match["repository"])


@cache
def official_image_uri(framework: str, version: str, region: str) -> str:
    """The official serving image URI for ``framework`` ``version`` in ``region`` (offline).

    Importing the resolver costs ~2 s, most of a synth; its answers depend only on the installed
    ``sagemaker-core`` version, so they are kept in a per-version cache file and the import
    happens only for a combination not resolved before.
    """
    cache = _cache_file(framework, version)
    key = f"{framework}|{version}|{region}"
    known = _read(cache)
    if key not in known:
        known[key] = _resolve(framework, version, region)
        _write(cache, known)
    return known[key]


def _cache_file(framework: str, version: str) -> Path:
    try:
        resolver = importlib.metadata.version("sagemaker-core")
    except importlib.metadata.PackageNotFoundError:
        raise RuntimeError(
            f"resolving the official {framework} {version} image needs sagemaker-core: "
            "pip install 'hyperwarm[images]', or give the image as an explicit ECR URI"
        ) from None
    return cache_root() / f"image-uris-sagemaker-core-{resolver}.json"


def _read(cache: Path) -> dict[str, str]:
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in known.items()} if isinstance(known, dict) else {}


def _write(cache: Path, known: dict[str, str]) -> None:
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        partial = cache.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(known, indent=1, sort_keys=True))
        partial.replace(cache)  # atomic: concurrent synths never read half a file
    except OSError:
        pass  # a read-only home only costs the next synth the import


def _resolve(framework: str, version: str, region: str) -> str:
    from sagemaker.core import image_uris

    try:
        return str(image_uris.retrieve(framework=framework, version=version, region=region))
    except (ValueError, KeyError) as exc:
        raise ValueError(f"no official {framework} {version} image in {region}: {exc}") from None


@dataclass(frozen=True)
class ServingImageConfig:
    """What a model's container definition takes from a bound image."""

    image_uri: str
    """The image as SageMaker pulls it: ``<registry>/<repository>:<tag>`` or ``@sha256:<digest>``."""


_PULL_ACTIONS = ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"]


class ServingImage:
    """The image of a SageMaker model container. Use the static factories."""

    def __init__(self, *, uri: str | None = None, repository: ecr.IRepository | None = None,
                 tag: str | None = None, framework: str | None = None, version: str | None = None) -> None:
        self._uri, self._repository, self._tag = uri, repository, tag
        self.framework: str | None = framework
        """The official framework (``official``), else None."""
        self.version: str | None = version
        """The official framework's version (``official``), else None."""

    @staticmethod
    def from_uri(uri: str) -> ServingImage:
        """An explicit ECR image URI; the model may pull from exactly its repository."""
        return ServingImage(uri=uri)

    @staticmethod
    def from_ecr_repository(repository: ecr.IRepository, tag: str = "latest") -> ServingImage:
        """An image in an ECR repository of this app (pull granted through ``repository.grant_pull``)."""
        return ServingImage(repository=repository, tag=tag)

    @staticmethod
    def official(framework: str, version: str) -> ServingImage:
        """An AWS serving container, e.g. ``official("vllm", "0.27.1")`` or ``official("djl-lmi", "0.33.0")``;
        resolved for the stack's region at synth."""
        return ServingImage(framework=framework, version=version)

    @property
    def literal_uri(self) -> str | None:
        """The explicit URI when it is known at synth (not a token), else None."""
        if self._uri is None or unresolved(self._uri):
            return None
        return self._uri

    def describe(self) -> str:
        """The image for messages: ``vllm 0.27.1``, the repository tag, or the URI."""
        if self.framework:
            return f"{self.framework} {self.version}"
        if self._repository is not None:
            return f"ECR repository image :{self._tag}"
        return str(self._uri)

    def uri_for(self, scope: IConstruct) -> str:
        """The image URI in ``scope``'s stack (official images are resolved for its region)."""
        if self._repository is not None:
            return self._repository.repository_uri_for_tag(self._tag)
        if self.framework:
            region = cdk.Stack.of(scope).region
            if unresolved(region):
                raise ValueError(
                    f"{scope.node.path}: image = {self.describe()!r} -- an official image is resolved per region at "
                    "synth; give the stack an explicit region (env=cdk.Environment(region=...))"
                )
            return official_image_uri(self.framework, str(self.version), region)
        return str(self._uri)

    def bind(self, scope: IConstruct, grantee: iam.IGrantable) -> ServingImageConfig:
        """The image for a model in ``scope``, with ``grantee`` (the model) allowed to pull exactly it."""
        uri = self.uri_for(scope)
        if self._repository is not None:
            self._repository.grant_pull(grantee)
            return ServingImageConfig(uri)
        if unresolved(uri):
            raise ValueError(
                f"{scope.node.path}: image = {uri!r} -- an image URI that is a token cannot be scoped for pulling; "
                "use ServingImage.from_ecr_repository(...)"
            )
        try:
            repository_arn = parse_ecr_uri(uri).repository_arn(cdk.Stack.of(scope).partition)
        except ValueError as exc:
            raise ValueError(f"{scope.node.path}: image = {exc}") from None
        iam.Grant.add_to_principal(grantee=grantee, actions=_PULL_ACTIONS, resource_arns=[repository_arn])
        # No resource-level scoping exists for the registry token.
        iam.Grant.add_to_principal(grantee=grantee, actions=["ecr:GetAuthorizationToken"], resource_arns=["*"])
        return ServingImageConfig(uri)
