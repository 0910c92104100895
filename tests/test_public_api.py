"""The public surface reads like aws-cdk-lib's: every public class's annotations resolve at run time (pdoc, pydantic
and a team's own tooling call ``typing.get_type_hints``), and a name a pure module types for checkers only loads
nothing until asked."""

from __future__ import annotations

import inspect
import subprocess
import sys
import typing

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template
from stand_ins import imported_cluster

import hyperwarm
from hyperwarm import HyperPodEksCluster, HyperPodEksClusterProps, IHyperPodCluster, InstanceGroupSpec


def _public_classes() -> list[tuple[str, type]]:
    return [(n, getattr(hyperwarm, n)) for n in hyperwarm.__all__ if inspect.isclass(getattr(hyperwarm, n))]


def test_get_type_hints_works_on_every_public_class_and_method() -> None:
    broken = []
    for name, cls in _public_classes():
        for where, target in [(name, cls), *((f"{name}.{m}", f) for m, f in inspect.getmembers(cls, inspect.isfunction)
                                              if not m.startswith("_") or m == "__init__")]:
            try:
                typing.get_type_hints(target)
            except Exception as exc:  # noqa: BLE001 - every failure is listed
                broken.append(f"{where}: {type(exc).__name__}: {exc}")
    assert len(_public_classes()) > 60 and broken == []


def test_instance_group_specs_still_load_without_aws_cdk() -> None:
    """Its ``cdk.Size`` annotation resolves on first use: loading the module starts no Node."""
    code = ("import sys, typing, hyperwarm.cluster.instance_group as m\n"
            "assert 'aws_cdk' not in sys.modules\n"
            "import aws_cdk\n"
            "assert typing.get_type_hints(m.InstanceGroupSpec)['ebs_volume'] == typing.Optional[aws_cdk.Size]\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def _cluster_stack() -> cdk.Stack:
    return cdk.Stack(cdk.App(), "T", env=cdk.Environment(account="123456789012", region="us-west-2"))


def test_the_cluster_is_a_resource_whose_connections_open_its_node_security_group() -> None:
    """Like an ``rds.DatabaseCluster``: ``peer.connections.allow_to(cluster, port)`` opens the nodes' group."""
    stack = _cluster_stack()
    cluster = HyperPodEksCluster(stack, "HyperPod", HyperPodEksClusterProps(
        instance_groups=[InstanceGroupSpec(name="system", instance_type="ml.m5.xlarge")],
        install_inference_operator=False))
    assert cdk.Resource.is_resource(cluster) and cluster.env.region == "us-west-2"
    peer = ec2.SecurityGroup(stack, "Peer", vpc=cluster.vpc)
    peer.connections.allow_to(cluster, ec2.Port.tcp(8080), "peer to the nodes")
    Template.from_stack(stack).has_resource_properties("AWS::EC2::SecurityGroupIngress", {
        "GroupId": stack.resolve(cluster.security_group.security_group_id), "FromPort": 8080,
        "SourceSecurityGroupId": stack.resolve(peer.security_group_id)})


def test_an_imported_cluster_has_connections_too() -> None:
    stack = _cluster_stack()
    cluster: IHyperPodCluster = imported_cluster(stack, [InstanceGroupSpec(name="system", instance_type="ml.m5.xlarge")])
    assert cdk.Resource.is_resource(cluster)
    assert [g.security_group_id for g in cluster.connections.security_groups] == ["sg-0123456789abcdef0"]
    fs = ec2.SecurityGroup(stack, "FileSystem", vpc=cluster.vpc)
    fs.connections.allow_from(cluster, ec2.Port.tcp(988), "Lustre from the nodes")
    Template.from_stack(stack).has_resource_properties("AWS::EC2::SecurityGroupIngress", {
        "GroupId": stack.resolve(fs.security_group_id), "FromPort": 988, "SourceSecurityGroupId": "sg-0123456789abcdef0"})

