"""Instance catalog: what each SageMaker ``ml.*`` instance type brings to model caching.

Caching decisions need numbers the SageMaker API does not return: local NVMe capacity (where
weights and images are cached), GPU memory (what a model needs to fit) and network bandwidth
(how long a cold download takes). Values are those EC2's DescribeInstanceTypes reports for the
EC2 type behind each ``ml.*`` type (instance store total, GPU memory in MiB / 1024, network
performance), cross-checked with the EC2 instance-type specifications. Two network figures are
kept: the advertised peak ("up to N" gives N) and the sustained baseline a long download gets
once burst credits run out. p5-family NVMe is counted as 30,000 GB, the project's reference
figure, below EC2's 8 x 3,800 GB: conservative for the capacity guard.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InstanceSpec:
    """Hardware facts of one ``ml.*`` instance type."""

    instance_type: str
    gpus: int
    gpu_memory_gib: float
    """Total GPU memory across all GPUs, as EC2 reports it (an "A10G 24 GB" has 22.35 GiB)."""
    nvme_gb: int
    """Total local NVMe instance store; 0 when the type has none."""
    network_gbps: float
    """Advertised peak network bandwidth."""
    network_baseline_gbps: float
    """Sustained network bandwidth: what a download of many minutes gets."""

    @property
    def has_nvme(self) -> bool:
        return self.nvme_gb > 0


def _family(prefix: str, gpu_gib: float,
            rows: dict[str, tuple[int, int, float] | tuple[int, int, float, float]]) -> dict[str, InstanceSpec]:
    """Rows map size -> (gpus, nvme_gb, peak_gbps[, baseline_gbps]); GPU memory is per GPU for the family."""
    specs = {}
    for size, (gpus, nvme, peak, *baseline) in rows.items():
        name = f"ml.{prefix}.{size}"
        specs[name] = InstanceSpec(name, gpus, round(gpus * gpu_gib, 2), nvme, peak, baseline[0] if baseline else peak)
    return specs


CATALOG: dict[str, InstanceSpec] = {
    # NVIDIA A10G, 22,888 MiB per GPU.
    **_family("g5", 22.35, {
        "xlarge": (1, 250, 10, 2.5), "2xlarge": (1, 450, 10, 5), "4xlarge": (1, 600, 25, 10),
        "8xlarge": (1, 900, 25), "12xlarge": (4, 3800, 40), "16xlarge": (1, 1900, 25),
        "24xlarge": (4, 3800, 50), "48xlarge": (8, 7600, 100),
    }),
    # NVIDIA L4, 22,888 MiB per GPU.
    **_family("g6", 22.35, {
        "xlarge": (1, 250, 10, 2.5), "2xlarge": (1, 450, 10, 5), "4xlarge": (1, 600, 25, 10),
        "8xlarge": (1, 900, 25), "12xlarge": (4, 3760, 40), "16xlarge": (1, 1880, 25),
        "24xlarge": (4, 3760, 50), "48xlarge": (8, 7520, 100),
    }),
    # NVIDIA L40S, 45,776 MiB per GPU.
    **_family("g6e", 44.7, {
        "xlarge": (1, 250, 20, 2.5), "2xlarge": (1, 450, 20, 5), "4xlarge": (1, 600, 20),
        "8xlarge": (1, 900, 25), "12xlarge": (4, 3800, 100), "16xlarge": (1, 1900, 35),
        "24xlarge": (4, 3800, 200), "48xlarge": (8, 7600, 400),
    }),
    # NVIDIA A100 40 GiB / 80 GiB, 8 x 1 TB NVMe.
    **_family("p4d", 40, {"24xlarge": (8, 8000, 400)}),
    **_family("p4de", 80, {"24xlarge": (8, 8000, 400)}),
    # NVIDIA H100 80 GiB / H200 141 GiB; NVMe counted as 30,000 GB (see the module docstring).
    **_family("p5", 80, {"48xlarge": (8, 30000, 3200)}),
    **_family("p5e", 141, {"48xlarge": (8, 30000, 3200)}),
    **_family("p5en", 141, {"48xlarge": (8, 30000, 3200)}),
    # General-purpose types for system pods; no GPU, no instance store.
    **_family("m5", 0, {"large": (0, 0, 10), "xlarge": (0, 0, 10), "2xlarge": (0, 0, 10),
                        "4xlarge": (0, 0, 10), "8xlarge": (0, 0, 10), "12xlarge": (0, 0, 12)}),
    **_family("c5", 0, {"large": (0, 0, 10), "xlarge": (0, 0, 10), "2xlarge": (0, 0, 10),
                        "4xlarge": (0, 0, 10), "9xlarge": (0, 0, 12)}),
    **_family("t3", 0, {"medium": (0, 0, 5, 0.256), "large": (0, 0, 5, 0.512), "xlarge": (0, 0, 5, 1.024)}),
}


def instance_spec(instance_type: str) -> InstanceSpec:
    """The catalog entry for ``instance_type``; raises ``KeyError`` naming the known types."""
    try:
        return CATALOG[instance_type]
    except KeyError:
        raise KeyError(
            f"unknown instance type {instance_type!r}; known types: {', '.join(sorted(CATALOG))}"
        ) from None


EFA_INSTANCE_TYPES = frozenset({
    *(f"ml.{family}.{size}" for family in ("g5", "g6", "g6e")
      for size in ("8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge")),
    "ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p5en.48xlarge",
})
"""Types with Elastic Fabric Adapter (EC2 "Supported instance types" for EFA). HyperPod's prerequisites
require a security group allowing all traffic to AND from itself for them: 0.0.0.0/0-only egress can
fail their EFA health checks."""
