"""Instance catalog: what each SageMaker ``ml.*`` instance type brings to model caching.

Caching decisions need three numbers the SageMaker API does not return: local NVMe capacity
(where weights and images are cached), GPU memory (what a model needs to fit) and network
bandwidth (how long a cold download takes). Values come from the EC2 accelerated-computing
instance specifications (instance store volumes x size, GPU memory, network performance) for
the EC2 type behind each ``ml.*`` type. ``Up to N`` network figures are recorded as N.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InstanceSpec:
    """Hardware facts of one ``ml.*`` instance type."""

    instance_type: str
    gpus: int
    gpu_memory_gib: int
    """Total GPU memory across all GPUs."""
    nvme_gb: int
    """Total local NVMe instance store; 0 when the type has none."""
    network_gbps: int

    @property
    def has_nvme(self) -> bool:
        return self.nvme_gb > 0


def _family(prefix: str, gpu_gib: int, rows: dict[str, tuple[int, int, int]]) -> dict[str, InstanceSpec]:
    """Rows map size -> (gpus, nvme_gb, network_gbps); GPU memory is per GPU for the family."""
    return {
        f"ml.{prefix}.{size}": InstanceSpec(f"ml.{prefix}.{size}", gpus, gpus * gpu_gib, nvme, net)
        for size, (gpus, nvme, net) in rows.items()
    }


CATALOG: dict[str, InstanceSpec] = {
    # NVIDIA A10G, 24 GiB per GPU.
    **_family("g5", 24, {
        "xlarge": (1, 250, 10), "2xlarge": (1, 450, 10), "4xlarge": (1, 600, 25),
        "8xlarge": (1, 900, 25), "12xlarge": (4, 3800, 40), "16xlarge": (1, 1900, 25),
        "24xlarge": (4, 3800, 50), "48xlarge": (8, 7600, 100),
    }),
    # NVIDIA L4, 24 GiB per GPU.
    **_family("g6", 24, {
        "xlarge": (1, 250, 10), "2xlarge": (1, 450, 10), "4xlarge": (1, 600, 25),
        "8xlarge": (1, 900, 25), "12xlarge": (4, 3760, 40), "16xlarge": (1, 1880, 25),
        "24xlarge": (4, 3760, 50), "48xlarge": (8, 7520, 100),
    }),
    # NVIDIA L40S, 48 GiB per GPU.
    **_family("g6e", 48, {
        "xlarge": (1, 250, 20), "2xlarge": (1, 450, 20), "4xlarge": (1, 600, 20),
        "8xlarge": (1, 900, 25), "12xlarge": (4, 3800, 100), "16xlarge": (1, 1900, 35),
        "24xlarge": (4, 3800, 200), "48xlarge": (8, 7600, 400),
    }),
    # NVIDIA A100 40 GiB / 80 GiB, 8 x 1 TB NVMe.
    **_family("p4d", 40, {"24xlarge": (8, 8000, 400)}),
    **_family("p4de", 80, {"24xlarge": (8, 8000, 400)}),
    # NVIDIA H100 80 GiB / H200 141 GiB, 8 x 3.84 TB NVMe (counted as 30,000 GB as in the
    # project's reference facts: conservative for the capacity guard).
    **_family("p5", 80, {"48xlarge": (8, 30000, 3200)}),
    **_family("p5e", 141, {"48xlarge": (8, 30000, 3200)}),
    **_family("p5en", 141, {"48xlarge": (8, 30000, 3200)}),
    # General-purpose types for system pods; no GPU, no instance store.
    **_family("m5", 0, {"large": (0, 0, 10), "xlarge": (0, 0, 10), "2xlarge": (0, 0, 10),
                        "4xlarge": (0, 0, 10), "8xlarge": (0, 0, 10), "12xlarge": (0, 0, 12)}),
    **_family("c5", 0, {"large": (0, 0, 10), "xlarge": (0, 0, 10), "2xlarge": (0, 0, 10),
                        "4xlarge": (0, 0, 10), "9xlarge": (0, 0, 12)}),
    **_family("t3", 0, {"medium": (0, 0, 5), "large": (0, 0, 5), "xlarge": (0, 0, 5)}),
}


def instance_spec(instance_type: str) -> InstanceSpec:
    """The catalog entry for ``instance_type``; raises ``KeyError`` naming the known types."""
    try:
        return CATALOG[instance_type]
    except KeyError:
        raise KeyError(
            f"unknown instance type {instance_type!r}; known types: {', '.join(sorted(CATALOG))}"
        ) from None
