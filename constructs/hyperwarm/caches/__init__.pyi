"""Public names of ``hyperwarm.caches`` (read by type checkers, and by lazy_loader at run time)."""

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
    ColdStart as ColdStart,
    StartBreakdown as StartBreakdown,
)
from .handle import (
    CachedModelHandle as CachedModelHandle,
    DeploymentKind as DeploymentKind,
)
from .hub import (
    HubTokenSync as HubTokenSync,
    HubTokenSyncProps as HubTokenSyncProps,
)
from .objects import cache_ready_preferences as cache_ready_preferences
from .placement import (
    footprint as footprint,
    placement_problems as placement_problems,
)
from .props import (
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
    AnyModelSource as AnyModelSource,
    FsxModelSource as FsxModelSource,
    HuggingFaceModelSource as HuggingFaceModelSource,
    JumpStartModelSource as JumpStartModelSource,
    LustreThroughput as LustreThroughput,
    ModelSource as ModelSource,
)

# Renamed in 0.2.0, removed in 0.3.0 (hyperwarm._internal.deprecation: reading one warns at run time). An
# assignment, not an import: lazy_loader reads only the imports.
CachedModelProps = CachedModelSpec
HyperPodAutoScaling = HyperPodAutoscaling
