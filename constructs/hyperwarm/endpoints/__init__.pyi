"""Public names of ``hyperwarm.endpoints`` (read by type checkers, and by lazy_loader at run time)."""

from .base import IInferenceEndpoint as IInferenceEndpoint
from .client import (
    PREFIX_AWARE_ID_HEADER as PREFIX_AWARE_ID_HEADER,
    canonical_json as canonical_json,
    invoke_endpoint_args as invoke_endpoint_args,
    prefix_aware_id as prefix_aware_id,
)
from .configuration import (
    EndpointConfiguration as EndpointConfiguration,
    EndpointConfigurationProps as EndpointConfigurationProps,
    production_variant_api_shape as production_variant_api_shape,
)
from .endpoint import InferenceEndpoint as InferenceEndpoint
from .inference_component import (
    InferenceComponent as InferenceComponent,
    InferenceComponentProps as InferenceComponentProps,
)
from .model import (
    InferenceModel as InferenceModel,
    InferenceModelProps as InferenceModelProps,
    grant_model_data_read as grant_model_data_read,
)
from .props import (
    METRIC_PUBLISH_FREQUENCIES as METRIC_PUBLISH_FREQUENCIES,
    VARIANT_COUNT as VARIANT_COUNT,
    DataCapture as DataCapture,
    DeploymentGuardrails as DeploymentGuardrails,
    InferenceComponentSpec as InferenceComponentSpec,
    InferenceEndpointProps as InferenceEndpointProps,
    InstanceCount as InstanceCount,
    MetricPublishFrequency as MetricPublishFrequency,
    ModelSpec as ModelSpec,
    ProductionVariant as ProductionVariant,
    SamplingPercentage as SamplingPercentage,
    ScalingMetric as ScalingMetric,
    ServerlessSpec as ServerlessSpec,
    ShiftPercent as ShiftPercent,
    ShiftWait as ShiftWait,
    StartupTimeout as StartupTimeout,
    TrafficShift as TrafficShift,
    TrafficType as TrafficType,
    VariantAutoscaling as VariantAutoscaling,
    VariantWeight as VariantWeight,
)
from .routing import (
    EndpointRoutingStrategy as EndpointRoutingStrategy,
    Routing as Routing,
    routing_problems as routing_problems,
)
from .rules import (
    VARIANT_NAME as VARIANT_NAME,
    autoscaling_problems as autoscaling_problems,
    parse_s3_uri as parse_s3_uri,
    serverless_problems as serverless_problems,
)
