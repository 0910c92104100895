"""Per-node capacity of HyperPod instance groups, read from the templates as CloudFormation applies them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hyperwarm.cluster.catalog import CATALOG
from hyperwarm.cluster.node_capacity import (
    PODS_PER_NODE_METADATA,
    NodeGroup,
    addon_workloads,
    node_problems,
    workloads_from_objects,
)
from rehearsal.core import Assembly, Finding, rule

ClusterKey = tuple[str, str]
"""(stack, logical id) of an ``AWS::EKS::Cluster``."""


def _node_group(group: dict[str, Any], pods_per_node: Any) -> NodeGroup | str:
    """The instance group as the check needs it, or what the rehearsal cannot read of it."""
    name, instance_type = group.get("InstanceGroupName", "?"), group.get("InstanceType")
    count, threads = group.get("InstanceCount"), group.get("ThreadsPerCore", 1)
    if instance_type not in CATALOG:
        return (f"instance group {name!r}: instance type {instance_type!r} is not in hyperwarm's catalog, so its "
                "pods, vCPUs, memory and GPUs per node are unknown")
    if not isinstance(count, int) or not isinstance(threads, int):
        return f"instance group {name!r}: InstanceCount or ThreadsPerCore is known only at deploy time"
    override = pods_per_node.get(instance_type) if isinstance(pods_per_node, dict) else None
    if override is not None and (not isinstance(override, int) or isinstance(override, bool) or override < 1):
        return f"instance group {name!r}: {PODS_PER_NODE_METADATA} gives {override!r} pods for {instance_type}"
    return NodeGroup(name, instance_type, count, threads, override)


@rule("nodes.capacity",
      source="https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-setup.html")
def every_node_holds_its_pods(assembly: Assembly) -> Iterator[Finding]:
    """Each HyperPod node can hold the pods placed on it: pods, CPU, memory and GPUs.

    For every ``AWS::SageMaker::Cluster``: its instance groups (type, count, ThreadsPerCore) against
    the DaemonSets, Deployments and ``InferenceEndpointConfig`` objects the kubectl resources apply to
    its EKS cluster, and the pods of its EKS add-ons (the inference operator runs about 13). A pod
    that finds no room stays Pending: a HyperPod node holds far fewer pods than an EC2 node of the
    same type (14 on ml.g5.xlarge), and ``ThreadsPerCore: 1`` halves the vCPUs.

    The pods-per-node figure is hyperwarm's estimate (``hyperwarm.cluster.catalog``): AWS publishes none for
    HyperPod. An override per instance type (``pods_per_node``) is read from the cluster's metadata
    (``hyperwarm:pods-per-node``). What the rule cannot read is a finding: a type outside the catalog,
    a count known only at deploy time, a cluster whose EKS cluster it cannot follow.
    """
    objects: dict[ClusterKey, list[dict[str, Any]]] = {}
    for stack, logical_id, obj in assembly.kubernetes_objects():
        resource = assembly.templates[stack]["Resources"][logical_id]
        key = assembly.referenced(stack, resource["Properties"].get("ClusterName"))
        if key:
            objects.setdefault(key, []).append(obj)
    addons: dict[ClusterKey, list[str]] = {}
    for stack, _, resource in assembly.resources("AWS::EKS::Addon"):
        key = assembly.referenced(stack, resource["Properties"].get("ClusterName"))
        if key:
            addons.setdefault(key, []).append(resource["Properties"]["AddonName"])

    for stack, logical_id, resource in assembly.resources("AWS::SageMaker::Cluster"):
        properties = resource.get("Properties", {})
        key = assembly.referenced(stack, properties.get("Orchestrator", {}).get("Eks", {}).get("ClusterArn"))
        if key is None:
            yield Finding("nodes.capacity", stack, logical_id, "the rehearsal cannot follow Orchestrator.Eks.ClusterArn "
                          "to an EKS cluster in the assembly, so it cannot tell what runs on the nodes")
            continue
        pods_per_node = resource.get("Metadata", {}).get(PODS_PER_NODE_METADATA, {})
        groups = [_node_group(g, pods_per_node) for g in properties.get("InstanceGroups", [])]
        unreadable = [g for g in groups if isinstance(g, str)]
        for problem in unreadable:
            yield Finding("nodes.capacity", stack, logical_id, problem)
        if unreadable:
            continue
        workloads = workloads_from_objects(objects.get(key, [])) + addon_workloads(addons.get(key, []))
        for problem in node_problems([g for g in groups if isinstance(g, NodeGroup)], workloads):
            yield Finding("nodes.capacity", stack, logical_id, problem)
