"""What a HyperPod instance group is, as props: cdk-free, so apps build and check them without aws-cdk."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence


@dataclass(frozen=True)
class NodeTaint:
    """A Kubernetes taint HyperPod puts on every node of an instance group."""

    key: str
    effect: str
    """NoSchedule, PreferNoSchedule or NoExecute."""
    value: str = ""
    """Default: no value."""


@dataclass(frozen=True)
class InstanceGroupSpec:
    """One HyperPod instance group (``ClusterInstanceGroup``), as :class:`HyperPodEksCluster` takes it."""

    name: str
    """1..63 letters, digits or hyphens; unique in the cluster."""
    instance_type: str
    """An ml.* type from :data:`hyperwarm.CATALOG`."""
    instance_count: int = 1
    """Default: 1."""
    threads_per_core: int = 1
    """1, or 2 for hyperthreading where the type supports it. Default: 1."""
    deep_health_checks: Sequence[str] = ()
    """``InstanceStress`` / ``InstanceConnectivity`` run when a node starts. Default: none."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Kubernetes labels on every node of the group. Default: none."""
    taints: Sequence[NodeTaint] = ()
    """Kubernetes taints on every node (not with deep health checks). Default: none."""
    ebs_volume_gb: int | None = None
    """Extra EBS volume mounted at /opt/sagemaker. Default: none."""
    holds_caches: bool = False
    """Whether model weights and images are cached on this group's NVMe. Default: false."""
