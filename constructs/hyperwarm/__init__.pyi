"""Public names of ``hyperwarm`` (read by type checkers, and by lazy_loader at run time)."""

from ._node import use_bundled_node as use_bundled_node
from .caches import (
    CacheFootprint as CacheFootprint,
)
from .caches import (
    CloudWatchTrigger as CloudWatchTrigger,
)
from .caches import (
    GroupUsage as GroupUsage,
)
from .caches import (
    HyperPodAutoScaling as HyperPodAutoScaling,
)
from .caches import (
    PrometheusTrigger as PrometheusTrigger,
)
from .caches import (
    group_usage as group_usage,
)
from .cluster import (
    CATALOG as CATALOG,
)
from .cluster import (
    HEALTH_TAINT_KEY as HEALTH_TAINT_KEY,
)
from .cluster import (
    INSTANCE_GROUP_LABEL as INSTANCE_GROUP_LABEL,
)
from .cluster import (
    NVME_PATH as NVME_PATH,
)
from .cluster import (
    SUPPORTED_KUBERNETES_VERSIONS as SUPPORTED_KUBERNETES_VERSIONS,
)
from .cluster import (
    EksControlPlane as EksControlPlane,
)
from .cluster import (
    EksControlPlaneProps as EksControlPlaneProps,
)
from .cluster import (
    HyperPodEksCluster as HyperPodEksCluster,
)
from .cluster import (
    HyperPodEksClusterProps as HyperPodEksClusterProps,
)
from .cluster import (
    HyperPodNetwork as HyperPodNetwork,
)
from .cluster import (
    HyperPodNetworkProps as HyperPodNetworkProps,
)
from .cluster import (
    HyperPodNodes as HyperPodNodes,
)
from .cluster import (
    HyperPodNodesProps as HyperPodNodesProps,
)
from .cluster import (
    IHyperPodCluster as IHyperPodCluster,
)
from .cluster import (
    IInferenceOperator as IInferenceOperator,
)
from .cluster import (
    InferenceOperator as InferenceOperator,
)
from .cluster import (
    InstanceGroup as InstanceGroup,
)
from .cluster import (
    InstanceGroupSpec as InstanceGroupSpec,
)
from .cluster import (
    InstanceSpec as InstanceSpec,
)
from .cluster import (
    NodeTaint as NodeTaint,
)
from .cluster import (
    grant_mounted_model_read as grant_mounted_model_read,
)
from .cluster import (
    instance_spec as instance_spec,
)
from .endpoints import (
    PREFIX_AWARE_ID_HEADER as PREFIX_AWARE_ID_HEADER,
)
from .endpoints import (
    Autoscaling as Autoscaling,
)
from .endpoints import (
    DataCapture as DataCapture,
)
from .endpoints import (
    DeploymentGuardrails as DeploymentGuardrails,
)
from .endpoints import (
    EndpointConfiguration as EndpointConfiguration,
)
from .endpoints import (
    EndpointConfigurationProps as EndpointConfigurationProps,
)
from .endpoints import (
    IInferenceEndpoint as IInferenceEndpoint,
)
from .endpoints import (
    InferenceComponent as InferenceComponent,
)
from .endpoints import (
    InferenceComponentProps as InferenceComponentProps,
)
from .endpoints import (
    InferenceComponentSpec as InferenceComponentSpec,
)
from .endpoints import (
    InferenceEndpoint as InferenceEndpoint,
)
from .endpoints import (
    InferenceEndpointProps as InferenceEndpointProps,
)
from .endpoints import (
    InferenceModel as InferenceModel,
)
from .endpoints import (
    InferenceModelProps as InferenceModelProps,
)
from .endpoints import (
    ModelSpec as ModelSpec,
)
from .endpoints import (
    ProductionVariant as ProductionVariant,
)
from .endpoints import (
    Routing as Routing,
)
from .endpoints import (
    ServerlessSpec as ServerlessSpec,
)
from .endpoints import (
    TrafficShift as TrafficShift,
)
from .endpoints import (
    canonical_json as canonical_json,
)
from .endpoints import (
    grant_model_data_read as grant_model_data_read,
)
from .endpoints import (
    invoke_endpoint_args as invoke_endpoint_args,
)
from .endpoints import (
    prefix_aware_id as prefix_aware_id,
)
from .endpoints import (
    production_variant_api_shape as production_variant_api_shape,
)
from .observability import (
    PUBLISHED_METRICS as PUBLISHED_METRICS,
)
from .observability import (
    AlarmDestination as AlarmDestination,
)
from .observability import (
    AlarmDestinationProps as AlarmDestinationProps,
)
from .observability import (
    CacheMetricsExporter as CacheMetricsExporter,
)
from .observability import (
    CacheMetricsExporterProps as CacheMetricsExporterProps,
)
from .observability import (
    EndpointMetricsBridge as EndpointMetricsBridge,
)
from .observability import (
    EndpointMetricsBridgeProps as EndpointMetricsBridgeProps,
)
from .observability import (
    HyperPodModels as HyperPodModels,
)
from .observability import (
    InferenceObservability as InferenceObservability,
)
from .observability import (
    InferenceObservabilityProps as InferenceObservabilityProps,
)
from .observability import (
    PublishedMetric as PublishedMetric,
)
from .observability import (
    SlackChannel as SlackChannel,
)
from .observability import (
    alarm_topic as alarm_topic,
)
from .observability import (
    allow_cloudwatch_alarms as allow_cloudwatch_alarms,
)
from .observability import (
    declare_existing_alarm_topic as declare_existing_alarm_topic,
)
from .observability import (
    notify_alarms as notify_alarms,
)
from .refresh import (
    BlueGreen as BlueGreen,
)
from .refresh import (
    CacheRefreshHook as CacheRefreshHook,
)
from .refresh import (
    CacheRefreshHookProps as CacheRefreshHookProps,
)
from .refresh import (
    EndpointRefreshTarget as EndpointRefreshTarget,
)
from .refresh import (
    GuardedTarget as GuardedTarget,
)
from .refresh import (
    HyperPodRefreshTarget as HyperPodRefreshTarget,
)
from .refresh import (
    RefreshedPrefix as RefreshedPrefix,
)
from .refresh import (
    RefreshGuard as RefreshGuard,
)
from .refresh import (
    RefreshGuardProps as RefreshGuardProps,
)
from .serving import (
    MODEL_DIR as MODEL_DIR,
)
from .serving import (
    ContainerImage as ContainerImage,
)
from .serving import (
    ContainerImageConfig as ContainerImageConfig,
)
from .serving import (
    ServerSettings as ServerSettings,
)
from .serving import (
    Serving as Serving,
)
from .serving import (
    declare_existing_buckets as declare_existing_buckets,
)
from .serving import (
    model_bucket as model_bucket,
)
from .serving import (
    server_settings as server_settings,
)
