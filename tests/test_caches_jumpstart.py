"""A JumpStart-sourced cached model: its cdk.json entry, its props, its JumpStartModel, its IAM, its cold start."""

from __future__ import annotations

import fnmatch
import json
from typing import Any

import aws_cdk as cdk
import pytest
import test_caches_manifests
from aws_cdk.assertions import Template
from rich.console import Console
from test_cached_models import build, llama
from test_caches_config import default_groups, environment, model, problems
from test_caches_manifests import crd_errors, objects_of

from hyperwarm.caches import (
    CachedModelSpec,
    CachesChart,
    CachesChartProps,
    ColdStart,
    HyperPodAutoscaling,
    JumpStartModelSource,
    KvCache,
    LoadBalancer,
    Metrics,
    Probes,
    PropsError,
    RequestLimits,
    Tls,
    WorkerResources,
    cache_objects,
    gigabytes,
)
from hyperwarm.caches.autoscaling import CloudWatchTrigger
from hyperwarm.caches.jumpstart import gated_download_role, hub_content_arns
from hyperwarm.cluster.rules import operator_pin_problem
from hyperwarm.functions.cache_refresh.targets.hyperpod import served_version
from hyperwarm.serving.settings import Serving
from stacks.config.environment import parse_environment
from stacks.plan import plan, render

crd_schemas = test_caches_manifests.crd_schemas  # the fixture
MODEL_ID, VERSION = "deepseek-llm-r1-distill-qwen-1-5b", "2.0.4"
GROUP_TYPES = {"inference": "ml.g5.xlarge", "system": "ml.c5.4xlarge"}
ROLE_ARN = "arn:aws:iam::123456789012:role/js-gated"


def deepseek(**overrides: Any) -> CachedModelSpec:
    return CachedModelSpec(**{"name": "deepseek", "source": JumpStartModelSource(MODEL_ID, VERSION),
                               "size": gigabytes(3.6), "instance_group": "inference", **overrides})


def js_entry(**overrides: Any) -> dict[str, Any]:
    entry = {"name": "deepseek", "size_gb": 3.6, "instance_group": "inference",
             "source": {"model_id": MODEL_ID, "model_version": VERSION}}
    entry.update(overrides)
    return entry


def rendered(*models: CachedModelSpec, gated_role: str | None = None) -> dict[str, Any]:
    (obj,) = [o for o in cache_objects(CachesChartProps(models, region="us-west-2", cluster_name="c",
                                                        instance_types=GROUP_TYPES, jumpstart_gated_role_arn=gated_role))
              if o["kind"] == "JumpStartModel"]
    return obj


# --- cdk.json -------------------------------------------------------------------------------------------------------


def test_a_jumpstart_entry_needs_no_image_and_becomes_its_source() -> None:
    (props,) = parse_environment("dev", environment(js_entry())).caches.models
    assert props.source == JumpStartModelSource(MODEL_ID, VERSION) and props.image is None


@pytest.mark.parametrize("source, field, value", [
    ({"model_id": MODEL_ID, "model_version": "2.0"}, "model_version", "'2.0'"),
    ({"model_id": "-bad-id", "model_version": VERSION}, "model_id", "'-bad-id'"),
    ({"model_id": MODEL_ID, "model_version": VERSION, "hub_name": "no_underscores"}, "hub_name", "'no_underscores'"),
])
def test_a_bad_id_version_or_hub_fails_naming_the_field(source, field, value) -> None:
    message = problems(environment(js_entry(source=source)))
    assert f"environments.dev.caches.models[0].source.{field}: {value}" in message
    assert message.count("\n  ") == 1  # one problem, one line


def test_a_gated_model_without_its_licence_accepted_fails_naming_accept_eula() -> None:
    message = problems(environment(js_entry(source={"model_id": MODEL_ID, "model_version": VERSION, "gated": True})))
    assert "environments.dev.caches.models[0].source.accept_eula: False -- JumpStart model" in message
    assert message.count("\n  ") == 1


@pytest.mark.parametrize("overrides, field", [
    ({"image": model()["image"]}, "image"),
    ({"resources": {"gpus": 1, "cpu": "2", "memory": "12Gi"}}, "resources"),
    ({"port": 9000}, "port"),
    ({"prepull": "daemonset"}, "prepull"),
    ({"weights_cache": "node"}, "weights_cache"),
])
def test_what_a_jumpstartmodel_cannot_take_fails_naming_the_field(overrides, field) -> None:
    message = problems(environment(js_entry(**overrides)))
    assert f"environments.dev.caches.models[0].{field}: " in message
    assert message.count("\n  ") == 1


def test_an_s3_model_still_needs_its_image() -> None:
    entry = model()
    del entry["image"]
    assert "environments.dev.caches.models[0].image: None -- a s3 source is served by the image you give" \
        in problems(environment(entry))


def test_a_group_sharing_its_instance_type_with_another_is_refused() -> None:
    raw = environment(js_entry())
    raw["instance_groups"] = [*default_groups(), {"name": "batch", "instance_type": "ml.g5.xlarge"}]
    assert ("caches.models[0].instance_group: 'inference' -- a JumpStartModel is placed by server.instanceType alone"
            in problems(raw))


def test_project_dev_serves_a_jumpstart_model(project_context) -> None:
    config = parse_environment("dev", project_context["environments"]["dev"])
    (js,) = [m for m in config.caches.models if isinstance(m.source, JumpStartModelSource)]
    assert (js.source.model_id, js.source.model_version, js.instance_group) == (MODEL_ID, VERSION, "inference")


# --- library props ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("overrides, field", [
    ({"image": "public.ecr.aws/x/server:1.0"}, "image"),
    ({"resources": WorkerResources(gpus=1, cpu="2")}, "resources"),
    ({"probes": Probes()}, "probes"),
    ({"request_limits": RequestLimits(8)}, "request_limits"),
    ({"serving": Serving(args=("--max-model-len", "4096"))}, "serving"),
    ({"port": 9000}, "port"),
    ({"prepull": "both"}, "prepull"),
])
def test_props_refuse_what_a_jumpstartmodel_cannot_take(overrides, field) -> None:
    with pytest.raises(PropsError) as error:
        deepseek(**overrides)
    assert str(error.value).count("\n  ") == 1 and f"\n  {field} = " in str(error.value)


def test_gpus_are_not_checked_against_the_group_for_a_jumpstart_model() -> None:
    # Its hub content sizes the pod; the ml.g5.xlarge group's one GPU is not compared with a resources default.
    assert build(deepseek()).objects[-1]["kind"] == "JumpStartModel"


# --- the JumpStartModel --------------------------------------------------------------------------------------------


def test_the_jumpstartmodel_names_the_hub_content_and_the_groups_instance_type() -> None:
    spec = rendered(deepseek())["spec"]
    assert spec["model"] == {"modelHubName": "SageMakerPublicHub", "modelId": MODEL_ID, "modelVersion": VERSION,
                             "acceptEula": False}
    assert spec["server"] == {"instanceType": "ml.g5.xlarge"}
    assert spec["modelCacheConfig"] == {"weightsCache": {"enabled": True, "hostPath": "/opt/dlami/nvme"},
                                        "imageCache": {"enabled": True}}


def test_every_option_validates_against_the_crd_with_unknown_fields_rejected(crd_schemas) -> None:
    full = deepseek(replicas=2, routing="kvaware", serving=Serving(environment={"OPTION_MAX_MODEL_LEN": "4096"}),
                    weights_cache="off", image_cache=False, kv_cache=KvCache(),
                    autoscaling=HyperPodAutoscaling(3, CloudWatchTrigger("AWS/SageMaker", "Invocations", 10)),
                    metrics=Metrics(), load_balancer=LoadBalancer(), size=gigabytes(400),
                    tls=Tls(certificate_output_s3_uri="s3://my-tls/certs/"),
                    source=JumpStartModelSource(MODEL_ID, VERSION, accept_eula=True, gated=True))
    obj = rendered(full, gated_role=ROLE_ARN)
    assert crd_errors(obj, crd_schemas) == []
    spec = obj["spec"]
    assert spec["model"]["gatedModelDownloadRole"] == ROLE_ARN and spec["model"]["acceptEula"] is True
    assert spec["modelCacheConfig"]["weightsCache"]["enabled"] is False and spec["replicas"] == 2
    assert spec["environmentVariables"] == [{"name": "OPTION_MAX_MODEL_LEN", "value": "4096"}]
    assert spec["maxDeployTimeInSeconds"] > 3600  # 400 GB at S3's rate: the operator must not give up first
    assert {"autoScalingSpec", "intelligentRoutingSpec", "kvCacheSpec", "metrics", "loadBalancer", "tlsConfig"} <= set(spec)
    # The chart binds it to the types generated from the CRD (an unknown field would fail here).
    chart = CachesChart(__import__("cdk8s").App(), "c", CachesChartProps(
        [full], region="us-west-2", cluster_name="c", instance_types=GROUP_TYPES, jumpstart_gated_role_arn=ROLE_ARN))
    assert chart.to_json()[-1]["spec"]["model"]["modelVersion"] == VERSION


def test_project_dev_jumpstartmodel_validates(crd_schemas, project_context) -> None:
    (obj,) = [o for o in objects_of(project_context["environments"]["dev"]) if o["kind"] == "JumpStartModel"]
    assert crd_errors(obj, crd_schemas) == []
    assert obj["spec"]["server"]["instanceType"] == "ml.g5.xlarge"


def test_the_refresh_reads_and_patches_the_version_where_it_is_rendered() -> None:
    # targets/hyperpod.py reads spec.model.modelVersion and patches {"model": {"modelVersion": ...}}.
    assert served_version("JumpStartModel", rendered(deepseek()), "ignored", frozenset()) == VERSION


def test_a_missing_instance_type_fails_naming_the_group() -> None:
    with pytest.raises(ValueError, match="instance_types has no type for its instance group 'inference'"):
        cache_objects(CachesChartProps([deepseek()], region="us-west-2", cluster_name="c"))


def test_the_operator_pin_covers_the_jumpstartmodel_cache_fields() -> None:
    obj = rendered(deepseek())
    problem = operator_pin_problem("v1.0.0-eksbuild.1", [obj])
    assert problem is not None and "JumpStartModel.spec.modelCacheConfig needs operator 3.3" in problem
    assert operator_pin_problem("v2.0.0-eksbuild.1", [obj]) is None


def test_caches_on_an_operator_predating_jumpstart_caches_fail_synth() -> None:
    from hyperwarm.caches import OperatorBuildError

    with pytest.raises(OperatorBuildError, match="JumpStartModel.spec.modelCacheConfig"):
        build(deepseek(), operator_build="v1.0.0-eksbuild.1")


# --- IAM ----------------------------------------------------------------------------------------------------------


def _policies(caches: Any) -> dict[str, Any]:
    template = Template.from_stack(cdk.Stack.of(caches)).to_json()
    return {k: v["Properties"]["PolicyDocument"]["Statement"] for k, v in template["Resources"].items()
            if v["Type"] == "AWS::IAM::Policy"}


def test_the_model_readers_read_the_regions_jumpstart_bucket_and_nothing_else() -> None:
    policies = _policies(build(deepseek()))
    assert sorted(policies) == ["HyperPodCsiRolePolicy1745C741", "HyperPodOperatorRolePolicyD85F7AAA"]
    for statements in policies.values():
        (statement,) = statements
        assert statement["Action"] == ["s3:GetObject", "s3:ListBucket"]
        assert [json.dumps(r) for r in statement["Resource"]] == [json.dumps(
            {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":s3:::jumpstart-cache-prod-us-west-2{tail}"]]})
            for tail in ("", "/*")]


def test_s3_models_get_no_jumpstart_read() -> None:
    assert "jumpstart" not in json.dumps(_policies(build(llama())))


def test_a_gated_model_downloads_with_a_role_scoped_to_its_hub_content() -> None:
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(account="123456789012", region="us-west-2"))
    role = gated_download_role(stack, "Gated", issuer_url="https://oidc.eks.us-west-2.amazonaws.com/id/ABC",
                               namespace="models", sources=[JumpStartModelSource(MODEL_ID, VERSION, True, True)])
    template = Template.from_stack(stack).to_json()["Resources"]
    (policy,) = [v for v in template.values() if v["Type"] == "AWS::IAM::Policy"]
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "sagemaker:CreateHubContentPresignedUrls"
    assert [r["Fn::Join"][1][2] for r in statement["Resource"]] == [
        ":sagemaker:us-west-2:*:hub-content/SageMakerPublicHub/Model/deepseek-llm-r1-distill-qwen-1-5b/*",
        ":sagemaker:us-west-2:*:hub/SageMakerPublicHub"]
    assert statement["Condition"] == {"StringEquals": {"aws:ResourceAccount": "${aws:PrincipalAccount}"}}
    subject = json.dumps([v for v in template.values() if v["Type"] == "Custom::AWSCDKCfnJson"])
    assert "system:serviceaccount:models:hyperpod-inference-service-account*" in subject
    trust = json.dumps(template[stack.get_logical_id(role.node.default_child)]["Properties"])
    assert "StringLike" in trust and "sagemaker.amazonaws.com" in trust
    assert hub_content_arns(JumpStartModelSource(MODEL_ID, VERSION), "aws", "us-west-2")[1].endswith(
        f"/Model/{MODEL_ID}/*")


GATED_MODEL_ACCESS = {
    "Sid": "CreatePresignedUrlAccess", "Effect": "Allow", "Action": ["sagemaker:CreateHubContentPresignedUrls"],
    "Resource": ["arn:aws:sagemaker:*:*:hub/SageMakerPublicHub",
                 "arn:aws:sagemaker:*:*:hub-content/SageMakerPublicHub/*/*"],
    "Condition": {"StringEquals": {"aws:ResourceAccount": "${aws:PrincipalAccount}"}}}
"""AWS's AmazonSageMakerHyperPodGatedModelAccess, v3 (default since 2026-02-12), as the AWS Managed Policy Reference
Guide prints it (https://docs.aws.amazon.com/aws-managed-policy/latest/reference/
AmazonSageMakerHyperPodGatedModelAccess.html)."""


def test_the_gated_role_is_aws_gated_model_access_narrowed_to_the_model_and_nothing_else() -> None:
    """Same statement as AWS's (action, effect, the aws:ResourceAccount condition exactly as AWS writes it), on a
    subset of its resources: what AWS grants every gated download, for one model."""
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(account="123456789012", region="us-west-2"))
    gated_download_role(stack, "Gated", issuer_url="https://oidc.eks.us-west-2.amazonaws.com/id/ABC",
                        namespace="models", sources=[JumpStartModelSource(MODEL_ID, VERSION, True, True)])
    (policy,) = Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
    (statement,) = stack.resolve(policy["Properties"]["PolicyDocument"]["Statement"])
    assert {k: statement[k] for k in ("Sid", "Effect", "Condition")} == {
        k: GATED_MODEL_ACCESS[k] for k in ("Sid", "Effect", "Condition")}
    assert [statement["Action"]] == GATED_MODEL_ACCESS["Action"]
    resources = ["".join(part if isinstance(part, str) else "aws" for part in r["Fn::Join"][1])
                 for r in statement["Resource"]]
    assert resources and all(any(fnmatch.fnmatchcase(r, aws) for aws in GATED_MODEL_ACCESS["Resource"])
                             for r in resources), resources
    assert "SageMakerPublicHub/Model/" + MODEL_ID in resources[0]  # narrowed to the one model


def test_a_gated_model_on_a_cluster_without_its_oidc_issuer_fails_synth() -> None:
    with pytest.raises(ValueError, match="gated JumpStart models .* does not give its issuer URL"):
        build(deepseek(source=JumpStartModelSource(MODEL_ID, VERSION, accept_eula=True, gated=True)))


# --- cold start ----------------------------------------------------------------------------------------------------


def test_a_jumpstart_model_downloads_at_s3s_rate_and_the_planner_says_so(project_context) -> None:
    cold_start = ColdStart(bandwidth_gbps=2.0)
    assert cold_start.rate_gbps(deepseek()) == 2.0
    assert cold_start.download_s(deepseek()) == pytest.approx(3.6 * 8 / 2.0)
    config = parse_environment("dev", project_context["environments"]["dev"])
    console = Console(record=True, width=400)
    render("dev", plan(config, cold_start), cold_start, console)
    assert ("deepseek-r1-qwen-1-5b: weights from JumpStart (its bucket's S3 objects, at S3's rate) at 2 Gbit/s per "
            "node") in console.export_text()
