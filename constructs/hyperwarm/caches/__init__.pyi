"""Public names of ``hyperwarm.caches`` (read by type checkers, and by lazy_loader at run time)."""

from .autoscaling import (
    CloudWatchTrigger as CloudWatchTrigger,
)
from .autoscaling import (
    ExporterTrigger as ExporterTrigger,
)
from .autoscaling import (
    HyperPodAutoScaling as HyperPodAutoScaling,
)
from .autoscaling import (
    PrometheusTrigger as PrometheusTrigger,
)
from .cached_models import (
    CLUSTER_NAME_PLACEHOLDER as CLUSTER_NAME_PLACEHOLDER,
)
from .cached_models import (
    CachedModels as CachedModels,
)
from .cached_models import (
    OperatorBuildError as OperatorBuildError,
)
from .capacity import (
    CacheFootprint as CacheFootprint,
)
from .capacity import (
    GroupUsage as GroupUsage,
)
from .capacity import (
    group_usage as group_usage,
)
from .chart import (
    CachesChart as CachesChart,
)
from .chart import (
    CachesChartProps as CachesChartProps,
)
from .chart import (
    cache_objects as cache_objects,
)
from .cold_start import ColdStart as ColdStart
from .objects import cache_ready_preferences as cache_ready_preferences
from .placement import (
    footprint as footprint,
)
from .placement import (
    placement_problems as placement_problems,
)
from .props import (
    CachedModelProps as CachedModelProps,
)
from .props import (
    CachedModelsProps as CachedModelsProps,
)
from .props import (
    ExtraImage as ExtraImage,
)
from .props import (
    KvCache as KvCache,
)
from .props import (
    LoadBalancer as LoadBalancer,
)
from .props import (
    Metrics as Metrics,
)
from .props import (
    ModelSource as ModelSource,
)
from .props import (
    Probes as Probes,
)
from .props import (
    RequestLimits as RequestLimits,
)
from .props import (
    Tls as Tls,
)
from .props import (
    WorkerResources as WorkerResources,
)
from .props import (
    PropsError as PropsError,
)
from .props import (
    gigabytes as gigabytes,
)
from .props import (
    in_gigabytes as in_gigabytes,
)
