"""After a refresh, a deploy from an unchanged cdk.json neither rolls the model back nor fails.

Synth reads what the refresh made serve (stacks/served.py) from the state table, here moto's, and deploys the
newer of it and cdk.json's version; a pinned prefix deploys cdk.json's version as it is. The deploy guard then
checks the synthesized properties against the same table, as CloudFormation would run it.
"""

from __future__ import annotations

import copy
import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from stand_ins import pk_table

from hyperwarm.functions.cache_refresh import contract, deploy_guard
from hyperwarm.refresh import publish as publishing
from stacks import served
from stacks.app import build_app
from stacks.config import ConfigError, parse_environment
from stacks.refresh_guards import refresh_function_name, state_table_name

REGION = "us-east-1"
CLUSTER = "hyperwarm-prod-eks-4f2a1c"
CHAT = contract.endpoint_target_id("hyperwarm-prod-chat")
LLAMA_70B = contract.hyperpod_target_id(CLUSTER, "hyperwarm-models", "InferenceEndpointConfig", "llama-3-1-70b")
ROOT = "s3://hyperwarm-models-prod/llama-3.1-70b-instruct"


BUCKET = "hyperwarm-models-prod"
PREFIX = "llama-3.1-70b-instruct"
FUNCTION = refresh_function_name("prod")


def deploy_refresh_function(publisher_key: str | None = None) -> None:
    """The refresh function as the refresh stack deploys it, to the configuration synth reads: prod's 70B prefix
    with its endpoint and HyperPod targets, the model bucket, and a publisher key when given."""
    role = boto3.client("iam", region_name=REGION).create_role(
        RoleName="refresh", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []}))["Role"]
    targets = {PREFIX: [contract.EndpointTarget("hyperwarm-prod-chat"),
                        contract.HyperPodTarget(CLUSTER, "hyperwarm-models", "llama-3-1-70b",
                                                node_cache=contract.NodeCache("llama-3-1-70b", "/opt/dlami/nvme"))]}
    admission = {PREFIX: contract.Admission(publisher_key=publisher_key)} if publisher_key else {}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("handler.py", "def lambda_handler(event, context):\n    return None\n")
    boto3.client("lambda", region_name=REGION).create_function(
        FunctionName=FUNCTION, Runtime="python3.13", Role=role["Arn"], Handler="handler.lambda_handler",
        Code={"ZipFile": buffer.getvalue()}, Environment={"Variables": {
            contract.REFRESH_TARGETS: json.dumps(contract.targets_json(targets)),
            contract.STATE_TABLE: state_table_name("prod"), contract.ALLOWED_BUCKETS: BUCKET,
            contract.ADMISSION: json.dumps(contract.admissions_json(admission))}})


def _versioned_bucket() -> None:
    """The model bucket, versioned as hyperwarm creates it (a signed version binds each file to its VersionId)."""
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})


def publish_version(version: str, tmp_path: Path, key: str | None = None) -> None:
    """``hyperwarm publish`` of a small version of the 70B prefix (signed with ``key`` when given)."""
    folder = tmp_path / version
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"version": version}))
    publishing.publish(folder, f"s3://{BUCKET}/{PREFIX}/{version}", key, s3=boto3.client("s3", region_name=REGION),
                       kms=boto3.client("kms", region_name=REGION), say=lambda text: None)


@pytest.fixture(name="aws")
def aws_fixture(tmp_path: Path) -> Iterator[Any]:
    """prod as deployed: its cluster stack (with the EKS cluster's name), the refresh state table and function,
    and versions v2 and v3 of the 70B prefix published to its bucket, in moto."""
    with mock_aws():
        boto3.client("cloudformation", region_name=REGION).create_stack(
            StackName="hyperwarm-prod-cluster", TemplateBody=json.dumps({
                "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
                "Outputs": {served.CLUSTER_NAME_OUTPUT: {"Value": CLUSTER}}}))
        pk_table(state_table_name("prod"), REGION)
        _versioned_bucket()
        deploy_refresh_function()
        for version in ("v2", "v3"):
            publish_version(version, tmp_path)
        yield boto3.resource("dynamodb", region_name=REGION).Table(state_table_name("prod"))


def refreshed(table: Any, target: str, version: str, prefix: str = PREFIX) -> None:
    """What the refresh function records once it made ``version`` serve (lambdas/cache_refresh/README.md)."""
    table.put_item(Item={"pk": contract.state_pk(target), "rev": 3, "format": "hyperwarm.refresh.state/v1",
                         "current_version": version, "current_location": f"{prefix}/{version}",
                         "current_sequencer": "0067485C2B1A0E5F09", "current_bucket": BUCKET})


def read(project_context: dict[str, Any]) -> tuple[dict[str, str], str | None]:
    return served.read("prod", prod(project_context), state_table_name("prod"), "hyperwarm-prod-cluster", FUNCTION)


def raw_prod(project_context: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(project_context["environments"]["prod"])


def prod(project_context: dict[str, Any]) -> Any:
    return parse_environment("prod", raw_prod(project_context))


def test_synth_follows_the_refresh_to_the_newer_version(aws, project_context) -> None:
    refreshed(aws, CHAT, "v3")
    refreshed(aws, LLAMA_70B, "v2")
    config = prod(project_context)
    found, cluster = read(project_context)
    assert (found, cluster) == ({CHAT: "v3", LLAMA_70B: "v2"}, CLUSTER)
    followed = served.follow("prod", config, raw_prod(project_context), found, cluster)
    assert [v.model_data for v in followed.endpoints[0].variants] == [f"{ROOT}/v3/"] * 2
    assert [m.source.version for m in followed.caches.models] == ["v2", "v1"]  # llama-3-1-8b was never refreshed
    assert followed.refresh == config.refresh and followed.alarms == config.alarms  # all else as cdk.json says


def test_cdk_json_stays_the_floor_a_newer_version_there_is_deployed(aws, project_context) -> None:
    config = prod(project_context)
    assert served.follow("prod", config, raw_prod(project_context), {CHAT: "v0"}, CLUSTER) is config


def test_versions_that_cannot_be_ordered_fail_synth_naming_the_field(project_context) -> None:
    with pytest.raises(ConfigError) as raised:
        served.follow("prod", prod(project_context), raw_prod(project_context), {CHAT: "2026-11-01"}, CLUSTER)
    assert str(raised.value).startswith("environments.prod.endpoints[0].variants[0].model_data: 'v1' -- the refresh "
                                        "made '2026-11-01' serve, and the two cannot be ordered")


def test_never_deployed_or_never_refreshed_reads_nothing(project_context) -> None:
    with mock_aws():  # no cluster stack, no state table
        assert read(project_context) == ({}, None)


def test_a_cluster_stack_from_before_its_name_output_leaves_the_cached_models_at_cdk_json(project_context,
                                                                                           capsys) -> None:
    with mock_aws():
        boto3.client("cloudformation", region_name=REGION).create_stack(
            StackName="hyperwarm-prod-cluster",
            TemplateBody=json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}))
        assert read(project_context) == ({}, None)
    assert "hyperwarm-prod-cluster has no EksClusterName output yet" in capsys.readouterr().err


def test_a_state_that_cannot_be_read_fails_synth_saying_how_to_go_on(aws, project_context) -> None:
    aws.put_item(Item={"pk": contract.state_pk(CHAT), "format": "hyperwarm.refresh.state/v9", "current_version": "v3"})
    with pytest.raises(ConfigError) as raised:
        read(project_context)
    assert "environment 'prod': cannot read what the refresh made serve" in str(raised.value)
    assert "-c served_versions=config" in str(raised.value)


@pytest.mark.parametrize("value, cli_account, account, reads", [
    (None, None, None, False),  # make synth, the tests: no CLI
    (None, "123456789012", None, True),  # cdk synth/diff/deploy with credentials
    (None, "123456789012", "123456789012", True),
    (None, "123456789012", "210987654321", False),  # another account's environment
    ("read", None, None, True),
    ("config", "123456789012", None, False),
])
def test_when_synth_reads(monkeypatch, project_context, value, cli_account, account, reads) -> None:
    if cli_account:
        monkeypatch.setenv("CDK_DEFAULT_ACCOUNT", cli_account)
    else:
        monkeypatch.delenv("CDK_DEFAULT_ACCOUNT", raising=False)
    raw = {**copy.deepcopy(project_context["environments"]["prod"]), **({"account": account} if account else {})}
    assert served.should_read(served.setting({served.CONTEXT_KEY: value}.get), parse_environment("prod", raw)) == reads
    with pytest.raises(ConfigError, match="allowed: auto, read, config"):
        served.setting({served.CONTEXT_KEY: "sometimes"}.get)


def _endpoints_only(context: dict[str, Any], **prod_changes: Any) -> dict[str, Any]:
    """prod's endpoints and the refresh of their prefix, nothing else (a whole-prod synth costs more)."""
    environments = copy.deepcopy(context["environments"])
    config = environments["prod"]
    for key in ("instance_groups", "caches", "vpc", "kubernetes_version", "addon_versions", "cluster_admins"):
        del config[key]
    config["refresh"]["models"] = [{"prefix": "llama-3.1-70b-instruct", "endpoints": ["chat"], **prod_changes}]
    config["observability"] = {"enabled": False}
    return {**context, "environments": {"prod": config}, "env": "prod", served.CONTEXT_KEY: "read"}


def _guard(assembly: Any) -> dict[str, Any]:
    template = assembly.get_stack_by_name("hyperwarm-prod-endpoints").template
    (guard,) = [r for r in template["Resources"].values() if r["Type"] == "Custom::RefreshGuard"]
    return guard["Properties"]


def test_a_deploy_after_a_refresh_from_an_unchanged_cdk_json_neither_rolls_back_nor_fails(
        aws, project_context, tmp_path) -> None:
    """The refresh moved prod's chat endpoint from cdk.json's v1 to v3. Before, the templates named v1: a deploy
    touching the endpoint was stopped by the guard (or, without it, would have put v1 back)."""
    refreshed(aws, CHAT, "v3")
    assembly = build_app(outdir=str(tmp_path), context=_endpoints_only(project_context), nag=False).synth()
    template = assembly.get_stack_by_name("hyperwarm-prod-endpoints").template
    models = [r["Properties"]["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]["S3Uri"]
              for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Model"]
    assert models == [f"{ROOT}/v3/"] * 2  # what serves: nothing moves back
    properties = _guard(assembly)
    assert [t["Version"] for t in properties["Targets"]] == ["v3", "v3"]
    assert deploy_guard.stale_targets(aws, properties["Targets"]) == []  # and the guard lets it through
    stale = [{**t, "Version": "v1"} for t in properties["Targets"]]  # the templates before: cdk.json's v1
    assert "serves v3" in deploy_guard.stale_targets(aws, stale)[0]


def test_a_deploy_that_replaces_the_endpoints_models_updates_the_refresh_stacks_grant_on_them(
        aws, project_context, tmp_path) -> None:
    """The refresh reads the endpoint's CloudFormation-named models and config through cross-stack references, which
    CloudFormation resolves only when the refresh stack updates: a deploy that replaces them (here the one after a
    refresh, serving v3) must change the refresh stack too (a review found its template unchanged: the next
    refresh was refused access to the new config), and one that does not, must not."""
    def grant(name: str) -> dict[str, Any]:
        assembly = build_app(outdir=str(tmp_path / name), context=_endpoints_only(project_context), nag=False).synth()
        template = assembly.get_stack_by_name("hyperwarm-prod-refresh").template
        (statement,) = [s for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Policy"
                        for s in r["Properties"]["PolicyDocument"]["Statement"]
                        if "sagemaker:DescribeEndpointConfig" in s["Action"]]
        assert any("Fn::GetStackOutput" in json.dumps(r) for r in statement["Resource"])
        return statement

    before, again = grant("before"), grant("again")
    refreshed(aws, CHAT, "v3")
    after = grant("after")
    assert before == again and after["Sid"] != before["Sid"] and after["Sid"].startswith("ReadLiveVersions")


def test_a_pinned_prefix_deploys_cdk_jsons_version_and_the_refresh_leaves_it_alone(
        aws, project_context, tmp_path) -> None:
    """A deliberate rollback: chat back to cdk.json's v1 while v3 serves, explicitly (refresh.models[].pinned). The
    guard lets it through and records v1 as what serves; the refresh function no longer refreshes the prefix."""
    refreshed(aws, CHAT, "v3")
    context = _endpoints_only(project_context, pinned=True)
    prod = context["environments"]["prod"]
    prod["endpoints"].append({"name": "batch", "variants": [  # a second prefix keeps the refresh stack busy
        {**prod["endpoints"][0]["variants"][1], "model_data": "s3://hyperwarm-models-prod/llama-3.1-8b-instruct/v1/"}]})
    prod["refresh"]["models"].append({"prefix": "llama-3.1-8b-instruct", "endpoints": ["batch"]})
    assembly = build_app(outdir=str(tmp_path), context=context, nag=False).synth()
    properties = _guard(assembly)
    pinned = [t for t in properties["Targets"] if t.get("Pinned")]
    assert [(t["Id"], t["Version"], t["Location"]) for t in pinned] == [(CHAT, "v1", "llama-3.1-70b-instruct/v1")] * 2
    assert deploy_guard.stale_targets(aws, properties["Targets"]) == []
    refresh = assembly.get_stack_by_name("hyperwarm-prod-refresh").template
    targets = {json.dumps(r["Properties"]["Environment"]["Variables"]["HYPERWARM_REFRESH_TARGETS"])
               for r in refresh["Resources"].values() if r["Type"] == "AWS::Lambda::Function"
               and "HYPERWARM_REFRESH_TARGETS" in r["Properties"].get("Environment", {}).get("Variables", {})}
    assert targets and all("llama-3.1-8b-instruct" in t and "llama-3.1-70b-instruct" not in t for t in targets)
    prod["refresh"]["models"].pop()
    with pytest.raises(ConfigError, match="every prefix is pinned"):
        build_app(outdir=str(tmp_path / "all-pinned"), context=context, nag=False)


def test_a_pinned_prefix_keeps_cdk_jsons_version_on_its_caches_and_endpoints_alike(project_context) -> None:
    """prod pins llama-3.1-70b-instruct (cdk.json's v1, a deliberate rollback) and keeps refreshing llama-3.1-8b:
    every target of the prefix goes to its guard pinned at v1 (the guard records it: tests/test_refresh_guard.py)."""
    context = copy.deepcopy(project_context)
    context["environments"]["prod"]["refresh"]["models"][0]["pinned"] = True
    config = parse_environment("prod", context["environments"]["prod"])
    assert served.follow("prod", config, context["environments"]["prod"], {CHAT: "v3", LLAMA_70B: "v3"},
                         CLUSTER) is config  # v1 stays
    targets = list(served.refreshed_targets("prod", config, CLUSTER))
    assert [(t.target_id, t.pinned_location) for t in targets if t.pinned] == [
        (LLAMA_70B, "llama-3.1-70b-instruct/v1"), (CHAT, "llama-3.1-70b-instruct/v1"),
        (CHAT, "llama-3.1-70b-instruct/v1")]
    assert [m.prefix for m in config.refresh.active] == ["llama-3.1-8b-instruct"]


# -- the table is not the publisher: what synth follows passes the refresh's gate ---------------------------------

def test_a_version_only_the_table_vouches_for_fails_synth_and_names_it(aws, project_context) -> None:
    """A table writer records v9, never published: synth would deploy it to every target of the prefix."""
    refreshed(aws, CHAT, "v9")
    with pytest.raises(ConfigError) as raised:
        read(project_context)
    message = str(raised.value)
    assert f"{CHAT}: v9 -- manifest-missing" in message and "hyperwarm refresh reset" in message


def test_a_signed_prefix_follows_only_versions_its_publisher_signed(project_context, tmp_path) -> None:
    from refresh import moto_ext

    moto_ext.install()  # KMS digest signing
    with mock_aws():
        _versioned_bucket()
        pk_table(state_table_name("prod"), REGION)
        table = boto3.resource("dynamodb", region_name=REGION).Table(state_table_name("prod"))
        key = boto3.client("kms", region_name=REGION).create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")[
            "KeyMetadata"]["Arn"]
        deploy_refresh_function(publisher_key=key)
        publish_version("v2", tmp_path, key)
        publish_version("v3", tmp_path)  # a bucket writer's: unsigned
        refreshed(table, CHAT, "v2")
        assert read(project_context) == ({CHAT: "v2"}, None)
        refreshed(table, CHAT, "v3")
        with pytest.raises(ConfigError, match=rf"{CHAT}: v3 -- signature-missing"):
            read(project_context)


def test_versions_recorded_without_a_deployed_refresh_function_are_not_followed(project_context) -> None:
    with mock_aws():
        pk_table(state_table_name("prod"), REGION)
        refreshed(boto3.resource("dynamodb", region_name=REGION).Table(state_table_name("prod")), CHAT, "v2")
        with pytest.raises(ConfigError, match=f"the refresh function {FUNCTION} is not deployed"):
            read(project_context)
