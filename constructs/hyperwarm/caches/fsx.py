"""What a model read from FSx for Lustre needs beyond its ``modelSourceConfig``: the network path, the VPC, the
read rate of its cold start.

- The CSI driver: the inference operator mounts the file system through the FSx for Lustre CSI driver, and its
  add-on fails without it ("FSx CSI driver not installed (missing CSIDriver fsx.csi.aws.com)",
  https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-ts-cli.html), so
  :class:`~hyperwarm.cluster.addons.InferenceOperator` installs ``aws-fsx-csi-driver`` with every operator: a cluster
  that serves cached models has it. The driver needs IAM only to create and delete file systems (dynamic
  provisioning, https://github.com/kubernetes-sigs/aws-fsx-csi-driver/blob/master/docs/install.md); mounting an
  existing one, as the operator does (AWS's FSx deploy guide creates no volume of its own,
  https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-deploy-ftm.html), calls no AWS
  API. The pods read through the mount: no S3 grant, no role.
- The network: an FSx for Lustre file system is reached through its network interfaces in its VPC (or a peered
  one), and Lustre's connections go both ways on TCP 988 and 1018-1023: the file system's security group must admit
  the clients, and the clients' security groups must admit the file servers ("Lustre client VPC security group
  rules",
  https://docs.aws.amazon.com/fsx/latest/LustreGuide/limit-access-security-groups.html#lustre-client-inbound-outbound-rules).
  :func:`admit_nodes` adds both: ingress on ``security_group_id`` from the cluster's node security group, and
  ingress on the node security group from ``security_group_id``. (Which groups a HyperPod node has is fixed when
  the cluster is created; the rules of those groups are not.) The nodes' group already lets all traffic out
  (:class:`~hyperwarm.cluster.network.HyperPodNetwork`).
- The VPC: :func:`vpc_problems` compares a source's ``vpc_id`` with the cluster's VPC where both are known at synth
  (an existing VPC named by id or found by ``Vpc.from_lookup``); FSx has no CDK context lookup, so the file
  system's own VPC is known only when given.
- The read rate: :func:`per_node_gbps`, the file system's throughput shared by every node reading it at once
  (:func:`file_system_readers`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from hyperwarm.caches.sources import FsxModelSource

if TYPE_CHECKING:
    from aws_cdk import aws_ec2 as ec2
    from constructs import Construct

    from hyperwarm.caches.props import CachedModelSpec
    from hyperwarm.cluster.interfaces import IHyperPodCluster

LUSTRE_PORTS = ((988, 988), (1018, 1023))
"""TCP port ranges of Lustre traffic between clients and an FSx for Lustre file system."""

FILE_SYSTEM_METADATA = "hyperwarm:fsx-file-system"
"""CloudFormation metadata of each ingress rule :func:`admit_nodes` adds: the file system it opens (the rehearsal's
``fsx.lustre-ports`` rule reads it)."""

PERFORMANCE_DOCS = "https://docs.aws.amazon.com/fsx/latest/LustreGuide/ssd-storage.html"


def file_system_sources(models: Sequence[CachedModelSpec]) -> list[tuple[int, FsxModelSource]]:
    """(index, source) of every model read from FSx for Lustre."""
    return [(i, m.source) for i, m in enumerate(models) if isinstance(m.source, FsxModelSource)]


def admit_nodes(scope: Construct, cluster: IHyperPodCluster,
                models: Sequence[CachedModelSpec]) -> list[ec2.CfnSecurityGroupIngress]:
    """Lustre's ports both ways: ingress on each file system's security group from the cluster's node security
    group, and on the node security group from the file system's; one set per file system and group however many
    models read it."""
    from aws_cdk import aws_ec2 as ec2

    nodes = cluster.security_group.security_group_id
    rules = []
    opened: set[tuple[str, str]] = set()
    for _, source in file_system_sources(models):
        key = (source.file_system_id, source.security_group_id)
        if key in opened:
            continue
        opened.add(key)
        fs, group = source.file_system_id, source.security_group_id
        for low, high in LUSTRE_PORTS:
            ports = str(low) if low == high else f"{low}-{high}"
            for logical_id, to, from_, description in (
                    (f"Lustre{low}-{fs}-{group}", group, nodes, f"Lustre TCP {ports} from the HyperPod nodes to FSx {fs}"),
                    (f"LustreToNodes{low}-{fs}-{group}", nodes, group,
                     f"Lustre TCP {ports} from the file servers of FSx {fs} to the HyperPod nodes")):
                rule = ec2.CfnSecurityGroupIngress(
                    scope, logical_id, group_id=to, ip_protocol="tcp", from_port=low, to_port=high,
                    source_security_group_id=from_, description=description)
                rule.add_metadata(FILE_SYSTEM_METADATA, fs)
                rules.append(rule)
    return rules


def vpc_problems(models: Sequence[CachedModelSpec], cluster_vpc_id: str | None, path: str = "models") -> list[str]:
    """``<path>[i].source.vpc_id: ... -- ...`` for each file system said to be in another VPC than the cluster's;
    nothing where either VPC is unknown at synth (not given, or a token: a VPC this app creates)."""
    from hyperwarm._internal.tokens import resolved

    if cluster_vpc_id is None or not resolved(cluster_vpc_id):
        return []
    return [f"{path}[{i}].source.vpc_id: {s.vpc_id!r} -- file system {s.file_system_id} is not in the cluster's VPC "
            f"{cluster_vpc_id}: the nodes reach it through its network interfaces in its VPC (a peered VPC also "
            f"needs routes hyperwarm does not make); allowed: {cluster_vpc_id}"
            for i, s in file_system_sources(models) if s.vpc_id is not None and s.vpc_id != cluster_vpc_id]


def throughput_mb_s(source: FsxModelSource) -> float:
    """The file system's baseline read rate from disk, MB/s: storage (TiB) x throughput per TiB. A cold model is
    not in the file servers' memory, and such a read gets "the lower of the network throughput and disk
    throughput" (https://docs.aws.amazon.com/fsx/latest/LustreGuide/performance.html); per TiB the disk's is the
    lower: PERSISTENT_2 125/250/500/1000 MB/s against network 320/640/1300/2600, SCRATCH_2 200 against 200
    (:data:`PERFORMANCE_DOCS`). Burst credits (disk up to 500 MB/s per TiB at 125 and 250) are not counted."""
    return source.storage_capacity_gib / 1024 * source.per_unit_storage_throughput


def readers(model: CachedModelSpec, group_nodes: Mapping[str, int]) -> int:
    """Nodes that read ``model`` at once: its ``max_replicas`` pods, or, with its weights cached, every node of its
    listed groups (``group_nodes``: group -> node count), whichever is more: the operator fills the weights cache
    of every node of the groups, not only of the nodes its pods land on."""
    nodes = sum(group_nodes.get(g, 0) for g in model.instance_groups) if model.weights_cached else 0
    return max(model.max_replicas, nodes)


def file_system_readers(models: Sequence[CachedModelSpec], group_nodes: Mapping[str, int]) -> dict[str, int]:
    """File system id -> nodes reading it at once: :func:`readers` summed over the models it serves (their
    caches fill together at a deploy)."""
    total: dict[str, int] = {}
    for model in models:
        if isinstance(model.source, FsxModelSource):
            total[model.source.file_system_id] = total.get(model.source.file_system_id, 0) + readers(model, group_nodes)
    return total


def per_node_gbps(source: FsxModelSource, readers: int) -> float:
    """One node's share of the file system's read rate, Gbit/s, when ``readers`` nodes load the model at once (the
    file system's throughput is shared by its clients; each node's own network is taken to be faster)."""
    return throughput_mb_s(source) * 8 / 1000 / max(readers, 1)


def rate_basis(source: FsxModelSource, readers: int) -> str:
    """How :func:`per_node_gbps` came about, for the planner."""
    return (f"FSx {source.file_system_id}: {source.storage_capacity_gib / 1024:.3g} TiB x "
            f"{source.per_unit_storage_throughput} MB/s/TiB = {throughput_mb_s(source):,.0f} MB/s shared by "
            f"{max(readers, 1)} node(s) = {per_node_gbps(source, readers):.2g} Gbit/s per node")
