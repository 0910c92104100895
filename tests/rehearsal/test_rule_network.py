"""network.control-plane-to-model-pods on defective in-memory templates."""

from __future__ import annotations

import json
from typing import Any

from rehearsal import Assembly
from rehearsal.rules.network import control_plane_reaches_model_pods

NODES, PLANE = {"Fn::GetAtt": ["NodeSg", "GroupId"]}, {"Fn::GetAtt": ["PlaneSg", "GroupId"]}


def _ingress(source: dict[str, Any], protocol: str, ports: tuple[int, int] | None = None) -> dict[str, Any]:
    props: dict[str, Any] = {"GroupId": NODES, "SourceSecurityGroupId": source, "IpProtocol": protocol}
    if ports:
        props.update(FromPort=ports[0], ToPort=ports[1])
    return {"Type": "AWS::EC2::SecurityGroupIngress", "Properties": props}


def assembly(*ingress: dict[str, Any], metrics: dict[str, Any] | None = None) -> Assembly:
    """A cluster stack (nodes and control plane in separate groups) and a caches stack with one model."""
    cluster = {"Resources": {
        "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}},
        "NodeSg": {"Type": "AWS::EC2::SecurityGroup", "Properties": {"VpcId": {"Ref": "Vpc"}}},
        "PlaneSg": {"Type": "AWS::EC2::SecurityGroup", "Properties": {}},
        **{f"In{i}": rule for i, rule in enumerate(ingress)},
        "Eks": {"Type": "AWS::EKS::Cluster", "Properties": {"ResourcesVpcConfig": {"SecurityGroupIds": [PLANE]}}},
        "HyperPod": {"Type": "AWS::SageMaker::Cluster", "Properties": {
            "Orchestrator": {"Eks": {"ClusterArn": {"Fn::GetAtt": ["Eks", "Arn"]}}},
            "VpcConfig": {"SecurityGroupIds": [NODES]}}},
        "Provider": {"Type": "AWS::Lambda::Function", "Properties": {}}},
        "Outputs": {"ProviderArn": {"Value": {"Fn::GetAtt": ["Provider", "Arn"]}, "Export": {"Name": "provider"}}}}
    spec: dict[str, Any] = {"worker": {"modelInvocationPort": {"containerPort": 8080}}}
    if metrics:
        spec["metrics"] = metrics
    model = {"apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "InferenceEndpointConfig",
             "metadata": {"name": "llama"}, "spec": spec}
    caches = {"Resources": {"Manifest": {"Type": "Custom::AWSCDK-EKS-KubernetesResource", "Properties": {
        "ServiceToken": {"Fn::ImportValue": "provider"}, "Manifest": json.dumps([model])}}}}
    return Assembly.from_templates({"cluster": cluster, "caches": caches}, {"caches": ["cluster"]})


def test_nodes_admitting_only_https_from_the_control_plane_are_found() -> None:
    (finding,) = control_plane_reaches_model_pods(assembly(_ingress(PLANE, "tcp", (443, 443))))
    assert (finding.stack, finding.resource) == ("cluster", "NodeSg")
    assert "no TCP 8080" in finding.message and "llama" in finding.message


def test_the_operators_metrics_port_is_the_one_checked() -> None:
    opened = _ingress(PLANE, "tcp", (8080, 8080))
    (finding,) = control_plane_reaches_model_pods(assembly(opened, metrics={"modelMetrics": {"port": 9400}}))
    assert "no TCP 9400" in finding.message


def test_a_port_range_all_traffic_or_the_eks_created_group_as_source_passes() -> None:
    eks_group = {"Fn::GetAtt": ["Eks", "ClusterSecurityGroupId"]}
    for rule in (_ingress(PLANE, "tcp", (1024, 65535)), _ingress(PLANE, "-1"), _ingress(eks_group, "6", (8080, 8080))):
        assert control_plane_reaches_model_pods(assembly(rule)) == []


def test_another_groups_rule_does_not_count() -> None:
    from_elsewhere = _ingress({"Fn::GetAtt": ["NodeSg", "GroupId"]}, "-1")  # node to node only
    assert len(list(control_plane_reaches_model_pods(assembly(from_elsewhere)))) == 1


def _from_range(cidr: str) -> dict[str, Any]:
    return {"Type": "AWS::EC2::SecurityGroupIngress",
            "Properties": {"GroupId": NODES, "CidrIp": cidr, "IpProtocol": "tcp", "FromPort": 8080, "ToPort": 8080}}


def test_an_address_range_counts_only_when_it_holds_the_whole_vpc() -> None:
    """The control plane's interfaces take addresses anywhere in the VPC's subnets."""
    for cidr in ("10.0.0.0/16", "10.0.0.0/8", "0.0.0.0/0"):
        assert control_plane_reaches_model_pods(assembly(_from_range(cidr))) == [], cidr
    for cidr in ("10.0.1.0/24", "10.0.0.5/32", "192.168.0.0/16"):
        assert len(list(control_plane_reaches_model_pods(assembly(_from_range(cidr))))) == 1, cidr


def test_an_address_range_the_rule_cannot_compare_with_the_vpc_does_not_pass() -> None:
    """Unknown is a failure: a token range, or a VPC whose range is not in the template."""
    token = _from_range("10.0.0.0/8")
    token["Properties"]["CidrIp"] = {"Fn::ImportValue": "some-range"}
    assert len(list(control_plane_reaches_model_pods(assembly(token)))) == 1
    unknown_vpc = assembly(_from_range("10.0.0.0/8"))
    for template in unknown_vpc.templates.values():
        for resource in template["Resources"].values():
            if resource["Type"] == "AWS::EC2::VPC":
                resource["Properties"].pop("CidrBlock", None)
    assert len(list(control_plane_reaches_model_pods(unknown_vpc))) == 1
