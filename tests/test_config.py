"""Every configuration rule fails with one message naming environment, field path, value and what is allowed."""

from __future__ import annotations

import pytest

from stacks.config import ConfigError, EnvironmentConfig, parse_environment, parse_environments
from stacks.config.regional import pull_registry_accounts


def error_of(raw: object, env: str = "prod") -> str:
    with pytest.raises(ConfigError) as info:
        parse_environment(env, raw)
    return str(info.value)


def group(**overrides: object) -> dict:
    return {"name": "gpu", "instance_type": "ml.g5.12xlarge", **overrides}


def test_empty_environment_is_the_small_dev_default() -> None:
    config = parse_environment("dev", {})
    assert [(g.name, g.instance_type, g.holds_caches) for g in config.instance_groups] == [
        ("system", "ml.c5.4xlarge", False), ("inference", "ml.g5.xlarge", True)]
    assert config.region == "us-west-2" and config.kubernetes_version == "1.33"


def test_missing_environments_context_is_an_error_not_a_built_in_default() -> None:
    with pytest.raises(ConfigError, match=r"environments: missing -- cdk.json's context needs an \"environments\""):
        parse_environments(None)


def test_null_environment_is_an_error_not_silently_dropped() -> None:
    with pytest.raises(ConfigError, match=r"environments\.dev: None -- must be an object"):
        parse_environments({"dev": None, "prod": {}})


def test_availability_zones_of_another_region_are_rejected() -> None:
    message = error_of({"region": "us-east-1", "vpc": {"availability_zones": ["us-west-2a", "us-east-1b"]}})
    assert ("vpc.availability_zones us-west-2a are not zones of the environment's region us-east-1; "
            "use zones such as us-east-1a, us-east-1b") in message


def test_pattern_errors_say_in_words_what_is_allowed() -> None:
    message = error_of({"account": "12345"})
    assert "environments.prod.account: '12345' -- must be a 12-digit AWS account id, e.g. 123456789012" in message
    assert "^" not in message and "pattern" not in message


def test_every_pattern_in_the_configuration_is_described_in_words() -> None:
    from stacks.config.strict import pattern_in_words

    def patterns(node: object) -> set[str]:
        if isinstance(node, dict):
            own = {node["pattern"]} if isinstance(node.get("pattern"), str) else set()
            return own.union(*(patterns(v) for v in node.values()))
        if isinstance(node, list):
            return set().union(*(patterns(v) for v in node))
        return set()

    found = patterns(EnvironmentConfig.model_json_schema())
    assert len(found) > 10
    assert sorted(p for p in found if pattern_in_words(p).startswith("must match")) == []


def test_a_rule_over_an_object_names_the_place_not_the_whole_object() -> None:
    endpoint = {"name": "chat", "variants": [{"name": "a", "image": {"framework": "vllm", "version": "0.27.1"},
                                              "instance_type": "ml.g5.2xlarge"}]}
    message = error_of({"endpoints": [endpoint, endpoint]})
    assert "environments.prod.endpoints: endpoint names must be unique; repeated: chat" in message
    assert "{" not in message


@pytest.mark.parametrize("routing", [
    {"strategy": "KV_AWARE"},
    {"strategy": "PREFIX_AWARE", "prefix_length": 4096, "concurrency_threshold": 8},
], ids=lambda r: r["strategy"])
def test_a_one_instance_cache_aware_variant_gets_one_error_only(routing: dict) -> None:
    variant = {"name": "a", "image": {"framework": "vllm", "version": "0.27.1"}, "instance_type": "ml.g5.2xlarge",
               "routing": routing}
    lines = error_of({"endpoints": [{"name": "chat", "variants": [variant]}]}).splitlines()[1:]
    assert len(lines) == 1 and f"{routing['strategy']} only routes between two or more" in lines[0]


VARIANT = {"name": "a", "image": {"framework": "vllm", "version": "0.27.1"}, "instance_type": "ml.g5.2xlarge"}


@pytest.mark.parametrize("raw, expected", [
    ({"account": "12345"}, "account: '12345' -- must be a 12-digit AWS account id, e.g. 123456789012"),
    ({"region": "mars"}, "region: 'mars' -- must be an AWS region name, e.g. us-west-2"),
    ({"model_buckets": [{"name": "My_Bucket"}]},
     "model_buckets[0].name: 'My_Bucket' -- must be an S3 bucket name: 3..63 lower-case letters, digits, dots or "
     "hyphens, e.g. my-models"),
    ({"endpoints": [{"name": "chat", "variants": [{**VARIANT, "model_data": "my-bucket/model"}]}]},
     "model_data: 'my-bucket/model' -- must be an S3 URI of an object or prefix, e.g. s3://my-models/"),
    ({"caches": {"models": [{"name": "qwen", "size_gb": 10, "instance_group": "inference",
                             "image": "763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm",
                             "source": {"bucket": "my-models", "prefix": "qwen", "version": "v1"}}]},
      "model_buckets": [{"name": "my-models"}]},
     "image: '763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm' -- must be an image with a tag or digest "
     "(untagged images are not allowed), e.g. 763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:"),
], ids=["account", "region", "bucket", "s3-uri", "untagged-image"])
def test_each_pattern_error_says_in_words_what_is_allowed_with_an_example(raw: dict, expected: str) -> None:
    message = error_of(raw)
    assert expected in message
    assert "^" not in message and "pattern" not in message.lower()


def test_unknown_key_is_rejected_with_its_path() -> None:
    message = error_of({"instance_groups": [group(colour="blue")]})
    assert "environments.prod.instance_groups[0].colour: 'blue' -- unknown key" in message


def test_wrong_type_is_rejected() -> None:
    message = error_of({"instance_groups": [group(instance_count="3")]})
    assert "environments.prod.instance_groups[0].instance_count: '3'" in message
    assert "valid integer" in message


def test_unknown_instance_type_lists_allowed_types() -> None:
    message = error_of({"instance_groups": [group(instance_type="ml.x9.huge")]})
    assert "environments.prod.instance_groups[0].instance_type: 'ml.x9.huge'" in message
    assert "ml.p5.48xlarge" in message and "ml.g6e.xlarge" in message


def test_out_of_range_ebs_volume_names_the_bound() -> None:
    message = error_of({"instance_groups": [group(ebs_volume_gb=20000)]})
    assert "instance_groups[0].ebs_volume_gb: 20000 -- Input should be less than or equal to 16384" in message


def test_threads_per_core_allows_only_one_or_two() -> None:
    assert "instance_groups[0].threads_per_core: 4 -- Input should be 1 or 2" in error_of(
        {"instance_groups": [group(threads_per_core=4)]})


def test_cache_group_without_nvme_names_group_and_type() -> None:
    message = error_of({"instance_groups": [group(name="system", instance_type="ml.m5.2xlarge", holds_caches=True)]})
    assert "instance group 'system' holds caches but ml.m5.2xlarge has no local NVMe" in message


def test_taints_with_deep_health_checks_are_rejected() -> None:
    message = error_of({"instance_groups": [group(
        deep_health_checks=["InstanceStress"], taints=[{"key": "a", "effect": "NoSchedule"}])]})
    assert "custom taints are not allowed while deep health checks are on" in message


def test_unknown_deep_health_check_lists_allowed() -> None:
    message = error_of({"instance_groups": [group(deep_health_checks=["Burn"])]})
    assert "deep_health_checks[0]: 'Burn' -- Input should be 'InstanceStress' or 'InstanceConnectivity'" in message


def test_duplicate_group_names_are_rejected() -> None:
    message = error_of({"instance_groups": [group(), group()]})
    # A rule across fields names the environment, not the whole environment object as a value.
    assert "environments.prod: instance group names must be unique; repeated: gpu" in message


def test_bad_group_name_is_rejected() -> None:
    assert "instance_groups[0].name: 'GPU_1'" in error_of({"instance_groups": [group(name="GPU_1")]})


def test_unsupported_kubernetes_version_lists_allowed() -> None:
    message = error_of({"kubernetes_version": "1.29"})
    assert "environments.prod.kubernetes_version: '1.29'" in message and "'1.35'" in message


def test_existing_vpc_needs_private_subnets() -> None:
    assert "an existing vpc_id needs private_subnet_ids" in error_of({"vpc": {"vpc_id": "vpc-0123456789abcdef0"}})


def test_bad_account_is_rejected() -> None:
    assert "environments.prod.account: '12345'" in error_of({"account": "12345"})


def test_every_problem_is_reported_at_once() -> None:
    message = error_of({"region": "mars", "instance_groups": [group(instance_count=-1)]})
    assert "region: 'mars'" in message and "instance_count: -1" in message


def test_environment_must_be_an_object() -> None:
    assert "environments.prod: [] -- must be an object" in error_of([])


def test_bad_environment_name_is_rejected() -> None:
    assert "environments.Prod_1:" in error_of({}, env="Prod_1")


def test_config_is_immutable() -> None:
    config = EnvironmentConfig()
    with pytest.raises((ValueError, AttributeError)):  # pydantic's frozen error is a ValueError
        config.region = "eu-west-1"  # type: ignore[misc]


# -- model buckets, AZ names, add-on versions --------------------------------------------------


def cached(bucket: str) -> dict:
    return {"instance_groups": [group(holds_caches=True)], "caches": {"models": [
        {"name": "m", "size_gb": 10, "image": "r.example/vllm:1", "instance_group": "gpu",
         "source": {"bucket": bucket, "prefix": "m", "version": "v1"}, "serving": {"framework": "vllm"}}]}}


def test_a_bucket_models_read_must_be_declared_created_or_existing() -> None:
    message = error_of(cached("team-models"))
    assert "caches.models[0].source.bucket: 'team-models' -- not declared in model_buckets" in message
    assert '{"name": "team-models", "create": true}' in message
    for declared in ({"name": "team-models"}, {"name": "team-models", "create": True}):
        config = parse_environment("qa", {**cached("team-models"), "model_buckets": [declared]})
        assert config.bucket_readers() == {"team-models": ["caches.models[0].source.bucket"]}


def test_refresh_create_bucket_points_to_model_buckets() -> None:
    message = error_of({"refresh": {"bucket": "team-models", "create_bucket": True}})
    assert 'refresh.create_bucket moved to model_buckets: declare {"name": "team-models", "create": true}' in message


def test_az_ids_are_rejected_with_how_to_find_the_zone_name() -> None:
    message = error_of({"vpc": {"availability_zones": ["use1-az4", "us-east-1b"]}})
    assert "environments.prod.vpc.availability_zones" in message
    assert "use1-az4 is an AZ ID; give zone names" in message
    assert "aws ec2 describe-availability-zones --zone-ids use1-az4" in message


def test_an_operator_pin_that_is_no_add_on_build_is_rejected() -> None:
    # "v3.3" names an operator release, not an add-on build: CreateAddon would fail deep into the cluster stack.
    message = error_of({"addon_versions": {"amazon-sagemaker-hyperpod-inference": "v3.3"}})
    assert "environments.prod.addon_versions: ['amazon-sagemaker-hyperpod-inference'] = 'v3.3' -- allowed: an EKS " \
           "add-on build such as v2.0.0-eksbuild.1" in message
    assert parse_environment("qa", {"addon_versions": {"amazon-sagemaker-hyperpod-inference": "v1.0.0-eksbuild.1"}})


def test_a_project_environment_with_caches_and_no_operator_pin_fails_synth(project_context) -> None:
    from stacks.app import build_app

    del project_context["environments"]["prod"]["addon_versions"]
    with pytest.raises(ConfigError) as info:
        build_app(context={**project_context, "env": "prod"}, nag=False)
    assert ("environments.prod.addon_versions['amazon-sagemaker-hyperpod-inference']: None -- no build is pinned, "
            "so EKS installs its default build, which may be older, and InferenceEndpointConfig.spec.modelCacheConfig "
            "needs operator 3.3 or later") in str(info.value)


def test_explicit_cuda_13_image_without_a_fitting_ami_is_rejected_in_config() -> None:
    variant = {"name": "v", "instance_type": "ml.g6e.2xlarge",
               "image": {"uri": "123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm:0.27.1-gpu-py312-cu130-ubuntu22.04"},
               "serving": {"framework": "vllm", "environment": {"SM_VLLM_MODEL": "meta-llama/Llama-3.1-8B-Instruct"}}}
    message = error_of({"endpoints": [{"name": "chat", "variants": [variant]}]})
    assert "environments.prod.endpoints[0].variants[0]" in message
    assert "inference_ami_version = None -- the image" in message and "needs CUDA 13.0" in message
    ok = {**variant, "inference_ami_version": "al2023-ami-sagemaker-inference-gpu-4-1"}
    assert parse_environment("qa", {"endpoints": [{"name": "chat", "variants": [ok]}],
                                    "observability": {"otel_enrichment": "existing"}}).endpoints[0].variants[0]


def test_an_environment_with_nothing_to_deploy_is_rejected() -> None:
    assert "environments.prod: nothing to deploy: give instance_groups" in error_of({"instance_groups": []})


def test_a_cluster_region_without_hyperpod_is_rejected_at_config_time() -> None:
    message = error_of({"region": "ap-northeast-3"})
    assert "region ap-northeast-3: the HyperPod cluster needs a region where HyperPod's health monitoring agent" in message
    assert "us-west-2" in message


def test_an_endpoint_region_without_sagemaker_is_rejected_at_config_time() -> None:
    variant = {"name": "a", "image": {"framework": "vllm", "version": "0.27.1"}, "instance_type": "ml.g5.2xlarge"}
    message = error_of({"region": "us-moon-1", "endpoints": [{"name": "chat", "variants": [variant]}]})
    assert "region us-moon-1: SageMaker endpoints are not offered there" in message and "ca-central-1" in message


def test_a_refreshed_target_whose_version_the_refresh_function_cannot_order_is_rejected(project_context) -> None:
    prod = project_context["environments"]["prod"]
    prod["caches"]["models"][0]["source"]["version"] = "latest"
    message = error_of(prod)
    assert "cached model 'llama-3-1-70b' serves version 'latest', which the refresh function cannot order" in message


@pytest.mark.parametrize("guardrails, expected", [
    ({"traffic": "CANARY", "percent": 60}, "guardrails.percent: 60 -- Input should be less than or equal to 50"),
    ({"traffic": "LINEAR", "percent": 5}, "guardrails.percent: 5 -- LINEAR allowed: 10..50"),
    ({"traffic": "CANARY"}, "guardrails.percent: None -- a percent is needed: CANARY allowed: 1..50"),
    ({"percent": 5}, "guardrails.percent: 5 -- only CANARY and LINEAR take a percent, not ALL_AT_ONCE"),
    ({"wait": 3601}, "guardrails.wait: 3601 -- Input should be less than or equal to 3600"),
])
def test_guardrails_follow_sagemakers_traffic_shift_limits(guardrails: dict, expected: str) -> None:
    endpoint = {"name": "chat", "guardrails": guardrails, "variants": [{**VARIANT, "instance_count": 2}]}
    assert expected in error_of({"endpoints": [endpoint]})


def test_every_guardrail_problem_is_reported_at_once() -> None:
    endpoint = {"name": "chat", "guardrails": {"traffic": "LINEAR", "percent": 5, "wait": -1},
                "variants": [{**VARIANT, "instance_count": 2}]}
    message = error_of({"endpoints": [endpoint]})
    assert "guardrails.percent: 5 -- LINEAR allowed: 10..50" in message
    assert "guardrails.wait: -1 -- Input should be greater than or equal to 0" in message


@pytest.mark.parametrize("traffic, percent", [(t, p) for t in ("CANARY", "LINEAR") for p in (0, 1, 5, 9, 10, 50, 51)])
def test_config_endpoint_and_refresh_accept_the_same_traffic_shifts(traffic: str, percent: int) -> None:
    # one rule, SageMaker's (contract.shift_percent_problem), behind all three layers
    import aws_cdk as cdk

    from hyperwarm.endpoints.props import DeploymentGuardrails, TrafficShift
    from hyperwarm.endpoints.rules import guardrail_problems
    from hyperwarm.functions.cache_refresh import contract

    endpoint = {"name": "chat", "guardrails": {"traffic": traffic, "percent": percent},
                "variants": [{**VARIANT, "instance_count": 2}]}
    try:
        parse_environment("prod", {"endpoints": [endpoint], "observability": {"otel_enrichment": "existing"}})
        config_ok = True
    except ConfigError as error:
        config_ok = "guardrails" not in str(error)
    construct_ok = not [p for p in guardrail_problems(
        DeploymentGuardrails(traffic=TrafficShift(traffic, percent, cdk.Duration.minutes(5))), "chat")
        if "percent" in p]
    refresh_ok = not [p for p in contract.blue_green_problems(contract.BlueGreen(traffic=traffic, step_percent=percent))
                      if p[0] == "step_percent"]
    assert config_ok == construct_ok == refresh_ok == (contract.shift_percent_problem(traffic, percent) is None)
    assert refresh_ok == ((1 if traffic == "CANARY" else 10) <= percent <= 50)


# -- what the region offers ---------------------------------------------------------------------------

_G6E = {"region": "ca-central-1", "instance_groups": [
    {"name": "system", "instance_type": "ml.c5.4xlarge"},
    {"name": "gpu", "instance_type": "ml.g6e.48xlarge", "threads_per_core": 2}]}


def test_an_instance_type_the_region_lacks_is_one_message_naming_the_field() -> None:
    """Before aws-cdk-lib's template validation stops synth with a report and a traceback."""
    message = error_of(_G6E)
    assert ("environments.prod.instance_groups[1].instance_type: 'ml.g6e.48xlarge' -- not offered for HyperPod "
            "clusters in ca-central-1") in message
    assert "ml.g5.12xlarge" in message  # what the region does offer
    parse_environment("qa", {**_G6E, "region": "us-east-1"})


def _variant(**overrides: object) -> dict:
    return {"name": "main", "image": {"uri": "123456789012.dkr.ecr.af-south-1.amazonaws.com/srv:1"},
            "model_data": "s3://my-models/m/v1/", "instance_type": "ml.g5.xlarge",
            "serving": {"framework": "vllm"}, **overrides}


def _with_bucket(raw: dict) -> dict:
    return {**raw, "model_buckets": [{"name": "my-models"}]}


def test_an_endpoint_instance_type_the_region_lacks_is_rejected() -> None:
    raw = {"region": "af-south-1", "endpoints": [{"name": "chat", "variants": [_variant(instance_type="ml.p5.48xlarge")]}]}
    assert "environments.prod.endpoints[0].variants[0].instance_type: 'ml.p5.48xlarge' -- not offered for " \
           "SageMaker endpoints in af-south-1" in error_of(_with_bucket(raw))


def test_an_image_from_another_region_is_rejected_for_caches_and_endpoints() -> None:
    image = "763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:0.27.1-gpu-py312-cu130-ubuntu22.04-sagemaker"
    raw = cached("my-models")
    raw["caches"]["models"][0]["image"] = image
    message = error_of(_with_bucket({"region": "us-east-1", **raw}))
    assert (f"environments.prod.caches.models[0].image: {image!r} -- an ECR image in us-west-2, while the "
            "environment runs in us-east-1") in message and "use the us-east-1 URI" in message
    variant = _variant(image={"uri": image.replace("763104351884", "123456789012")},
                       inference_ami_version="al2023-ami-sagemaker-inference-gpu-4-1")
    message = error_of(_with_bucket({"region": "us-east-1", "endpoints": [{"name": "chat", "variants": [variant]}]}))
    assert "environments.prod.endpoints[0].variants[0].image.uri: " in message and "in us-west-2" in message


# -- who administers the cluster ----------------------------------------------------------------------

def test_production_names_its_cluster_admins() -> None:
    message = error_of({"production": True}, env="qa")
    assert "environments.qa.cluster_admins: [] -- a production environment names the IAM roles or users" in message
    assert "environments.prod.cluster_admins: []" in error_of({})  # an environment named prod is production
    parse_environment("prod", {"cluster_admins": ["arn:aws:iam::123456789012:role/admins"],
                               "alarms": {"emails": ["oncall@acme-corp.io"]}})
    parse_environment("prod", {"production": False})  # said not to be
    parse_environment("dev", {})  # elsewhere the deploying identity (CDK's deploy role), as synth's summary says
    assert "an IAM role or user ARN, e.g. arn:aws:iam::123456789012:role/platform-admins" in error_of(
        {"cluster_admins": ["admins"]})


def test_the_nodes_may_pull_from_the_accounts_of_the_cached_images_and_those_named() -> None:
    raw = cached("my-models")
    raw["caches"]["models"][0]["image"] = "444455556666.dkr.ecr.us-west-2.amazonaws.com/srv:1"
    config = parse_environment("dev", {**raw, "model_buckets": [{"name": "my-models"}],
                                       "image_registry_accounts": ["777788889999"]})
    assert pull_registry_accounts(config.caches.models, config.image_registry_accounts) == ("444455556666",
                                                                                     "777788889999")


def test_a_bucket_key_is_for_existing_buckets_and_is_a_kms_key_arn() -> None:
    key = "arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    assert "kms_key_arn is for existing buckets" in error_of(
        {"model_buckets": [{"name": "my-models", "create": True, "kms_key_arn": key}]})
    assert "must be a KMS key ARN" in error_of({"model_buckets": [{"name": "my-models", "kms_key_arn": "alias/x"}]})
    config = parse_environment("dev", {"model_buckets": [{"name": "my-models", "kms_key_arn": key}]})
    assert config.bucket_keys() == {"my-models": key}


def _models(model: type, seen: set[type]) -> set[type]:
    """``model`` and every pydantic model its fields nest."""
    import typing

    import pydantic

    if model in seen:
        return seen
    seen.add(model)
    for info in model.model_fields.values():
        stack = [info.annotation]
        while stack:
            hint = stack.pop()
            if isinstance(hint, type) and issubclass(hint, pydantic.BaseModel):
                _models(hint, seen)
            stack.extend(typing.get_args(hint))
    return seen


def test_every_library_rule_a_config_field_carries_is_applied_by_pydantic() -> None:
    """pydantic keeps metadata it does not know (the library's ``Rule``, ``Matches``) and never runs it: a field
    typed with a library alias directly would accept what the library refuses (an invalid ``versions`` regex
    passed until it was declared through ``config_type``)."""
    import typing

    from hyperwarm._internal.constraints import Matches, Rule
    from stacks.config import EnvironmentConfig

    unapplied = []
    for model in _models(EnvironmentConfig, set()):
        for name, info in model.model_fields.items():
            hints = [*info.metadata, *(m for a in typing.get_args(info.annotation) for m in getattr(a, "__metadata__", ()))]
            unapplied += [f"{model.__name__}.{name}" for m in hints if isinstance(m, Rule | Matches)]
    assert unapplied == [], "wrap the library type in stacks.config.library.config_type"
