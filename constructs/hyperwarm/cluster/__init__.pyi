"""Public names of ``hyperwarm.cluster`` (read by type checkers, and by lazy_loader at run time)."""

from .addons import (
    IInferenceOperator as IInferenceOperator,
)
from .addons import (
    InferenceOperator as InferenceOperator,
)
from .addons import (
    grant_mounted_model_read as grant_mounted_model_read,
)
from .catalog import (
    CATALOG as CATALOG,
)
from .catalog import (
    InstanceSpec as InstanceSpec,
)
from .catalog import (
    instance_spec as instance_spec,
)
from .cluster import (
    HyperPodEksCluster as HyperPodEksCluster,
)
from .cluster import (
    HyperPodEksClusterProps as HyperPodEksClusterProps,
)
from .cluster import (
    IHyperPodCluster as IHyperPodCluster,
)
from .control_plane import EksControlPlane as EksControlPlane
from .control_plane import EksControlPlaneProps as EksControlPlaneProps
from .instance_group import (
    HEALTH_TAINT_KEY as HEALTH_TAINT_KEY,
)
from .instance_group import (
    NVME_PATH as NVME_PATH,
)
from .instance_group import (
    InstanceGroup as InstanceGroup,
)
from .instance_group import (
    InstanceGroupSpec as InstanceGroupSpec,
)
from .instance_group import (
    NodeTaint as NodeTaint,
)
from .network import HyperPodNetwork as HyperPodNetwork
from .network import HyperPodNetworkProps as HyperPodNetworkProps
from .node_capacity import INSTANCE_GROUP_LABEL as INSTANCE_GROUP_LABEL
from .nodes import HyperPodNodes as HyperPodNodes
from .nodes import HyperPodNodesProps as HyperPodNodesProps
from .rules import SUPPORTED_KUBERNETES_VERSIONS as SUPPORTED_KUBERNETES_VERSIONS
