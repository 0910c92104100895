"""Per-node capacity of HyperPod instance groups, read from the templates as CloudFormation applies them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hyperwarm.node_capacity import NodeGroup, addon_workloads, node_problems, workloads_from_objects
from rehearsal.core import Assembly, Finding, rule

ClusterKey = tuple[str, str]
"""(stack, logical id) of an ``AWS::EKS::Cluster``."""


@rule("nodes.capacity",
      source="https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-setup.html")
def every_node_holds_its_pods(assembly: Assembly) -> Iterator[Finding]:
    """Each HyperPod node can hold the pods placed on it: pods, CPU, memory and GPUs.

    For every ``AWS::SageMaker::Cluster``: its instance groups (type, count, ThreadsPerCore) against
    the DaemonSets, Deployments and ``InferenceEndpointConfig`` objects the kubectl resources apply to
    its EKS cluster, and the pods of its EKS add-ons (the inference operator runs about 13). A pod
    that finds no room stays Pending: a HyperPod node holds far fewer pods than an EC2 node of the
    same type (14 on ml.g5.xlarge), and ``ThreadsPerCore: 1`` halves the vCPUs. Schema validators
    see none of this; the per-type numbers are in ``hyperwarm.catalog``.
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
        groups = [NodeGroup(g["InstanceGroupName"], g["InstanceType"], int(g["InstanceCount"]),
                            int(g.get("ThreadsPerCore", 1))) for g in properties.get("InstanceGroups", [])]
        workloads = workloads_from_objects(objects.get(key, [])) + addon_workloads(addons.get(key, []))
        for problem in node_problems(groups, workloads):
            yield Finding("nodes.capacity", stack, logical_id, problem)


