"""One naming for what the refresh function creates and what the construct grants.

The function truncates long endpoint names in the Models and EndpointConfigs it creates; the
construct's IAM must name exactly those, and SageMaker's 63-character endpoint-name limit is
checked at synth (cdk.json and the constructs).
"""

from __future__ import annotations

import fnmatch
import json
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import boto3
import pytest
from aws_cdk.assertions import Template
from moto import mock_aws

from hyperwarm import (
    CacheRefreshHook,
    CacheRefreshHookProps,
    EndpointRefreshTarget,
    InferenceEndpoint,
    InferenceEndpointProps,
    ModelSpec,
    ProductionVariant,
    RefreshedPrefix,
    Serving,
    ServingImage,
)
from hyperwarm.functions.cache_refresh import contract
from hyperwarm.functions.cache_refresh.config import EndpointTarget
from hyperwarm.functions.cache_refresh.events import parse_manifest_created
from hyperwarm.functions.cache_refresh.targets import endpoint as endpoint_target
from stacks.config import ConfigError, parse_environment

sys.path.insert(0, str(Path(__file__).resolve().parent / "refresh"))
import moto_ext  # noqa: E402  (moto's missing UpdateEndpoint)

BUCKET = "hyperwarm-models-test"
PREFIX = "models/llama"
ROLE = "arn:aws:iam::123456789012:role/sagemaker-exec"
IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/serving/vllm:0.27.1"
NAME_39 = "hyperwarm-production-llama-3-1-70b-chat"
NAME_63 = "hyperwarm-production-eu-central-llama-3-1-70b-instruct-chat-api"
MIXED_CASE = "Hyperwarm-Prod-Chat"


def test_the_names_under_test_have_the_lengths_they_claim() -> None:
    assert (len(NAME_39), len(NAME_63)) == (39, 63)


def hook_grants(endpoint_name: str) -> tuple[list[str], list[str]]:
    """(endpoint ARN names, create/delete patterns) the construct grants for one refreshed endpoint."""
    app = cdk.App()
    stack = cdk.Stack(app, "T", env=cdk.Environment(region="us-west-2", account="123456789012"))
    endpoint = InferenceEndpoint(stack, "Chat", InferenceEndpointProps(endpoint_name=endpoint_name, variants=[
        ProductionVariant(name="main", model=ModelSpec(ServingImage.from_uri(IMAGE), serving=Serving(framework="vllm"),
                                                       model_data=f"s3://{BUCKET}/{PREFIX}/v1/"),
                          instance_type="ml.g5.2xlarge", instance_count=1)]))
    CacheRefreshHook(stack, "Hook", CacheRefreshHookProps(
        models=[RefreshedPrefix(prefix=PREFIX, endpoints=[EndpointRefreshTarget(endpoint)])],
        bucket=cdk.aws_s3.Bucket.from_bucket_name(stack, "Models", BUCKET)))
    statements = [s for r in Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
                  for s in r["Properties"]["PolicyDocument"]["Statement"]]

    def arn_names(statement: dict[str, Any]) -> list[str]:
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        return [r["Fn::Join"][1][-1].rsplit(":", 1)[1] for r in resources]  # "...:<account>:model/x-*"

    update = next(s for s in statements if "sagemaker:UpdateEndpoint" in s["Action"])
    create = next(s for s in statements if s.get("Sid") == "CreateAndRetireRefreshedVersions")
    return arn_names(update), arn_names(create)


def created_names(endpoint_name: str) -> list[str]:
    """The ARN resource names of the Models and EndpointConfig the function creates for v2."""
    with mock_aws():
        moto_ext.install()
        sm = boto3.client("sagemaker", region_name="us-west-2")
        sm.create_model(ModelName="live", ExecutionRoleArn=ROLE, PrimaryContainer={
            "Image": IMAGE, "ModelDataSource": {"S3DataSource": {
                "S3Uri": f"s3://{BUCKET}/{PREFIX}/v1/", "S3DataType": "S3Prefix", "CompressionType": "None"}}})
        sm.create_endpoint_config(EndpointConfigName="live", ProductionVariants=[
            {"VariantName": "main-variant-long", "ModelName": "live", "InstanceType": "ml.m5.large",
             "InitialInstanceCount": 1}])
        sm.create_endpoint(EndpointName=endpoint_name, EndpointConfigName="live")
        event = parse_manifest_created({
            "version": "0", "id": "e", "detail-type": "Object Created", "source": "aws.s3", "account": "123456789012",
            "time": "2026-11-29T12:00:00Z", "region": "us-west-2", "resources": [],
            "detail": {"bucket": {"name": BUCKET},
                       "object": {"key": f"{PREFIX}/2026-11-29T12-00-00Z/manifest.json", "sequencer": "0A1B"}}})
        rollout = endpoint_target.start(sm, EndpointTarget(endpoint=endpoint_name), event)
    return [f"endpoint-config/{contract.arn_name(rollout['config'])}",
            *(f"model/{contract.arn_name(m)}" for m in rollout["created_models"])]


@pytest.mark.parametrize("endpoint_name", [NAME_39, NAME_63, MIXED_CASE])
def test_grants_match_exactly_the_names_the_function_creates(endpoint_name: str) -> None:
    endpoints, patterns = hook_grants(endpoint_name)
    assert endpoints == [f"endpoint/{endpoint_name.lower()}"]  # SageMaker ARNs are lower case
    created = created_names(endpoint_name)
    assert len(created) == 2
    for name in created:
        assert len(name.split("/", 1)[1]) <= contract.NAME_MAX
        assert [p for p in patterns if fnmatch.fnmatchcase(name, p)], f"{name} is not granted by {patterns}"


def test_generated_names_are_valid_and_stable_on_a_retry() -> None:
    for endpoint in (NAME_39, NAME_63, "a--b", "x"):
        for name in (contract.model_name(endpoint, "variant-name-long", "1.10.0-rc.1+build.5", "s"),
                     contract.endpoint_config_name(endpoint, "v12", "s")):
            assert contract.NAME_PATTERN.match(name) and len(name) <= contract.NAME_MAX, name
    assert contract.endpoint_config_name(NAME_63, "v2", "a") == contract.endpoint_config_name(NAME_63, "v2", "a")
    assert contract.endpoint_config_name(NAME_63, "v2", "a") != contract.endpoint_config_name(NAME_63, "v2", "b")


# -- SageMaker's 63-character endpoint-name limit at synth ----------------------------------------

def _environment_with_endpoint_named(project_context: dict[str, Any], name: str) -> dict[str, Any]:
    env = json.loads(json.dumps(project_context["environments"]["prod"]))
    env["endpoints"][0]["name"] = name
    env["refresh"]["models"][0]["endpoints"] = [name]
    return env


def test_an_endpoint_name_too_long_for_its_environment_fails_config(project_context) -> None:
    env = "production-eu-central"  # 21 characters, the longest environment name: 31 are left for a name
    parse_environment(env, _environment_with_endpoint_named(project_context, "c" * 31))
    with pytest.raises(ConfigError, match=rf"environments\.{env}\.endpoints\[0\]\.name: 'c{{32}}' -- SageMaker "
                                          rf"endpoint name 'hyperwarm-{env}-c{{32}}': 64 characters; SageMaker allows "
                                          rf"at most 63; in environment '{env}' a name may have at most 31 characters"):
        parse_environment(env, _environment_with_endpoint_named(project_context, "c" * 32))


def test_the_endpoint_construct_rejects_a_name_sagemaker_would_reject() -> None:
    stack = cdk.Stack(cdk.App(), "T")
    model = ModelSpec(ServingImage.from_uri(IMAGE), serving=Serving(framework="vllm"))
    variant = ProductionVariant(name="main", model=model, instance_type="ml.g5.2xlarge", instance_count=1)
    with pytest.raises(ValueError, match=r"endpoint_name = 'e{64}' -- 64 characters; SageMaker allows at most 63"):
        InferenceEndpoint(stack, "E", InferenceEndpointProps(endpoint_name="e" * 64, variants=[variant]))
    with pytest.raises(ValueError, match=r"endpoint_name = 'a_b' -- allowed: letters, digits and hyphens"):
        InferenceEndpoint(stack, "F", InferenceEndpointProps(endpoint_name="a_b", variants=[variant]))
