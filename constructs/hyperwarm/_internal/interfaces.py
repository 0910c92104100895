"""aws-cdk-lib classes as the jsii interfaces they implement, where its Python types fall behind."""

from __future__ import annotations

from typing import cast

from aws_cdk import aws_eks_v2 as eks
from constructs import IConstruct


def as_cluster(cluster: eks.Cluster) -> eks.ICluster:
    """``cluster`` as an ``ICluster``: aws-cdk-lib's Python ``Cluster`` leaves out the ``kubectl_provider_options``
    property that ``ICluster`` declares (``Cluster`` implements it in JavaScript), so mypy cannot match them."""
    return cast(eks.ICluster, cluster)


def scope_of(construct: IConstruct) -> IConstruct:
    """The construct that holds ``construct`` (e.g. a handler function, from its role); it has one below the app."""
    scope = construct.node.scope
    assert scope is not None, f"{construct.node.path} has no scope"
    return scope
