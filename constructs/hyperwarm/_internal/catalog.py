"""Instance catalog: what each SageMaker ``ml.*`` instance type brings to model caching and scheduling.

Caching decisions need numbers the SageMaker API does not return: local NVMe capacity (where
weights and images are cached), GPU memory (what a model needs to fit) and network bandwidth
(how long a cold download takes). Values are those EC2's DescribeInstanceTypes reports for the
EC2 type behind each ``ml.*`` type (instance store total, GPU memory in MiB / 1024, network
performance, vCPUs, memory, IPv4 addresses per network interface), cross-checked with the EC2
instance-type specifications. Two network figures are kept: the advertised peak ("up to N" gives
N) and the sustained baseline a long download gets once burst credits run out. p5-family NVMe is
counted as 30,000 GB, the project's reference figure, below EC2's 8 x 3,800 GB: conservative for
the capacity guard.

Scheduling numbers (:mod:`hyperwarm.cluster.node_capacity`): every type here runs two threads per core,
so ``ThreadsPerCore: 1`` halves its vCPUs. Pods per node are an ESTIMATE: AWS publishes no
pods-per-node figure for HyperPod nodes, per type or as a formula. hyperwarm assumes HyperPod gives
pods the addresses of one network interface in the cluster VPC, so a node holds at most
``IPv4 addresses per interface - 1`` pods: 14 on ml.g5.xlarge (observed by users,
awslabs/ai-on-sagemaker-hyperpod#142), 29 on ml.c5.4xlarge (the smallest type AWS recommends for the
inference operator); the other types are this formula, not observations. AWS's inference-operator
troubleshooting page quotes EKS's EC2 figures instead (m5.large 29, m5.xlarge 58 pods), which the
observed 14 on ml.g5.xlarge contradicts: the estimate takes the lower, one-interface reading.
``kubectl get node <node> -o jsonpath={.status.allocatable.pods}`` shows the real figure; ``pods_per_node``
(cdk.json, ``HyperPodEksClusterProps``) overrides the estimate per instance type.

This module imports nothing from aws-cdk: the deploy rehearsal reads it too.
"""

from __future__ import annotations

from dataclasses import dataclass

SMT_THREADS_PER_CORE = 2
"""Threads per core of every type in the catalog (Intel/AMD with simultaneous multithreading)."""


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
    vcpus: int = 0
    """vCPUs with multithreading on (ThreadsPerCore 2)."""
    memory_gib: float = 0
    ipv4_per_interface: int = 0
    """IPv4 addresses per network interface (EC2); sets how many pods a HyperPod node holds."""

    @property
    def has_nvme(self) -> bool:
        return self.nvme_gb > 0

    @property
    def max_pods(self) -> int:
        """Pods one HyperPod node of this type holds, ESTIMATED (AWS publishes no figure): one interface's
        addresses less its primary. Overridable per type (``pods_per_node``)."""
        return self.ipv4_per_interface - 1

    def vcpus_at(self, threads_per_core: int) -> int:
        """vCPUs the node shows with ``threads_per_core`` (1 turns multithreading off)."""
        return self.vcpus * threads_per_core // SMT_THREADS_PER_CORE


def _family(prefix: str, gpu_gib: float,
            rows: dict[str, tuple[int, float, int, int, float, float, int]]) -> dict[str, InstanceSpec]:
    """Rows map size -> (vcpus, memory_gib, gpus, nvme_gb, peak_gbps, baseline_gbps, ipv4_per_interface).

    GPU memory is per GPU for the family.
    """
    specs = {}
    for size, (vcpus, memory, gpus, nvme, peak, baseline, ips) in rows.items():
        name = f"ml.{prefix}.{size}"
        specs[name] = InstanceSpec(name, gpus, round(gpus * gpu_gib, 2), nvme, peak, baseline,
                                   vcpus, memory, ips)
    return specs


CATALOG: dict[str, InstanceSpec] = {
    # NVIDIA A10G, 22,888 MiB per GPU.
    **_family("g5", 22.35, {
        "xlarge": (4, 16, 1, 250, 10, 2.5, 15), "2xlarge": (8, 32, 1, 450, 10, 5, 15),
        "4xlarge": (16, 64, 1, 600, 25, 10, 30), "8xlarge": (32, 128, 1, 900, 25, 25, 30),
        "12xlarge": (48, 192, 4, 3800, 40, 40, 50), "16xlarge": (64, 256, 1, 1900, 25, 25, 30),
        "24xlarge": (96, 384, 4, 3800, 50, 50, 50), "48xlarge": (192, 768, 8, 7600, 100, 100, 50),
    }),
    # NVIDIA L4, 22,888 MiB per GPU.
    **_family("g6", 22.35, {
        "xlarge": (4, 16, 1, 250, 10, 2.5, 15), "2xlarge": (8, 32, 1, 450, 10, 5, 15),
        "4xlarge": (16, 64, 1, 600, 25, 10, 30), "8xlarge": (32, 128, 1, 900, 25, 25, 30),
        "12xlarge": (48, 192, 4, 3760, 40, 40, 30), "16xlarge": (64, 256, 1, 1880, 25, 25, 50),
        "24xlarge": (96, 384, 4, 3760, 50, 50, 50), "48xlarge": (192, 768, 8, 7520, 100, 100, 50),
    }),
    # NVIDIA L40S, 45,776 MiB per GPU.
    **_family("g6e", 44.7, {
        "xlarge": (4, 32, 1, 250, 20, 2.5, 15), "2xlarge": (8, 64, 1, 450, 20, 5, 15),
        "4xlarge": (16, 128, 1, 600, 20, 20, 30), "8xlarge": (32, 256, 1, 900, 25, 25, 30),
        "12xlarge": (48, 384, 4, 3800, 100, 100, 30), "16xlarge": (64, 512, 1, 1900, 35, 35, 50),
        "24xlarge": (96, 768, 4, 3800, 200, 200, 50), "48xlarge": (192, 1536, 8, 7600, 400, 400, 50),
    }),
    # NVIDIA A100 40 GiB / 80 GiB, 8 x 1 TB NVMe.
    **_family("p4d", 40, {"24xlarge": (96, 1152, 8, 8000, 400, 400, 50)}),
    **_family("p4de", 80, {"24xlarge": (96, 1152, 8, 8000, 400, 400, 50)}),
    # NVIDIA H100 80 GiB / H200 141 GiB; NVMe counted as 30,000 GB (see the module docstring).
    **_family("p5", 80, {"48xlarge": (192, 2048, 8, 30000, 3200, 3200, 50)}),
    **_family("p5e", 141, {"48xlarge": (192, 2048, 8, 30000, 3200, 3200, 50)}),
    **_family("p5en", 141, {"48xlarge": (192, 2048, 8, 30000, 3200, 3200, 50)}),
    # General-purpose types for system pods; no GPU, no instance store.
    **_family("m5", 0, {
        "large": (2, 8, 0, 0, 10, 10, 10), "xlarge": (4, 16, 0, 0, 10, 10, 15),
        "2xlarge": (8, 32, 0, 0, 10, 10, 15), "4xlarge": (16, 64, 0, 0, 10, 10, 30),
        "8xlarge": (32, 128, 0, 0, 10, 10, 30), "12xlarge": (48, 192, 0, 0, 12, 12, 30),
    }),
    **_family("c5", 0, {
        "large": (2, 4, 0, 0, 10, 10, 10), "xlarge": (4, 8, 0, 0, 10, 10, 15),
        "2xlarge": (8, 16, 0, 0, 10, 10, 15), "4xlarge": (16, 32, 0, 0, 10, 10, 30),
        "9xlarge": (36, 72, 0, 0, 12, 12, 30),
    }),
    **_family("t3", 0, {"medium": (2, 4, 0, 0, 5, 0.256, 6), "large": (2, 8, 0, 0, 5, 0.512, 12),
                               "xlarge": (4, 16, 0, 0, 5, 1.024, 15)}),
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
