"""Public names of ``hyperwarm.endpoints`` (read by type checkers, and by lazy_loader at run time)."""

from .base import IInferenceEndpoint as IInferenceEndpoint
from .client import (
    PREFIX_AWARE_ID_HEADER as PREFIX_AWARE_ID_HEADER,
)
from .client import (
    canonical_json as canonical_json,
)
from .client import (
    invoke_endpoint_args as invoke_endpoint_args,
)
from .client import (
    prefix_aware_id as prefix_aware_id,
)
from .configuration import (
    EndpointConfiguration as EndpointConfiguration,
)
from .configuration import (
    EndpointConfigurationProps as EndpointConfigurationProps,
)
from .configuration import (
    production_variant_api_shape as production_variant_api_shape,
)
from .endpoint import InferenceEndpoint as InferenceEndpoint
from .inference_component import InferenceComponent as InferenceComponent
from .inference_component import InferenceComponentProps as InferenceComponentProps
from .model import (
    InferenceModel as InferenceModel,
)
from .model import (
    InferenceModelProps as InferenceModelProps,
)
from .model import (
    grant_model_data_read as grant_model_data_read,
)
from .props import (
    Autoscaling as Autoscaling,
)
from .props import (
    DataCapture as DataCapture,
)
from .props import (
    DeploymentGuardrails as DeploymentGuardrails,
)
from .props import (
    InferenceComponentSpec as InferenceComponentSpec,
)
from .props import (
    InferenceEndpointProps as InferenceEndpointProps,
)
from .props import (
    ModelSpec as ModelSpec,
)
from .props import (
    ProductionVariant as ProductionVariant,
)
from .props import (
    ServerlessSpec as ServerlessSpec,
)
from .props import (
    TrafficShift as TrafficShift,
)
from .routing import Routing as Routing
