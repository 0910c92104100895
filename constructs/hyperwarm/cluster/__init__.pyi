"""Public names of ``hyperwarm.cluster`` (read by type checkers, and by lazy_loader at run time)."""

from .addons import (
    IInferenceOperator as IInferenceOperator,
    InferenceOperator as InferenceOperator,
    grant_mounted_model_read as grant_mounted_model_read,
)
from .catalog import (
    CATALOG as CATALOG,
    InstanceSpec as InstanceSpec,
    instance_spec as instance_spec,
)
from .cluster import (
    HyperPodEksCluster as HyperPodEksCluster,
    HyperPodEksClusterProps as HyperPodEksClusterProps,
    IHyperPodCluster as IHyperPodCluster,
)
from .control_plane import EksControlPlane as EksControlPlane, EksControlPlaneProps as EksControlPlaneProps
from .instance_group import (
    HEALTH_TAINT_KEY as HEALTH_TAINT_KEY,
    NVME_PATH as NVME_PATH,
    InstanceGroup as InstanceGroup,
    InstanceGroupSpec as InstanceGroupSpec,
    NodeTaint as NodeTaint,
)
from .network import HyperPodNetwork as HyperPodNetwork, HyperPodNetworkProps as HyperPodNetworkProps
from .node_capacity import INSTANCE_GROUP_LABEL as INSTANCE_GROUP_LABEL
from .nodes import HyperPodNodes as HyperPodNodes, HyperPodNodesProps as HyperPodNodesProps
from .rules import SUPPORTED_KUBERNETES_VERSIONS as SUPPORTED_KUBERNETES_VERSIONS
