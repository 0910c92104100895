"""The ``caches`` section of an environment: which models are cached on which instance group.

Each entry is the library's :class:`~hyperwarm.caches.CachedModelSpec` in its cdk.json form (derived by
:mod:`stacks.config.library`: the library holds every field, default and range); only the autoscaling trigger
and the serving block have a cdk.json form of their own. ``CachesConfig.models`` are the library's props, which
the caches stack hands to :class:`~hyperwarm.caches.CachedModels`.

Rules that need the instance groups (the group exists, holds caches, has the GPUs, the NVMe fits) are the
library's :func:`~hyperwarm.caches.placement.placement_problems`, called from ``EnvironmentConfig``'s validator.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field, model_validator

from hyperwarm.caches import (
    CachedModelSpec,
    CachedModelsProps,
    CacheGroup,
    ExtraImage,
    ModelSource,
    placement_problems,
    vpc_problems,
)

from . import deployment_options  # noqa: F401 (registers the autoscaling's cdk.json form)
from .library import LibraryModel, config_model, library_field
from .serving import ServingConfig
from .strict import StrictModel, repeated

S3ModelSource = config_model(ModelSource)
CachedExtraImage = config_model(ExtraImage)
CachedModel = config_model(CachedModelSpec, overrides={
    "serving": (ServingConfig, Field(default_factory=ServingConfig), lambda s: s.to_serving()),
})
"""One cached model in cdk.json (``size_gb``, ``image_size_gb``, ``*_s``: the props' Sizes and Durations)."""


class CachesConfig(StrictModel):
    """Model caches of one environment; empty (no models) by default."""

    namespace: str = library_field(CachedModelsProps, "namespace",
                                   description="Kubernetes namespace of the deployments and caches")
    nvme_headroom_percent: int = library_field(CachedModelsProps, "nvme_headroom_percent",
                                               description="share of each node's NVMe kept free")
    filler_image: str = library_field(CachedModelsProps, "filler_image",
                                      description="the node-cache fillers' image (Python 3 with boto3; pin a digest)")
    entries: tuple[CachedModel, ...] = Field(default=(), alias="models")  # type: ignore[valid-type]
    rollback: tuple[str, ...] = Field(
        default=(), description="names of caches.models whose source version (Hugging Face revision, FSx or S3 "
                                "version, JumpStart model_version) this deploy may set older than the one an earlier "
                                "deploy set (a deliberate rollback; the deploy guard records it as what serves); remove "
                                "a name once deployed. A model a refresh prefix names rolls back with "
                                "refresh.models[].pinned instead; default none")

    @model_validator(mode="after")
    def _unique(self) -> CachesConfig:
        dupes = repeated([m.name for m in self.models])
        if dupes:
            raise ValueError(f"model names must be unique; repeated: {', '.join(dupes)}")
        names = [m.name for m in self.models]
        for name in self.rollback:
            if name not in names:
                raise ValueError(f"caches.rollback: {name!r} is not a cached model; caches.models: "
                                 f"{', '.join(names) or 'none'}")
        return self

    @property
    def models(self) -> tuple[CachedModelSpec, ...]:
        """The library's props of each cached model."""
        entries: tuple[LibraryModel, ...] = self.entries
        return tuple(entry.props for entry in entries)


def cache_problems(caches: CachesConfig, instance_groups: Sequence[CacheGroup],
                   refreshed: Sequence[str] = (), vpc_id: str | None = None) -> list[str]:
    """Rules across ``caches``, the instance groups and the ``refreshed`` models (their NVMe holds two versions),
    and an FSx source's VPC against the cluster's existing ``vpc_id``; each problem names its field path and value."""
    return placement_problems(caches.models, instance_groups, caches.nvme_headroom_percent, path="caches.models",
                              refreshed=refreshed) + vpc_problems(caches.models, vpc_id, path="caches.models")
