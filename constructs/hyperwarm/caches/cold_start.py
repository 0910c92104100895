"""How long a new pod of a cached model takes to serve on a cold and on a warm node (estimates).

Defaults follow AWS's published HyperPod figures: a multi-GB serving image takes 5..7 min to pull
(6 min), 145 GB of weights take more than 20 min from S3 (an effective ~1 Gbit/s per node, well
below the ~5 Gbit/s ceiling of one S3 connection), local NVMe reads ~7 GB/s. The startup probe of
a cached model is sized from :meth:`ColdStart.cold_s`; the planner (``python -m stacks plan cache``)
reports all three.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hyperwarm._internal.constraints import in_gigabytes

if TYPE_CHECKING:
    from hyperwarm.caches.props import CachedModelProps

DEFAULT_BANDWIDTH_GBPS = 1.0
DEFAULT_IMAGE_PULL_MIN = 6.0
NVME_GB_PER_S = 7.0


@dataclass(frozen=True)
class ColdStart:
    """Assumptions of the estimate."""

    bandwidth_gbps: float = DEFAULT_BANDWIDTH_GBPS
    """Effective S3 download rate per node, Gbit/s. Default: 1."""
    image_pull_s: float = DEFAULT_IMAGE_PULL_MIN * 60
    """Default: 6 minutes."""
    nvme_gb_per_s: float = NVME_GB_PER_S
    """Default: 7 GB/s."""

    def cold_s(self, model: CachedModelProps) -> float:
        """A new pod on a node without caches: pull the image, download the weights."""
        return self.image_pull_s + in_gigabytes(model.size) * 8 / self.bandwidth_gbps

    def fill_s(self, model: CachedModelProps) -> float:
        """One node's weights cache fills at the S3 rate; nothing fills when weights are not cached."""
        return in_gigabytes(model.size) * 8 / self.bandwidth_gbps if model.weights_cache else 0.0

    def warm_s(self, model: CachedModelProps) -> float:
        """A new pod on a prepared node: what is cached costs (almost) nothing, the rest stays cold."""
        size_gb = in_gigabytes(model.size)
        image = 0.0 if model.image_cache else self.image_pull_s
        weights = size_gb / self.nvme_gb_per_s if model.weights_cache else size_gb * 8 / self.bandwidth_gbps
        return image + weights
