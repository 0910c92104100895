"""dependencies.*: names written as strings need a dependency path to what creates them."""

from __future__ import annotations

from typing import Any

from rehearsal import Assembly
from rehearsal.rules.dependencies import bucket_names, endpoint_names

ENDPOINT = {"Type": "AWS::SageMaker::Endpoint", "Properties": {"EndpointName": "chat", "EndpointConfigName": "x"}}


def scaling(**extra: Any) -> dict[str, Any]:
    return {"Type": "AWS::ApplicationAutoScaling::ScalableTarget", **extra,
            "Properties": {"ServiceNamespace": "sagemaker", "ResourceId": "endpoint/chat/variant/main",
                           "ScalableDimension": "sagemaker:variant:DesiredInstanceCount"}}


def test_scaling_target_racing_its_endpoint_is_found() -> None:
    findings = endpoint_names(Assembly.from_templates({"s": {"Resources": {"E": ENDPOINT, "T": scaling()}}}))
    assert [(f.resource, "add DependsOn: E" in f.message) for f in findings] == [("T", True)]


def test_scaling_target_after_its_endpoint_passes_directly_or_through_references() -> None:
    direct = {"E": ENDPOINT, "T": scaling(DependsOn=["E"])}
    through = {"E": ENDPOINT, "P": {"Type": "X", "Properties": {"A": {"Fn::GetAtt": ["E", "EndpointName"]}}},
               "T": scaling(DependsOn="P")}
    for resources in (direct, through):
        assert endpoint_names(Assembly.from_templates({"s": {"Resources": resources}})) == []


def test_scaling_target_naming_its_endpoint_through_tokens_still_needs_a_dependency() -> None:
    joined = {"Fn::Join": ["", ["endpoint/chat-", {"Ref": "AWS::Region"}, "/variant/main"]]}
    sub = {"Fn::Sub": "endpoint/chat-${AWS::Region}/variant/main"}
    for resource_id in (joined, sub):
        target = scaling()
        target["Properties"]["ResourceId"] = resource_id
        racing = endpoint_names(Assembly.from_templates({"s": {"Resources": {"E": ENDPOINT, "T": target}}}))
        assert [f.resource for f in racing] == ["T"] and "no dependency path" in racing[0].message
        waiting = {"E": ENDPOINT, "T": {**target, "DependsOn": ["E"]}}
        assert endpoint_names(Assembly.from_templates({"s": {"Resources": waiting}})) == []


def test_endpoint_in_another_stack_needs_the_stack_order() -> None:
    templates = {"endpoints": {"Resources": {"E": ENDPOINT}}, "scaling": {"Resources": {"T": scaling()}}}
    assert len(endpoint_names(Assembly.from_templates(templates))) == 1
    assert endpoint_names(Assembly.from_templates(templates, {"scaling": ["endpoints"]})) == []


def test_inference_component_naming_an_endpoint_no_stack_creates_is_found() -> None:
    component = {"Type": "AWS::SageMaker::InferenceComponent", "Properties": {"EndpointName": "other"}}
    (finding,) = endpoint_names(Assembly.from_templates({"s": {"Resources": {"C": component}}}))
    assert "no stack of the assembly creates" in finding.message


MODEL = {"Type": "AWS::SageMaker::Model", "Properties": {"PrimaryContainer": {
    "Image": "i", "ModelDataSource": {"S3DataSource": {"S3Uri": "s3://models/llama/v1/"}}}}}
BUCKET = {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "models"}}


def test_model_reading_a_bucket_created_by_a_later_stack_is_found() -> None:
    # Finding 2: staging's models read the bucket the refresh stack (deployed last) created.
    templates = {"endpoints": {"Resources": {"M": MODEL}}, "refresh": {"Resources": {"B": BUCKET}}}
    (finding,) = bucket_names(Assembly.from_templates(templates, {"refresh": ["endpoints"]}))
    assert (finding.stack, finding.resource) == ("endpoints", "M")
    assert "make stack endpoints depend on refresh" in finding.message
    assert bucket_names(Assembly.from_templates(templates, {"endpoints": ["refresh"]})) == []


def test_iam_arns_notification_and_kubectl_sources_are_bucket_references() -> None:
    policy = {"Type": "AWS::IAM::Policy", "Properties": {"PolicyDocument": {"Statement": [{"Resource": {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::models/llama/*"]]}}]}}}
    notifications = {"Type": "Custom::S3BucketNotifications", "Properties": {"BucketName": "models"}}
    manifest = {"Type": "Custom::AWSCDK-EKS-KubernetesResource", "Properties": {
        "Manifest": '[{"spec":{"modelSourceConfig":{"s3Storage":{"bucketName":"models"}}}}]'}}
    templates = {"a": {"Resources": {"P": policy, "N": notifications, "K": manifest}}}
    assert sorted(f.resource for f in bucket_names(Assembly.from_templates(templates))) == ["K", "N", "P"]


def test_a_bucket_is_either_created_first_or_declared_existing() -> None:
    declared = {"Metadata": {"hyperwarm:existingBuckets": ["models"]}, "Resources": {"M": MODEL}}
    assert bucket_names(Assembly.from_templates({"a": declared})) == []
    (undeclared,) = bucket_names(Assembly.from_templates({"a": {"Resources": {"M": MODEL}}}))
    assert "does not declare existing" in undeclared.message
    both = {"a": declared, "b": {"Resources": {"B": BUCKET}}}
    assert "declared existing but b/B creates it" in bucket_names(Assembly.from_templates(both, {"a": ["b"]}))[0].message


def test_a_buckets_own_name_and_tokenized_names_are_not_references() -> None:
    tokenized = {"Type": "AWS::IAM::Policy", "Properties": {"PolicyDocument": {"Statement": [{"Resource": {
        "Fn::Sub": "arn:${AWS::Partition}:s3:::cdk-hnb659fds-assets-${AWS::AccountId}-us-west-2/*"}}]}}}
    assert bucket_names(Assembly.from_templates({"a": {"Resources": {"B": BUCKET, "P": tokenized}}})) == []
