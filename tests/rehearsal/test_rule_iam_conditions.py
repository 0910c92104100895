"""iam.kms-create-grant and iam.service-trust-source: permissions held to their documented conditions."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from rehearsal import Assembly
from rehearsal.rules.iam_conditions import kms_create_grant, service_trust_source

KEY = {"Fn::GetAtt": ["Key", "Arn"]}
FOR_AWS = {"Bool": {"kms:GrantIsForAWSResource": "true"}}


def policy(*statements: dict[str, Any], kind: str = "AWS::IAM::Policy") -> dict[str, Any]:
    return {"Resources": {"P": {"Type": kind, "Properties": {"Roles": [{"Ref": "R"}],
                                                             "PolicyDocument": {"Statement": list(statements)}}}}}


def grants(template: dict[str, Any]) -> list[str]:
    return [f.message for f in kms_create_grant(Assembly.from_templates({"s": template}))]


@pytest.mark.parametrize("statement", [
    {"Effect": "Allow", "Action": ["kms:CreateGrant", "kms:DescribeKey"], "Resource": KEY},
    {"Effect": "Allow", "Action": "kms:*", "Resource": KEY},
    {"Effect": "Allow", "Action": "*", "Resource": "*"},
    {"Effect": "Allow", "Action": "KMS:create*", "Resource": KEY},
    {"Effect": "Allow", "NotAction": "s3:*", "Resource": "*"},
    {"Effect": "Allow", "Action": "kms:CreateGrant", "Resource": KEY,
     "Condition": {"Bool": {"kms:GrantIsForAWSResource": "false"}}},
    {"Effect": "Allow", "Action": "kms:CreateGrant", "Resource": KEY,
     "Condition": {"StringEquals": {"kms:GrantIsForAWSResource": "true"}}},  # not the Bool the docs give
])
def test_a_create_grant_without_the_aws_resource_condition_is_found(statement: dict[str, Any]) -> None:
    (message,) = grants(policy(statement))
    assert "allows kms:CreateGrant" in message and "kms:GrantIsForAWSResource" in message


def test_inline_and_managed_policies_are_read_too() -> None:
    bare = {"Effect": "Allow", "Action": "kms:CreateGrant", "Resource": KEY}
    assert len(grants(policy(bare, kind="AWS::IAM::ManagedPolicy"))) == 1
    role = {"Resources": {"R": {"Type": "AWS::IAM::Role", "Properties": {
        "Policies": [{"PolicyName": "p", "PolicyDocument": {"Statement": [bare]}}]}}}}
    assert len(grants(role)) == 1


@pytest.mark.parametrize("statement", [
    {"Effect": "Allow", "Action": "kms:CreateGrant", "Resource": KEY, "Condition": FOR_AWS},
    {"Effect": "Allow", "Action": "kms:*", "Resource": KEY, "Condition": {"Bool": {"kms:GrantIsForAWSResource": [True]}}},
    {"Effect": "Deny", "Action": "kms:CreateGrant", "Resource": KEY},
    {"Effect": "Allow", "Action": ["kms:Decrypt", "kms:DescribeKey"], "Resource": KEY},
    {"Effect": "Allow", "NotAction": "kms:*", "Resource": "*"},
])
def test_a_grant_for_aws_resources_only_or_no_grant_passes(statement: dict[str, Any]) -> None:
    assert grants(policy(statement)) == []


def test_the_refresh_s_grant_on_the_endpoint_key_is_for_sagemaker_alone_and_fails_without_it(synthesized) -> None:
    """The real synth passes; the same template with the condition taken out (the grant as it was) is found."""
    assembly = Assembly.from_outdir(synthesized.outdir)
    assert kms_create_grant(assembly) == []
    template = copy.deepcopy(assembly.templates["hyperwarm-prod-refresh"])
    found = [s for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Policy"
             for s in r["Properties"]["PolicyDocument"]["Statement"] if "kms:CreateGrant" in json.dumps(s["Action"])]
    assert found and all(s["Condition"] == FOR_AWS and s["Resource"] != "*" for s in found)
    for statement in found:
        del statement["Condition"]
    assert len(kms_create_grant(Assembly.from_templates({"hyperwarm-prod-refresh": template}))) == len(found)


SOURCE = {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
          "ArnLike": {"aws:SourceArn": {"Fn::Sub": "arn:${AWS::Partition}:sagemaker:${AWS::Region}:${AWS::AccountId}:*"}}}


def trust_role(service: str, condition: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    statement: dict[str, Any] = {"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": service}}
    if condition is not None:
        statement["Condition"] = condition
    return {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": {"Statement": [statement]}, **extra}}


def trusts(**resources: dict[str, Any]) -> list[str]:
    return [f"{f.resource}: {f.message}"
            for f in service_trust_source(Assembly.from_templates({"s": {"Resources": resources}}))]


@pytest.mark.parametrize("service", ["sagemaker.amazonaws.com", "pods.eks.amazonaws.com"])
def test_a_service_trust_without_source_conditions_is_found(service: str) -> None:
    (finding,) = trusts(R=trust_role(service))
    assert finding.startswith(f"R: trusts {service} without aws:SourceAccount and aws:SourceArn")


@pytest.mark.parametrize("condition, missing", [
    ({"StringEquals": {"aws:SourceAccount": "111122223333"}}, "without aws:SourceArn"),
    ({"ArnLike": {"aws:SourceArn": "arn:aws:sagemaker:us-west-2:111122223333:*"}}, "without aws:SourceAccount"),
    ({**SOURCE, "ArnLike": {"aws:SourceArn": "*"}}, "without aws:SourceArn"),  # matches anything
    ({"StringEqualsIfExists": {"aws:SourceAccount": "1"}, "ArnLikeIfExists": {"aws:SourceArn": "a"}},
     "without aws:SourceAccount and aws:SourceArn"),  # absent keys pass an IfExists test
])
def test_a_partial_or_vacuous_source_condition_is_found(condition: dict[str, Any], missing: str) -> None:
    (finding,) = trusts(R=trust_role("sagemaker.amazonaws.com", condition))
    assert missing in finding


def test_held_trusts_other_services_and_hyperpod_node_roles_pass() -> None:
    cluster = {"Type": "AWS::SageMaker::Cluster", "Properties": {"InstanceGroups": [
        {"InstanceGroupName": "g", "ExecutionRole": {"Fn::GetAtt": ["Node", "Arn"]}}]}}
    assert trusts(Held=trust_role("sagemaker.amazonaws.com", SOURCE), Lambda=trust_role("lambda.amazonaws.com"),
                  Node=trust_role("sagemaker.amazonaws.com"), Cluster=cluster) == []


def test_the_operator_and_endpoint_roles_of_every_environment_are_held_and_fail_without_it(synthesized) -> None:
    """Every synthesized trust passes; with the operator's and the endpoints' conditions taken out they are found."""
    assembly = Assembly.from_outdir(synthesized.outdir)
    assert service_trust_source(assembly) == []
    stripped = copy.deepcopy(assembly.templates)
    expected = set()
    for stack, template in stripped.items():
        for logical_id, resource in template["Resources"].items():
            if resource["Type"] != "AWS::IAM::Role" or not logical_id.startswith(
                    ("HyperPodInferenceOperatorExecutionRole", "chatExecutionRole")):
                continue
            for statement in resource["Properties"]["AssumeRolePolicyDocument"]["Statement"]:
                if statement.get("Principal", {}).get("Service") == "sagemaker.amazonaws.com":
                    assert statement["Condition"]["ArnLike"]["aws:SourceArn"]
                    del statement["Condition"]
                    expected.add((stack, logical_id))
    assert {s for s, _ in expected} >= {"hyperwarm-prod-cluster", "hyperwarm-prod-endpoints"}
    found = {(f.stack, f.resource) for f in service_trust_source(Assembly.from_templates(stripped))}
    assert found == expected


ACCOUNT = {"Ref": "AWS::AccountId"}


def sagemaker_arn(resource: str) -> dict[str, Any]:
    return {"Fn::Join": ["", ["arn:aws:sagemaker:us-east-1:", ACCOUNT, f":{resource}"]]}


def refresh_stack(*statements: dict[str, Any], handler: str = "hyperwarm.functions.cache_refresh.handler.x"
                  ) -> dict[str, Any]:
    return {"Resources": {
        "Role": {"Type": "AWS::IAM::Role", "Properties": {}},
        "Function": {"Type": "AWS::Lambda::Function", "Properties": {"Handler": handler,
                                                                     "Role": {"Fn::GetAtt": ["Role", "Arn"]}}},
        "Policy": {"Type": "AWS::IAM::Policy", "Properties": {"Roles": [{"Ref": "Role"}],
                                                              "PolicyDocument": {"Statement": list(statements)}}}}}


def scoped(template: dict[str, Any]) -> list[str]:
    from rehearsal.rules.iam_conditions import refresh_sagemaker_scoped

    return [f.message for f in refresh_sagemaker_scoped(Assembly.from_templates({"s": template}))]


DESCRIBE = ["sagemaker:DescribeModel", "sagemaker:DescribeEndpointConfig"]


def test_refresh_reads_by_stem_endpoint_and_deployed_arn_pass() -> None:
    deployed = {"Fn::GetStackOutput": {"StackName": "e", "OutputName": "ConfigArn"}}
    assert scoped(refresh_stack({"Effect": "Allow", "Action": DESCRIBE, "Resource": [
        sagemaker_arn("model/hyperwarm-prod-chat-*"), sagemaker_arn("endpoint-config/hyperwarm-prod-chat-*"),
        deployed]})) == []


@pytest.mark.parametrize("actions, resource, shown", [
    (DESCRIBE, [sagemaker_arn("model/*"), sagemaker_arn("endpoint-config/*")], "model/*"),
    (DESCRIBE, "*", "on *"),
    (["sagemaker:*"], sagemaker_arn("model/hyperwarm-prod-chat-*"), None),  # named: passes
    (["sagemaker:CreateModel"], sagemaker_arn("*"), ":*"),
    (["sagemaker:UpdateEndpoint"], sagemaker_arn("endpoint/*"), "endpoint/*"),
    (["sagemaker:CreateModel"], {"Fn::Join": ["", ["arn:aws:sagemaker:us-east-1:", ACCOUNT, ":model/",
                                                    {"Ref": "Stem"}, "*"]]}, "${TOKEN}*"),  # a stem unknown
])
def test_a_refresh_role_reaching_every_model_or_config_is_found(actions: list[str], resource: Any,
                                                               shown: str | None) -> None:
    found = scoped(refresh_stack({"Effect": "Allow", "Action": actions, "Resource": resource}))
    if shown is None:
        assert found == []
    else:
        (message,) = found
        assert "lets a refresh role" in message and shown in message


def test_roles_of_other_functions_are_not_the_refresh_s() -> None:
    statement = {"Effect": "Allow", "Action": DESCRIBE, "Resource": "*"}
    assert scoped(refresh_stack(statement, handler="index.handler")) == []
    assert len(scoped(refresh_stack(statement))) == 1


def test_the_refresh_of_every_synthesis_reads_only_named_sagemaker_resources_and_fails_on_every_model(
        synthesized) -> None:
    """The real synth passes; the same template with the reads widened back to model/* (as they were) is found."""
    from rehearsal.rules.iam_conditions import refresh_sagemaker_scoped

    assembly = Assembly.from_outdir(synthesized.outdir)
    assert refresh_sagemaker_scoped(assembly) == []
    template = copy.deepcopy(assembly.templates["hyperwarm-prod-refresh"])
    (reads,) = [s for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Policy"
                for s in r["Properties"]["PolicyDocument"]["Statement"] if s.get("Sid", "").startswith("ReadLiveVersions")]
    deployed = [r for r in reads["Resource"] if "Fn::GetStackOutput" in r]
    assert len(deployed) == 3  # the chat endpoint's config and its two variants' models, by ARN
    assert all("hyperwarm-prod-chat-*" in json.dumps(r) for r in reads["Resource"] if r not in deployed)
    reads["Resource"] = [sagemaker_arn("model/*"), sagemaker_arn("endpoint-config/*")]
    (finding,) = refresh_sagemaker_scoped(Assembly.from_templates({"hyperwarm-prod-refresh": template}))
    assert "model/*" in finding.message


def signing_key(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Resources": {"Key": {"Type": "AWS::KMS::Key", "Properties": {
        "KeyPolicy": {"Statement": [{"Effect": "Allow", "Principal": {"AWS": {"Fn::Join": ["", [
            "arn:aws:iam::", ACCOUNT, ":root"]]}}, "Action": "kms:*", "Resource": "*"}, *statements]}}}}}


@pytest.mark.parametrize("principal", [
    {"AWS": "arn:aws:iam::111122223333:role/ci"}, {"AWS": "*"}, "*", {"AWS": "arn:aws:iam::444455556666:root"},
    {"Service": "logs.amazonaws.com"},
])
def test_a_key_policy_letting_a_principal_create_grants_without_the_condition_is_found(principal: Any) -> None:
    statement = {"Effect": "Allow", "Principal": principal, "Action": ["kms:CreateGrant"], "Resource": "*"}
    (message,) = grants(signing_key(statement))
    assert "allows kms:CreateGrant" in message
    assert grants(signing_key({**statement, "Condition": FOR_AWS})) == []


def test_a_key_policy_leaving_grants_to_its_own_account_s_iam_policies_passes() -> None:
    """CDK's root statement (kms:* to the stack's account) hands the decision to identity policies, read above."""
    assert grants(signing_key()) == []
    literal = {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::111122223333:root"}, "Action": "kms:*",
               "Resource": "*"}
    assembly = Assembly.from_templates({"s": signing_key(literal)}, accounts={"s": "111122223333"})
    assert kms_create_grant(assembly) == []
    assert len(grants(signing_key(literal))) == 1  # an account the stack is not known to deploy to


@pytest.mark.parametrize("account, stack_account, shown", [
    (ACCOUNT, None, None),
    ({"Fn::Sub": "${AWS::AccountId}"}, None, None),
    ("111122223333", "111122223333", None),  # the literal account of the stack's environment
    ("444455556666", "111122223333", "444455556666"),  # another account's SageMaker resources
    ("111122223333", None, "111122223333"),  # a literal the stack is not known to deploy to
    ([ACCOUNT, "444455556666"], None, "444455556666"),
])
def test_a_source_account_other_than_the_stack_s_own_is_found(account: Any, stack_account: str | None,
                                                              shown: str | None) -> None:
    condition = {**SOURCE, "StringEquals": {"aws:SourceAccount": account}}
    assembly = Assembly.from_templates({"s": {"Resources": {"R": trust_role("sagemaker.amazonaws.com", condition)}}},
                                       accounts={"s": stack_account} if stack_account else None)
    messages = [f.message for f in service_trust_source(assembly)]
    if shown is None:
        assert messages == []
    else:
        (message,) = messages
        assert f"for aws:SourceAccount {shown}, not the stack's own account" in message


EVERY_MODEL = {"Effect": "Allow", "Action": DESCRIBE, "Resource": [sagemaker_arn("model/*")]}


def test_every_model_in_a_managed_or_inline_policy_of_a_refresh_role_is_found() -> None:
    managed = refresh_stack()
    managed["Resources"]["Policy"]["Type"] = "AWS::IAM::ManagedPolicy"
    managed["Resources"]["Policy"]["Properties"]["PolicyDocument"]["Statement"] = [EVERY_MODEL]
    attached_by_role = copy.deepcopy(managed)
    del attached_by_role["Resources"]["Policy"]["Properties"]["Roles"]
    attached_by_role["Resources"]["Role"]["Properties"]["ManagedPolicyArns"] = [{"Ref": "Policy"}]
    inline = refresh_stack()
    del inline["Resources"]["Policy"]
    inline["Resources"]["Role"]["Properties"]["Policies"] = [
        {"PolicyName": "p", "PolicyDocument": {"Statement": [EVERY_MODEL]}}]
    for template in (managed, attached_by_role, inline):
        (message,) = scoped(template)
        assert "model/*" in message
    del attached_by_role["Resources"]["Role"]["Properties"]["ManagedPolicyArns"]
    assert scoped(attached_by_role) == []  # attached to no refresh role
