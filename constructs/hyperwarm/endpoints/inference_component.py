"""``InferenceComponent``: one model served as copies on an endpoint's variant (``AWS::SageMaker::InferenceComponent``)."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from hyperwarm.endpoints.props import InferenceComponentSpec


@dataclass(frozen=True)
class InferenceComponentProps:
    """Properties of :class:`InferenceComponent`."""

    endpoint_name: str
    """The endpoint whose variant hosts the copies."""
    variant_name: str
    """The variant that hosts the copies."""
    model_name: str
    """The SageMaker Model each copy runs."""
    spec: InferenceComponentSpec
    """Copies, their accelerators and memory, and SageMaker's caching."""


class InferenceComponent(Construct):
    """Copies of a model on an endpoint variant. ``node.default_child`` is the ``CfnInferenceComponent``."""

    def __init__(self, scope: Construct, id: str, props: InferenceComponentProps) -> None:
        super().__init__(scope, id)
        spec = props.spec
        self._resource = sagemaker.CfnInferenceComponent(
            self, "Default",
            endpoint_name=props.endpoint_name,
            variant_name=props.variant_name,
            specification=sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty(
                model_name=props.model_name,
                compute_resource_requirements=sagemaker.CfnInferenceComponent
                .InferenceComponentComputeResourceRequirementsProperty(
                    min_memory_required_in_mb=spec.min_memory_mb,
                    number_of_accelerator_devices_required=spec.accelerators_per_copy,
                ),
                data_cache_config=sagemaker.CfnInferenceComponent.InferenceComponentDataCacheConfigProperty(
                    enable_caching=spec.enable_caching),
            ),
            runtime_config=sagemaker.CfnInferenceComponent.InferenceComponentRuntimeConfigProperty(
                copy_count=spec.copies),
        )
        self.node.default_child = self._resource
        self.inference_component_arn: str = self._resource.attr_inference_component_arn
        """The component's ARN."""
