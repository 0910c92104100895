"""Public names of ``hyperwarm.cluster`` (read by type checkers, and by lazy_loader at run time)."""

from .addons import (
    IInferenceOperator as IInferenceOperator,
    InferenceOperator as InferenceOperator,
    InferenceOperatorProps as InferenceOperatorProps,
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
)
from .instance_group import (
    HEALTH_TAINT_KEY as HEALTH_TAINT_KEY,
    NVME_PATH as NVME_PATH,
    InstanceGroup as InstanceGroup,
    InstanceGroupSpec as InstanceGroupSpec,
    NodeTaint as NodeTaint,
)
from .interfaces import IHyperPodCluster as IHyperPodCluster
from .node_capacity import INSTANCE_GROUP_LABEL as INSTANCE_GROUP_LABEL
from .rules import (
    SUPPORTED_KUBERNETES_VERSIONS as SUPPORTED_KUBERNETES_VERSIONS,
    DeepHealthCheck as DeepHealthCheck,
    KubernetesVersion as KubernetesVersion,
    NodeRecovery as NodeRecovery,
    TaintEffect as TaintEffect,
    ThreadsPerCore as ThreadsPerCore,
)
