"""Typed props of a model cached on a HyperPod cluster's NVMe: the one definition of every field, default and range.

Frozen dataclasses that check themselves when built (every problem in one error naming field, value and
what is allowed). The ranges and patterns sit on the fields (:mod:`hyperwarm._internal.constraints`); the
operator's CRD (``crds/``, operator 3.3) is where most of them come from. Times are ``aws_cdk.Duration``
and sizes ``aws_cdk.Size``; the rendered objects keep the operator's units (seconds). Model weights live
in S3 at ``s3://<bucket>/<prefix>/<version>``: the operator does not notice objects overwritten under the
same path, so every model version gets its own location.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import aws_cdk as cdk
from annotated_types import Interval, MaxLen
from aws_cdk import aws_s3 as s3

# Public as hyperwarm.caches' own: the error the props raise, and the GB unit of their sizes.
from hyperwarm._internal.constraints import (
    Matches,
    Measured,
    PropsError as PropsError,  # noqa: PLC0414
    Rule,
    check,
    gigabytes as gigabytes,  # noqa: PLC0414
    in_gigabytes as in_gigabytes,  # noqa: PLC0414
    size_in_gb,
)
from hyperwarm._internal.tokens import resolved
from hyperwarm.caches.autoscaling import HyperPodAutoscaling, crd_seconds
from hyperwarm.caches.jumpstart import jumpstart_problems
from hyperwarm.caches.sources import (  # noqa: F401 (ModelSource and the name rules: hyperwarm.caches.props' own)
    BUCKET as BUCKET,  # noqa: PLC0414
    KEY_PREFIX as KEY_PREFIX,  # noqa: PLC0414
    REGION as REGION,  # noqa: PLC0414
    VERSION as VERSION,  # noqa: PLC0414
    AnyModelSource,
    JumpStartModelSource,
    ModelSource as ModelSource,  # noqa: PLC0414
)
from hyperwarm.cluster.interfaces import IHyperPodCluster
from hyperwarm.serving.inference_ami import hyperpod_cuda_problem
from hyperwarm.serving.settings import Serving

MANAGED_BY = {"app.kubernetes.io/managed-by": "hyperwarm"}
"""The label every object of hyperwarm's caches carries."""
DEFAULT_FILLER_IMAGE = "public.ecr.aws/lambda/python:3.13"
"""AWS's Lambda base image for Python 3.13: Python with boto3, all a node-cache filler needs."""

K8S_NAME = Matches(r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$",
                   "1..40 lower-case letters, digits or hyphens, starting and ending with a letter or digit, "
                   "e.g. llama-3-1-8b")
"""DNS-1123 label of at most 40 characters: leaves room for suffixes such as ``-weights``."""
NAMESPACE = Matches(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
                    "a Kubernetes namespace: 1..63 lower-case letters, digits or hyphens, e.g. hyperwarm-models")
QUANTITY = Matches(r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$",
                   "a Kubernetes quantity, e.g. 8 or 500m for CPU, 64Gi for memory")
IMAGE = Matches(
    r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[0-9a-f]{64})$",
    "an image with a tag or digest (untagged images are not allowed), e.g. "
    "763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:0.27.1-gpu-py312-cu130-ubuntu22.04-sagemaker")
HTTP_PATH = Matches(r"^/[a-zA-Z0-9\-_./]*$", "an HTTP path starting with /, e.g. /ping")
ACM_ARN = Matches(r"^arn:aws:acm:[a-z0-9-]+:[0-9]{12}:certificate/[a-fA-F0-9-]+$",
                  "an ACM certificate ARN, e.g. arn:aws:acm:us-west-2:123456789012:certificate/0a1b2c3d-...")
DOMAIN = Matches(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$",
                 "a lower-case domain name without wildcard, e.g. chat.example.com")
S3_URI = Matches(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$", "an S3 URI, e.g. s3://my-bucket/certificates/")
REDIS_URL = Matches(r"^rediss?://[^\s]+$", "a redis:// or rediss:// URL, e.g. rediss://kv.example.internal:6379")

def node_gb(above: float, most: float) -> Measured:
    """A size on a node's NVMe, in GB (10^9 bytes, as model and image sizes are published); above ``above``, at
    most ``most``. cdk.json gives it as ``<name>_gb``."""
    return size_in_gb(Interval(gt=above, le=most), key_suffix="_gb")


PrepullMode = Literal["operator", "daemonset", "both"]
"""Who pre-pulls a cached model's image onto its nodes: the operator, a hyperwarm DaemonSet, or both."""
WeightsCache = Literal["node", "operator", "off"]
"""Where a model's weights wait on its nodes' NVMe:

- ``node``: hyperwarm's node cache. A filler fills ``<hostPath>/hyperwarm/<model>/<version>`` on every node of the
  group and labels the node once the copy is verified; the pods read it (``modelSourceType: kubernetesVolume``) and
  may run only on labelled nodes, so no pod starts cold, and a refresh stages the next version beside the serving
  one before it moves the deployment (a warm version change).
- ``operator``: the operator's per-deployment weights cache (``modelCacheConfig.weightsCache``): it fills the
  deployment's nodes before it creates the deployment; a pod on a node without the cache downloads (its affinity to
  the cache is only preferred), and a new version changes the deployment in place, which may start cold pods.
- ``off``: every pod downloads the weights from S3."""
CacheRoutingStrategy = Literal["prefixaware", "kvaware", "session", "roundrobin"]
"""The operator's ``intelligentRoutingSpec.routingStrategy`` (an endpoint variant's is ``EndpointRoutingStrategy``)."""
KvCacheTier = Literal["redis", "tieredstorage"]
"""The operator's L2 KV cache backends."""
LoadBalancerAlgorithm = Literal["least_outstanding_requests", "round_robin"]
"""The operator's ``loadBalancer.routingAlgorithm`` values."""


def pinned_image_problem(image: str) -> str | None:
    """Why ``image`` cannot be cached, or None: a moving tag is re-resolved, so the cache never holds it."""
    if image.endswith(":latest"):
        return "a moving tag (:latest) defeats the image cache; pin a version tag or a sha256 digest"
    return None


def _given(*values: Any) -> bool:
    return all(resolved(v) for v in values)


@dataclass(frozen=True)
class WorkerResources:
    """Requests of one serving pod; GPUs and memory are also its limits."""

    gpus: Annotated[int, Interval(ge=0, le=8)] = 1
    """GPUs of the pod (tensor parallelism), 0..8. Default: 1."""
    cpu: Annotated[str, QUANTITY] = "4"
    """Default: 4."""
    memory: Annotated[str, QUANTITY] = "32Gi"
    """Default: 32Gi."""

    def __post_init__(self) -> None:
        check(self, [])


@dataclass(frozen=True)
class ExtraImage:
    """An image the operator's image cache does not cover (sidecar, init image): pre-pulled by the DaemonSet."""

    image: Annotated[str, IMAGE, Rule(pinned_image_problem)]
    size: Annotated[cdk.Size, node_gb(0, 500)] = field(default_factory=lambda: gigabytes(1))
    """Uncompressed size on the node. Default: 1 GB."""

    def __post_init__(self) -> None:
        check(self, [])


@dataclass(frozen=True)
class Probes:
    """HTTP probes of the serving container; the startup probe's budget is the planner's cold start.

    The startup probe holds the liveness probe off until the server first answers, for as long as a pod on a
    cold node needs to pull the image and download the weights, so a cold start is never killed as a hung server.
    """

    path: Annotated[str, HTTP_PATH] = "/ping"
    """The server's health path. Default: /ping."""
    period: Annotated[cdk.Duration, crd_seconds(1, 300)] = field(default_factory=lambda: cdk.Duration.seconds(10))
    """Default: 10 seconds."""
    timeout: Annotated[cdk.Duration, crd_seconds(1, 300)] = field(default_factory=lambda: cdk.Duration.seconds(5))
    """Default: 5 seconds."""
    liveness_failures: Annotated[int, Interval(ge=1, le=100)] = 3
    """Failed checks before a restart. Default: 3."""
    readiness: bool = True
    """Also take the pod out of service while it fails. Default: true."""
    # One check fails on one slow answer; a busy 70B pod answers its health path between engine steps, and the
    # planner's engine (hyperwarm.planner.sim: 8,192-token prefill steps at 36,900 tokens/s, about 0.22 s each,
    # behind a queue of them under load) can delay one answer past the timeout. Three failures in a row at the
    # default period (30 s) are a server that stopped answering, not a busy one.
    readiness_failures: Annotated[int, Interval(ge=1, le=100)] = 3
    """Failed checks before the pod leaves service; at most ``liveness_failures``. Default: 3."""

    def __post_init__(self) -> None:
        check(self, self._rules)

    def _rules(self) -> list[str]:
        rules = []
        if self.readiness and _given(self.readiness_failures, self.liveness_failures) \
                and self.readiness_failures > self.liveness_failures:
            rules.append(f"readiness_failures = {self.readiness_failures} -- must not exceed liveness_failures "
                         f"({self.liveness_failures}): a failing pod leaves service before it is restarted")
        return rules


@dataclass(frozen=True)
class Metrics:
    """The operator's metrics scrape of the serving container."""

    enabled: bool = True
    """Default: true."""
    scrape_interval: Annotated[cdk.Duration, crd_seconds(5, 300)] = field(
        default_factory=lambda: cdk.Duration.seconds(15))
    """Default: 15 seconds."""
    path: Annotated[str, HTTP_PATH] = "/metrics"
    """Default: /metrics."""
    port: Annotated[int | None, Interval(ge=1024, le=65535)] = None
    """Default: the model's port."""

    def __post_init__(self) -> None:
        check(self, [])


@dataclass(frozen=True)
class KvCache:
    """Tiered KV cache: L1 in the pod's CPU memory, L2 in redis or the operator's tiered storage."""

    l1: bool = True
    """Offload KV blocks to the pod's CPU memory. Default: true."""
    l2: KvCacheTier | None = None
    """Default: no L2."""
    l2_url: str | None = None
    """redis: the rediss:// URL; tieredstorage: optional. Default: none."""

    def __post_init__(self) -> None:
        check(self, self._rules)

    def _rules(self) -> list[str]:
        rules = []
        if self.l2 == "redis" and not self.l2_url:
            rules.append("l2_url = None -- l2 redis needs l2_url, e.g. rediss://kv.example.internal:6379")
        elif self.l2 == "redis" and resolved(self.l2_url) and not re.match(REDIS_URL.pattern, self.l2_url or ""):
            rules.append(f"l2_url = {self.l2_url!r} -- allowed: {REDIS_URL.words}")
        if self.l2_url and not self.l2:
            rules.append(f"l2_url = {self.l2_url!r} -- needs l2 (redis or tieredstorage)")
        return rules


@dataclass(frozen=True)
class LoadBalancer:
    """The Application Load Balancer the operator puts in front of the deployment."""

    health_check_path: Annotated[str, HTTP_PATH] = "/ping"
    """Default: /ping."""
    idle_timeout: Annotated[cdk.Duration, crd_seconds(1, 4000)] = field(
        default_factory=lambda: cdk.Duration.seconds(60))
    """Long generations need more than the default, 60 seconds."""
    routing_algorithm: LoadBalancerAlgorithm = "least_outstanding_requests"
    """Default: least_outstanding_requests."""

    def __post_init__(self) -> None:
        check(self, [])


@dataclass(frozen=True)
class Tls:
    """Your ACM certificate, or where the operator writes its self-signed one."""

    certificate_arn: Annotated[str | None, ACM_ARN] = None
    """Default: none (the operator generates a certificate)."""
    domain_name: Annotated[str | None, DOMAIN, MaxLen(253)] = None
    """The certificate's domain; with ``certificate_arn``. Default: none."""
    certificate_output_s3_uri: Annotated[str | None, S3_URI] = None
    """Where the operator stores a generated certificate. Default: none."""

    def __post_init__(self) -> None:
        check(self, self._rules)

    def _rules(self) -> list[str]:
        rules = []
        if (self.certificate_arn is None) != (self.domain_name is None):
            rules.append(f"domain_name = {self.domain_name!r} -- certificate_arn and domain_name go together (the "
                         "domain must be on the certificate)")
        if not (self.certificate_arn or self.certificate_output_s3_uri):
            rules.append("certificate_arn = None -- give certificate_arn with domain_name, or "
                         "certificate_output_s3_uri")
        return rules


@dataclass(frozen=True)
class RequestLimits:
    """Fail fast at the pod's proxy instead of queueing without bound."""

    max_concurrent_requests: Annotated[int, Interval(ge=1, le=100_000)]
    max_queue_size: Annotated[int, Interval(ge=0, le=100_000)] = 0
    """0: reject at the limit. Default: 0."""
    overflow_status_code: Annotated[int, Interval(ge=400, le=599)] = 429
    """Default: 429."""

    def __post_init__(self) -> None:
        check(self, [])


@dataclass(frozen=True)
class CachedModelSpec:
    """One model deployment whose weights and image are cached on an instance group's NVMe."""

    name: Annotated[str, K8S_NAME]
    """Names every object of the model (``<name>``, ``<name>-weights``)."""
    source: AnyModelSource
    """Where the weights come from: S3 (:class:`ModelSource`), FSx for Lustre, the Hugging Face Hub or JumpStart
    (:mod:`hyperwarm.caches.sources`)."""
    size: Annotated[cdk.Size, node_gb(0, 100_000)]
    """Weights size (counted twice on the NVMe when refreshed: old and new version side by side)."""
    instance_group: str
    """An instance group of the cluster with local NVMe (``cluster.cache_group``)."""
    fallback_groups: tuple[str, ...] = ()
    """Further instance groups in order of preference, for the pods ``instance_group`` has no room for (the
    operator's ordered ``instanceTypes``, by group). Each is checked as the first is (it holds caches, its instance
    type has the GPUs, its NVMe holds the caches) and its nodes are filled and pre-pulled too. Default: none."""
    image: Annotated[str | None, IMAGE, Rule(pinned_image_problem), Rule(hyperpod_cuda_problem)] = field(
        default=None, kw_only=True)
    """Serving container image, pinned by tag or digest, whose CUDA runs on HyperPod's nodes. Required, except for a
    JumpStart source, whose hub content names its own (then it must be unset)."""
    image_size: Annotated[cdk.Size, node_gb(0, 500)] = field(default_factory=lambda: gigabytes(20))
    """Uncompressed image size on the node. Default: 20 GB (vLLM/LMI DLCs)."""
    weights_cache: WeightsCache = "operator"
    """Where the weights wait on the nodes: ``node`` (hyperwarm's node cache, warm refreshes), ``operator`` (the
    operator's per-deployment cache) or ``off`` (:data:`WeightsCache`). ``True``/``False`` still mean operator/off,
    with a deprecation warning. Default: operator."""
    image_cache: bool = True
    """Pre-pull the serving image (see ``prepull``). Default: true."""
    prepull: PrepullMode = "operator"
    """Who pre-pulls images: the operator's image cache, a DaemonSet, or both. Default: operator."""
    extra_images: tuple[ExtraImage, ...] = ()
    """Sidecar/init images for the DaemonSet. Default: none."""
    prewarm: bool = False
    """Deprecated: the stand-alone caches it made were never read by the deployment's pods (the operator keeps a
    cache directory per deployment). ``True`` now means ``weights_cache="node"``, with a warning. Default: false."""
    replicas: Annotated[int, Interval(ge=0, le=1000)] = 1
    """Pods at creation (within the autoscaling range when given). Default: 1."""
    resources: WorkerResources = field(default_factory=WorkerResources)
    """Default: 1 GPU, 4 CPUs, 32Gi."""
    port: Annotated[int, Interval(ge=1, le=65535)] = 8080
    """The server's invocation port. Default: 8080."""
    routing: CacheRoutingStrategy | None = None
    """The operator's intelligent routing. Default: none."""
    serving: Serving = field(default_factory=Serving)
    """What the model server is told beyond the derived settings. Default: the derived settings only."""
    autoscaling: HyperPodAutoscaling | None = None
    """KEDA autoscaling. Default: fixed replicas."""
    probes: Probes | None = None
    """Startup/liveness/readiness probes. Default: the operator's."""
    metrics: Metrics | None = None
    """The operator's metrics scrape. Default: its defaults."""
    kv_cache: KvCache | None = None
    """Tiered KV cache. Default: the operator's."""
    load_balancer: LoadBalancer | None = None
    """ALB settings. Default: the operator's."""
    tls: Tls | None = None
    """Certificate. Default: the operator generates one."""
    request_limits: RequestLimits | None = None
    """Per-pod proxy limits. Default: none."""

    def __post_init__(self) -> None:
        self._migrate()
        check(self, self._rules)

    def _migrate(self) -> None:
        """The old spellings, with a warning naming the new one (removed in the next minor release)."""
        cache: Any = self.weights_cache
        if isinstance(cache, bool):
            warnings.warn(f"CachedModelSpec({self.name}).weights_cache = {cache}: use \"operator\" or \"off\"",
                          DeprecationWarning, stacklevel=4)
            object.__setattr__(self, "weights_cache", "operator" if cache else "off")
        if self.prewarm:
            warnings.warn(f"CachedModelSpec({self.name}).prewarm is deprecated: use weights_cache=\"node\" (the "
                          "stand-alone caches prewarm made were never read by the deployment's pods)",
                          DeprecationWarning, stacklevel=4)
            if self.weights_cache != "off":
                object.__setattr__(self, "weights_cache", "node")

    def _rules(self) -> list[str]:
        rules = []
        repeated_groups = sorted({g for g in self.fallback_groups if self.instance_groups.count(g) > 1})
        if repeated_groups:
            rules.append(f"fallback_groups = {list(self.fallback_groups)} -- lists {', '.join(repeated_groups)} "
                         "again; allowed: groups other than instance_group, each once")
        if self.weights_cache == "node" and not isinstance(self.source, ModelSource):
            rules.append(f"weights_cache = 'node' -- the node cache fills from S3; a {self.source.kind} source "
                         "is cached by the operator: allowed: operator, off")
        if self.image is None and not isinstance(self.source, JumpStartModelSource):
            rules.append(f"image = None -- a {self.source.kind} source is served by the image you give: give the "
                         "serving image, pinned by tag or digest")
        rules += jumpstart_problems(self)
        if self.extra_images and self.prepull == "operator":
            rules.append(f"extra_images = {len(self.extra_images)} image(s) -- pre-pulled by the DaemonSet; "
                         "set prepull to daemonset or both")
        if self.extra_images and not self.image_cache:
            rules.append(f"extra_images = {len(self.extra_images)} image(s) -- need image_cache true")
        scaling = self.autoscaling
        if scaling and _given(self.replicas, scaling.min_replicas, scaling.max_replicas) \
                and not scaling.min_replicas <= self.replicas <= scaling.max_replicas:
            rules.append(f"replicas = {self.replicas} -- the starting count must lie within autoscaling "
                         f"min_replicas..max_replicas; allowed: {scaling.min_replicas}..{scaling.max_replicas}")
        if self.metrics and self.metrics.port is None and _given(self.port) and self.port < 1024:
            rules.append(f"metrics.port = None -- the operator scrapes ports 1024..65535 and the model's port is "
                         f"{self.port}; allowed: a port 1024..65535")
        return rules

    @property
    def instance_groups(self) -> tuple[str, ...]:
        """Every group the pods may run on, in order of preference."""
        return (self.instance_group, *self.fallback_groups)

    @property
    def weights_cached(self) -> bool:
        """The weights wait on the nodes' NVMe (the node cache or the operator's), not downloaded by every pod."""
        return self.weights_cache != "off"

    @property
    def operator_image_cache(self) -> bool:
        """Whether the operator's image cache pre-pulls the serving image."""
        return self.image_cache and self.prepull in ("operator", "both")

    @property
    def daemonset_images(self) -> tuple[str, ...]:
        """Images the pre-pull DaemonSet keeps on the group's nodes for this model."""
        if not self.image_cache or self.prepull == "operator" or self.image is None:
            return ()
        return (self.image, *(e.image for e in self.extra_images))

    @property
    def max_replicas(self) -> int:
        """The most pods the deployment runs: its autoscaling maximum, else its replicas."""
        return self.autoscaling.max_replicas if self.autoscaling else self.replicas


@dataclass(frozen=True)
class CachedModelsProps:
    """The models to cache on ``cluster``'s instance groups, and where their objects go."""

    cluster: IHyperPodCluster
    """A cluster with the HyperPod inference operator (``install_inference_operator``)."""
    models: Sequence[CachedModelSpec]
    """Unique names; each on an instance group with local NVMe."""
    namespace: Annotated[str, NAMESPACE] = "hyperwarm-models"
    """Kubernetes namespace of the deployments and caches. Default: hyperwarm-models."""
    nvme_headroom_percent: Annotated[int, Interval(ge=0, le=90)] = 10
    """Share of each node's NVMe kept free, 0..90. Default: 10."""
    labels: Mapping[str, str] = field(default_factory=lambda: dict(MANAGED_BY))
    """Labels of every object (a model's also get ``hyperwarm.io/model``). Default: managed-by hyperwarm."""
    buckets: Mapping[str, s3.IBucket] = field(default_factory=dict)
    """Bucket name -> the bucket, for models whose bucket has a KMS key or lives in this app. Default: each
    model's bucket imported by name."""
    refreshed: Sequence[str] = ()
    """Names of the models a refresh targets (:class:`~hyperwarm.refresh.CacheRefreshHook`): the NVMe capacity
    guard keeps room for two versions of each, the new one staged beside the serving one; one for the others.
    Default: none."""
    filler_image: Annotated[str, IMAGE, Rule(pinned_image_problem)] = DEFAULT_FILLER_IMAGE
    """The image the node-cache fillers run in (``weights_cache="node"``): any image with Python 3.9+ and boto3 on
    its ``PATH`` (the filler's code comes in a ConfigMap). Pin a digest in production. Default: AWS's Lambda base
    image for Python 3.13 (``public.ecr.aws/lambda/python:3.13``)."""

    def __post_init__(self) -> None:
        check(self, self._rules)

    def _rules(self) -> list[str]:
        names = [m.name for m in self.models]
        repeated = sorted({n for n in names if names.count(n) > 1})
        rules = [f"models = {', '.join(repeated)} -- model names must be unique"] if repeated else []
        unknown = [n for n in self.refreshed if n not in names]
        if unknown:
            rules.append(f"refreshed = {', '.join(unknown)} -- not a model of models; allowed: {', '.join(names)}")
        return rules
