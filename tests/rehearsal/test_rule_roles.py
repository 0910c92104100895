"""roles.*: each role holds the actions AWS documents for the service that uses it."""

from __future__ import annotations

import json
from typing import Any

from rehearsal import Assembly
from rehearsal.rules.roles import (
    endpoint_rollback_alarms,
    hyperpod_execution,
    load_balancer_controller,
    load_balancer_controller_actions,
    managed_pass_role,
    model_execution,
)


def role(**props: Any) -> dict[str, Any]:
    return {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": {"Statement": []}, **props}}


def policy(role_id: str, *statements: dict[str, Any]) -> dict[str, Any]:
    return {"Type": "AWS::IAM::Policy", "Properties": {"Roles": [{"Ref": role_id}],
                                                       "PolicyDocument": {"Statement": list(statements)}}}


def allow(actions: Any, resource: Any = "*") -> dict[str, Any]:
    return {"Effect": "Allow", "Action": actions, "Resource": resource}


MANAGED = {"ManagedPolicyArns": [{"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"},
                                                    ":iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy"]]}]}
CLUSTER = {"Type": "AWS::SageMaker::Cluster", "Properties": {
    "Orchestrator": {"Eks": {"ClusterArn": "arn"}},
    "InstanceGroups": [{"InstanceGroupName": "g", "ExecutionRole": {"Fn::GetAtt": ["Exec", "Arn"]}}]}}


def test_hyperpod_execution_role_without_vpc_actions_is_found() -> None:
    # Finding 4: the managed policy alone leaves out the network-interface permission and VPC reads.
    resources = {"C": CLUSTER, "Exec": role(**MANAGED), "P": policy("Exec", allow("ecr:GetAuthorizationToken"))}
    (finding,) = hyperpod_execution(Assembly.from_templates({"s": {"Resources": resources}}))
    documented = ("ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterfacePermission", "ec2:DescribeVpcs",
             "ec2:DescribeDhcpOptions", "ec2:DescribeSecurityGroups")
    assert finding.resource == "Exec" and all(a in finding.message for a in documented)


def test_hyperpod_execution_role_with_documented_actions_passes_and_wildcards_count() -> None:
    granted = policy("Exec", allow(["ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterfacePermission",
                                    "ec2:Describe*"]))
    assert hyperpod_execution(Assembly.from_templates({"s": {"Resources": {
        "C": CLUSTER, "Exec": role(**MANAGED), "P": granted}}})) == []
    (finding,) = hyperpod_execution(Assembly.from_templates({"s": {"Resources": {
        "C": CLUSTER, "Exec": role(), "P": granted}}}))
    assert "AmazonSageMakerClusterInstanceRolePolicy" in finding.message


def irsa_role(**props: Any) -> dict[str, Any]:
    trust = {"Statement": [{"Action": "sts:AssumeRoleWithWebIdentity",
                            "Condition": {"StringEquals": {"Fn::GetAtt": ["Conditions", "Value"]}}}]}
    return {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": trust, **props}}


CONDITIONS = {"Type": "Custom::AWSCDKCfnJson", "Properties": {"Value": {"Fn::Join": ["", [
    '{"', {"Ref": "Issuer"}, ':sub":"system:serviceaccount:hyperpod-inference-system:aws-load-balancer-controller"}']]}}}


def test_load_balancer_controller_on_elb_full_access_is_found() -> None:
    # Finding 8: ElasticLoadBalancingFullAccess cannot create security groups, tag or read certificates.
    full_access = irsa_role(ManagedPolicyArns=["arn:aws:iam::aws:policy/ElasticLoadBalancingFullAccess"])
    (finding,) = load_balancer_controller(Assembly.from_templates({"s": {"Resources": {
        "Conditions": CONDITIONS, "Lb": full_access}}}))
    assert "ec2:CreateSecurityGroup" in finding.message and "acm:DescribeCertificate" in finding.message


def test_load_balancer_controller_with_the_published_policy_passes() -> None:
    resources = {"Conditions": CONDITIONS, "Lb": irsa_role(),
                 "P": policy("Lb", allow(load_balancer_controller_actions()))}
    assert load_balancer_controller(Assembly.from_templates({"s": {"Resources": resources}})) == []
    assert len(load_balancer_controller_actions()) == 80


def endpoint_stack(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Resources": {
        "Exec": role(), "P": policy("Exec", *statements),
        "Alarm": {"Type": "AWS::CloudWatch::Alarm", "Properties": {}},
        "Model": {"Type": "AWS::SageMaker::Model", "Properties": {"ExecutionRoleArn": {"Fn::GetAtt": ["Exec", "Arn"]}}},
        "Config": {"Type": "AWS::SageMaker::EndpointConfig", "Properties": {"ProductionVariants": [
            {"VariantName": "v", "ModelName": {"Fn::GetAtt": ["Model", "ModelName"]}}]}},
        "Endpoint": {"Type": "AWS::SageMaker::Endpoint", "Properties": {
            "EndpointConfigName": {"Fn::GetAtt": ["Config", "EndpointConfigName"]},
            "DeploymentConfig": {"AutoRollbackConfiguration": {"Alarms": [{"AlarmName": {"Ref": "Alarm"}}]}}}},
    }}


def test_endpoint_role_that_cannot_read_its_rollback_alarms_is_found() -> None:
    # Finding 9: deployment guardrails need cloudwatch:DescribeAlarms on the rollback alarms.
    (finding,) = endpoint_rollback_alarms(Assembly.from_templates({"s": endpoint_stack(allow("s3:GetObject"))}))
    assert finding.resource == "Exec" and "Alarm" in finding.message
    other_alarm = allow("cloudwatch:DescribeAlarms", {"Fn::GetAtt": ["OtherAlarm", "Arn"]})
    assert len(endpoint_rollback_alarms(Assembly.from_templates({"s": endpoint_stack(other_alarm)}))) == 1


def test_endpoint_role_reading_its_rollback_alarms_passes() -> None:
    for resource in ({"Fn::GetAtt": ["Alarm", "Arn"]}, "*"):
        statement = allow("cloudwatch:DescribeAlarms", [resource])
        assert endpoint_rollback_alarms(Assembly.from_templates({"s": endpoint_stack(statement)})) == []


MODEL = {"Type": "AWS::SageMaker::Model", "Properties": {
    "ExecutionRoleArn": {"Fn::GetAtt": ["Exec", "Arn"]},
    "PrimaryContainer": {"Image": "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.27.1-gpu",
                         "ModelDataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "CompressionType": "None",
                                                              "S3Uri": "s3://team-models/llama/v1/"}}}}}
PULL = allow(["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
             "arn:aws:ecr:us-east-1:763104351884:repository/vllm")


def test_a_model_role_that_cannot_read_its_model_data_or_pull_its_image_is_found() -> None:
    resources = {"M": MODEL, "Exec": role(), "P": policy("Exec", allow("ecr:GetAuthorizationToken"),
                                                         allow("s3:GetObject", "arn:aws:s3:::team-models/other/*"))}
    (finding,) = model_execution(Assembly.from_templates({"s": {"Resources": resources}}))
    assert finding.resource == "Exec"
    assert "s3:GetObject on arn:aws:s3:::team-models/llama/v1/config.json" in finding.message
    assert "ecr:BatchGetImage on arn:aws:ecr:us-east-1:763104351884:repository/vllm" in finding.message


def test_a_model_role_scoped_to_its_prefix_and_repository_passes() -> None:
    objects = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::team-models/llama/v1/*"]]}
    resources = {"M": MODEL, "Exec": role(), "P": policy("Exec", allow("ecr:GetAuthorizationToken"), PULL,
                                                         allow(["s3:GetObject*"], objects))}
    assert model_execution(Assembly.from_templates({"s": {"Resources": resources}})) == []


def test_a_grant_on_a_bucket_the_template_cannot_name_covers_nothing() -> None:
    """A token read as * let a grant on any bucket's objects satisfy the model-data check."""
    some_bucket = {"Fn::Join": ["", [{"Fn::GetAtt": ["Other", "Arn"]}, "/*"]]}
    resources = {"M": MODEL, "Exec": role(), "Other": {"Type": "AWS::S3::Bucket", "Properties": {}},
                 "P": policy("Exec", allow("ecr:GetAuthorizationToken"), PULL, allow("s3:GetObject", some_bucket))}
    (finding,) = model_execution(Assembly.from_templates({"s": {"Resources": resources}}))
    assert "s3:GetObject on arn:aws:s3:::team-models/llama/v1/config.json" in finding.message


def test_a_grant_on_a_bucket_named_in_the_template_is_followed() -> None:
    named = {"Fn::Join": ["", [{"Fn::GetAtt": ["Models", "Arn"]}, "/llama/*"]]}
    resources = {"M": MODEL, "Exec": role(), "Models": {"Type": "AWS::S3::Bucket",
                                                         "Properties": {"BucketName": "team-models"}},
                 "P": policy("Exec", allow("ecr:GetAuthorizationToken"), PULL, allow("s3:GetObject", named))}
    assert model_execution(Assembly.from_templates({"s": {"Resources": resources}})) == []


def test_a_model_whose_data_or_image_the_template_cannot_name_is_a_finding() -> None:
    """Unknown is a failure: the rule cannot vouch for a location it cannot read."""
    model = {"Type": "AWS::SageMaker::Model", "Properties": {
        "ExecutionRoleArn": {"Fn::GetAtt": ["Exec", "Arn"]},
        "PrimaryContainer": {"Image": {"Fn::ImportValue": "image-uri"},
                             "ModelDataUrl": {"Fn::Join": ["", ["s3://", {"Ref": "Bucket"}, "/m.tar.gz"]]}}}}
    resources = {"M": model, "Exec": role(), "Bucket": {"Type": "AWS::S3::Bucket", "Properties": {}},
                 "P": policy("Exec", allow(["ecr:*", "s3:*"]))}
    (finding,) = model_execution(Assembly.from_templates({"s": {"Resources": resources}}))
    assert "cannot tell from the template whether the role may read its image and its model data" in finding.message


INFERENCE_ACCESS = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"},
                                      ":iam::aws:policy/AmazonSageMakerHyperPodInferenceAccess"]]}
SAGEMAKER_TRUST = {"Statement": [{"Action": "sts:AssumeRole", "Effect": "Allow",
                                  "Principal": {"Service": "sagemaker.amazonaws.com"}}]}
STACK_SUFFIX = {"Fn::Select": [0, {"Fn::Split": ["-", {"Ref": "AWS::StackId"}]}]}


def operator_stack(role_name: Any = None, **role_props: Any) -> dict[str, Any]:
    """The inference operator's execution role (as the cluster stack writes it) and the add-on naming it."""
    props: dict[str, Any] = {"AssumeRolePolicyDocument": SAGEMAKER_TRUST, "ManagedPolicyArns": [INFERENCE_ACCESS],
                             **role_props}
    if role_name is not None:
        props["RoleName"] = role_name
    configuration = {"Fn::Join": ["", ['{"executionRoleArn":"', {"Fn::GetAtt": ["Exec", "Arn"]},
                                       '","tlsCertificateS3Bucket":"', {"Ref": "Tls"}, '"}']]}
    return {"Resources": {"Exec": {"Type": "AWS::IAM::Role", "Properties": props},
                          "Operator": {"Type": "AWS::EKS::Addon", "Properties": {
                              "AddonName": "amazon-sagemaker-hyperpod-inference",
                              "ConfigurationValues": configuration}}}}


def test_an_operator_role_with_a_generated_name_is_found() -> None:
    # The managed policy's PassRole covers role/SageMakerHyperPodInference* only: a generated name never matches.
    (finding,) = managed_pass_role(Assembly.from_templates({"s": operator_stack()}))
    assert (finding.rule, finding.resource) == ("roles.managed-pass-role", "Exec")
    assert "a name CloudFormation generates" in finding.message
    assert "arn:aws:iam::*:role/SageMakerHyperPodInference*" in finding.message
    (finding,) = managed_pass_role(Assembly.from_templates({"s": operator_stack("hyperwarm-operator")}))
    assert "is named hyperwarm-operator" in finding.message
    (finding,) = managed_pass_role(Assembly.from_templates({"s": operator_stack(
        "SageMakerHyperPodInference-x", Path="/hyperwarm/")}))
    assert "has path '/hyperwarm/'" in finding.message


def test_an_operator_role_named_as_aws_names_it_passes() -> None:
    for name in ("SageMakerHyperPodInference-prod",
                 {"Fn::Join": ["-", ["SageMakerHyperPodInference", STACK_SUFFIX]]},
                 {"Fn::Sub": "SageMakerHyperPodInference-${AWS::StackName}"}):
        assert managed_pass_role(Assembly.from_templates({"s": operator_stack(name)})) == []


def test_a_role_the_add_on_passes_is_checked_even_without_the_policy_or_the_trust() -> None:
    template = operator_stack()
    template["Resources"]["Exec"]["Properties"] = {"AssumeRolePolicyDocument": {"Statement": []}}
    (finding,) = managed_pass_role(Assembly.from_templates({"s": template}))
    assert finding.resource == "Exec"
    # A role holding the policy but passed nowhere (not trusted by SageMaker, named by no add-on) is not judged.
    template = operator_stack()
    template["Resources"]["Exec"]["Properties"]["AssumeRolePolicyDocument"] = {"Statement": []}
    del template["Resources"]["Operator"]
    assert managed_pass_role(Assembly.from_templates({"s": template})) == []


def test_a_role_name_or_an_add_on_role_the_rehearsal_cannot_see_is_a_finding() -> None:
    (finding,) = managed_pass_role(Assembly.from_templates({"s": operator_stack({"Ref": "RoleNameParameter"})}))
    assert "cannot tell that role/SageMakerHyperPodInference* covers it" in finding.message
    template = operator_stack("SageMakerHyperPodInference-x")
    template["Resources"]["Operator"]["Properties"]["ConfigurationValues"] = {"Fn::Join": ["", [
        '{"executionRoleArn":"', {"Fn::ImportValue": "operator-role-arn"}, '"}']]}
    (finding,) = managed_pass_role(Assembly.from_templates({"s": template}))
    assert finding.resource == "Operator" and "cannot follow executionRoleArn" in finding.message
    template["Resources"]["Operator"]["Properties"]["ConfigurationValues"] = json.dumps(
        {"executionRoleArn": "arn:aws:iam::123456789012:role/operator"})
    (finding,) = managed_pass_role(Assembly.from_templates({"s": template}))
    assert "role/operator, which role/SageMakerHyperPodInference* does not cover" in finding.message
