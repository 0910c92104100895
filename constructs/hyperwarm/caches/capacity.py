"""NVMe capacity guard: every cache placed on an instance group must fit each node's NVMe.

Per node of a group: cached weights of every model (one copy of a version: hyperwarm's node cache, or the
operator's per-deployment cache; none with ``weights_cache="off"``) x the versions kept at once, plus every
distinct image once, must fit the NVMe less a headroom. Checked at synth, so an oversize cache never reaches a
GPU node.

A refreshed model (a refresh prefix targets it) keeps exactly two versions at its peak: a node-cached model's
filler holds the new version beside the serving one until the deployment moved, then drops the old one (and
never keeps more than two: it deletes whatever else lies in the model's directory before it fills); an
operator-cached model's source change does the same ("creates a new cache, rolls the deployment, deletes the old
cache"). Any other model keeps one: its version changes only by a deploy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CacheFootprint:
    """What one model puts on each node of its instance group."""

    model: str
    weights_gb: float
    cached: bool
    """The weights are cached on the node (hyperwarm's node cache or the operator's): one copy per version."""
    images: Mapping[str, float] = field(default_factory=dict)
    """Cached image -> size in GB; an image shared by several models is counted once per node."""
    versions: int = 1
    """Versions side by side at the peak: 2 for a refreshed model (the new one staged beside the serving
    one), else 1. Default: 1."""

    @property
    def peak_gb(self) -> float:
        """The model's weights on one node at the peak: size x versions, when cached."""
        return self.weights_gb * self.versions if self.cached else 0.0

    def describe(self) -> str:
        """``llama (145 GB x 2 versions, refreshed)``."""
        versions = "2 versions, refreshed" if self.versions == 2 else f"{self.versions} version"
        return f"{self.model} ({_gb(self.weights_gb)} GB x {versions})"


@dataclass(frozen=True)
class GroupUsage:
    """NVMe use of one instance group's node against what it may use."""

    group: str
    nvme_gb: float
    headroom_percent: int
    weights_gb: float
    images_gb: float
    models: tuple[CacheFootprint, ...]
    instance_type: str = ""
    """The group's instance type, named beside the group when given. Default: not named."""

    @property
    def need_gb(self) -> float:
        return self.weights_gb + self.images_gb

    @property
    def have_gb(self) -> float:
        return self.nvme_gb * (100 - self.headroom_percent) / 100

    @property
    def fits(self) -> bool:
        return self.need_gb <= self.have_gb

    def describe(self) -> str:
        models = ", ".join(m.describe() for m in self.models if m.cached) or "none"
        kind = f" ({self.instance_type})" if self.instance_type else ""
        return (f"instance group {self.group!r}{kind}: need {_gb(self.need_gb)} GB, have {_gb(self.have_gb)} GB "
                f"(NVMe {_gb(self.nvme_gb)} GB less {self.headroom_percent} % headroom); "
                f"weights {_gb(self.weights_gb)} GB from models {models}; images {_gb(self.images_gb)} GB")


def group_usage(group: str, nvme_gb: float, footprints: Sequence[CacheFootprint],
                headroom_percent: int, instance_type: str = "") -> GroupUsage:
    images: dict[str, float] = {}
    for footprint in footprints:
        for image, size in footprint.images.items():
            images[image] = max(size, images.get(image, 0.0))
    weights = sum(f.peak_gb for f in footprints)
    return GroupUsage(group, nvme_gb, headroom_percent, weights, sum(images.values()), tuple(footprints),
                      instance_type)


def capacity_problems(nvme_gb: Mapping[str, float], placed: Mapping[str, Sequence[CacheFootprint]],
                      headroom_percent: int, instance_types: Mapping[str, str] | None = None) -> list[str]:
    """One message per instance group whose caches do not fit its NVMe (naming its instance type when
    ``instance_types`` gives it)."""
    kinds = instance_types or {}
    usages = [group_usage(g, nvme_gb[g], placed[g], headroom_percent, kinds.get(g, "")) for g in nvme_gb]
    return [f"caches: {u.describe()} -- does not fit{_why_two(u)}; use a larger instance type, fewer or smaller models, "
            "or a lower nvme_headroom_percent" for u in usages if not u.fits]


def _why_two(usage: GroupUsage) -> str:
    refreshed = [m.model for m in usage.models if m.versions == 2 and m.cached]
    if not refreshed:
        return ""
    return (f" (a refreshed model, {', '.join(refreshed)}, holds its new version beside the serving one until the "
            "switch)")


def _gb(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"
