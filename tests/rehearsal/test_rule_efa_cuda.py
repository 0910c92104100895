"""efa.security-group and cuda.inference-ami on defective in-memory templates."""

from __future__ import annotations

import json
from typing import Any

from rehearsal import Assembly
from rehearsal.rules.cuda import hyperpod_ami, inference_ami
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


def endpoint_stack(image: Any, ami: str | None) -> dict[str, Any]:
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


def test_an_ami_or_an_image_tag_the_rule_cannot_see_is_a_finding() -> None:
    (finding,) = inference_ami(Assembly.from_templates({"s": endpoint_stack(CU130, "al2023-ami-sagemaker-inference-gpu-9")}))
    assert "InferenceAmiVersion 'al2023-ami-sagemaker-inference-gpu-9' is unknown to hyperwarm" in finding.message
    tagged_at_deploy = {"Fn::Join": ["", ["763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:", {"Ref": "Tag"}]]}
    (finding,) = inference_ami(Assembly.from_templates({"s": endpoint_stack(tagged_at_deploy, None)}))
    assert "has a tag known only at deploy time" in finding.message
    # A repository URI built from tokens with a literal tag is read.
    repository = {"Fn::Join": ["", [{"Ref": "AWS::AccountId"}, ".dkr.ecr.", {"Ref": "AWS::Region"},
                                    ".amazonaws.com/serving:1.0-cu130"]]}
    (finding,) = inference_ami(Assembly.from_templates({"s": endpoint_stack(repository, None)}))
    assert "needs CUDA 13.0" in finding.message


CU131 = CU130.replace("cu130", "cu131")


def hyperpod_stack(image: Any, **group: Any) -> Assembly:
    """A HyperPod cluster on an EKS cluster and one InferenceEndpointConfig on its group "gpu"."""
    worker = {"apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "InferenceEndpointConfig",
              "metadata": {"name": "qwen"}, "spec": {"worker": {"image": "__IMAGE__"}, "nodeAffinity": {
                  "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                      {"key": "sagemaker.amazonaws.com/instance-group-name", "operator": "In", "values": ["gpu"]}]}]}}}}
    before, after = json.dumps([worker]).split("__IMAGE__")
    manifest = before + image + after if isinstance(image, str) else {"Fn::Join": ["", [before, image, after]]}
    groups = [{"InstanceGroupName": "system", "InstanceType": "ml.m5.2xlarge", "ImageId": "ami-0123"},
              {"InstanceGroupName": "gpu", "InstanceType": "ml.g5.12xlarge", **group}]
    return Assembly.from_templates({"s": {"Resources": {
        "Eks": {"Type": "AWS::EKS::Cluster", "Properties": {}},
        "HyperPod": {"Type": "AWS::SageMaker::Cluster", "Properties": {
            "Orchestrator": {"Eks": {"ClusterArn": {"Fn::GetAtt": ["Eks", "Arn"]}}}, "InstanceGroups": groups}},
        "Manifest": {"Type": "Custom::AWSCDK-EKS-KubernetesResource", "Properties": {
            "ClusterName": {"Ref": "Eks"}, "Manifest": manifest}},
    }}})


def test_a_hyperpod_worker_needing_a_newer_cuda_than_the_hyperpod_ami_is_found() -> None:
    # HyperPod EKS AMIs 1.x run NVIDIA driver 580: CUDA 13.0 at most. The system group's custom AMI is not
    # judged: the worker cannot land there.
    (finding,) = hyperpod_ami(hyperpod_stack(CU131))
    assert (finding.rule, finding.resource) == ("cuda.hyperpod-ami", "Manifest")
    assert "InferenceEndpointConfig qwen: instance group 'gpu': the image needs CUDA 13.1 but HyperPod's EKS AMIs " \
           "run NVIDIA driver 580, CUDA <= 13.0" in finding.message
    assert hyperpod_ami(hyperpod_stack(CU130)) == []
    assert hyperpod_ami(hyperpod_stack(CU130, ImageReleaseVersion="1.3.0")) == []
    assert hyperpod_ami(hyperpod_stack("123456789012.dkr.ecr.us-west-2.amazonaws.com/server:2")) == []


def test_a_hyperpod_node_driver_or_worker_image_the_rule_cannot_see_is_a_finding() -> None:
    (finding,) = hyperpod_ami(hyperpod_stack(CU130, ImageId="ami-0abc"))
    assert "runs a custom AMI (ImageId)" in finding.message
    (finding,) = hyperpod_ami(hyperpod_stack(CU130, ImageReleaseVersion="0.9.1"))
    assert "pins ImageReleaseVersion '0.9.1'" in finding.message
    (finding,) = hyperpod_ami(hyperpod_stack({"Ref": "ImageUri"}))
    assert "is known only at deploy time" in finding.message
    assembly = hyperpod_stack(CU130)
    assembly.templates["s"]["Resources"]["Manifest"]["Properties"]["ClusterName"] = "team-cluster"
    (finding,) = hyperpod_ami(assembly)
    assert "cannot follow its ClusterName to a HyperPod cluster" in finding.message
