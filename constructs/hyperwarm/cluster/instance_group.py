"""HyperPod instance groups: what a user asks for (:class:`InstanceGroupSpec`) and what other constructs
read of a created group (:class:`InstanceGroup`). Plain frozen dataclasses, cdk-free, so apps build and
check them without aws-cdk; :class:`hyperwarm.HyperPodEksCluster` validates a spec (rules in
:mod:`hyperwarm.cluster.rules`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

from annotated_types import Interval

from hyperwarm._internal.constraints import Measured, Rule, in_gigabytes
from hyperwarm._internal.lazy import on_first_use
from hyperwarm.cluster.catalog import InstanceSpec, instance_spec
from hyperwarm.cluster.node_capacity import INSTANCE_GROUP_LABEL, INSTANCE_TYPE_LABEL
from hyperwarm.cluster.rules import EBS_VOLUME_GB, INSTANCE_COUNT, TaintEffect, ThreadsPerCore
from hyperwarm.functions.node_cache import layout

GroupInstanceCount = Annotated[int, Interval(ge=INSTANCE_COUNT.start, le=INSTANCE_COUNT.stop - 1)]
"""``ClusterInstanceGroup.InstanceCount``: 0..1000."""
if TYPE_CHECKING:
    import aws_cdk as cdk
else:  # loaded on first use (typing.get_type_hints): the module itself loads without aws-cdk, and so without Node
    cdk = on_first_use("aws_cdk")


def _whole_gb(size: Any) -> str | None:
    return None if in_gigabytes(size).is_integer() else "allowed: a whole number of GB (VolumeSizeInGB is an integer)"


EBS_VOLUME = Measured("GB", (Interval(ge=EBS_VOLUME_GB.start, le=EBS_VOLUME_GB.stop - 1),), key_suffix="_gb")
"""``ClusterEbsVolumeConfig.VolumeSizeInGB``: 1..16384 GB (10^9 bytes, as SageMaker states it), whole GB;
cdk.json gives it as ``ebs_volume_gb``."""
EbsVolumeSize = Annotated["cdk.Size", EBS_VOLUME, Rule(_whole_gb)]
"""An instance group's extra EBS volume (aws-cdk is imported for type checkers only: the props load without it)."""

NVME_PATH = layout.DEFAULT_HOST_PATH
"""Where HyperPod mounts the local NVMe instance store; the weights cache's default hostPath."""

HEALTH_TAINT_KEY = "sagemaker.amazonaws.com/node-health-status"
"""HyperPod taints nodes with this key (value Unschedulable, NoSchedule) during health checks."""


@dataclass(frozen=True)
class NodeTaint:
    """A Kubernetes taint HyperPod puts on every node of an instance group."""

    key: str
    """1..253 characters."""
    effect: TaintEffect
    """NoSchedule, PreferNoSchedule or NoExecute."""
    value: str = ""
    """Up to 63 characters. Default: no value."""


@dataclass(frozen=True)
class InstanceGroupSpec:
    """One HyperPod instance group (``ClusterInstanceGroup``), as :class:`HyperPodEksCluster` takes it."""

    name: str
    """1..63 letters, digits or hyphens, starting and ending with a letter or digit; unique in the cluster."""
    instance_type: str
    """An ml.* type from :data:`hyperwarm.CATALOG`."""
    instance_count: GroupInstanceCount = 1
    """0..1000. Default: 1."""
    threads_per_core: ThreadsPerCore = 1
    """1, or 2 for hyperthreading where the type supports it. Default: 1."""
    deep_health_checks: Sequence[str] = ()
    """``InstanceStress`` / ``InstanceConnectivity`` run when a node starts. Default: none."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Kubernetes labels on every node of the group. Default: none (HyperPod's own are always set)."""
    taints: Sequence[NodeTaint] = ()
    """Kubernetes taints on every node (not with deep health checks). Default: none."""
    ebs_volume: EbsVolumeSize | None = None
    """Extra EBS volume mounted at /opt/sagemaker: 1..16384 whole GB (``hyperwarm.caches.gigabytes(500)``).
    Default: none."""
    holds_caches: bool = False
    """Whether model weights and images are cached on this group's NVMe (the type needs NVMe). Default: false."""


@dataclass(frozen=True)
class InstanceGroup:
    """A created instance group, as other constructs see it (never the L1 internals)."""

    name: str
    instance_type: str
    instance_count: int
    spec: InstanceSpec
    holds_caches: bool
    taints: Sequence[NodeTaint] = ()
    """The group's node taints: what pods placed there must tolerate. Default: none."""

    @classmethod
    def of(cls, group: InstanceGroupSpec) -> InstanceGroup:
        return cls(group.name, group.instance_type, group.instance_count, instance_spec(group.instance_type),
                   group.holds_caches, tuple(group.taints))

    @property
    def nvme_gb(self) -> int:
        return self.spec.nvme_gb

    @property
    def nvme_path(self) -> str:
        return NVME_PATH

    @property
    def node_labels(self) -> dict[str, str]:
        """Labels HyperPod puts on every node of the group: select the group with these."""
        return {INSTANCE_GROUP_LABEL: self.name, INSTANCE_TYPE_LABEL: self.instance_type}


def find_group(groups: Mapping[str, InstanceGroup], name: str, where: str, *, cache: bool = False) -> InstanceGroup:
    """The group ``name`` of a cluster at ``where``; with ``cache``, one with local NVMe to hold model caches."""
    group = groups.get(name)
    if group is None:
        raise ValueError(f"{where}: no instance group {name!r}; groups: {', '.join(groups)}")
    if cache and not group.spec.has_nvme:
        raise ValueError(f"{where}: instance group {name!r} ({group.instance_type}) has no local NVMe "
                         "and cannot hold model caches")
    return group
