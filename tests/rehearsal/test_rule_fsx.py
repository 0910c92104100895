"""fsx.lustre-ports and fsx.csi-driver on defective in-memory templates."""

from __future__ import annotations

import json
from typing import Any

from hyperwarm.caches.fsx import FILE_SYSTEM_METADATA
from rehearsal import Assembly
from rehearsal.rules.fsx import clusters_mount_file_systems, nodes_reach_file_systems

FS = "fs-0123456789abcdef0"
NODES = {"Fn::ImportValue": "nodes"}  # the caches stack's reference to the cluster stack's node group
SERVERS = "sg-0fedcba9876543210"  # the file system's security group


def ingress(low: int, high: int, *, source: Any = NODES, group: Any = SERVERS, protocol: str = "tcp",
            file_system: str | None = FS) -> dict[str, Any]:
    """An ingress rule; by default the file system's group admitting the nodes."""
    rule: dict[str, Any] = {"Type": "AWS::EC2::SecurityGroupIngress", "Properties": {
        "GroupId": group, "IpProtocol": protocol, "FromPort": low, "ToPort": high,
        "SourceSecurityGroupId": source}}
    if file_system:
        rule["Metadata"] = {FILE_SYSTEM_METADATA: file_system}
    return rule


def back(low: int, high: int, **kwargs: Any) -> dict[str, Any]:
    """The nodes' group admitting the file servers."""
    return ingress(low, high, **{"group": NODES, "source": SERVERS, **kwargs})


BACK = (back(988, 988), back(1018, 1023))
OPEN = (ingress(988, 988), ingress(1018, 1023), *BACK)


def assembly(*rules: dict[str, Any], egress: list[dict[str, Any]] | None = None, addon: bool = True,
             source_type: str = "fsx") -> Assembly:
    """A cluster stack (nodes' group, EKS cluster, its add-ons, the HyperPod cluster) and a caches stack applying
    one model read from FSx, with the ingress rules ``rules``."""
    group: dict[str, Any] = {"VpcId": "vpc-0123456789abcdef0"}
    if egress is not None:
        group["SecurityGroupEgress"] = egress
    cluster = {"Resources": {
        "NodeSg": {"Type": "AWS::EC2::SecurityGroup", "Properties": group},
        "Eks": {"Type": "AWS::EKS::Cluster", "Properties": {}},
        "HyperPod": {"Type": "AWS::SageMaker::Cluster", "Properties": {
            "Orchestrator": {"Eks": {"ClusterArn": {"Fn::GetAtt": ["Eks", "Arn"]}}},
            "VpcConfig": {"SecurityGroupIds": [{"Fn::GetAtt": ["NodeSg", "GroupId"]}]}}},
        "Provider": {"Type": "AWS::Lambda::Function", "Properties": {}}},
        "Outputs": {"ProviderArn": {"Value": {"Fn::GetAtt": ["Provider", "Arn"]}, "Export": {"Name": "provider"}},
                    "Nodes": {"Value": {"Fn::GetAtt": ["NodeSg", "GroupId"]}, "Export": {"Name": "nodes"}}}}
    if addon:
        cluster["Resources"]["FsxCsi"] = {"Type": "AWS::EKS::Addon", "Properties": {
            "AddonName": "aws-fsx-csi-driver", "ClusterName": {"Ref": "Eks"}}}
    source = {"modelSourceType": source_type, "modelLocation": "models/qwen/v1",
              "fsxStorage": {"fileSystemId": FS, "mountName": "abcdef12"}}
    model = {"apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "InferenceEndpointConfig",
             "metadata": {"name": "qwen"}, "spec": {"modelSourceConfig": source}}
    caches = {"Resources": {
        "Manifest": {"Type": "Custom::AWSCDK-EKS-KubernetesResource", "Properties": {
            "ServiceToken": {"Fn::ImportValue": "provider"}, "Manifest": json.dumps([model])}},
        **{f"Lustre{i}": rule for i, rule in enumerate(rules)}}}
    return Assembly.from_templates({"cluster": cluster, "caches": caches}, {"caches": ["cluster"]})


def test_lustre_ports_open_both_ways_pass() -> None:
    assert list(nodes_reach_file_systems(assembly(*OPEN))) == []
    assert list(nodes_reach_file_systems(assembly(ingress(988, 1023), back(988, 1023)))) == []  # one range, both
    assert list(nodes_reach_file_systems(assembly(ingress(0, 0, protocol="-1"), back(0, 0, protocol="-1")))) == []


def test_nodes_that_do_not_admit_the_file_servers_are_found() -> None:
    """AWS's "Lustre client VPC security group rules": the clients' groups admit the file system's on 988 and
    1018-1023 too (the servers connect to the clients)."""
    (finding,) = nodes_reach_file_systems(assembly(ingress(988, 988), ingress(1018, 1023)))
    assert (finding.rule, finding.stack, finding.resource) == ("fsx.lustre-ports", "cluster", "HyperPod")
    assert ("the cluster's node security groups admit no TCP 988 and 1018-1023 from the file system's security "
            "group") in finding.message
    (finding,) = nodes_reach_file_systems(assembly(ingress(988, 988), ingress(1018, 1023), back(988, 988)))
    assert "admit no TCP 1018-1023 from" in finding.message
    # From another group than the file system's, or to another group than the nodes', they do not count.
    elsewhere = [back(lo, hi, source="sg-0aaaaaaaaaaaaaaaa") for lo, hi in ((988, 988), (1018, 1023))]
    assert len(list(nodes_reach_file_systems(assembly(ingress(988, 988), ingress(1018, 1023), *elsewhere)))) == 1
    other_group = [back(lo, hi, group={"Fn::ImportValue": "elsewhere"}) for lo, hi in ((988, 988), (1018, 1023))]
    assert len(list(nodes_reach_file_systems(assembly(ingress(988, 988), ingress(1018, 1023), *other_group)))) == 1


def test_no_rule_for_the_file_system_is_found_naming_both_ranges() -> None:
    (finding,) = nodes_reach_file_systems(assembly(*BACK))
    assert (finding.rule, finding.stack, finding.resource) == ("fsx.lustre-ports", "cluster", "HyperPod")
    assert f"model qwen reads FSx {FS}, whose security group admits no TCP 988 and 1018-1023" in finding.message


def test_a_missing_or_narrower_range_is_found() -> None:
    (finding,) = nodes_reach_file_systems(assembly(ingress(988, 988), *BACK))
    assert "admits no TCP 1018-1023 " in finding.message
    (finding,) = nodes_reach_file_systems(assembly(ingress(988, 988), ingress(1018, 1021), *BACK))
    assert "admits no TCP 1018-1023 " in finding.message
    (finding,) = nodes_reach_file_systems(assembly(ingress(988, 988, protocol="udp"), ingress(1018, 1023), *BACK))
    assert "admits no TCP 988 " in finding.message


def test_rules_from_another_group_or_for_another_file_system_do_not_count() -> None:
    elsewhere = {"Fn::ImportValue": "somewhere-else"}
    assert len(list(nodes_reach_file_systems(assembly(*(ingress(lo, hi, source=elsewhere) for lo, hi in
                                                                 ((988, 988), (1018, 1023))), *BACK)))) == 1
    other = [ingress(lo, hi, file_system="fs-0aaaaaaaaaaaaaaaa") for lo, hi in ((988, 988), (1018, 1023))]
    assert len(list(nodes_reach_file_systems(assembly(*other, *BACK)))) == 1
    unmarked = [ingress(lo, hi, file_system=None) for lo, hi in ((988, 988), (1018, 1023))]
    assert len(list(nodes_reach_file_systems(assembly(*unmarked, *BACK)))) == 1


def test_nodes_that_may_not_send_lustre_out_are_found() -> None:
    https_only = [{"CidrIp": "0.0.0.0/0", "IpProtocol": "tcp", "FromPort": 443, "ToPort": 443}]
    (finding,) = nodes_reach_file_systems(assembly(*OPEN, egress=https_only))
    assert finding.resource == "NodeSg" and "may not send TCP 988 and 1018-1023 out" in finding.message
    everywhere = [{"CidrIp": "0.0.0.0/0", "IpProtocol": "-1"}]
    assert list(nodes_reach_file_systems(assembly(*OPEN, egress=everywhere))) == []
    assert list(nodes_reach_file_systems(assembly(*OPEN))) == []  # no egress given: EC2's default, all out


def test_models_read_from_s3_are_not_checked() -> None:
    assert list(nodes_reach_file_systems(assembly(source_type="s3"))) == []
    assert list(clusters_mount_file_systems(assembly(source_type="s3", addon=False))) == []


def test_a_cluster_without_the_fsx_csi_driver_is_found() -> None:
    assert list(clusters_mount_file_systems(assembly(*OPEN))) == []
    (finding,) = clusters_mount_file_systems(assembly(*OPEN, addon=False))
    assert (finding.rule, finding.stack, finding.resource) == ("fsx.csi-driver", "cluster", "Eks")
    assert "no aws-fsx-csi-driver add-on" in finding.message
