"""EFA traffic: the cluster security group lets all traffic in from AND out to itself."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hyperwarm.cluster.catalog import EFA_INSTANCE_TYPES
from rehearsal.core import Assembly, Finding, ref_target, rule


def _self_rule(resources: dict[str, Any], group: str, direction: str) -> bool:
    """Whether `group` allows all protocols `direction` ("in" or "out") to/from itself."""
    peer = "SourceSecurityGroupId" if direction == "in" else "DestinationSecurityGroupId"
    inline = resources.get(group, {}).get("Properties", {}).get(
        "SecurityGroupIngress" if direction == "in" else "SecurityGroupEgress", [])
    rules = [r for r in inline if isinstance(r, dict)]
    kind = "AWS::EC2::SecurityGroupIngress" if direction == "in" else "AWS::EC2::SecurityGroupEgress"
    rules += [r.get("Properties", {}) for r in resources.values()
              if r.get("Type") == kind and ref_target(r.get("Properties", {}).get("GroupId")) == group]
    return any(ref_target(r.get(peer)) == group and str(r.get("IpProtocol")) == "-1" for r in rules)


@rule("efa.security-group",
      source="https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-prerequisites.html")
def efa_security_group(assembly: Assembly) -> Iterator[Finding]:
    """A HyperPod cluster with an EFA instance type (p4d, p5*, g5/g6/g6e 8xlarge and up) has, in each
    security group of its VpcConfig, a self-referencing ingress AND egress rule for all traffic. The
    HyperPod prerequisites require both for EFA and warn that 0.0.0.0/0-only egress can fail the EFA
    health checks, leaving nodes unhealthy."""
    for stack, logical_id, cluster in assembly.resources("AWS::SageMaker::Cluster"):
        props = cluster.get("Properties", {})
        efa = sorted({g.get("InstanceType") for g in props.get("InstanceGroups", [])} & EFA_INSTANCE_TYPES)
        if not efa:
            continue
        resources = assembly.templates[stack].get("Resources", {})
        for group in (ref_target(g) for g in props.get("VpcConfig", {}).get("SecurityGroupIds", [])):
            if group is None or resources.get(group, {}).get("Type") != "AWS::EC2::SecurityGroup":
                continue  # an existing group: its rules are not in the assembly
            missing = [name for name, direction in (("ingress", "in"), ("egress", "out"))
                       if not _self_rule(resources, group, direction)]
            if missing:
                yield Finding("efa.security-group", stack, group,
                              f"cluster {logical_id} runs EFA types ({', '.join(efa)}) but the group has no "
                              f"self-referencing all-traffic {' or '.join(missing)} rule")
