"""InferenceEndpoint: synthesized EndpointConfig per routing strategy, validation rules, operations."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Annotations, Match, Template
from stand_ins import IMAGE, MODEL

from hyperwarm import (
    DataCapture,
    DeploymentGuardrails,
    IInferenceEndpoint,
    InferenceComponentSpec,
    InferenceEndpoint,
    InferenceEndpointProps,
    InferenceModel,
    InferenceModelProps,
    ModelSpec,
    ProductionVariant,
    Routing,
    ServerlessSpec,
    Serving,
    ServingImage,
    TrafficShift,
    VariantAutoscaling,
    grant_model_data_read,
)
from hyperwarm.endpoints.rules import endpoint_problems

CU130 = ServingImage.from_uri("763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.27.1-gpu-py312-cu130-ubuntu22.04-sagemaker")
CU130_MODEL = ModelSpec(CU130, model_data="s3://models-bucket/llama/v1/")
AMI_4_1 = "al2023-ami-sagemaker-inference-gpu-4-1"


def variant(name: str = "main", **kwargs: Any) -> ProductionVariant:
    kwargs.setdefault("model", MODEL)
    kwargs.setdefault("instance_type", "ml.g5.2xlarge")
    kwargs.setdefault("instance_count", 2)
    return ProductionVariant(name=name, **kwargs)


def build(*variants: ProductionVariant, **props: Any) -> tuple[cdk.Stack, InferenceEndpoint]:
    app = cdk.App()
    stack = cdk.Stack(app, "Test", env=cdk.Environment(region="us-east-1", account="111122223333"))
    endpoint = InferenceEndpoint(stack, "Chat", InferenceEndpointProps(variants=list(variants), **props))
    return stack, endpoint


def template(*variants: ProductionVariant, **props: Any) -> dict[str, Any]:
    stack, _ = build(*variants, **props)
    return Template.from_stack(stack).to_json()


def of_type(tpl: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in tpl["Resources"].items() if v["Type"] == kind}


def production_variants(tpl: dict[str, Any]) -> list[dict[str, Any]]:
    (config,) = of_type(tpl, "AWS::SageMaker::EndpointConfig").values()
    return config["Properties"]["ProductionVariants"]


# -- every strategy in the synthesized EndpointConfig --------------------------------------


@pytest.mark.parametrize("routing, expected", [
    (Routing.random(), {"RoutingStrategy": "RANDOM"}),
    (Routing.least_outstanding_requests(), {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}),
    (Routing.prefix_aware(prefix_length=4096, concurrency_threshold=16),
     {"RoutingStrategy": "PREFIX_AWARE", "PrefixAwareRoutingConfig": {"PrefixLength": 4096, "ConcurrencyThreshold": 16}}),
    (Routing.kv_aware(), {"RoutingStrategy": "KV_AWARE"}),
])
def test_endpoint_config_carries_each_routing_strategy(routing: Routing, expected: dict[str, Any]) -> None:
    (pv,) = production_variants(template(variant(routing=routing)))
    assert pv["RoutingConfig"] == expected


def test_omitted_routing_leaves_routing_config_out_so_sagemaker_uses_random() -> None:
    (pv,) = production_variants(template(variant()))
    assert "RoutingConfig" not in pv


def test_two_variants_keep_their_own_routing_side_by_side() -> None:
    pvs = production_variants(template(
        variant("a", routing=Routing.prefix_aware(prefix_length=8192, concurrency_threshold=32)),
        variant("b", routing=Routing.random(), initial_weight=3.0)))
    assert [(p["VariantName"], p["RoutingConfig"]["RoutingStrategy"], p["InitialVariantWeight"]) for p in pvs] == \
        [("a", "PREFIX_AWARE", 1.0), ("b", "RANDOM", 3.0)]


# -- routing change: same Model, new EndpointConfig --------------------------------------


def test_changing_only_routing_keeps_the_model_and_replaces_the_endpoint_config() -> None:
    before = template(variant(routing=Routing.random()))
    after = template(variant(routing=Routing.prefix_aware(prefix_length=2048, concurrency_threshold=8)))
    assert of_type(before, "AWS::SageMaker::Model") == of_type(after, "AWS::SageMaker::Model")
    old_config, new_config = (of_type(t, "AWS::SageMaker::EndpointConfig") for t in (before, after))
    assert old_config.keys() == new_config.keys()  # same logical id ...
    (config_id,) = old_config
    assert old_config[config_id] != new_config[config_id]  # ... different properties: replacement
    # No explicit name, so CloudFormation can create the replacement beside the old config.
    assert "EndpointConfigName" not in new_config[config_id]["Properties"]
    (endpoint,) = of_type(after, "AWS::SageMaker::Endpoint").values()
    assert endpoint["Properties"]["EndpointConfigName"] == {"Fn::GetAtt": [config_id, "EndpointConfigName"]}


def metrics_config(tpl: dict[str, Any]) -> dict[str, Any] | None:
    (config,) = of_type(tpl, "AWS::SageMaker::EndpointConfig").values()
    return config["Properties"].get("MetricsConfig")


def test_detailed_observability_is_on_explicitly_whatever_the_config_creation_date() -> None:
    # SageMaker's own default is true only for configs created after 2026-06-17; TTFT alarms need it.
    assert metrics_config(template(variant())) == {"EnableDetailedObservability": True}


def test_detailed_observability_can_be_turned_off_and_the_publish_frequency_set() -> None:
    tpl = template(variant(), detailed_observability=False, metric_publish_frequency=cdk.Duration.seconds(30))
    assert metrics_config(tpl) == {"EnableDetailedObservability": False, "MetricPublishFrequencyInSeconds": 30}
    assert metrics_config(template(variant(), metric_publish_frequency=cdk.Duration.minutes(5))) == {
        "EnableDetailedObservability": True, "MetricPublishFrequencyInSeconds": 300}


@pytest.mark.parametrize("frequency", [cdk.Duration.seconds(45), cdk.Duration.minutes(10), cdk.Duration.millis(1500)])
def test_a_publish_frequency_sagemaker_does_not_accept_is_rejected(frequency: cdk.Duration) -> None:
    seconds = frequency.to_milliseconds() / 1000
    rejects(rf"metric_publish_frequency = {seconds:g} s -- allowed: 10, 30, 60, 120, 180, 240, 300 seconds",
            variant(), metric_publish_frequency=frequency)


def test_the_endpoint_configuration_construct_validates_its_frequency_itself() -> None:
    from hyperwarm.endpoints.configuration import EndpointConfiguration, EndpointConfigurationProps

    stack = cdk.Stack(cdk.App(), "S")
    with pytest.raises(ValueError, match=r"^S/Config: metric_publish_frequency = 90 s -- allowed: 10, 30"):
        EndpointConfiguration(stack, "Config", EndpointConfigurationProps(
            variants=[variant()], model_names={"main": "m"}, metric_publish_frequency=cdk.Duration.seconds(90)))


# -- validation --------------------------------------------------------------------------


def rejects(match: str, *variants: ProductionVariant, **props: Any) -> str:
    with pytest.raises(ValueError, match=match) as info:
        build(*variants, **props)
    message = str(info.value)
    assert "Test/Chat" in message
    return message


def test_prefix_aware_without_threshold_is_rejected() -> None:
    message = rejects(r"routing\.concurrency_threshold = None -- PREFIX_AWARE needs both",
                      variant("pa", routing=Routing("PREFIX_AWARE", prefix_length=4096)))
    assert "variant 'pa'" in message and "1..1024" in message


def test_prefix_aware_without_prefix_length_is_rejected() -> None:
    rejects(r"routing\.prefix_length = None -- PREFIX_AWARE needs both .*1024\.\.65536",
            variant(routing=Routing("PREFIX_AWARE", concurrency_threshold=4)))


@pytest.mark.parametrize("length", [512, 70000])
def test_prefix_length_outside_1024_to_65536_is_rejected(length: int) -> None:
    rejects(rf"routing\.prefix_length = {length} -- allowed: an integer 1024\.\.65536",
            variant(routing=Routing.prefix_aware(prefix_length=length, concurrency_threshold=4)))


@pytest.mark.parametrize("threshold", [0, 1025])
def test_concurrency_threshold_outside_1_to_1024_is_rejected(threshold: int) -> None:
    rejects(rf"routing\.concurrency_threshold = {threshold} -- allowed: an integer 1\.\.1024",
            variant(routing=Routing.prefix_aware(prefix_length=4096, concurrency_threshold=threshold)))


def test_prefix_settings_with_another_strategy_are_rejected() -> None:
    rejects(r"routing\.prefix_length = 4096 -- only PREFIX_AWARE takes prefix_length; strategy is "
            r"LEAST_OUTSTANDING_REQUESTS", variant(routing=Routing("LEAST_OUTSTANDING_REQUESTS", prefix_length=4096)))


def test_unknown_strategy_is_rejected() -> None:
    rejects(r"routing\.strategy = 'ROUND_ROBIN' -- allowed: RANDOM, LEAST_OUTSTANDING_REQUESTS",
            variant(routing=Routing("ROUND_ROBIN")))


@pytest.mark.parametrize("routing", [Routing.kv_aware(), Routing.prefix_aware(prefix_length=4096,
                                                                               concurrency_threshold=4)])
def test_cache_aware_routing_on_a_variant_fixed_at_one_instance_is_rejected(routing: Routing) -> None:
    rejects(r"fixed at 1 instance .* only routes between two or more", variant(instance_count=1, routing=routing))


def test_cache_aware_routing_that_needs_autoscaling_to_reach_two_instances_warns() -> None:
    stack, _ = build(variant(instance_count=1, routing=Routing.kv_aware(),
                             autoscaling=VariantAutoscaling(max_capacity=3, target_value=8)))
    warnings = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("has no effect while"))
    assert len(warnings) == 1


def test_routing_on_a_serverless_variant_is_rejected() -> None:
    rejects(r"serverless variants take no routing",
            ProductionVariant(name="sls", model=MODEL, serverless=ServerlessSpec(cdk.Size.mebibytes(2048), 5),
                              routing=Routing.random()))


def test_duplicate_variant_names_are_rejected() -> None:
    rejects(r"name = 'a' -- variant names must be unique", variant("a"), variant("a"))


@pytest.mark.parametrize("name", ["-lead", "under_score", "x" * 64, ""])
def test_malformed_variant_names_are_rejected(name: str) -> None:
    rejects(r"name = .* -- allowed: 1\.\.63 letters, digits or hyphens", variant(name))


@pytest.mark.parametrize("weight", [0, -1.5])
def test_non_positive_weights_are_rejected(weight: float) -> None:
    rejects(rf"initial_weight = {weight} -- allowed: > 0", variant(initial_weight=weight))


@pytest.mark.parametrize("uri", ["https://bucket/key", "s3://bucket", "s3://bucket/", "s3://Bad_Bucket/key"])
def test_model_data_that_is_not_s3_bucket_key_is_rejected(uri: str) -> None:
    rejects(r"model\.model_data = .* -- allowed: s3://bucket/key", variant(model=ModelSpec(IMAGE, model_data=uri)))


def test_non_ml_instance_type_is_rejected() -> None:
    rejects(r"instance_type = 'g5.2xlarge' -- allowed: an ml\.\* SageMaker instance type",
            variant(instance_type="g5.2xlarge"))


def test_unresolved_tokens_are_not_validated() -> None:
    app = cdk.App()
    stack = cdk.Stack(app, "Test", env=cdk.Environment(region="us-east-1"))
    count = cdk.Token.as_number(cdk.CfnParameter(stack, "Count", type="Number").value_as_number)
    length = cdk.Token.as_number(cdk.CfnParameter(stack, "Length", type="Number").value_as_number)
    InferenceEndpoint(stack, "Chat", InferenceEndpointProps(variants=[variant(
        instance_count=count, routing=Routing.prefix_aware(prefix_length=length, concurrency_threshold=4))]))
    (pv,) = production_variants(Template.from_stack(stack).to_json())
    assert pv["RoutingConfig"]["PrefixAwareRoutingConfig"]["PrefixLength"] == {"Ref": "Length"}


# -- operations --------------------------------------------------------------------------


def test_execution_role_reads_only_the_model_prefix_and_pulls_only_its_repository() -> None:
    tpl = template(variant())
    (policy,) = of_type(tpl, "AWS::IAM::Policy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    by_action = {str(s["Action"]): s for s in statements}
    assert by_action["s3:GetObject"]["Resource"] == {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::models-bucket/llama/v1/*"]]}
    assert by_action["s3:ListBucket"]["Condition"] == {"StringLike": {"s3:prefix": ["llama/v1/*"]}}
    pull = next(s for s in statements if "ecr:BatchGetImage" in s["Action"])
    assert pull["Resource"] == {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"},
                                                  ":ecr:us-east-1:123456789012:repository/serving/vllm"]]}
    (model,) = of_type(tpl, "AWS::SageMaker::Model").values()
    assert model["Properties"]["PrimaryContainer"]["ModelDataSource"]["S3DataSource"] == {
        "S3Uri": "s3://models-bucket/llama/v1/", "S3DataType": "S3Prefix", "CompressionType": "None"}
    assert model["Properties"]["EnableNetworkIsolation"] is True


def test_official_image_resolves_per_region_to_the_dlc_repository() -> None:
    tpl = template(variant(model=ModelSpec(ServingImage.official("vllm", "0.27.1"),
                                           model_data="s3://models-bucket/llama/v1/"),
                           inference_ami_version=AMI_4_1))
    (model,) = of_type(tpl, "AWS::SageMaker::Model").values()
    image = model["Properties"]["PrimaryContainer"]["Image"]
    assert image.startswith("763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.27.1-")


def test_storage_key_is_set_for_ebs_only_instances() -> None:
    tpl = template(variant(instance_type="ml.m5.xlarge"))
    (config,) = of_type(tpl, "AWS::SageMaker::EndpointConfig").values()
    assert "Fn::GetAtt" in config["Properties"]["KmsKeyId"]
    assert of_type(tpl, "AWS::KMS::Key")


def test_storage_key_is_omitted_when_a_variant_has_local_nvme() -> None:
    tpl = template(variant("a", instance_type="ml.m5.xlarge"), variant("b", instance_type="ml.p5.48xlarge"))
    (config,) = of_type(tpl, "AWS::SageMaker::EndpointConfig").values()
    assert "KmsKeyId" not in config["Properties"]


def test_autoscaling_tracks_the_chosen_metric_per_variant() -> None:
    tpl = template(variant(autoscaling=VariantAutoscaling(min_capacity=2, max_capacity=6, target_value=24)),
                   endpoint_name="chat")
    (target,) = of_type(tpl, "AWS::ApplicationAutoScaling::ScalableTarget").values()
    assert target["Properties"]["MinCapacity"] == 2 and target["Properties"]["MaxCapacity"] == 6
    assert target["Properties"]["ScalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    (policy,) = of_type(tpl, "AWS::ApplicationAutoScaling::ScalingPolicy").values()
    tracking = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["TargetValue"] == 24
    assert tracking["PredefinedMetricSpecification"]["PredefinedMetricType"] == \
        "SageMakerVariantConcurrentRequestsPerModelHighResolution"
    (endpoint,) = of_type(tpl, "AWS::SageMaker::Endpoint").values()
    assert endpoint["Properties"]["RetainAllVariantProperties"] is True


def test_canary_guardrails_roll_back_on_5xx_alarms() -> None:
    tpl = template(variant(), endpoint_name="chat",
                   guardrails=DeploymentGuardrails(traffic=TrafficShift.canary(10, cdk.Duration.minutes(10))))
    (endpoint,) = of_type(tpl, "AWS::SageMaker::Endpoint").values()
    deployment = endpoint["Properties"]["DeploymentConfig"]
    assert deployment["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"] == {
        "Type": "CANARY", "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 10}, "WaitIntervalInSeconds": 600}
    ((alarm_id, alarm),) = of_type(tpl, "AWS::CloudWatch::Alarm").items()
    assert deployment["AutoRollbackConfiguration"]["Alarms"] == [{"AlarmName": {"Ref": alarm_id}}]
    # a share of failed requests sustained over minutes, not a single 5XX in one minute
    props = alarm["Properties"]
    assert (props["MetricName"], props["Statistic"], props["Period"]) == ("Invocation5XXErrors", "Average", 60)
    assert (props["Threshold"], props["DatapointsToAlarm"], props["EvaluationPeriods"]) == (0.05, 2, 3)


def test_canary_above_50_percent_is_rejected() -> None:
    rejects(r"guardrails\.traffic\.percent = 60 -- CANARY allowed: 1\.\.50", variant(), endpoint_name="chat",
            guardrails=DeploymentGuardrails(traffic=TrafficShift.canary(60)))


def test_a_wait_sagemaker_would_reject_is_rejected() -> None:
    # WaitIntervalInSeconds and TerminationWaitInSeconds: 0..3600 (TrafficRoutingConfig, BlueGreenUpdatePolicy)
    rejects(r"guardrails\.traffic\.wait = 7200 seconds -- allowed: 0\.\.3600 seconds", variant(), endpoint_name="chat",
            guardrails=DeploymentGuardrails(traffic=TrafficShift.linear(10, cdk.Duration.hours(2))))
    rejects(r"guardrails\.termination_wait = 5400 seconds -- allowed: 0\.\.3600 seconds", variant(), endpoint_name="chat",
            guardrails=DeploymentGuardrails(termination_wait=cdk.Duration.minutes(90)))
    from hyperwarm.endpoints.rules import guardrail_problems  # a fraction of a second is checked, not a crash

    assert guardrail_problems(DeploymentGuardrails(traffic=TrafficShift.all_at_once(cdk.Duration.millis(1500))),
                              "chat") == []


def test_data_capture_goes_to_an_encrypted_bucket() -> None:
    tpl = template(variant(instance_type="ml.p5.48xlarge"), data_capture=DataCapture(sampling_percentage=5))
    (config,) = of_type(tpl, "AWS::SageMaker::EndpointConfig").values()
    capture = config["Properties"]["DataCaptureConfig"]
    assert capture["InitialSamplingPercentage"] == 5 and "KmsKeyId" in capture
    (bucket,) = of_type(tpl, "AWS::S3::Bucket").values()
    rule = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    assert bucket["Properties"]["PublicAccessBlockConfiguration"]["BlockPublicAcls"] is True
    assert bucket["Properties"]["VersioningConfiguration"] == {"Status": "Enabled"}


def test_inference_component_enables_sagemaker_caching_and_leaves_the_variant_model_free() -> None:
    tpl = template(variant(routing=Routing.least_outstanding_requests(),
                           inference_component=InferenceComponentSpec(copies=2, accelerators_per_copy=1)))
    (pv,) = production_variants(tpl)
    assert "ModelName" not in pv and pv["RoutingConfig"]["RoutingStrategy"] == "LEAST_OUTSTANDING_REQUESTS"
    (component,) = of_type(tpl, "AWS::SageMaker::InferenceComponent").values()
    assert component["Properties"]["Specification"]["DataCacheConfig"] == {"EnableCaching": True}
    assert component["Properties"]["RuntimeConfig"] == {"CopyCount": 2}


# -- deploy semantics --------------------------------------------------------------------------


def test_scaling_targets_wait_for_the_endpoint_they_name_by_string() -> None:
    # Finding 1: the ResourceId names the endpoint as a string, so only DependsOn orders them.
    tpl = template(variant(autoscaling=VariantAutoscaling(min_capacity=2, max_capacity=6, target_value=24)),
                   endpoint_name="chat")
    (endpoint_id,) = of_type(tpl, "AWS::SageMaker::Endpoint")
    (target,) = of_type(tpl, "AWS::ApplicationAutoScaling::ScalableTarget").values()
    assert target["Properties"]["ResourceId"] == "endpoint/chat/variant/main"
    assert endpoint_id in target["DependsOn"]


def test_inference_components_wait_for_the_endpoint() -> None:
    tpl = template(variant(inference_component=InferenceComponentSpec(accelerators_per_copy=1)), endpoint_name="chat")
    (endpoint_id,) = of_type(tpl, "AWS::SageMaker::Endpoint")
    (component,) = of_type(tpl, "AWS::SageMaker::InferenceComponent").values()
    assert endpoint_id in component["DependsOn"]


def test_execution_role_may_describe_exactly_its_rollback_alarms() -> None:
    # Finding 9: deployment guardrails need cloudwatch:DescribeAlarms on the auto-rollback alarms.
    tpl = template(variant("a"), variant("b"), endpoint_name="chat", guardrails=DeploymentGuardrails())
    alarms = sorted(of_type(tpl, "AWS::CloudWatch::Alarm"))
    statements = [s for p in of_type(tpl, "AWS::IAM::Policy").values()
                  for s in p["Properties"]["PolicyDocument"]["Statement"]]
    (describe,) = [s for s in statements if s["Action"] == "cloudwatch:DescribeAlarms"]
    assert describe["Resource"] == [{"Fn::GetAtt": [a, "Arn"]} for a in alarms]


def test_cuda_13_image_without_a_fitting_ami_fails_synth_naming_the_ami() -> None:
    # Finding 10: cu130 needs driver 580; SageMaker's default AMI has 470 or 535.
    for ami in (None, "al2-ami-sagemaker-inference-gpu-3-1"):
        message = rejects(r"variant 'main': inference_ami_version = .* needs CUDA 13\.0", variant(
            model=CU130_MODEL, inference_ami_version=ami))
        assert f"set inference_ami_version to {AMI_4_1}" in message


def test_inference_ami_version_lands_on_the_variant() -> None:
    (pv,) = production_variants(template(variant(model=CU130_MODEL, inference_ami_version=AMI_4_1)))
    assert pv["InferenceAmiVersion"] == AMI_4_1


def test_an_ami_hyperwarm_does_not_know_is_passed_through_with_a_warning() -> None:
    stack, _ = build(variant(model=CU130_MODEL, inference_ami_version="al2023-ami-sagemaker-inference-gpu-5-0"))
    Annotations.from_stack(stack).has_warning("*", Match.string_like_regexp(
        "inference_ami_version 'al2023-ami-sagemaker-inference-gpu-5-0' is unknown to hyperwarm"))


# -- what the model server is told ---------------------------------------------------------


def container(tpl: dict[str, Any]) -> dict[str, Any]:
    (model,) = of_type(tpl, "AWS::SageMaker::Model").values()
    return model["Properties"]["PrimaryContainer"]


def served(serving: Serving, image: ServingImage = IMAGE) -> ModelSpec:
    return ModelSpec(image, model_data="s3://models-bucket/llama/v1/", serving=serving)


def test_the_model_container_is_told_its_model_and_the_instance_types_gpus() -> None:
    """Fails on the old construct, whose Models had no Environment."""
    tpl = template(variant(model=served(Serving(framework="vllm")), instance_type="ml.g6e.12xlarge"))
    assert container(tpl)["Environment"] == {"SM_VLLM_MODEL": "/opt/ml/model", "SM_VLLM_TENSOR_PARALLEL_SIZE": "4"}


def test_an_official_lmi_image_is_told_in_its_own_variables() -> None:
    tpl = template(variant(model=served(Serving(), ServingImage.official("djl-lmi", "0.33.0")),
                           instance_type="ml.p5.48xlarge", inference_ami_version=AMI_4_1))
    assert container(tpl)["Environment"] == {"HF_MODEL_ID": "/opt/ml/model", "OPTION_TENSOR_PARALLEL_DEGREE": "8"}


def test_serving_args_and_environment_reach_the_container() -> None:
    serving = Serving(framework="vllm", args=["--max-model-len", "32768"], environment={"SM_VLLM_DTYPE": "bfloat16"})
    assert container(template(variant(model=served(serving))))["Environment"] == {
        "SM_VLLM_DTYPE": "bfloat16", "SM_VLLM_MAX_MODEL_LEN": "32768", "SM_VLLM_MODEL": "/opt/ml/model",
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "1"}


def test_an_inference_component_copy_is_told_its_accelerators() -> None:
    tpl = template(variant(instance_type="ml.p5.48xlarge",
                           inference_component=InferenceComponentSpec(copies=4, accelerators_per_copy=2)))
    assert container(tpl)["Environment"]["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "2"


def test_the_model_records_the_convention_for_the_rehearsal() -> None:
    (model,) = of_type(template(variant()), "AWS::SageMaker::Model").values()
    assert model["Metadata"]["hyperwarm:serving"] == {"framework": "vllm"}


def test_parallelism_that_does_not_match_the_gpus_fails_synth_naming_variant_variable_and_allowed() -> None:
    serving = Serving(framework="vllm", environment={"SM_VLLM_TENSOR_PARALLEL_SIZE": "1"})
    rejects(r"variant 'main': model\.serving\.environment\.SM_VLLM_TENSOR_PARALLEL_SIZE = '1' -- vllm runs one "
            r"server on 1 GPU\(s\) but ml\.p5\.48xlarge has 8 GPU\(s\); allowed: settings whose product is 8",
            variant(model=served(serving), instance_type="ml.p5.48xlarge"))


def test_an_image_hyperwarm_cannot_recognise_fails_synth_until_told_its_convention() -> None:
    rejects(r"variant 'main': model\.serving\.framework = None -- hyperwarm cannot tell how the server in "
            r"123456789012\.dkr\.ecr\.us-east-1\.amazonaws\.com/serving/vllm:0\.27\.1 reads",
            variant(model=served(Serving())))


def test_a_component_without_whole_accelerators_needs_explicit_parallelism() -> None:
    rejects(r"the inference component sets no whole accelerators_per_copy, so hyperwarm cannot derive tensor "
            r"parallelism; set SM_VLLM_TENSOR_PARALLEL_SIZE",
            variant(inference_component=InferenceComponentSpec(copies=2)))


def test_a_token_instance_type_needs_explicit_parallelism_and_then_synthesizes() -> None:
    app = cdk.App()
    stack = cdk.Stack(app, "Test", env=cdk.Environment(region="us-east-1"))
    instance_type = cdk.CfnParameter(stack, "Type").value_as_string
    with pytest.raises(ValueError, match="the instance type is only known at deploy time, so hyperwarm cannot derive"):
        InferenceEndpoint(stack, "Chat", InferenceEndpointProps(variants=[variant(instance_type=instance_type)]))
    serving = Serving(framework="vllm", environment={"SM_VLLM_TENSOR_PARALLEL_SIZE": "8"})
    InferenceEndpoint(stack, "Chat2", InferenceEndpointProps(variants=[
        variant(instance_type=instance_type, model=served(serving))]))
    assert container(Template.from_stack(stack).to_json())["Environment"]["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "8"


# -- construct library surface ----------------------------------------------------------------


def grantee(stack: cdk.Stack) -> cdk.aws_iam.Role:
    return cdk.aws_iam.Role(stack, "Caller", assumed_by=cdk.aws_iam.AccountRootPrincipal())


def statements_of(stack: cdk.Stack, role: cdk.aws_iam.Role) -> list[dict[str, Any]]:
    role_id = stack.resolve(role.node.default_child.logical_id)
    return [s for p in Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
            if {"Ref": role_id} in p["Properties"]["Roles"] for s in p["Properties"]["PolicyDocument"]["Statement"]]


def test_grant_invoke_lets_the_grantee_invoke_and_stream_on_this_endpoint_only() -> None:
    stack, endpoint = build(variant(), endpoint_name="chat")
    caller = grantee(stack)
    grant = endpoint.grant_invoke(caller)
    assert grant.success
    (statement,) = statements_of(stack, caller)
    (endpoint_id,) = of_type(Template.from_stack(stack).to_json(), "AWS::SageMaker::Endpoint")
    assert statement["Action"] == ["sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream"]
    assert statement["Resource"] == {"Ref": endpoint_id}


def test_an_imported_endpoint_grants_invoke_on_its_lower_case_arn() -> None:
    app = cdk.App()
    stack = cdk.Stack(app, "Test", env=cdk.Environment(region="us-east-1", account="111122223333"))
    imported = InferenceEndpoint.from_endpoint_attributes(stack, "Chat", endpoint_name="Chat-Prod")
    caller = grantee(stack)
    imported.grant_invoke(caller)
    (statement,) = statements_of(stack, caller)
    assert stack.resolve(statement["Resource"]) == {"Fn::Join": ["", [
        "arn:", {"Ref": "AWS::Partition"}, ":sagemaker:us-east-1:111122223333:endpoint/chat-prod"]]}
    assert imported.endpoint_name == "Chat-Prod" and imported.variant_names is None


def test_created_and_imported_endpoints_satisfy_the_protocol() -> None:
    stack, endpoint = build(variant(), endpoint_name="chat")
    imported = InferenceEndpoint.from_endpoint_attributes(stack, "Other", endpoint_name="other",
                                                          variant_names=["main"])
    assert isinstance(endpoint, IInferenceEndpoint) and isinstance(imported, IInferenceEndpoint)


def test_an_imported_endpoint_name_is_validated_naming_path_and_rule() -> None:
    app = cdk.App()
    stack = cdk.Stack(app, "Test")
    with pytest.raises(ValueError, match=r"Test/Bad: endpoint_name = 'a_b' -- allowed: letters, digits and hyphens"):
        InferenceEndpoint.from_endpoint_attributes(stack, "Bad", endpoint_name="a_b")


@pytest.mark.parametrize("method, metric_name, statistic", [
    ("metric_invocations", "Invocations", "Sum"),
    ("metric_invocation_4xx_errors", "Invocation4XXErrors", "Sum"),
    ("metric_invocation_5xx_errors", "Invocation5XXErrors", "Sum"),
    ("metric_model_latency", "ModelLatency", "Average"),
    ("metric_overhead_latency", "OverheadLatency", "Average"),
])
def test_metric_helpers_default_to_their_statistic_over_5_minutes_per_variant(method: str, metric_name: str,
                                                                             statistic: str) -> None:
    stack, endpoint = build(variant(), endpoint_name="chat")
    metric = getattr(endpoint, method)("main")
    assert (metric.namespace, metric.metric_name, metric.statistic) == ("AWS/SageMaker", metric_name, statistic)
    assert metric.period.to_minutes() == 5
    assert stack.resolve(metric.dimensions) == {"EndpointName": "chat", "VariantName": "main"}
    assert getattr(endpoint, method)("main", statistic="p99").statistic == "p99"


def test_a_metric_of_an_unknown_variant_names_the_path_and_the_variants() -> None:
    _, endpoint = build(variant("a"), variant("b"), endpoint_name="chat")
    with pytest.raises(ValueError, match=r"Test/Chat: variant_name = 'c' -- allowed: a, b"):
        endpoint.metric_model_latency("c")


def test_each_l2_wraps_its_l1_as_default_child_under_the_old_logical_id() -> None:
    stack, endpoint = build(variant(inference_component=InferenceComponentSpec(accelerators_per_copy=1)),
                            endpoint_name="chat")
    children = {"model": endpoint.models["main"], "config": endpoint.endpoint_config,
                "component": endpoint.inference_components["main"]}
    ids = {k: stack.resolve(c.node.default_child.logical_id) for k, c in children.items()}
    # "Default" leaves the logical id as it was when the endpoint owned the L1s directly.
    assert ids["model"].startswith("ChatmainModel") and ids["config"].startswith("ChatEndpointConfig")
    assert ids["component"].startswith("ChatmainComponent")
    assert endpoint.node.default_child.cfn_resource_type == "AWS::SageMaker::Endpoint"


def test_attributes_of_absent_features_are_defined_and_empty() -> None:
    _, endpoint = build(variant(instance_type="ml.p5.48xlarge"))
    assert endpoint.encryption_key is None and endpoint.data_capture_bucket is None
    assert endpoint.rollback_alarms == [] and endpoint.inference_components == {} and endpoint.scalable_targets == {}


def test_a_bucket_grants_read_to_the_endpoint_as_to_any_grantee() -> None:
    stack, endpoint = build(variant(), endpoint_name="chat")
    bucket = cdk.aws_s3.Bucket.from_bucket_name(stack, "More", "more-models")
    assert bucket.grant_read(endpoint, "extra/*").success
    statements = statements_of(stack, endpoint.execution_role)
    assert any("s3:GetObject*" in s["Action"] for s in statements)


def test_model_data_read_grant_returns_a_grant_on_the_prefix_only() -> None:
    stack, endpoint = build(variant(), endpoint_name="chat")
    bucket = cdk.aws_s3.Bucket.from_bucket_name(stack, "Versions", "versions")
    grant = grant_model_data_read(endpoint, bucket, "llama/")
    assert grant.success
    listing = [s for s in statements_of(stack, endpoint.execution_role)
               if s["Action"] == "s3:ListBucket" and "versions" in json.dumps(s["Resource"])]
    assert [s["Condition"] for s in listing] == [{"StringLike": {"s3:prefix": ["llama/*"]}}]


def test_an_ecr_repository_image_grants_its_pull_to_the_model() -> None:
    app = cdk.App()
    stack = cdk.Stack(app, "Test", env=cdk.Environment(region="us-east-1", account="111122223333"))
    repository = cdk.aws_ecr.Repository(stack, "Repo")
    role = cdk.aws_iam.Role(stack, "Role", assumed_by=cdk.aws_iam.ServicePrincipal("sagemaker.amazonaws.com"))
    model = InferenceModel(stack, "Model", InferenceModelProps(
        image=ServingImage.from_ecr_repository(repository, "1.0"), role=role))
    assert model.node.default_child.cfn_resource_type == "AWS::SageMaker::Model"
    pull = [s for s in statements_of(stack, role) if "ecr:BatchGetImage" in s["Action"]]
    assert [s["Resource"] for s in pull] == [{"Fn::GetAtt": [stack.resolve(repository.node.default_child.logical_id),
                                                             "Arn"]}]


def test_routing_rules_load_without_aws_cdk() -> None:
    # the props are aws-cdk's types (Duration, Size), so their rules load it; routing's rules stay pure
    code = ("import sys, hyperwarm.endpoints.routing; "
            "assert 'aws_cdk' not in sys.modules, 'aws_cdk loaded'")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_endpoint_rules_report_every_problem_at_once_without_a_construct() -> None:
    props = InferenceEndpointProps(endpoint_name="a_b", variants=[
        variant("x", initial_weight=0), variant("x", instance_type="g5.2xlarge")])
    problems = endpoint_problems(props)
    assert problems[0].startswith("endpoint_name = 'a_b' -- ")
    assert "variant 'x': initial_weight = 0 -- allowed: > 0" in problems
    assert "variant 'x': name = 'x' -- variant names must be unique in the endpoint" in problems
    assert "variant 'x': instance_type = 'g5.2xlarge' -- allowed: an ml.* SageMaker instance type" in problems


def test_an_official_image_in_a_stack_without_region_names_path_image_and_fix() -> None:
    app = cdk.App()
    stack = cdk.Stack(app, "Test")
    with pytest.raises(ValueError, match=r"Test/Chat: image = 'vllm 0\.27\.1' -- an official image is resolved per "
                                         r"region at synth; give the stack an explicit region"):
        InferenceEndpoint(stack, "Chat", InferenceEndpointProps(variants=[
            variant(model=ModelSpec(ServingImage.official("vllm", "0.27.1"), model_data="s3://models-bucket/v1/"))]))
