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
from functools import lru_cache
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr

_ECR_URI = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr(-fips)?\.(?P<region>[a-z]{2}(-[a-z]+)+-\d)\.amazonaws\.com(\.cn)?"
    r"/(?P<repository>[a-z0-9][a-z0-9._/-]*?)(:(?P<tag>[\w][\w.-]{0,127})|@sha256:[0-9a-f]{64})?$"
)


INFERENCE_AMI_CUDA: dict[str, tuple[int, int]] = {
    "al2-ami-sagemaker-inference-gpu-2": (12, 2),  # NVIDIA driver 535
    "al2-ami-sagemaker-inference-gpu-2-1": (12, 2),  # driver 535
    "al2-ami-sagemaker-inference-gpu-3-1": (12, 4),  # driver 550
    "al2023-ami-sagemaker-inference-gpu-4-1": (13, 0),  # driver 580
}
"""Highest CUDA version each SageMaker ``InferenceAmiVersion``'s GPU driver runs (botocore 1.44.8's
``ProductionVariant.InferenceAmiVersion`` documentation). Without one, SageMaker picks a default AMI with
driver 470 (CUDA 11.4) or 535 (CUDA 12.2) by instance family: "Best practices to minimize interruptions
during GPU driver upgrades", https://docs.aws.amazon.com/sagemaker/latest/dg/inference-gpu-drivers.html."""

_CUDA_TAG = re.compile(r"(?:^|[-_.])cu(\d{2,3})(?=$|[-_.])")


def image_cuda(uri: str) -> tuple[int, int] | None:
    """The CUDA version an image's tag names (``...-cu130-...`` -> (13, 0)); None when it names none."""
    tag = uri.rsplit("/", 1)[-1].partition(":")[2]
    match = _CUDA_TAG.search(tag)
    if match is None:
        return None
    digits = match[1]
    return int(digits[:-1]), int(digits[-1])


def cuda_ami_problem(uri: str, ami: str | None) -> str | None:
    """Why a SageMaker variant running ``uri`` on host AMI ``ami`` (an ``InferenceAmiVersion``) cannot
    start its CUDA; None when it can, or when the image names no CUDA or the AMI is unknown."""
    cuda = image_cuda(uri)
    if cuda is None or (ami is not None and ami not in INFERENCE_AMI_CUDA):
        return None
    if ami is not None and INFERENCE_AMI_CUDA[ami] >= cuda:
        return None
    fitting = [name for name, supported in INFERENCE_AMI_CUDA.items() if supported >= cuda]
    wanted = f"set inference_ami_version to {' or '.join(fitting)}" if fitting \
        else "no known InferenceAmiVersion supports it; use an image built for an older CUDA"
    have = "SageMaker's default AMI runs CUDA <= 12.2 (driver 470 or 535)" if ami is None \
        else f"that AMI's driver runs CUDA <= {'.'.join(map(str, INFERENCE_AMI_CUDA[ami]))}"
    return f"the image {uri} needs CUDA {cuda[0]}.{cuda[1]} but {have}; {wanted}"


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


@lru_cache(maxsize=None)
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
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "hyperwarm" / f"image-uris-sagemaker-core-{resolver}.json"


def _read(cache: Path) -> dict[str, str]:
    try:
        return json.loads(cache.read_text())
    except (OSError, ValueError):
        return {}


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
        return image_uris.retrieve(framework=framework, version=version, region=region)
    except (ValueError, KeyError) as exc:
        raise ValueError(f"no official {framework} {version} image in {region}: {exc}") from None


class ContainerImage:
    """The image of a SageMaker model container. Use the static factories."""

    def __init__(self, *, uri: str | None = None, repository: ecr.IRepository | None = None,
                 tag: str | None = None, framework: str | None = None, version: str | None = None) -> None:
        self._uri, self._repository, self._tag = uri, repository, tag
        self.framework, self.version = framework, version

    @staticmethod
    def from_uri(uri: str) -> "ContainerImage":
        """An explicit ECR image URI; the execution role may pull from exactly its repository."""
        return ContainerImage(uri=uri)

    @staticmethod
    def from_ecr_repository(repository: ecr.IRepository, tag: str = "latest") -> "ContainerImage":
        """An image in an ECR repository of this app (pull granted through ``repository.grant_pull``)."""
        return ContainerImage(repository=repository, tag=tag)

    @staticmethod
    def official(framework: str, version: str) -> "ContainerImage":
        """An AWS serving container, e.g. ``official("vllm", "0.27.1")`` or ``official("djl-lmi", "0.33.0")``;
        resolved for the stack's region at synth."""
        return ContainerImage(framework=framework, version=version)

    @property
    def literal_uri(self) -> str | None:
        """The explicit URI when it is known at synth (not a token), else None."""
        if self._uri is None or cdk.Token.is_unresolved(self._uri):
            return None
        return self._uri

    def describe(self) -> str:
        if self.framework:
            return f"{self.framework} {self.version}"
        if self._repository is not None:
            return f"ECR repository image :{self._tag}"
        return str(self._uri)

    def bind(self, scope: cdk.Stack) -> tuple[str, ecr.IRepository | None, EcrImage | None]:
        """(image URI, repository to grant pull on or None, parsed URI or None) for ``scope``'s region."""
        if self._repository is not None:
            return self._repository.repository_uri_for_tag(self._tag), self._repository, None
        if self.framework:
            region = scope.region
            if cdk.Token.is_unresolved(region):
                raise ValueError(
                    f"{scope.node.path}: the official {self.describe()} image is resolved per region at synth; "
                    "give the stack an explicit region (env=cdk.Environment(region=...))"
                )
            uri = official_image_uri(self.framework, str(self.version), region)
            return uri, None, parse_ecr_uri(uri)
        uri = str(self._uri)
        if cdk.Token.is_unresolved(uri):
            raise ValueError(
                f"{scope.node.path}: an image URI that is a token cannot be scoped for pulling; "
                "use ContainerImage.from_ecr_repository(...)"
            )
        return uri, None, parse_ecr_uri(uri)
