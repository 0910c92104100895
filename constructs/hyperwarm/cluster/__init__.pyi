"""Public names of ``hyperwarm.cluster`` (read by type checkers, and by lazy_loader at run time)."""

from . import hyperpod_dependencies as hyperpod_dependencies
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
from .cluster import HyperPodEksCluster as HyperPodEksCluster, HyperPodEksClusterProps as HyperPodEksClusterProps
from .instance_group import (
    EBS_VOLUME as EBS_VOLUME,
    HEALTH_TAINT_KEY as HEALTH_TAINT_KEY,
    NVME_PATH as NVME_PATH,
    GroupInstanceCount as GroupInstanceCount,
    InstanceGroup as InstanceGroup,
    InstanceGroupSpec as InstanceGroupSpec,
    NodeTaint as NodeTaint,
)
from .interfaces import IHyperPodCluster as IHyperPodCluster
from .node_capacity import (
    ADDON_WORKLOADS as ADDON_WORKLOADS,
    INSTANCE_GROUP_LABEL as INSTANCE_GROUP_LABEL,
    NodeGroup as NodeGroup,
    Requests as Requests,
    Workload as Workload,
    addon_workloads as addon_workloads,
    node_problems as node_problems,
    pod as pod,
    workloads_from_objects as workloads_from_objects,
)
from .rules import (
    DEFAULT_KUBERNETES_VERSION as DEFAULT_KUBERNETES_VERSION,
    GROUP_NAME_PATTERN as GROUP_NAME_PATTERN,
    GROUP_NAME_WORDS as GROUP_NAME_WORDS,
    INFERENCE_OPERATOR_ADDON as INFERENCE_OPERATOR_ADDON,
    SUPPORTED_KUBERNETES_VERSIONS as SUPPORTED_KUBERNETES_VERSIONS,
    DeepHealthCheck as DeepHealthCheck,
    KubernetesVersion as KubernetesVersion,
    NodeRecovery as NodeRecovery,
    TaintEffect as TaintEffect,
    ThreadsPerCore as ThreadsPerCore,
    addon_build_problem as addon_build_problem,
    instance_type_problem as instance_type_problem,
    nvme_problem as nvme_problem,
    pods_per_node_problem as pods_per_node_problem,
    taints_problem as taints_problem,
)
