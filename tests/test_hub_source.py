"""The Hugging Face Hub source: cdk.json, the library's props, the rendered objects against the operator's CRD and
Kubernetes, the token's way from Secrets Manager into the operator's Secret (IAM, RBAC, the sync function), the
egress check, the cold-start rate and the rehearsal rules."""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import boto3
import kubernetes_validate
import pytest
import urllib3
from aws_cdk import aws_ec2 as ec2, aws_eks_v2 as eks, aws_iam as iam
from aws_cdk.assertions import Match, Template
from moto import mock_aws
from stand_ins import ACCOUNT, imported_cluster
from test_cached_models import GROUPS, llama
from test_caches_config import environment, model, problems
from test_caches_manifests import crd_errors, crd_schemas, objects_of  # noqa: F401 (crd_schemas: a fixture)

from hyperwarm import HyperPodEksCluster, InferenceOperator
from hyperwarm.caches import CachedModels, CachedModelSpec, CachedModelsProps, PropsError, gigabytes
from hyperwarm.caches.cold_start import HUB_BANDWIDTH_GBPS, ColdStart
from hyperwarm.caches.hub import RBAC_GROUP, SOURCE_ANNOTATION, HubTokenSync, HubTokenSyncProps, restart_every
from hyperwarm.caches.sources import HuggingFaceModelSource, model_source_config
from hyperwarm.cluster.instance_group import InstanceGroupSpec
from hyperwarm.functions import eks_auth
from hyperwarm.functions.hub_token import handler
from hyperwarm.functions.hub_token.contract import (
    CLUSTER_DIMENSION,
    LEFT_METRIC,
    METRICS_NAMESPACE,
    NAMESPACE_DIMENSION,
    RESTARTED_METRIC,
    STUCK_AFTER_SECONDS,
    TOKEN_KEY,
)
from hyperwarm.serving.settings import MODEL_DIR
from rehearsal import Assembly
from rehearsal.rules.secrets import hub_token, read_scoped
from stacks.config.environment import parse_environment, parse_environments
from stacks.plan import plan, render

sys.path.insert(0, str(Path(__file__).parent / "refresh"))
import fake_kube  # noqa: E402

SHA = "a09a35458c702b33eeacc393d103063234e8bc28"
"""Qwen/Qwen2.5-7B-Instruct's commit (https://huggingface.co/Qwen/Qwen2.5-7B-Instruct/commit/<SHA>), as in staging."""
QWEN = {"repo_id": "Qwen/Qwen2.5-7B-Instruct", "revision": SHA}
LLAMA = {"repo_id": "meta-llama/Llama-3.1-8B-Instruct", "revision": SHA, "gated": True,
         "token_secret": "hyperwarm/hub-token"}
SECRET_ARN = f"arn:aws:secretsmanager:us-west-2:{ACCOUNT}:secret:hyperwarm/hub-token-AbC123"
KEY_ARN = f"arn:aws:kms:us-west-2:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def hub(source: dict[str, Any] | None = None, **overrides: Any) -> dict[str, Any]:
    return model(name="qwen-hub", source=source or QWEN, **overrides)


def one_problem(raw: dict[str, Any]) -> str:
    """The single problem line of a configuration that fails."""
    lines = [line.strip() for line in problems(raw).splitlines()[1:]]
    assert len(lines) == 1, lines
    return lines[0]


# --- cdk.json -----------------------------------------------------------------------------------------------------

def test_a_hub_source_is_told_by_repo_id_and_pins_a_commit() -> None:
    source = parse_environment("dev", environment(hub())).caches.models[0].source
    assert isinstance(source, HuggingFaceModelSource)
    assert (source.version, source.uri, source.token_secret) == (SHA, f"hf://Qwen/Qwen2.5-7B-Instruct@{SHA}", None)


@pytest.mark.parametrize("repo_id", ["Qwen2.5-7B-Instruct", "Qwen/Qwen2.5/7B", "Qwen/Qwen 2.5", "/Qwen2.5"])
def test_a_repo_id_of_the_wrong_shape_fails_naming_the_field(repo_id: str) -> None:
    line = one_problem(environment(hub({**QWEN, "repo_id": repo_id})))
    assert line.startswith(f"environments.dev.caches.models[0].source.repo_id: {repo_id!r} -- ")
    assert "<owner>/<name>" in line


@pytest.mark.parametrize("revision", ["main", "v1.0", SHA[:7], SHA.upper(), SHA + "0"])
def test_a_revision_that_is_not_a_full_commit_sha_fails_saying_a_branch_moves(revision: str) -> None:
    line = one_problem(environment(hub({**QWEN, "revision": revision})))
    assert line.startswith(f"environments.dev.caches.models[0].source.revision: {revision!r} -- ")
    assert "40 lower-case hex digits" in line and "a branch or tag moves" in line


def test_a_gated_repository_without_a_token_secret_fails_naming_token_secret() -> None:
    line = one_problem(environment(hub({**LLAMA, "token_secret": None})))
    assert line.startswith("environments.dev.caches.models[0].source.token_secret: None -- ")
    assert "meta-llama/Llama-3.1-8B-Instruct is gated" in line


def test_a_secret_arn_without_its_suffix_fails() -> None:
    partial = f"arn:aws:secretsmanager:us-west-2:{ACCOUNT}:secret:hyperwarm/hub-token"
    line = one_problem(environment(hub({**LLAMA, "token_secret": partial})))
    assert line.startswith("environments.dev.caches.models[0].source.token_secret: ") and "complete ARN" in line


def test_a_key_without_a_token_secret_fails() -> None:
    line = one_problem(environment(hub({**QWEN, "token_secret_key_arn": KEY_ARN})))
    assert line.startswith("environments.dev.caches.models[0].source.token_secret_key_arn: ")


def test_a_hub_source_cannot_use_the_node_cache() -> None:
    line = one_problem(environment(hub(weights_cache="node")))
    assert "weights_cache" in line and "huggingface source" in line


def test_staging_serves_a_public_hub_model_at_a_pinned_commit(project_context) -> None:
    staging = parse_environments(project_context["environments"])["staging"]
    (model_,) = [m for m in staging.caches.models if isinstance(m.source, HuggingFaceModelSource)]
    assert (model_.source.repo_id, model_.source.revision, model_.source.token_secret) == \
        ("Qwen/Qwen2.5-7B-Instruct", SHA, None)


# --- the library's props and rendering --------------------------------------------------------------------------

def test_the_library_checks_the_source_when_built() -> None:
    with pytest.raises(PropsError) as error:
        HuggingFaceModelSource("meta-llama/Llama-3.1-8B-Instruct", "main", gated=True)
    assert [p.split(" = ")[0] for p in error.value.problems] == ["revision", "token_secret"]


def test_model_source_config_names_the_token_secret_and_its_key() -> None:
    source = HuggingFaceModelSource(**LLAMA)
    assert model_source_config(source, "us-west-2", "llama-hub-token") == {
        "modelSourceType": "huggingface",
        "huggingFaceModel": {"modelId": "meta-llama/Llama-3.1-8B-Instruct", "commitSHA": SHA,
                             "tokenSecretRef": {"name": "llama-hub-token", "key": TOKEN_KEY}}}


def test_a_gated_model_renders_an_empty_token_secret_before_its_deployment(crd_schemas) -> None:  # noqa: F811
    objects = objects_of(environment(hub(LLAMA)))
    kinds = [o["kind"] for o in objects]
    assert kinds == ["Namespace", "Secret", "InferenceEndpointConfig"]
    secret, iec = objects[1], objects[2]
    assert secret["metadata"]["name"] == "qwen-hub-hub-token" and secret["metadata"]["namespace"] == "hyperwarm-models"
    assert "data" not in secret and "stringData" not in secret  # the token is never in a manifest
    assert secret["metadata"]["annotations"] == {SOURCE_ANNOTATION: "hyperwarm/hub-token"}
    kubernetes_validate.validate(secret, "1.30", strict=True)
    assert iec["spec"]["modelSourceConfig"]["huggingFaceModel"] == {
        "modelId": "meta-llama/Llama-3.1-8B-Instruct", "commitSHA": SHA,
        "tokenSecretRef": {"name": "qwen-hub-hub-token", "key": "token"}}
    assert crd_errors(iec, crd_schemas) == []


def test_a_public_model_has_no_token_and_the_engine_loads_the_operator_mount(crd_schemas) -> None:  # noqa: F811
    objects = objects_of(environment(hub()))
    assert [o["kind"] for o in objects] == ["Namespace", "InferenceEndpointConfig"]
    spec = objects[1]["spec"]
    assert spec["modelSourceConfig"] == {"modelSourceType": "huggingface",
                                         "huggingFaceModel": {"modelId": "Qwen/Qwen2.5-7B-Instruct", "commitSHA": SHA}}
    # The CRD: modelVolumeMount.mountPath is where "the model data will be available" whatever the source.
    assert spec["worker"]["modelVolumeMount"]["mountPath"] == MODEL_DIR
    assert {"name": "SM_VLLM_MODEL", "value": MODEL_DIR} in spec["worker"]["environmentVariables"]
    assert spec["modelCacheConfig"]["weightsCache"]["enabled"] is True  # the operator caches Hub weights too
    assert crd_errors(objects[1], crd_schemas) == []


# --- the construct: IAM, RBAC, the deploy-time copy, egress --------------------------------------------------------

def gated(name: str = "llama", **source: Any) -> CachedModelSpec:
    return llama(name=name, source=HuggingFaceModelSource(**{**LLAMA, **source}))


def build(*models: CachedModelSpec, cluster_factory: Any = imported_cluster) -> CachedModels:
    app = cdk.App()
    stack = cdk.Stack(app, "Models", env=cdk.Environment(account=ACCOUNT, region="us-west-2"))
    return CachedModels(stack, "Caches", CachedModelsProps(cluster=cluster_factory(stack, GROUPS), models=models))


def secret_statements(template: Template) -> list[dict[str, Any]]:
    found = []
    for policy in template.find_resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if any(a.startswith(("secretsmanager:", "kms:")) for a in actions):
                found.append(statement)
    return found


def test_only_the_sync_role_reads_the_named_secret() -> None:
    caches = build(gated(), gated("other", token_secret=SECRET_ARN, token_secret_key_arn=KEY_ARN))
    assert caches.hub_tokens is not None
    template = Template.from_stack(cdk.Stack.of(caches))
    statements = secret_statements(template)
    stack = cdk.Stack.of(caches)
    read, decrypt = statements
    assert read["Action"] == "secretsmanager:GetSecretValue"
    assert [stack.resolve(r) for r in read["Resource"]] == [
        SECRET_ARN, {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"},
                                       f":secretsmanager:us-west-2:{ACCOUNT}:secret:hyperwarm/hub-token-??????"]]}]
    assert decrypt == {"Action": "kms:Decrypt", "Effect": "Allow", "Resource": KEY_ARN, "Sid": "DecryptHubTokens",
                       "Condition": {"StringEquals": {"kms:ViaService": {  # only through Secrets Manager
                          "Fn::Join": ["", ["secretsmanager.us-west-2.", {"Ref": "AWS::URLSuffix"}]]}}}}
    policies = template.find_resources("AWS::IAM::Policy")
    readers = [p for p in policies.values() if any(s in secret_statements_of(p) for s in [read])]
    assert [r["Properties"]["Roles"] for r in readers] == [[{"Ref": stack.resolve(
        caches.hub_tokens.role.node.default_child.logical_id)}]]  # type: ignore[union-attr]


def secret_statements_of(policy: dict[str, Any]) -> list[dict[str, Any]]:
    return policy["Properties"]["PolicyDocument"]["Statement"]


def test_the_sync_function_may_only_get_and_patch_the_named_secrets_and_restart_pods_after_the_models_manifest():
    caches = build(gated(), gated("other"))
    sync = caches.hub_tokens
    assert sync is not None
    (role, binding) = sync.rbac_objects
    assert role["metadata"]["namespace"] == "hyperwarm-models"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"],
                              "resourceNames": ["llama-hub-token", "other-hub-token"], "verbs": ["get", "patch"]},
                             {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "delete"]}]
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": RBAC_GROUP}]
    template = Template.from_stack(cdk.Stack.of(caches))
    stack = cdk.Stack.of(caches)
    template.has_resource_properties("AWS::EKS::AccessEntry", {"KubernetesGroups": [RBAC_GROUP], "Type": "STANDARD"})
    rbac_id = stack.resolve(sync.rbac.node.default_child.logical_id)  # type: ignore[union-attr]
    manifest_id = stack.resolve(caches.manifest.node.default_child.logical_id)  # type: ignore[union-attr]
    assert manifest_id in template.to_json()["Resources"][rbac_id]["DependsOn"]
    copy = template.find_resources("Custom::HubTokenSync")
    ((copy_id, resource),) = copy.items()
    assert rbac_id in resource["DependsOn"]
    # the documented window: the endpoints naming the Secrets are applied with them, before the first copy
    assert copy_id not in template.to_json()["Resources"][manifest_id].get("DependsOn", [])
    assert resource["Properties"]["Tokens"] == {"llama-hub-token": "hyperwarm/hub-token",
                                                "other-hub-token": "hyperwarm/hub-token"}
    env = template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": Match.string_like_regexp(
        "hub_token")}})
    ((_, function),) = env.items()
    variables = function["Properties"]["Environment"]["Variables"]
    assert json.loads(variables["HYPERWARM_HUB_TOKENS"]) == resource["Properties"]["Tokens"]
    assert variables["HYPERWARM_NAMESPACE"] == "hyperwarm-models"
    template.has_resource_properties("AWS::Events::Rule", {"ScheduleExpression": "rate(5 minutes)"})


def test_a_failed_sync_and_pods_a_restart_does_not_mend_alarm() -> None:
    caches = build(gated())
    sync = caches.hub_tokens
    assert sync is not None
    stack = cdk.Stack.of(caches)
    template = Template.from_stack(stack)
    function_id = stack.resolve(sync.function.node.default_child.logical_id)  # type: ignore[union-attr]
    template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "MetricName": "Errors", "Namespace": "AWS/Lambda", "Period": 300, "EvaluationPeriods": 1, "Threshold": 1,
        "Dimensions": [{"Name": "FunctionName", "Value": {"Ref": function_id}}],
        "TreatMissingData": "notBreaching"})
    (stuck,) = template.find_resources("AWS::CloudWatch::Alarm", {"Properties": {
        "Namespace": METRICS_NAMESPACE, "MetricName": RESTARTED_METRIC}}).values()
    assert {k: stuck["Properties"][k] for k in ("Statistic", "Period", "EvaluationPeriods", "DatapointsToAlarm",
                                                "Threshold")} == \
        {"Statistic": "Sum", "Period": 300, "EvaluationPeriods": 3, "DatapointsToAlarm": 3, "Threshold": 1}
    variables = template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": Match.string_like_regexp(
        "hub_token")}}).popitem()[1]["Properties"]["Environment"]["Variables"]
    (left,) = template.find_resources("AWS::CloudWatch::Alarm", {"Properties": {
        "Namespace": METRICS_NAMESPACE, "MetricName": LEFT_METRIC}}).values()
    assert {k: left["Properties"][k] for k in ("Statistic", "Period", "EvaluationPeriods", "DatapointsToAlarm",
                                               "Threshold", "ComparisonOperator")} == \
        {"Statistic": "Maximum", "Period": 300, "EvaluationPeriods": 3, "DatapointsToAlarm": 2, "Threshold": 1,
         "ComparisonOperator": "GreaterThanOrEqualToThreshold"}
    # what the function publishes under: its cluster's name and namespace
    for alarm in (stuck, left):
        assert alarm["Properties"]["Dimensions"] == [
            {"Name": CLUSTER_DIMENSION, "Value": variables["HYPERWARM_CLUSTER_NAME"]},
            {"Name": NAMESPACE_DIMENSION, "Value": variables["HYPERWARM_NAMESPACE"]}]


@pytest.mark.parametrize("minutes, evaluated", [(1, 9), (2, 6), (3, 3), (60, 3)])
def test_the_stuck_pods_alarm_evaluates_three_restarts_of_the_runs_they_need(minutes: int, evaluated: int) -> None:
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(account=ACCOUNT, region="us-west-2"))
    sync = HubTokenSync(stack, "Sync", HubTokenSyncProps(imported_cluster(stack, GROUPS), "hyperwarm-models",
                                                         {"a-hub-token": HuggingFaceModelSource(**LLAMA)},
                                                         interval=cdk.Duration.minutes(minutes)))
    alarm_id = stack.resolve(sync.stuck_pods_alarm.node.default_child.logical_id)  # type: ignore[union-attr]
    properties = Template.from_stack(stack).to_json()["Resources"][alarm_id]["Properties"]
    assert (properties["Period"], properties["EvaluationPeriods"], properties["DatapointsToAlarm"]) == \
        (minutes * 60, evaluated, 3)


@pytest.mark.parametrize("minutes", [1, 2, 3, 5, 60])
def test_a_pod_a_restart_never_mends_fills_the_alarms_window_at_any_interval(minutes: int) -> None:
    """The function restarts such a pod only once its replacement is STUCK_AFTER_SECONDS old: at 1 or 2 minute
    intervals not at every run. The alarm's window holds its 3 restarts at every allowed interval."""
    interval, runs = minutes * 60, restart_every(cdk.Duration.minutes(minutes))
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    created, restarts = start, []
    for run in range(1, 40):
        now = start + datetime.timedelta(seconds=run * interval)
        listed = pod("stuck", age=(now - created).total_seconds())
        listed["metadata"]["creationTimestamp"] = created.strftime("%Y-%m-%dT%H:%M:%SZ")
        hit = bool(handler.waiting_pods([listed], {"llama-hub-token"}, NS, now).stuck)
        restarts.append(hit)
        if hit:
            created = now + datetime.timedelta(seconds=3)  # the Deployment's replacement
    window = 3 * runs
    assert all(sum(restarts[i:i + window]) >= 3 for i in range(len(restarts) - window + 1)), (runs, restarts)
    assert restart_every(cdk.Duration.minutes(minutes)) == (1 if minutes >= 3 else 3 if minutes == 1 else 2)


def test_public_models_need_no_sync() -> None:
    caches = build(llama(source=HuggingFaceModelSource(**QWEN)))
    assert caches.hub_tokens is None
    assert "Custom::HubTokenSync" not in json.dumps(Template.from_stack(cdk.Stack.of(caches)).to_json())
    assert [o["kind"] for o in caches.objects] == ["Namespace", "InferenceEndpointConfig"]


def isolated_cluster(stack: cdk.Stack, groups: list[InstanceGroupSpec]) -> Any:
    """A deployed cluster whose VPC has no subnet with egress (isolated subnets only)."""
    vpc = ec2.Vpc.from_vpc_attributes(stack, "IsolatedVpc", vpc_id="vpc-0123456789abcdef0",
                                      availability_zones=["us-west-2a"], isolated_subnet_ids=["subnet-0123456789abcdef0"])
    provider = eks.KubectlProvider.from_kubectl_provider_attributes(
        stack, "Kubectl", service_token=f"arn:aws:lambda:us-west-2:{ACCOUNT}:function:kubectl",
        role=iam.Role.from_role_arn(stack, "KubectlRole", f"arn:aws:iam::{ACCOUNT}:role/kubectl"))
    eks_cluster = eks.Cluster.from_cluster_attributes(stack, "Eks", cluster_name="hyperpod-eks", vpc=vpc,
                                                      kubectl_provider=provider)
    operator = InferenceOperator.from_operator_attributes(
        stack, "Operator", execution_role=iam.Role.from_role_arn(stack, "OpRole", f"arn:aws:iam::{ACCOUNT}:role/op"),
        s3_csi_role=iam.Role.from_role_arn(stack, "Csi", f"arn:aws:iam::{ACCOUNT}:role/csi"),
        addon_version="v2.0.0-eksbuild.1")
    return HyperPodEksCluster.from_cluster_attributes(
        stack, "HyperPod", cluster_arn=f"arn:aws:sagemaker:us-west-2:{ACCOUNT}:cluster/abc", eks_cluster=eks_cluster,
        security_group=ec2.SecurityGroup.from_security_group_id(stack, "Group", "sg-0123456789abcdef0"),
        instance_groups=groups, inference_operator=operator)


def test_a_hub_model_on_a_cluster_without_egress_fails_synth() -> None:
    with pytest.raises(PropsError) as error:
        build(llama(), llama(name="qwen", source=HuggingFaceModelSource(**QWEN)), cluster_factory=isolated_cluster)
    (problem,) = [p for p in error.value.problems if "egress" in p]
    assert problem.startswith(f"models[1].source = 'hf://Qwen/Qwen2.5-7B-Instruct@{SHA}' -- the Hub is reached over "
                              "the internet")


def test_the_sync_props_are_checked() -> None:
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(account=ACCOUNT, region="us-west-2"))
    cluster = imported_cluster(stack, GROUPS)
    with pytest.raises(ValueError, match=r"interval = 30 seconds -- allowed: 1..60 minutes"):
        HubTokenSync(stack, "Sync", HubTokenSyncProps(cluster, "hyperwarm-models",
                                                      {"a-hub-token": HuggingFaceModelSource(**LLAMA)},
                                                      interval=cdk.Duration.seconds(30)))
    with pytest.raises(ValueError, match=r"tokens = \{\}"):
        HubTokenSync(stack, "Sync2", HubTokenSyncProps(cluster, "hyperwarm-models", {}))


# --- the sync function against moto and the Kubernetes API stand-in ------------------------------------------------

NS = "hyperwarm-models"
CLUSTER = "hyperwarm-test"


@pytest.fixture(scope="module")
def kube():
    server = fake_kube.FakeKube(CLUSTER)
    yield server
    server.close()


@contextlib.contextmanager
def aws(kube, monkeypatch, tokens: dict[str, str]):
    monkeypatch.setenv("HYPERWARM_CLUSTER_NAME", CLUSTER)
    monkeypatch.setenv("HYPERWARM_NAMESPACE", NS)
    monkeypatch.setenv("HYPERWARM_HUB_TOKENS", json.dumps(tokens))
    eks_auth.cluster_access.cache_clear()
    with mock_aws():
        client = boto3.client("eks", region_name="us-west-2")
        client.create_cluster(name=CLUSTER, roleArn=f"arn:aws:iam::{ACCOUNT}:role/eks",
                              resourcesVpcConfig={"subnetIds": ["subnet-1"]})
        from moto.eks.models import eks_backends
        stored = eks_backends[ACCOUNT]["us-west-2"].clusters[CLUSTER]
        stored.endpoint = kube.url
        stored.certificate_authority = {"data": base64.b64encode(kube.ca_pem).decode()}
        yield boto3.client("secretsmanager", region_name="us-west-2")
    eks_auth.cluster_access.cache_clear()


def empty_secret(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {"name": name, "namespace": NS}}


def stored_token(kube, name: str) -> str:
    return base64.b64decode(kube.get("Secret", NS, name)["data"]["token"]).decode()


def test_the_function_fills_the_secret_and_picks_up_a_rotation_without_logging_the_token(kube, monkeypatch, capsys):
    kube.objects.clear()
    kube.add(empty_secret("llama-hub-token"))
    kube.add(empty_secret("json-hub-token"))
    with aws(kube, monkeypatch, {"llama-hub-token": "hub/plain", "json-hub-token": "hub/json"}) as secrets:
        secrets.create_secret(Name="hub/plain", SecretString="hf_first\n")
        secrets.create_secret(Name="hub/json", SecretString=json.dumps({"token": "hf_json"}))
        first = handler.lambda_handler({}, None)["synced"]  # a scheduled run
        assert [(r["secret"], r["changed"]) for r in first] == [("json-hub-token", True), ("llama-hub-token", True)]
        assert (stored_token(kube, "llama-hub-token"), stored_token(kube, "json-hub-token")) == ("hf_first", "hf_json")
        patches = len(kube.patches)
        again = handler.lambda_handler({}, None)["synced"]
        assert [r["changed"] for r in again] == [False, False] and len(kube.patches) == patches  # nothing rewritten
        secrets.put_secret_value(SecretId="hub/plain", SecretString="hf_rotated")
        rotated = handler.lambda_handler({}, None)["synced"]
        assert [(r["secret"], r["changed"]) for r in rotated] == [("json-hub-token", False), ("llama-hub-token", True)]
        assert stored_token(kube, "llama-hub-token") == "hf_rotated"
    logged = capsys.readouterr().out
    assert "hf_" not in logged and "llama-hub-token" in logged


def test_a_secret_the_models_did_not_render_fails_naming_it_and_not_the_token(kube, monkeypatch, capsys):
    kube.objects.clear()
    with aws(kube, monkeypatch, {"gone-hub-token": "hub/plain"}) as secrets:
        secrets.create_secret(Name="hub/plain", SecretString="hf_secret_value")
        with pytest.raises(handler.SyncError) as error:
            handler.lambda_handler({}, None)
    assert "PATCH" not in str(error.value) and "GET Secret gone-hub-token: HTTP 404" in str(error.value)
    assert "deploy the caches first" in str(error.value)
    assert "hf_secret_value" not in str(error.value) + capsys.readouterr().out


def cfn_event(request: str, **extra: str) -> dict[str, str]:
    """A CloudFormation request to the sync's custom resource."""
    return {"RequestType": request, "StackId": "s", "RequestId": "r", "LogicalResourceId": "HubTokens",
            "ResponseURL": "https://example.invalid/", **extra}


@pytest.fixture
def answers(monkeypatch) -> list[tuple[str, str]]:
    """What the sync answers CloudFormation: (status, reason) per request."""
    sent: list[tuple[str, str]] = []
    monkeypatch.setattr(handler, "respond", lambda event, status, reason, resource: sent.append((status, reason)))
    return sent


def test_a_deploy_fails_when_a_token_cannot_be_read_and_says_which(kube, monkeypatch, answers):
    kube.objects.clear()
    kube.add(empty_secret("llama-hub-token"))
    event = cfn_event("Create")
    with aws(kube, monkeypatch, {"llama-hub-token": "hub/missing"}):
        handler.lambda_handler(event, None)
        handler.lambda_handler({**event, "RequestType": "Delete"}, None)
    (status, reason), deleted = answers
    assert status == "FAILED" and "Secret llama-hub-token from hub/missing: ResourceNotFoundException" in reason
    assert deleted[0] == "SUCCESS"


def test_a_rollback_update_before_its_secret_is_back_succeeds_but_a_create_fails(kube, monkeypatch, capsys,
                                                                                 answers):
    """CloudFormation rolls back a failed deploy that removed a gated model with an Update carrying the old token
    list, possibly before the old Secret is applied again: answering FAILED would leave UPDATE_ROLLBACK_FAILED."""
    kube.objects.clear()
    kube.add(empty_secret("llama-hub-token"))  # "removed-hub-token" is not back yet
    event = cfn_event("Update", PhysicalResourceId="hub-token-sync-HubTokens")
    tokens = {"llama-hub-token": "hub/plain", "removed-hub-token": "hub/deleted-with-the-model"}
    with aws(kube, monkeypatch, tokens) as secrets:
        secrets.create_secret(Name="hub/plain", SecretString="hf_kept")
        handler.lambda_handler(event, None)
        handler.lambda_handler({**event, "RequestType": "Create"}, None)
        with pytest.raises(handler.SyncError, match="GET Secret removed-hub-token: HTTP 404"):
            handler.lambda_handler({}, None)  # the scheduled run still counts it as an error
    (status, reason), (created, create_reason) = answers
    assert status == "SUCCESS" and "copied 1 Hub token(s)" in reason and "skipped removed-hub-token" in reason
    assert stored_token(kube, "llama-hub-token") == "hf_kept"  # the Secrets there are still filled
    assert created == "FAILED" and "GET Secret removed-hub-token: HTTP 404" in create_reason
    assert '"missing": ["removed-hub-token"]' in capsys.readouterr().out


def test_an_update_still_fails_when_an_existing_secrets_token_cannot_be_read(kube, monkeypatch, answers):
    kube.objects.clear()
    kube.add(empty_secret("llama-hub-token"))
    event = cfn_event("Update")
    with aws(kube, monkeypatch, {"llama-hub-token": "hub/missing"}):
        handler.lambda_handler(event, None)
    ((status, reason),) = answers
    assert status == "FAILED" and "Secret llama-hub-token from hub/missing: ResourceNotFoundException" in reason


def pod(name: str, *, age: float, secret: str = "llama-hub-token", reason: str = "CreateContainerConfigError",
        uid: str = "", owner: str = "ReplicaSet", message: str = "") -> dict[str, Any]:
    """A model pod as the API lists it, run by its ``owner`` (kind; empty: none): its download init container takes
    HF_TOKEN from ``secret``'s token key and waits for ``reason`` (empty: it runs)."""
    created = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=age)
    state = {"waiting": {"reason": reason, "message": message or f"couldn't find key token in Secret {NS}/{secret}"}} \
        if reason else {"running": {}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "uid": uid or f"uid-{name}",
                         "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner, "name": "llama-7d9f",
                                              "uid": "owner", "controller": True}] if owner else []},
            "spec": {"initContainers": [{"name": "download", "env": [{"name": "HF_TOKEN", "valueFrom": {
                "secretKeyRef": {"name": secret, "key": "token"}}}]}], "containers": [{"name": "serve"}]},
            "status": {"phase": "Pending", "initContainerStatuses": [{"name": "download", "state": state}]}}


def restart_metric(logged: str) -> list[dict[str, Any]]:
    """The embedded-metric-format lines a run printed."""
    return [line for line in map(json.loads, logged.splitlines()) if "_aws" in line]


def filled_secret(name: str, token: str) -> dict[str, Any]:
    return {**empty_secret(name), "data": {"token": base64.b64encode(token.encode()).decode()}}


def test_a_scheduled_run_restarts_only_old_pods_stuck_on_a_filled_token_key_and_counts_them(kube, monkeypatch,
                                                                                              capsys):
    kube.objects.clear()
    kube.deleted.clear()
    kube.add(filled_secret("llama-hub-token", "hf_token"))
    # its download container runs; the serving container, which takes no token, waits for something else
    serving_waits = pod("serving-waits", age=600, reason="")
    serving_waits["status"]["containerStatuses"] = [{"name": "serve", "state": {"waiting": {
        "reason": "CreateContainerConfigError", "message": 'configmap "llama-config" not found'}}}]
    for stuck in (pod("stuck", age=STUCK_AFTER_SECONDS + 60),
                  pod("young", age=STUCK_AFTER_SECONDS - 30),  # kubelet may still start it by itself
                  pod("other-secret", age=600, secret="not-ours"),
                  pod("pulling", age=600, reason="ImagePullBackOff"),
                  pod("running", age=600, reason=""),
                  pod("bare", age=600, owner=""),  # nothing would start it again
                  pod("stateful", age=600, owner="StatefulSet"),  # not the operator's Deployment
                  pod("root-image", age=600, message="container has runAsNonRoot and image will run as root"),
                  pod("other-key", age=600, message=f"couldn't find key other in Secret {NS}/llama-hub-token"),
                  pod("similar-name", age=600, message=f"couldn't find key token in Secret {NS}/llama-hub-token-2"),
                  pod("older-kubelet", age=600, message=f"Couldn't find key token in Secret {NS}/llama-hub-token"),
                  pod("reworded", age=600, message=f'key "token" not found in Secret {NS}/llama-hub-token'),
                  serving_waits):
        kube.add(stuck)
    with aws(kube, monkeypatch, {"llama-hub-token": "hub/plain"}) as secrets:
        secrets.create_secret(Name="hub/plain", SecretString="hf_token")
        first = handler.lambda_handler({}, None)
        again = handler.lambda_handler({}, None)  # "stuck" is still listed, being deleted: not deleted again
        kube.finish_deletions()
    assert first["restarted"] == ["older-kubelet", "stuck"] and again["restarted"] == []
    assert kube.deleted == [(NS, "older-kubelet"), (NS, "stuck")]
    # waiting on the token key for another cause, a message worded otherwise, or nothing to start them again
    left = ["bare", "other-key", "reworded", "root-image", "similar-name", "stateful"]
    assert sorted(first["left"]) == sorted(again["left"]) == left
    assert {name for (_, _, name) in kube.objects if name != "llama-hub-token"} == \
        {"young", "other-secret", "pulling", "running", "serving-waits", *left}
    metrics = restart_metric(capsys.readouterr().out)
    assert [(m[RESTARTED_METRIC], m[LEFT_METRIC], m[CLUSTER_DIMENSION], m[NAMESPACE_DIMENSION]) for m in metrics] == \
        [(2, 6, CLUSTER, NS), (0, 6, CLUSTER, NS)]
    assert metrics[0]["_aws"]["CloudWatchMetrics"] == [{"Namespace": METRICS_NAMESPACE,
                                                        "Dimensions": [[CLUSTER_DIMENSION, NAMESPACE_DIMENSION]],
                                                        "Metrics": [{"Name": RESTARTED_METRIC, "Unit": "Count"},
                                                                    {"Name": LEFT_METRIC, "Unit": "Count"}]}]


def test_a_key_written_by_this_run_gets_a_run_to_reach_kubelet_before_a_restart(kube, monkeypatch):
    """The first copy into an empty Secret (a Secret a rollback applied again, say) leaves its pods to kubelet's own
    retry for one run: the key may not have reached kubelet yet."""
    kube.objects.clear()
    kube.deleted.clear()
    kube.add(empty_secret("llama-hub-token"))
    kube.add(pod("stuck", age=600))
    with aws(kube, monkeypatch, {"llama-hub-token": "hub/plain"}) as secrets:
        secrets.create_secret(Name="hub/plain", SecretString="hf_token")
        first = handler.lambda_handler({}, None)
        second = handler.lambda_handler({}, None)
    assert first["restarted"] == first["left"] == [] and second["restarted"] == ["stuck"]


def test_a_deploy_time_copy_leaves_pods_alone(kube, monkeypatch, answers, capsys):
    """Right after the models' manifest the operator's first pods are seconds old; kubelet starts them itself."""
    kube.objects.clear()
    kube.deleted.clear()
    kube.add(filled_secret("llama-hub-token", "hf_token"))
    kube.add(pod("stuck", age=600))
    with aws(kube, monkeypatch, {"llama-hub-token": "hub/plain"}) as secrets:
        secrets.create_secret(Name="hub/plain", SecretString="hf_token")
        handler.lambda_handler(cfn_event("Create"), None)
    assert answers[0][0] == "SUCCESS" and kube.deleted == []
    assert restart_metric(capsys.readouterr().out) == []  # nothing counted: the scheduled runs' metrics stay whole


def test_a_restart_that_fails_fails_the_run_naming_the_pod_after_the_others_and_their_count(kube, monkeypatch,
                                                                                            capsys):
    kube.objects.clear()
    kube.deleted.clear()
    kube.add(filled_secret("llama-hub-token", "hf_token"))
    kube.add(pod("a-refused", age=600))
    kube.add(pod("b-stuck", age=600))
    kube.add(pod("c-replaced", age=600, uid="the-new-pod"))  # listed below with the uid of the pod it replaced
    listed = handler.Namespace.pods
    monkeypatch.setattr(handler.Namespace, "pods", lambda self: [
        {**p, "metadata": {**p["metadata"], "uid": "the-old-pod"}} if p["metadata"]["name"] == "c-replaced" else p
        for p in listed(self)])
    kube.add(pod("a-timed-out", age=600))
    kube.fail_next["a-refused"] = 403
    delete = handler.Namespace.delete_pod

    def dropped_once(self: Any, name: str, uid: str) -> bool:
        if name == "a-timed-out" and not getattr(dropped_once, "done", False):
            dropped_once.done = True  # type: ignore[attr-defined]
            raise urllib3.exceptions.MaxRetryError(None, "/pods/a-timed-out", "read timed out")
        return delete(self, name, uid)

    monkeypatch.setattr(handler.Namespace, "delete_pod", dropped_once)
    with aws(kube, monkeypatch, {"llama-hub-token": "hub/plain"}) as secrets:
        secrets.create_secret(Name="hub/plain", SecretString="hf_token")
        with pytest.raises(handler.SyncError, match="delete pod a-refused: HTTP 403.*delete pod a-timed-out: "
                                                   "MaxRetryError"):
            handler.lambda_handler({}, None)  # the function's Errors alarm sees it
        second = handler.lambda_handler({}, None)
    assert kube.deleted == [(NS, "b-stuck"), (NS, "a-refused"), (NS, "a-timed-out")]
    assert second["restarted"] == ["a-refused", "a-timed-out"]
    assert "deletionTimestamp" not in kube.get("Pod", NS, "c-replaced")["metadata"]  # 409: another pod, kept
    logged = capsys.readouterr().out
    assert [m[RESTARTED_METRIC] for m in restart_metric(logged)] == [1, 2] and "hf_token" not in logged


@pytest.mark.parametrize("text", ["", "  ", '{"token": ""}', '{"other": "x"}'])
def test_an_empty_or_keyless_secret_is_refused(text: str) -> None:
    with pytest.raises(handler.SyncError, match="hub/x"):
        handler.token_of(text, "hub/x")


# --- cold start, the planner ---------------------------------------------------------------------------------------

def test_a_hub_download_uses_the_hub_rate() -> None:
    hub_model = llama(source=HuggingFaceModelSource(**QWEN), size=gigabytes(16))
    s3_model = llama(size=gigabytes(16))
    start = ColdStart()
    assert (start.rate_gbps(hub_model), start.rate_gbps(s3_model)) == (HUB_BANDWIDTH_GBPS, 1.0)
    assert start.download_s(hub_model) == pytest.approx(16 * 8 / 0.5)
    assert start.cold_s(hub_model) - start.cold_s(s3_model) == pytest.approx(16 * 8 / 0.5 - 16 * 8)
    assert ColdStart(hub_bandwidth_gbps=2.0).download_s(hub_model) == pytest.approx(64)


def test_plan_cache_shows_the_hub_rate(project_context) -> None:
    from rich.console import Console

    staging = parse_environments(project_context["environments"])["staging"]
    groups = plan(staging)
    (hub_plan,) = [m for g in groups for m in g.models if m.model == "qwen2-5-7b-hub"]
    assert (hub_plan.source, hub_plan.rate_gbps) == ("huggingface", HUB_BANDWIDTH_GBPS)
    console = Console(width=250, record=True)
    render("staging", groups, ColdStart(), console)
    assert "qwen2-5-7b-hub: weights from the Hugging Face Hub (an assumption: no published per-node figure) at " \
           "0.5 Gbit/s per node" in console.export_text()


# --- rehearsal rules --------------------------------------------------------------------------------------------

def _policy(resource: Any, action: Any = "secretsmanager:GetSecretValue") -> dict[str, Any]:
    return {"Type": "AWS::IAM::Policy", "Properties": {"Roles": [{"Ref": "Role"}], "PolicyDocument": {
        "Statement": [{"Effect": "Allow", "Action": action, "Resource": resource}]}}}


ROLE = {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": {"Statement": []}}}


@pytest.mark.parametrize("resource", ["*", f"arn:aws:secretsmanager:us-west-2:{ACCOUNT}:secret:*"])
def test_a_read_of_every_secret_is_found(resource: str) -> None:
    (finding,) = read_scoped(Assembly.from_templates({"s": {"Resources": {"Role": ROLE, "P": _policy(resource)}}}))
    assert finding.resource == "P" and resource in finding.message


def test_a_read_of_named_secrets_passes_and_other_actions_are_not_judged() -> None:
    named = _policy([SECRET_ARN, {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":secretsmanager:us-west-2:",
                                                    ACCOUNT, ":secret:hyperwarm/hub-token-??????"]]}])
    others = _policy("*", "s3:ListAllMyBuckets")
    assert list(read_scoped(Assembly.from_templates({"s": {"Resources": {"Role": ROLE, "P": named, "Q": others}}}))) == []


def _manifest(*objects: dict[str, Any]) -> dict[str, Any]:
    return {"Type": "Custom::AWSCDK-EKS-KubernetesResource", "Properties": {"Manifest": json.dumps(list(objects))}}


def _iec(secret: str) -> dict[str, Any]:
    return {"kind": "InferenceEndpointConfig", "metadata": {"name": "llama", "namespace": NS},
            "spec": {"modelSourceConfig": {"modelSourceType": "huggingface", "huggingFaceModel": {
                "modelId": "meta-llama/Llama-3.1-8B-Instruct", "commitSHA": SHA,
                "tokenSecretRef": {"name": secret, "key": "token"}}}}}


def _secret(source: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "llama-hub-token", "namespace": NS}
    if source:
        meta["annotations"] = {SOURCE_ANNOTATION: source}
    return {"kind": "Secret", "metadata": meta}


def test_a_token_secret_nobody_renders_or_nobody_may_read_is_found() -> None:
    grant = _policy({"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":secretsmanager:us-west-2:", ACCOUNT,
                                       ":secret:hyperwarm/hub-token-??????"]]})
    missing = {"M": _manifest(_iec("llama-hub-token")), "Role": ROLE, "P": grant}
    (finding,) = hub_token(Assembly.from_templates({"s": {"Resources": missing}}))
    assert "no manifest applies" in finding.message
    unreadable = {"M": _manifest(_secret("hyperwarm/other"), _iec("llama-hub-token")), "Role": ROLE, "P": grant}
    (finding,) = hub_token(Assembly.from_templates({"s": {"Resources": unreadable}}))
    assert "no role may secretsmanager:GetSecretValue on 'hyperwarm/other'" in finding.message
    fine = {"M": _manifest(_secret("hyperwarm/hub-token"), _iec("llama-hub-token")), "Role": ROLE, "P": grant}
    assert list(hub_token(Assembly.from_templates({"s": {"Resources": fine}}))) == []


def test_the_rules_pass_on_a_synthesized_gated_model() -> None:
    caches = build(gated(), gated("other", token_secret=SECRET_ARN))
    template = Template.from_stack(cdk.Stack.of(caches)).to_json()
    assembly = Assembly.from_templates({"Models": template})
    assert list(read_scoped(assembly)) == [] and list(hub_token(assembly)) == []
