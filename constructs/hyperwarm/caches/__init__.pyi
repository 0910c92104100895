"""Public names of ``hyperwarm.caches`` (read by type checkers, and by lazy_loader at run time)."""

from . import events as events

# Renamed in 0.2.0, removed in 0.3.0: typed as deprecated; reading one warns at run time, and __all__ leaves them out
# (hyperwarm._internal.deprecation).
from ._renamed import CachedModelProps as CachedModelProps, HyperPodAutoScaling as HyperPodAutoScaling
from .autoscaling import (
    CloudWatchTrigger as CloudWatchTrigger,
    ExporterMetric as ExporterMetric,
    ExporterStatistic as ExporterStatistic,
    ExporterTrigger as ExporterTrigger,
    HyperPodAutoscaling as HyperPodAutoscaling,
    MetricType as MetricType,
    PrometheusTrigger as PrometheusTrigger,
)
from .cached_models import (
    CLUSTER_NAME_PLACEHOLDER as CLUSTER_NAME_PLACEHOLDER,
    CachedModels as CachedModels,
    OperatorBuildError as OperatorBuildError,
)
from .capacity import (
    CacheFootprint as CacheFootprint,
    GroupUsage as GroupUsage,
    group_usage as group_usage,
)
from .chart import (
    CachesChart as CachesChart,
    CachesChartProps as CachesChartProps,
    cache_objects as cache_objects,
)
from .cold_start import (
    DEFAULT_BANDWIDTH_GBPS as DEFAULT_BANDWIDTH_GBPS,
    DEFAULT_COMPILE_S as DEFAULT_COMPILE_S,
    DEFAULT_CONTAINER_START_S as DEFAULT_CONTAINER_START_S,
    DEFAULT_CUDA_GRAPH_S as DEFAULT_CUDA_GRAPH_S,
    DEFAULT_IMAGE_PULL_MIN as DEFAULT_IMAGE_PULL_MIN,
    HUB_BANDWIDTH_GBPS as HUB_BANDWIDTH_GBPS,
    ColdStart as ColdStart,
    StartBreakdown as StartBreakdown,
)
from .fsx import (
    PERFORMANCE_DOCS as PERFORMANCE_DOCS,
    file_system_readers as file_system_readers,
    rate_basis as rate_basis,
    readers as readers,
    vpc_problems as vpc_problems,
)
from .handle import CachedModelHandle as CachedModelHandle
from .hub import HubTokenSync as HubTokenSync, HubTokenSyncProps as HubTokenSyncProps
from .jumpstart import is_jumpstart as is_jumpstart, jumpstart_gpus as jumpstart_gpus
from .objects import cache_ready_preferences as cache_ready_preferences
from .placement import (
    CacheGroup as CacheGroup,
    footprint as footprint,
    placement_problems as placement_problems,
)
from .props import (
    MANAGED_BY as MANAGED_BY,
    CachedModelSpec as CachedModelSpec,
    CachedModelsProps as CachedModelsProps,
    CacheRoutingStrategy as CacheRoutingStrategy,
    ExtraImage as ExtraImage,
    KvCache as KvCache,
    KvCacheTier as KvCacheTier,
    LoadBalancer as LoadBalancer,
    LoadBalancerAlgorithm as LoadBalancerAlgorithm,
    Metrics as Metrics,
    PrepullMode as PrepullMode,
    Probes as Probes,
    PropsError as PropsError,
    RequestLimits as RequestLimits,
    Tls as Tls,
    WeightsCache as WeightsCache,
    WorkerResources as WorkerResources,
    gigabytes as gigabytes,
    in_gigabytes as in_gigabytes,
)
from .sources import (
    BUCKET as BUCKET,
    KEY_PREFIX as KEY_PREFIX,
    REGION as REGION,
    VPC_ID as VPC_ID,
    AnyModelSource as AnyModelSource,
    DeploymentKind as DeploymentKind,
    FsxModelSource as FsxModelSource,
    HuggingFaceModelSource as HuggingFaceModelSource,
    JumpStartModelSource as JumpStartModelSource,
    LustreThroughput as LustreThroughput,
    ModelSource as ModelSource,
)
