"""Models read from FSx for Lustre: the cluster has the FSx CSI driver, and the nodes reach the file system on
Lustre's ports."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from hyperwarm.caches.fsx import FILE_SYSTEM_METADATA, LUSTRE_PORTS
from rehearsal.core import Assembly, Finding, ref_target, rule

PORTS_RULE = "fsx.lustre-ports"
CSI_RULE = "fsx.csi-driver"
CSI_ADDON = "aws-fsx-csi-driver"


def _fsx_models(assembly: Assembly) -> Iterator[tuple[str, str, str]]:
    """(cluster stack, model name, file system id) of every InferenceEndpointConfig read from FSx, by the stack
    of the kubectl provider that applies it (the stack of its cluster)."""
    for stack, logical_id, obj in assembly.kubernetes_objects():
        source = obj.get("spec", {}).get("modelSourceConfig", {}) if obj.get("kind") == "InferenceEndpointConfig" \
            else {}
        if source.get("modelSourceType") != "fsx":
            continue
        token = assembly.templates[stack]["Resources"][logical_id].get("Properties", {}).get("ServiceToken")
        provider = assembly.referenced(stack, token)
        if provider:
            yield provider[0], obj["metadata"]["name"], source.get("fsxStorage", {}).get("fileSystemId", "")


def _clusters(assembly: Assembly, stack: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for logical_id, resource in assembly.templates[stack].get("Resources", {}).items():
        if resource.get("Type") == "AWS::SageMaker::Cluster":
            yield logical_id, resource.get("Properties", {})


def _covers(rule_: Mapping[str, Any], low: int, high: int) -> bool:
    """TCP ports ``low..high`` (all protocols too)."""
    protocol = str(rule_.get("IpProtocol"))
    return protocol == "-1" or (protocol in ("tcp", "6") and int(rule_.get("FromPort", -1)) <= low
                                and high <= int(rule_.get("ToPort", -1)))


def _open(assembly: Assembly, file_system: str, nodes: set[tuple[str, str]]
          ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The Lustre port ranges open (to the file system from ``nodes``, to ``nodes`` from the file system) by the
    ingress rules marked as opening ``file_system``; ``nodes`` are (stack, logical id) of node security groups. The
    file system's groups are those its marked rules admit the nodes to."""
    rules = [(stack, r.get("Properties", {})) for stack, _, r in assembly.resources("AWS::EC2::SecurityGroupIngress")
             if r.get("Metadata", {}).get(FILE_SYSTEM_METADATA) == file_system]
    to_servers = [props for stack, props in rules if assembly.referenced(stack, props.get("SourceSecurityGroupId")) in nodes]
    servers = {json.dumps(props.get("GroupId"), sort_keys=True) for props in to_servers}
    to_nodes = [props for stack, props in rules if assembly.referenced(stack, props.get("GroupId")) in nodes
                and json.dumps(props.get("SourceSecurityGroupId"), sort_keys=True) in servers]
    return ([(low, high) for low, high in LUSTRE_PORTS if any(_covers(p, low, high) for p in to_servers)],
            [(low, high) for low, high in LUSTRE_PORTS if any(_covers(p, low, high) for p in to_nodes)])


def _ports(ranges: list[tuple[int, int]]) -> str:
    return " and ".join(f"{low}" if low == high else f"{low}-{high}" for low, high in ranges)


def _egress_blocked(resources: Mapping[str, Any], group: str) -> list[tuple[int, int]]:
    """Lustre port ranges a node security group of the template does not let out to everywhere (its rules to
    a named group cannot be compared with a file system's group at synth, so only 0.0.0.0/0 counts)."""
    props = resources[group].get("Properties", {})
    if "SecurityGroupEgress" not in props:
        return []  # the group keeps the rule EC2 gives every new group: all traffic out to 0.0.0.0/0
    rules = [r for r in props["SecurityGroupEgress"] if isinstance(r, dict)]
    rules += [r.get("Properties", {}) for r in resources.values()
              if r.get("Type") == "AWS::EC2::SecurityGroupEgress"
              and ref_target(r.get("Properties", {}).get("GroupId")) == group]
    return [(low, high) for low, high in LUSTRE_PORTS
            if not any(_covers(r, low, high) and r.get("CidrIp") == "0.0.0.0/0" for r in rules)]


@rule(PORTS_RULE, source="https://docs.aws.amazon.com/fsx/latest/LustreGuide/limit-access-security-groups.html"
                   "#lustre-client-inbound-outbound-rules")
def nodes_reach_file_systems(assembly: Assembly) -> Iterator[Finding]:
    """For each model read from FSx for Lustre, the file system's security group admits the cluster's node
    security groups on TCP 988 and 1018-1023, the node groups admit the file system's group on the same ports
    (Lustre's connections go both ways: AWS's "Lustre client VPC security group rules"), each by ingress rules
    marked with the file system's id as :func:`hyperwarm.caches.fsx.admit_nodes` makes them, and each node group of
    the template lets those ports out. Without them the CSI driver's mount hangs and the pods never start."""
    for stack, model, file_system in _fsx_models(assembly):
        resources = assembly.templates[stack].get("Resources", {})
        for logical_id, cluster in _clusters(assembly, stack):
            groups = [g for g in (ref_target(s) for s in cluster.get("VpcConfig", {}).get("SecurityGroupIds", []))
                      if g is not None]
            to_servers, to_nodes = _open(assembly, file_system, {(stack, g) for g in groups})
            missing = [r for r in LUSTRE_PORTS if r not in to_servers]
            if missing:
                yield Finding(PORTS_RULE, stack, logical_id,
                              f"model {model} reads FSx {file_system}, whose security group admits no TCP "
                              f"{_ports(missing)} from the cluster's node security groups: give the source's "
                              "security_group_id (hyperwarm opens Lustre's ports on it)")
            back = [r for r in LUSTRE_PORTS if r not in to_nodes]
            if back and not missing:
                yield Finding(PORTS_RULE, stack, logical_id,
                              f"model {model} reads FSx {file_system}, but the cluster's node security groups admit "
                              f"no TCP {_ports(back)} from the file system's security group: Lustre's file servers "
                              "connect to their clients too (hyperwarm.caches.fsx.admit_nodes opens both ways)")
            for group in groups:
                if resources.get(group, {}).get("Type") != "AWS::EC2::SecurityGroup":
                    continue  # an existing group: its rules are not in the assembly
                blocked = _egress_blocked(resources, group)
                if blocked:
                    ports = _ports(blocked)
                    yield Finding(PORTS_RULE, stack, group,
                                  f"the nodes of cluster {logical_id} may not send TCP {ports} out, so they cannot "
                                  f"reach FSx {file_system} for model {model}: allow the Lustre ports out")


@rule(CSI_RULE, source="https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-ts-cli.html")
def clusters_mount_file_systems(assembly: Assembly) -> Iterator[Finding]:
    """A cluster of the assembly (an ``AWS::EKS::Cluster`` behind the kubectl provider) that serves a model from
    FSx for Lustre has the ``aws-fsx-csi-driver`` add-on: the operator mounts the file system through it, and
    reports "FSx CSI driver not installed (missing CSIDriver fsx.csi.aws.com)" without it."""
    for stack, model, file_system in _fsx_models(assembly):
        resources = assembly.templates[stack].get("Resources", {})
        clusters = [k for k, r in resources.items() if r.get("Type") == "AWS::EKS::Cluster"]
        addons = {ref_target(r.get("Properties", {}).get("ClusterName")) for r in resources.values()
                  if r.get("Type") == "AWS::EKS::Addon" and r.get("Properties", {}).get("AddonName") == CSI_ADDON}
        for cluster in clusters:
            if cluster not in addons:
                yield Finding(CSI_RULE, stack, cluster,
                              f"model {model} reads FSx {file_system} but the cluster has no {CSI_ADDON} add-on: "
                              "install it (the inference operator's prerequisite)")
