"""efa.security-group and cuda.inference-ami on defective in-memory templates."""

from __future__ import annotations

from typing import Any

from rehearsal import Assembly
from rehearsal.rules.cuda import inference_ami
from rehearsal.rules.efa import efa_security_group

SELF = {"Fn::GetAtt": ["Sg", "GroupId"]}


def cluster_stack(instance_type: str, *extra: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    group = {"Type": "AWS::EC2::SecurityGroup", "Properties": {
        "SecurityGroupEgress": [{"CidrIp": "0.0.0.0/0", "IpProtocol": "-1"}]}}
    ingress = {"Type": "AWS::EC2::SecurityGroupIngress",
               "Properties": {"GroupId": SELF, "SourceSecurityGroupId": SELF, "IpProtocol": "-1"}}
    cluster = {"Type": "AWS::SageMaker::Cluster", "Properties": {
        "InstanceGroups": [{"InstanceType": "ml.m5.2xlarge"}, {"InstanceType": instance_type}],
        "VpcConfig": {"SecurityGroupIds": [SELF], "Subnets": ["s"]}}}
    return {"Resources": {"Sg": group, "SelfIn": ingress, "Cluster": cluster, **dict(extra)}}


def test_efa_cluster_with_only_open_egress_is_found() -> None:
    # Finding 5: ingress from itself, but 0.0.0.0/0-only egress.
    (finding,) = efa_security_group(Assembly.from_templates({"s": cluster_stack("ml.p5.48xlarge")}))
    assert finding.resource == "Sg" and "egress" in finding.message and "ingress" not in finding.message


def test_efa_cluster_with_self_egress_passes_and_non_efa_clusters_are_not_checked() -> None:
    egress = {"Type": "AWS::EC2::SecurityGroupEgress",
              "Properties": {"GroupId": SELF, "DestinationSecurityGroupId": SELF, "IpProtocol": "-1"}}
    assert efa_security_group(Assembly.from_templates({"s": cluster_stack("ml.p5.48xlarge", ("SelfOut", egress))})) == []
    assert efa_security_group(Assembly.from_templates({"s": cluster_stack("ml.g5.xlarge")})) == []


CU130 = "763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:0.27.1-gpu-py312-cu130-ubuntu22.04-sagemaker"


def endpoint_stack(image: str, ami: str | None) -> dict[str, Any]:
    variant: dict[str, Any] = {"VariantName": "v", "ModelName": {"Fn::GetAtt": ["Model", "ModelName"]}}
    if ami:
        variant["InferenceAmiVersion"] = ami
    return {"Resources": {
        "Model": {"Type": "AWS::SageMaker::Model", "Properties": {"PrimaryContainer": {"Image": image}}},
        "Config": {"Type": "AWS::SageMaker::EndpointConfig", "Properties": {"ProductionVariants": [variant]}},
    }}


def test_cuda_13_image_on_the_default_or_an_older_ami_is_found() -> None:
    # Finding 10: cu130 needs driver 580 (al2023-ami-sagemaker-inference-gpu-4-1).
    for ami in (None, "al2-ami-sagemaker-inference-gpu-3-1"):
        (finding,) = inference_ami(Assembly.from_templates({"s": endpoint_stack(CU130, ami)}))
        assert "set inference_ami_version to al2023-ami-sagemaker-inference-gpu-4-1" in finding.message


def test_cuda_image_on_a_fitting_ami_or_an_image_without_cuda_tag_passes() -> None:
    assert inference_ami(Assembly.from_templates({"s": endpoint_stack(CU130, "al2023-ami-sagemaker-inference-gpu-4-1")})) == []
    cu124 = CU130.replace("cu130", "cu124")
    assert inference_ami(Assembly.from_templates({"s": endpoint_stack(cu124, "al2-ami-sagemaker-inference-gpu-3-1")})) == []
    plain = "123456789012.dkr.ecr.us-west-2.amazonaws.com/serving:1.0"
    assert inference_ami(Assembly.from_templates({"s": endpoint_stack(plain, None)})) == []


def test_inference_component_image_is_checked_against_its_variants_ami() -> None:
    template = endpoint_stack(CU130, None)
    template["Resources"]["Config"]["Properties"]["ProductionVariants"][0].pop("ModelName")
    template["Resources"]["Endpoint"] = {"Type": "AWS::SageMaker::Endpoint", "Properties": {
        "EndpointName": "chat", "EndpointConfigName": {"Fn::GetAtt": ["Config", "EndpointConfigName"]}}}
    template["Resources"]["Component"] = {"Type": "AWS::SageMaker::InferenceComponent", "Properties": {
        "EndpointName": "chat", "VariantName": "v",
        "Specification": {"ModelName": {"Fn::GetAtt": ["Model", "ModelName"]}}}}
    (finding,) = inference_ami(Assembly.from_templates({"s": template}))
    assert finding.resource == "Component"
    template["Resources"]["Config"]["Properties"]["ProductionVariants"][0]["InferenceAmiVersion"] = \
        "al2023-ami-sagemaker-inference-gpu-4-1"
    assert inference_ami(Assembly.from_templates({"s": template})) == []
