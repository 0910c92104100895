"""The ``caches`` section of an environment: which models are cached on which instance group.

Each entry becomes an ``InferenceEndpointConfig`` with ``spec.modelCacheConfig`` (and, when asked,
stand-alone pre-warm caches and an image pre-pull DaemonSet; see :mod:`manifests`). Model weights
live in S3 at ``s3://<bucket>/<prefix>/<version>``: the operator does not notice objects
overwritten under the same path, so every model version gets its own location.

Rules that need the instance groups (the group exists, holds caches, has the GPUs, the NVMe fits)
are in :func:`cache_problems`, called from ``EnvironmentConfig``'s validator.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, Sequence

from pydantic import Field, field_validator, model_validator

from hyperwarm.caches.capacity import CacheFootprint, capacity_problems
from hyperwarm.cluster.catalog import instance_spec
from hyperwarm.serving.inference_ami import hyperpod_cuda_problem
from hyperwarm.serving.settings import MODEL_DIR, Placement, ServerSettings, server_settings

from .deployment_options import AutoScaling, KvCache, LoadBalancer, Metrics, Probes, RequestLimits, Tls
from .serving import ServingConfig
from .strict import BUCKET, KEY_PREFIX, REGION, StrictModel, by_rule, described, repeated

_K8S_NAME = described(r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$",
                      "1..40 lower-case letters, digits or hyphens, starting and ending with a letter or digit, "
                      "e.g. llama-3-1-8b")
"""DNS-1123 label of at most 40 characters: leaves room for suffixes such as ``-weights``."""
_QUANTITY = described(r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$",
                      "a Kubernetes quantity, e.g. 8 or 500m for CPU, 64Gi for memory")
_IMAGE = described(
    r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[0-9a-f]{64})$",
    "an image with a tag or digest (untagged images are not allowed), e.g. "
    "763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:0.27.1-gpu-py312-cu130-ubuntu22.04-sagemaker")
_VERSION = described(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$",
                     "1..63 letters, digits, dots, underscores or hyphens, starting with a letter or digit, "
                     "e.g. v2 or 2026-11-29")
_NAMESPACE = described(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
                       "a Kubernetes namespace: 1..63 lower-case letters, digits or hyphens, e.g. hyperwarm-models")

PrepullMode = Literal["operator", "daemonset", "both"]
RoutingStrategy = Literal["prefixaware", "kvaware", "session", "roundrobin"]


def _pinned_image(value: str) -> str:
    if value.endswith(":latest"):
        raise ValueError("a moving tag (:latest) defeats the image cache; pin a version tag or a sha256 digest")
    return value


class ExtraImage(StrictModel):
    """An image the operator's image cache does not cover (sidecar, init image): pre-pulled by the DaemonSet."""

    image: str = Field(pattern=_IMAGE, description="registry/repository:tag or @sha256:digest")
    size_gb: float = Field(default=1.0, gt=0, le=500, description="uncompressed size on the node; default 1 GB")

    _pinned = field_validator("image")(_pinned_image)


class S3ModelSource(StrictModel):
    """Model weights at ``s3://bucket/prefix/version``: a new version is a new location."""

    bucket: str = Field(pattern=BUCKET)
    prefix: str = Field(pattern=KEY_PREFIX,
                        description="key prefix of the model, without leading or trailing slash")
    version: str = Field(pattern=_VERSION,
                         description="the version folder below prefix, e.g. v3 or 2026-11-01")
    region: str | None = Field(default=None, pattern=REGION,
                               description="bucket region; default: the environment's region")

    @property
    def location(self) -> str:
        """The key prefix of this version (the operator's ``modelLocation``)."""
        return f"{self.prefix}/{self.version}"

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.location}"


class WorkerResources(StrictModel):
    """Requests of one serving pod; GPUs are also its limit."""

    gpus: int = Field(default=1, ge=0, le=8)
    cpu: str = Field(default="4", pattern=_QUANTITY)
    memory: str = Field(default="32Gi", pattern=_QUANTITY)


class CachedModel(StrictModel):
    """One model deployment whose weights and image are cached on an instance group's NVMe."""

    name: str = Field(pattern=_K8S_NAME, description="lower-case, 1..40 characters; names every object")
    source: S3ModelSource
    size_gb: float = Field(gt=0, le=100_000, description="weights size in GB (counted twice: old+new on refresh)")
    image: str = Field(pattern=_IMAGE, description="serving container image, pinned by tag or digest")
    image_size_gb: float = Field(default=20.0, gt=0, le=500,
                                 description="uncompressed image size on the node; default 20 GB (vLLM/LMI DLCs)")
    instance_group: str = Field(description="an instance group with holds_caches true")
    weights_cache: bool = Field(default=True, description="operator caches the weights on the group's NVMe")
    image_cache: bool = Field(default=True, description="pre-pull the serving image (see prepull)")
    prepull: PrepullMode = Field(
        default="operator", description="who pre-pulls images: the operator's image cache, a DaemonSet, or both")
    extra_images: tuple[ExtraImage, ...] = Field(default=(), description="sidecar/init images for the DaemonSet")
    prewarm: bool = Field(default=False, description="stand-alone caches that fill the group before a deployment")
    replicas: int = Field(default=1, ge=0, le=1000)
    resources: WorkerResources = Field(default_factory=WorkerResources)
    port: int = Field(default=8080, ge=1, le=65535, description="the server's invocation port")
    routing: RoutingStrategy | None = Field(default=None, description="intelligent routing; none by default")
    serving: ServingConfig = Field(default_factory=ServingConfig,
                                   description="what the model server is told beyond the derived settings")
    autoscaling: AutoScaling | None = Field(default=None, description="KEDA autoscaling; fixed replicas by default")
    probes: Probes | None = Field(default=None, description="startup/liveness/readiness probes; the operator's "
                                                            "by default")
    metrics: Metrics | None = Field(default=None, description="the operator's metrics scrape; its defaults if unset")
    kv_cache: KvCache | None = Field(default=None, description="tiered KV cache; the operator's default if unset")
    load_balancer: LoadBalancer | None = Field(default=None, description="ALB settings; the operator's if unset")
    tls: Tls | None = Field(default=None, description="certificate; the operator generates one if unset")
    request_limits: RequestLimits | None = Field(default=None, description="per-pod proxy limits; none if unset")

    _pinned = field_validator("image")(_pinned_image)
    _cuda_runs_on_hyperpod = field_validator("image")(by_rule(hyperpod_cuda_problem))

    @model_validator(mode="after")
    def _rules(self) -> "CachedModel":
        if self.extra_images and self.prepull == "operator":
            raise ValueError(f"model {self.name!r}: extra_images are pre-pulled by the DaemonSet; "
                             "set prepull to daemonset or both")
        if self.extra_images and not self.image_cache:
            raise ValueError(f"model {self.name!r}: extra_images need image_cache true")
        if self.prewarm and not (self.weights_cache or self.image_cache):
            raise ValueError(f"model {self.name!r}: prewarm needs weights_cache or image_cache")
        return self

    @property
    def operator_image_cache(self) -> bool:
        return self.image_cache and self.prepull in ("operator", "both")

    @property
    def daemonset_images(self) -> tuple[str, ...]:
        """Images the pre-pull DaemonSet keeps on the group's nodes for this model."""
        if not self.image_cache or self.prepull == "operator":
            return ()
        return (self.image, *(e.image for e in self.extra_images))

    def server_settings(self) -> ServerSettings:
        """The worker's environment and arguments: the model at its volume mount, tensor parallelism = its GPUs."""
        gpus = self.resources.gpus
        placement = Placement("hyperpod", gpus, f"resources.gpus is {gpus}", model_dir=MODEL_DIR, port=self.port)
        return server_settings(self.serving.to_serving(), placement, image=self.image, image_uri=self.image)

    @property
    def max_replicas(self) -> int:
        """The most pods the deployment runs: its autoscaling maximum, else its replicas."""
        return self.autoscaling.max_replicas if self.autoscaling else self.replicas

    def footprint(self) -> CacheFootprint:
        """What this model puts on each node of its group (for the capacity guard)."""
        copies = (2 if self.weights_cache else 0) + (1 if self.prewarm and self.weights_cache else 0)
        # The serving image is on every node that runs the model, cached or not.
        images = {self.image: self.image_size_gb, **{e.image: e.size_gb for e in self.extra_images}}
        return CacheFootprint(self.name, self.size_gb, copies, images)


class CachesConfig(StrictModel):
    """Model caches of one environment; empty (no models) by default."""

    namespace: str = Field(default="hyperwarm-models", pattern=_NAMESPACE,
                           description="Kubernetes namespace of the deployments and caches")
    nvme_headroom_percent: int = Field(default=10, ge=0, le=90,
                                       description="share of each node's NVMe kept free; default 10 %")
    models: tuple[CachedModel, ...] = ()

    @model_validator(mode="after")
    def _unique(self) -> "CachesConfig":
        names = [m.name for m in self.models]
        dupes = repeated(names)
        if dupes:
            raise ValueError(f"model names must be unique; repeated: {', '.join(dupes)}")
        return self


class InstanceGroupLike(Protocol):
    """What these rules read of an instance group (``InstanceGroupConfig`` fits)."""

    name: str
    instance_type: str
    holds_caches: bool
    taints: Sequence[Any]


def cache_problems(caches: CachesConfig, instance_groups: Sequence[InstanceGroupLike]) -> list[str]:
    """Rules across ``caches`` and the instance groups; each problem names its field path and value."""
    groups = {g.name: g for g in instance_groups}
    problems = []
    for index, model in enumerate(caches.models):
        path = f"caches.models[{index}]"
        group = groups.get(model.instance_group)
        if group is None:
            problems.append(f"{path}.instance_group: {model.instance_group!r} -- no such instance group; "
                            f"allowed: {', '.join(groups)}")
            continue
        if not group.holds_caches:
            allowed = [n for n, g in groups.items() if g.holds_caches]
            problems.append(f"{path}.instance_group: {model.instance_group!r} -- holds_caches is false for "
                            f"this group; allowed: {', '.join(allowed) or 'none (set holds_caches true)'}")
            continue
        blocking = [f"{t.key}={t.value}:{t.effect}" for t in group.taints if t.effect != "PreferNoSchedule"]
        if blocking:
            problems.append(f"{path}.instance_group: {model.instance_group!r} -- the group is tainted "
                            f"({', '.join(blocking)}) and InferenceEndpointConfig has no tolerations, so its "
                            "pods could never run there; allowed: an untainted group")
            continue
        spec = instance_spec(group.instance_type)
        if model.resources.gpus > spec.gpus:
            problems.append(f"{path}.resources.gpus: {model.resources.gpus} -- {group.instance_type} "
                            f"has {spec.gpus} GPU(s); allowed: 0..{spec.gpus}")
        problems += [p.at(path) for p in model.server_settings().problems]
        scaling = model.autoscaling
        if scaling and not scaling.min_replicas <= model.replicas <= scaling.max_replicas:
            problems.append(f"{path}.replicas: {model.replicas} -- the starting count must lie within autoscaling "
                            f"min_replicas..max_replicas; allowed: {scaling.min_replicas}..{scaling.max_replicas}")
        if model.metrics and model.metrics.port is None and model.port < 1024:
            problems.append(f"{path}.metrics.port: None -- the operator scrapes ports 1024..65535 and the model's "
                            f"port is {model.port}; allowed: a port 1024..65535")
    if problems:
        return problems
    placed = {name: [m.footprint() for m in caches.models if m.instance_group == name] for name in groups}
    return capacity_problems(
        {name: instance_spec(g.instance_type).nvme_gb for name, g in groups.items() if placed[name]},
        placed, caches.nvme_headroom_percent)
