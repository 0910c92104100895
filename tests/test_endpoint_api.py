"""The synthesized production variants are valid SageMaker API input: botocore's own validator,
and a moto round trip that creates the endpoint config and endpoint and reads routing back."""

from __future__ import annotations

from typing import Any

import boto3
import botocore.session
import pytest
from botocore.validate import ParamValidator
from moto import mock_aws

from hyperwarm import ModelSpec, ProductionVariant, Routing, ServingImage, production_variant_api_shape

ENVIRONMENTS = ("dev", "staging", "prod")


def synthesized_variants(synthesized, env: str) -> list[dict[str, Any]]:
    """Each synthesized variant with its ModelName (a GetAtt) replaced by a literal name."""
    template = synthesized.template(f"hyperwarm-{env}-endpoints")
    variants = []
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::SageMaker::EndpointConfig":
            for pv in resource["Properties"]["ProductionVariants"]:
                variants.append({**pv, "ModelName": f"model-{pv['VariantName']}"})
    assert variants
    return variants


@pytest.fixture(scope="module")
def production_variant_shape():
    model = botocore.session.get_session().get_service_model("sagemaker")
    return model.shape_for("ProductionVariant")


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_synthesized_variants_pass_botocores_parameter_validation(synthesized, production_variant_shape,
                                                                    env: str) -> None:
    for pv in synthesized_variants(synthesized, env):
        report = ParamValidator().validate(pv, production_variant_shape)
        assert not report.has_errors(), report.generate_report()


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_synthesized_metrics_config_is_valid_api_input_with_detailed_observability_on(synthesized, env: str) -> None:
    shape = botocore.session.get_session().get_service_model("sagemaker").operation_model(
        "CreateEndpointConfig").input_shape.members["MetricsConfig"]
    configs = [r["Properties"] for r in synthesized.template(f"hyperwarm-{env}-endpoints")["Resources"].values()
               if r["Type"] == "AWS::SageMaker::EndpointConfig"]
    assert configs
    for config in configs:
        report = ParamValidator().validate(config["MetricsConfig"], shape)
        assert not report.has_errors(), report.generate_report()
        assert config["MetricsConfig"]["EnableDetailedObservability"] is True


def test_botocore_validation_catches_an_out_of_range_prefix_length(production_variant_shape) -> None:
    """The check above can fail: a bypassed range check is caught by botocore's model."""
    pv = production_variant_api_shape(ProductionVariant(
        name="x", model=ModelSpec(ServingImage.from_uri("1.dkr")), instance_type="ml.g5.2xlarge", instance_count=2,
        routing=Routing("PREFIX_AWARE", prefix_length=100, concurrency_threshold=4)), "m")
    report = ParamValidator().validate(pv, production_variant_shape)
    assert "PrefixLength" in report.generate_report()


def test_prod_has_a_prefix_aware_variant_with_both_parameters_beside_another_strategy(synthesized) -> None:
    routing = {pv["VariantName"]: pv["RoutingConfig"] for pv in synthesized_variants(synthesized, "prod")}
    assert routing["prefix-aware"] == {"RoutingStrategy": "PREFIX_AWARE",
                                       "PrefixAwareRoutingConfig": {"PrefixLength": 8192, "ConcurrencyThreshold": 32}}
    assert routing["random"] == {"RoutingStrategy": "RANDOM"}


def test_dev_has_one_least_outstanding_requests_variant(synthesized) -> None:
    (pv,) = synthesized_variants(synthesized, "dev")
    assert pv["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}


def _accept_current_instance_types(monkeypatch) -> None:
    """moto 5.2.5's instance-type list predates ml.g5/g6e/p5; check against botocore's enum instead."""
    from moto.sagemaker import models
    from moto.sagemaker.exceptions import ValidationError

    allowed = set(botocore.session.get_session().get_service_model("sagemaker")
                  .shape_for("ProductionVariantInstanceType").enum)

    def validate_instance_type(self, instance_type: str) -> None:
        if instance_type not in allowed:
            raise ValidationError(message=f"Value '{instance_type}' at 'instanceType' failed to satisfy constraint")

    monkeypatch.setattr(models.FakeEndpointConfig, "validate_instance_type", validate_instance_type)


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_moto_creates_endpoint_from_synthesized_variants_and_returns_their_routing(synthesized, monkeypatch,
                                                                                     env: str) -> None:
    _accept_current_instance_types(monkeypatch)
    variants = synthesized_variants(synthesized, env)
    with mock_aws():
        client = boto3.client("sagemaker", region_name="us-east-1")
        for pv in variants:
            client.create_model(ModelName=pv["ModelName"], ExecutionRoleArn="arn:aws:iam::123456789012:role/x",
                                PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/x:1"})
        client.create_endpoint_config(EndpointConfigName=f"{env}-config", ProductionVariants=variants)
        client.create_endpoint(EndpointName=f"{env}-chat", EndpointConfigName=f"{env}-config")
        described = client.describe_endpoint_config(EndpointConfigName=f"{env}-config")["ProductionVariants"]
        assert {pv["VariantName"]: pv.get("RoutingConfig") for pv in described} == \
            {pv["VariantName"]: pv.get("RoutingConfig") for pv in variants}
        assert client.describe_endpoint(EndpointName=f"{env}-chat")["EndpointConfigName"] == f"{env}-config"


@pytest.mark.parametrize("env, gpus", [("dev", "1"), ("staging", "1"), ("prod", "8")])
def test_synthesized_models_are_told_their_model_and_their_instance_types_gpus(synthesized, env: str,
                                                                                gpus: str) -> None:
    """Fails on the old app, whose Models had no Environment: vLLM started its default model on one GPU."""
    environment_shape = botocore.session.get_session().get_service_model("sagemaker") \
        .shape_for("ContainerDefinition").members["Environment"]
    models = synthesized.resources(f"hyperwarm-{env}-endpoints", "AWS::SageMaker::Model")
    assert models
    for model in models.values():
        environment = model["Properties"]["PrimaryContainer"]["Environment"]
        assert environment["SM_VLLM_MODEL"] == "/opt/ml/model"
        assert environment["SM_VLLM_TENSOR_PARALLEL_SIZE"] == gpus
        report = ParamValidator().validate(environment, environment_shape)
        assert not report.has_errors(), report.generate_report()
