"""Control plane to model pods: the EKS API server can open the models' metrics ports on the nodes."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from typing import Any

from hyperwarm.functions.cache_exporter.placement import metrics_target
from rehearsal.core import Assembly, Finding, ref_target, rule


def _ingress(resources: Mapping[str, Any], group: str) -> list[Mapping[str, Any]]:
    """The ingress rules of `group`: inline ones and AWS::EC2::SecurityGroupIngress resources."""
    inline = resources.get(group, {}).get("Properties", {}).get("SecurityGroupIngress", [])
    standalone = [r.get("Properties", {}) for r in resources.values()
                  if r.get("Type") == "AWS::EC2::SecurityGroupIngress"]
    return [r for r in inline if isinstance(r, dict)] + [r for r in standalone if ref_target(r.get("GroupId")) == group]


def _covers_vpc(cidr: Any, vpc_cidr: Any) -> bool:
    """An IPv4 range holding the whole VPC (the control plane's interfaces may take any of its addresses).
    Unknown at synth (a token on either side, or a VPC not in the template): not known to hold it, so a
    range the rule cannot read never passes it (name the control plane's group as the source instead)."""
    if not isinstance(cidr, str) or not isinstance(vpc_cidr, str):
        return False
    try:
        return ipaddress.ip_network(cidr, strict=False).supernet_of(ipaddress.ip_network(vpc_cidr, strict=False))
    except (ValueError, TypeError):  # a malformed or IPv6-against-IPv4 pair: not this VPC's range
        return False


def _allows(rule_: Mapping[str, Any], port: int, sources: set[str], vpc_cidr: Any) -> bool:
    """TCP `port` in from one of `sources` (logical ids of groups), or from a range covering the VPC."""
    protocol = str(rule_.get("IpProtocol"))
    covers = protocol == "-1" or (protocol in ("tcp", "6") and int(rule_.get("FromPort", -1)) <= port
                                  <= int(rule_.get("ToPort", -1)))
    peer = ref_target(rule_.get("SourceSecurityGroupId"))
    return covers and (peer in sources or ("CidrIp" in rule_ and _covers_vpc(rule_["CidrIp"], vpc_cidr)))


def _vpc_cidr(resources: Mapping[str, Any], group: str) -> Any:
    """The IPv4 range of the group's VPC when the VPC is in the template (else None: unknown)."""
    vpc = ref_target(resources[group].get("Properties", {}).get("VpcId"))
    return resources.get(vpc, {}).get("Properties", {}).get("CidrBlock") if vpc else None


def _model_ports(assembly: Assembly) -> dict[str, dict[int, list[str]]]:
    """Cluster stack -> metrics port -> models: each InferenceEndpointConfig, by the stack of the kubectl
    provider that applies it (the stack of its cluster)."""
    out: dict[str, dict[int, list[str]]] = {}
    for stack, logical_id, obj in assembly.kubernetes_objects():
        target = metrics_target(obj) if obj.get("kind") == "InferenceEndpointConfig" else None
        token = assembly.templates[stack]["Resources"][logical_id].get("Properties", {}).get("ServiceToken")
        provider = assembly.referenced(stack, token)
        if target and provider:
            out.setdefault(provider[0], {}).setdefault(target[0], []).append(obj["metadata"]["name"])
    return out


@rule("network.control-plane-to-model-pods",
      source="https://docs.aws.amazon.com/eks/latest/userguide/sec-group-reqs.html")
def control_plane_reaches_model_pods(assembly: Assembly) -> Iterator[Finding]:
    """Each security group of a HyperPod cluster's nodes lets TCP in, on every model's metrics port
    (``spec.metrics.modelMetrics.port``, else the invocation port), from the security groups of the EKS
    control plane it joins (its additional groups, or the cluster group EKS creates). The API server
    proxies to pods from the control plane's network interfaces in the VPC; without the rule the cache
    metrics exporter reads no pod's metrics (ScrapeFailures), and `kubectl port-forward` fails the same way."""
    ports = _model_ports(assembly)
    for stack, logical_id, cluster in assembly.resources("AWS::SageMaker::Cluster"):
        props = cluster.get("Properties", {})
        resources = assembly.templates[stack].get("Resources", {})
        eks = ref_target(props.get("Orchestrator", {}).get("Eks", {}).get("ClusterArn"))
        if eks is None or resources.get(eks, {}).get("Type") != "AWS::EKS::Cluster" or stack not in ports:
            continue  # an existing EKS cluster or no models: nothing to compare in the assembly
        vpc = resources[eks].get("Properties", {}).get("ResourcesVpcConfig", {})
        sources = {ref_target(g) for g in vpc.get("SecurityGroupIds", [])} | {eks}  # eks: its ClusterSecurityGroupId
        for group in (ref_target(g) for g in props.get("VpcConfig", {}).get("SecurityGroupIds", [])):
            if group is None or resources.get(group, {}).get("Type") != "AWS::EC2::SecurityGroup":
                continue  # an existing group: its rules are not in the assembly
            rules = _ingress(resources, group)
            for port, models in sorted(ports[stack].items()):
                if not any(_allows(r, port, sources, _vpc_cidr(resources, group)) for r in rules):
                    yield Finding("network.control-plane-to-model-pods", stack, group,
                                  f"cluster {logical_id}'s nodes admit no TCP {port} from the EKS control plane's "
                                  f"security groups, so the API server cannot reach the metrics of "
                                  f"{', '.join(sorted(models))}: add an ingress rule from the control plane's group "
                                  f"on port {port}")
