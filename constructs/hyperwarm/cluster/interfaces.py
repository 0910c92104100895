"""``IHyperPodCluster``: what other constructs use of a HyperPod cluster, in a module that loads no construct.

Props that take a cluster (a cached model's, a dashboard's) import it from here, so parsing them (the app's
cdk.json) loads neither EKS's constructs nor the cluster's, and their annotations resolve at run time
(``typing.get_type_hints``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from aws_cdk import aws_iam as iam
from constructs import Node

from hyperwarm.cluster.instance_group import InstanceGroup

if TYPE_CHECKING:
    from aws_cdk import aws_ec2 as ec2, aws_eks_v2 as eks

    from hyperwarm.cluster.addons import IInferenceOperator


class IHyperPodCluster(Protocol):
    """What other stacks use of a HyperPod EKS cluster."""

    @property
    def node(self) -> Node: ...

    @property
    def cluster_arn(self) -> str:
        """The ``AWS::SageMaker::Cluster``'s ARN (HyperPod's APIs take it where they ask for a name)."""
        ...

    @property
    def eks_cluster(self) -> eks.ICluster: ...

    @property
    def vpc(self) -> ec2.IVpc: ...

    @property
    def security_group(self) -> ec2.ISecurityGroup:
        """The group of the nodes and the EKS control plane; the EKS API listens on it."""
        ...

    @property
    def connections(self) -> ec2.Connections:
        """``security_group``'s connections (``ec2.IConnectable``): ``peer.connections.allow_to(cluster, port)``."""
        ...

    @property
    def inference_operator(self) -> IInferenceOperator | None:
        """None when the cluster has no HyperPod inference operator."""
        ...

    @property
    def instance_groups(self) -> Mapping[str, InstanceGroup]: ...

    def instance_group(self, name: str) -> InstanceGroup: ...

    def cache_group(self, name: str) -> InstanceGroup: ...

    def grant_describe(self, grantee: iam.IGrantable) -> iam.Grant: ...
