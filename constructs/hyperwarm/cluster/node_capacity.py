"""Per-node capacity: every HyperPod node must hold the pods placed on it (pods, CPU, memory, GPUs).

Every node of an instance group carries the DaemonSets that select it; the pods of the model
deployments placed on the group are packed onto its nodes (first fit, largest first), and a pod
that fits no node is reported with the numbers of the node it would land on. A deployment that may run on
several groups (a cached model's fallback groups) puts each pod on one node: one pod must fit a node of each
group, and the replicas the groups' nodes together, filled in order of preference. The cluster-wide
system pods (the Deployments of the EKS add-ons and the HyperPod inference operator) need room
left on the nodes after that. A node offers
what kubelet allocates: the pods per node (hyperwarm's estimate in the catalog, which AWS does not
publish, unless the user gives the real figure), its vCPUs at the group's ``ThreadsPerCore`` and its
memory, less the EKS AMI's kube-reserved and eviction reserve
(https://github.com/awslabs/amazon-eks-ami, ``nodeadm`` kubelet config: CPU 6 % of the first core,
1 % of the second, 0.5 % of the next two, 0.25 % of the rest; memory 255 MiB + 11 MiB per pod,
plus 100 MiB eviction threshold).

The same check runs at synth on the configuration (the app's :mod:`stacks.config`) and in the deploy
rehearsal on the synthesized templates (``rehearsal.rules.capacity``); :func:`workloads_from_objects`
reads Kubernetes objects for both. Nothing here imports aws-cdk.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hyperwarm.cluster.catalog import instance_spec
from hyperwarm.functions.node_cache import layout

INSTANCE_GROUP_LABEL = layout.GROUP_LABEL
"""HyperPod labels every node with its instance group's name."""
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
PODS_PER_NODE_METADATA = "hyperwarm:pods-per-node"
"""Metadata key of an ``AWS::SageMaker::Cluster`` holding the pods-per-node overrides by instance type, which
the deploy rehearsal reads."""
PODS_ESTIMATE_NOTE = ("{pods} pods per node is hyperwarm's estimate for {type}: AWS publishes no figure; "
                      "kubectl get node <node> -o jsonpath={{.status.allocatable.pods}} shows the real one, and "
                      "pods_per_node[{type!r}] overrides the estimate")
SYSTEM_GROUP_ADVICE = ("add an instance group without GPUs for them, e.g. ml.c5.4xlarge (29 pods per node), "
                       "the smallest type AWS recommends for the inference operator")


_CPU = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(m?)$")
_MEMORY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$")
_MEMORY_MI = {None: 1 / 2**20, "Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024**2,
              "k": 1e3 / 2**20, "M": 1e6 / 2**20, "G": 1e9 / 2**20, "T": 1e12 / 2**20}


def parse_cpu_m(quantity: str | int | float) -> float:
    """A Kubernetes CPU quantity in millicores ("500m" -> 500, "2" -> 2000)."""
    match = _CPU.match(str(quantity))
    if not match:
        raise ValueError(f"unreadable cpu quantity {quantity!r}")
    return float(match[1]) * (1 if match[2] else 1000)


def parse_memory_mi(quantity: str | int | float) -> float:
    """A Kubernetes memory quantity in MiB ("12Gi" -> 12288)."""
    match = _MEMORY.match(str(quantity))
    if not match:
        raise ValueError(f"unreadable memory quantity {quantity!r}")
    return float(match[1]) * _MEMORY_MI[match[2]]


@dataclass(frozen=True)
class Requests:
    """Resource requests (of one pod, or a sum)."""

    pods: int = 0
    cpu_m: float = 0
    memory_mi: float = 0
    gpus: int = 0

    def __add__(self, other: Requests) -> Requests:
        return Requests(self.pods + other.pods, self.cpu_m + other.cpu_m, self.memory_mi + other.memory_mi,
                        self.gpus + other.gpus)

    def times(self, n: int) -> Requests:
        return Requests(self.pods * n, self.cpu_m * n, self.memory_mi * n, self.gpus * n)


def pod(cpu: str | float = 0, memory: str | float = 0, gpus: int = 0) -> Requests:
    """One pod requesting ``cpu`` (Kubernetes quantity or millicores) and ``memory`` (quantity or MiB)."""
    cpu_m = parse_cpu_m(cpu) if isinstance(cpu, str) else cpu
    memory_mi = parse_memory_mi(memory) if isinstance(memory, str) else memory
    return Requests(1, cpu_m, memory_mi, gpus)


@dataclass(frozen=True)
class Workload:
    """Pods with one placement: a DaemonSet (one per selected node) or ``replicas`` pods."""

    name: str
    requests: Requests
    """Requests of one pod."""
    daemonset: bool = False
    replicas: int = 1
    groups: frozenset[str] | None = None
    """Instance groups it may run on; None: no group restriction."""
    instance_types: frozenset[str] | None = None
    """Instance types it may run on; None: no type restriction."""
    preference: tuple[str, ...] = ()
    """Groups in the scheduler's order of preference (preferred node affinity), for pods that may run on several:
    they fill these first, then the other groups they select, in the order :func:`node_problems` is given them."""

    @property
    def placed(self) -> bool:
        """Restricted to some groups or types; else a system pod that runs wherever there is room."""
        return self.groups is not None or self.instance_types is not None

    def selects(self, group: str, instance_type: str) -> bool:
        return ((self.groups is None or group in self.groups)
                and (self.instance_types is None or instance_type in self.instance_types))


@dataclass(frozen=True)
class NodeGroup:
    """An instance group as the check sees it."""

    name: str
    instance_type: str
    instance_count: int
    threads_per_core: int = 1
    max_pods: int | None = None
    """Pods one node holds, where the user knows it; None: the catalog's estimate."""

    @property
    def pods(self) -> int:
        return self.max_pods if self.max_pods is not None else instance_spec(self.instance_type).max_pods

    def allocatable(self) -> Requests:
        """What kubelet offers pods on one node of the group."""
        spec = instance_spec(self.instance_type)
        vcpus = spec.vcpus_at(self.threads_per_core)
        reserved_cpu = 60 + 10 * min(1, max(0, vcpus - 1)) + 5 * min(2, max(0, vcpus - 2)) + 2.5 * max(0, vcpus - 4)
        reserved_memory = 255 + 11 * self.pods + 100
        return Requests(self.pods, vcpus * 1000 - reserved_cpu, spec.memory_gib * 1024 - reserved_memory, spec.gpus)

    def pods_note(self) -> str:
        """Where the pods figure comes from, when it is only an estimate."""
        if self.max_pods is not None:
            return ""
        return "; " + PODS_ESTIMATE_NOTE.format(pods=self.pods, type=self.instance_type)

    def describe(self) -> str:
        return f"instance group {self.name!r} ({self.instance_type} x {self.instance_count}, " \
               f"ThreadsPerCore {self.threads_per_core})"


# Pods of the EKS add-ons hyperwarm installs, by add-on name: DaemonSets on every node and
# cluster-wide replicas. Counts are each add-on's defaults; requests are the add-ons' own where
# published, else a small estimate. The inference operator add-on runs about 13 pods (AWS).
ADDON_WORKLOADS: Mapping[str, tuple[Workload, ...]] = {
    "vpc-cni": (Workload("aws-node", pod("25m"), daemonset=True),),
    "kube-proxy": (Workload("kube-proxy", pod("100m"), daemonset=True),),
    "eks-pod-identity-agent": (Workload("eks-pod-identity-agent", pod("25m", "32Mi"), daemonset=True),),
    "coredns": (Workload("coredns", pod("100m", "70Mi"), replicas=2),),
    "cert-manager": (Workload("cert-manager", pod("10m", "32Mi"), replicas=3),),
    "metrics-server": (Workload("metrics-server", pod("100m", "200Mi"), replicas=2),),
    "aws-mountpoint-s3-csi-driver": (Workload("s3-csi-node", pod("10m", "40Mi"), daemonset=True),
                                     Workload("s3-csi-controller", pod("10m", "40Mi"))),
    "aws-fsx-csi-driver": (Workload("fsx-csi-node", pod("10m", "40Mi"), daemonset=True),
                           Workload("fsx-csi-controller", pod("10m", "40Mi"), replicas=2)),
    "amazon-sagemaker-hyperpod-inference": (
        Workload("hyperpod-inference-operator", pod("100m", "128Mi"), replicas=13),),
}


def addon_workloads(names: Iterable[str]) -> list[Workload]:
    """The pods of the named add-ons (unknown names add none)."""
    return [w for name in names for w in ADDON_WORKLOADS.get(name, ())]


def node_problems(groups: Sequence[NodeGroup], workloads: Sequence[Workload]) -> list[str]:
    """One message per instance group resource its nodes cannot hold, per workload spread over several groups whose
    nodes together cannot hold its replicas, and per resource system pods lack.

    A workload's pods that may run on one group only are packed onto that group's nodes. Those of a workload that
    may run on several (a cached model with fallback groups) each go to one node: one pod must fit a node of every
    such group, and all of them must fit the groups' nodes together, filled in order of preference after the
    single-group pods."""
    problems: list[str] = []
    packed: dict[str, list[_Node]] = {}
    spread = [w for w in workloads if _is_placed_pods(w) and len(_groups_of(w, groups)) > 1]
    for group in groups:
        placed = [w for w in workloads if _is_placed_pods(w) and w not in spread
                  and w.selects(group.name, group.instance_type)]
        if group.instance_count == 0:
            if placed:
                problems.append(f"{group.describe()}: has no nodes for {', '.join(w.name for w in placed)} "
                                "-- set instance_count to 1 or more")
            continue
        nodes = packed[group.name] = _pack(group, workloads, placed)
        have = group.allocatable()
        reported: set[str] = set()
        # One pod of each spread workload on an empty node of the group: it must fit (else it never lands here).
        alone = [_alone(nodes[0], w) for w in spread if w.selects(group.name, group.instance_type)]
        for node in [*nodes, *alone]:
            problems += _over(group, node, have, reported)
    problems += _spread_problems(groups, workloads, spread, packed)
    free: dict[str, Requests] = {}
    for group in groups:
        if group.name in packed:
            left = sum((max_zero(_minus(group.allocatable(), node.load())) for node in packed[group.name]), Requests())
            free[group.name] = Requests(left.pods, left.cpu_m, left.memory_mi, 0)
    problems.extend(_system_problems(groups, workloads, free))
    return problems


def _is_placed_pods(w: Workload) -> bool:
    return not w.daemonset and w.placed and w.replicas > 0


def _groups_of(w: Workload, groups: Sequence[NodeGroup]) -> list[NodeGroup]:
    """The groups ``w`` may run on, in its order of preference."""
    rank = {name: i for i, name in enumerate(w.preference)}
    selected = [g for g in groups if w.selects(g.name, g.instance_type)]
    return sorted(selected, key=lambda g: rank.get(g.name, len(rank)))


def _alone(node: _Node, w: Workload) -> _Node:
    """A node of the group with its DaemonSets and one pod of ``w``."""
    alone = _Node(node.daemonsets, node.daemonset_count)
    alone.add(w)
    return alone


def _over(group: NodeGroup, node: _Node, have: Requests, reported: set[str]) -> list[str]:
    """A message per resource ``node`` needs beyond ``have`` (each resource once per group)."""
    problems = []
    need = node.load()
    for resource in _RESOURCES:
        if resource.of(need) > resource.of(have) and resource.name not in reported:
            reported.add(resource.name)
            note = group.pods_note() if resource.name == "pods" else ""
            problems.append(f"{group.describe()}: {resource.name} per node: need {resource.show(need)}, "
                            f"have {resource.show(have)} ({node.describe(resource)}) -- {resource.advice}{note}")
    return problems


def _spread_problems(groups: Sequence[NodeGroup], workloads: Sequence[Workload], spread: Sequence[Workload],
                     packed: Mapping[str, list[_Node]]) -> list[str]:
    """The pods of ``spread`` onto the nodes of ``packed`` (first fit, by preference, largest pods first); one
    message per workload whose pods do not all fit."""
    unplaced: dict[str, int] = {}
    for workload in sorted((w for w in spread for _ in range(w.replicas)),
                           key=lambda w: (w.requests.gpus, w.requests.cpu_m, w.requests.memory_mi), reverse=True):
        target = next((node for g in _groups_of(workload, groups) for node in packed.get(g.name, [])
                       if _within(node.load() + workload.requests, g.allocatable())), None)
        if target is None:
            unplaced[workload.name] = unplaced.get(workload.name, 0) + 1
        else:
            target.add(workload)
    problems = []
    for w in spread:
        if w.name in unplaced:
            listed = ", ".join(g.describe() for g in _groups_of(w, groups))
            problems.append(f"{w.name}: {w.replicas} pods on {listed} together: room for "
                            f"{w.replicas - unplaced[w.name]} beside their other pods (a pod: "
                            f"{_describe_pod(w.requests)}) -- add nodes to these groups, another fallback group, "
                            "or fewer replicas")
    return problems


def _describe_pod(r: Requests) -> str:
    return ", ".join(resource.show(r) for resource in _RESOURCES[1:] if resource.of(r)) or "no requests"


@dataclass
class _Node:
    """One node of a group while pods are packed onto it: (label, pod count, requests of one pod) parts."""

    daemonsets: Requests
    daemonset_count: int
    pods: dict[str, list[Any]] = field(default_factory=dict)

    def load(self) -> Requests:
        return sum((r.times(n) for n, r in self.pods.values()), self.daemonsets)

    def add(self, workload: Workload) -> None:
        count, _ = self.pods.get(workload.name, (0, workload.requests))
        self.pods[workload.name] = [count + 1, workload.requests]

    def describe(self, resource: _Resource) -> str:
        parts = [(f"{self.daemonset_count} daemonsets", self.daemonsets)] + [
            (f"{name} ({n} pod{'s' if n > 1 else ''})", r.times(n)) for name, (n, r) in self.pods.items()]
        return "; ".join(f"{label} {resource.show(r)}" for label, r in parts if resource.of(r))


def _pack(group: NodeGroup, workloads: Sequence[Workload], placed: Sequence[Workload]) -> list[_Node]:
    """The group's nodes with its model pods packed first-fit, largest first (GPUs, then CPU, memory).

    A pod that fits no node goes to the least loaded one, whose numbers the message then shows.
    """
    daemonsets = [w for w in workloads if w.daemonset and w.selects(group.name, group.instance_type)]
    base = sum((w.requests for w in daemonsets), Requests())
    nodes = [_Node(base, len(daemonsets)) for _ in range(group.instance_count)]
    have = group.allocatable()
    pods = sorted((w for w in placed for _ in range(w.replicas)),
                  key=lambda w: (w.requests.gpus, w.requests.cpu_m, w.requests.memory_mi), reverse=True)
    for workload in pods:
        fits = [n for n in nodes if _within(n.load() + workload.requests, have)]
        target = fits[0] if fits else min(nodes, key=lambda n: (n.load().gpus, n.load().cpu_m, n.load().pods))
        target.add(workload)
    return nodes


def _within(need: Requests, have: Requests) -> bool:
    return all(resource.of(need) <= resource.of(have) for resource in _RESOURCES)


def _minus(a: Requests, b: Requests) -> Requests:
    return Requests(a.pods - b.pods, a.cpu_m - b.cpu_m, a.memory_mi - b.memory_mi, a.gpus - b.gpus)


def _system_problems(groups: Sequence[NodeGroup], workloads: Sequence[Workload],
                     free: Mapping[str, Requests]) -> list[str]:
    system = [w for w in workloads if not w.daemonset and not w.placed]
    need = sum((w.requests.times(w.replicas) for w in system), Requests())
    if not need.pods:
        return []
    eligible = [g for g in groups if g.name in free]
    have = sum((max_zero(free[g.name]) for g in eligible), Requests())
    problems = []
    for resource in _RESOURCES[:3]:
        if resource.of(need) > resource.of(have):
            spread = ", ".join(f"{g.name!r} {resource.show(max_zero(free[g.name]))}" for g in eligible) or "no nodes"
            notes = "".join(g.pods_note() for g in eligible) if resource.name == "pods" else ""
            problems.append(f"system pods ({len(system)} add-on and operator deployments): {resource.name}: "
                            f"need {resource.show(need)}, have {resource.show(have)} left on the nodes ({spread}) "
                            f"-- {SYSTEM_GROUP_ADVICE}{notes}")
    return problems


def max_zero(r: Requests) -> Requests:
    return Requests(max(0, r.pods), max(0.0, r.cpu_m), max(0.0, r.memory_mi), max(0, r.gpus))


@dataclass(frozen=True)
class _Resource:
    name: str
    attribute: str
    unit: str
    scale: float
    advice: str

    def of(self, r: Requests) -> float:
        return float(getattr(r, self.attribute))

    def show(self, r: Requests) -> str:
        value = self.of(r) / self.scale
        number = f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"
        return f"{number}{self.unit}"


_RESOURCES = (
    _Resource("pods", "pods", "", 1, "use an instance type with more pods per node, or place fewer pods here"),
    _Resource("cpu", "cpu_m", " vCPU", 1000, "use a larger instance type, threads_per_core 2, or smaller cpu requests"),
    _Resource("memory", "memory_mi", " GiB", 1024, "use a larger instance type or smaller memory requests"),
    _Resource("gpus", "gpus", " GPU(s)", 1, "use an instance type with more GPUs, more nodes, or fewer replicas"),
)


# -- Kubernetes objects -> workloads --------------------------------------------------------------

def _container_requests(containers: Sequence[Mapping[str, Any]]) -> Requests:
    total = Requests(pods=1)
    for container in containers:
        requests = container.get("resources", {}).get("requests", {})
        total += Requests(0, parse_cpu_m(requests.get("cpu", 0)), parse_memory_mi(requests.get("memory", 0)),
                          int(requests.get("nvidia.com/gpu", 0)))
    return total


def _placement(pod_spec: Mapping[str, Any], required: Mapping[str, Any] | None
               ) -> tuple[frozenset[str] | None, frozenset[str] | None]:
    """(groups, instance types) a pod may run on, from its nodeSelector and required node affinity."""
    values: dict[str, set[str]] = {}
    for key, value in pod_spec.get("nodeSelector", {}).items():
        values.setdefault(key, set()).add(value)
    terms = (required or {}).get("nodeSelectorTerms", [])
    if len(terms) == 1:  # several terms are ORed: no single restriction to read
        for expression in terms[0].get("matchExpressions", []):
            if expression.get("operator") == "In":
                values.setdefault(expression["key"], set()).update(expression.get("values", []))
    groups, types = values.get(INSTANCE_GROUP_LABEL), values.get(INSTANCE_TYPE_LABEL)
    return (frozenset(groups) if groups else None, frozenset(types) if types else None)


def workloads_from_objects(objects: Iterable[Mapping[str, Any]]) -> list[Workload]:
    """Workloads of DaemonSets, Deployments and the operator's ``InferenceEndpointConfig`` objects."""
    workloads = []
    for obj in objects:
        kind, name = obj.get("kind"), obj.get("metadata", {}).get("name", "?")
        spec = obj.get("spec", {})
        if kind in ("DaemonSet", "Deployment"):
            pod_spec = spec.get("template", {}).get("spec", {})
            required = pod_spec.get("affinity", {}).get("nodeAffinity", {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution")
            groups, types = _placement(pod_spec, required)
            workloads.append(Workload(name, _container_requests(pod_spec.get("containers", [])),
                                      daemonset=kind == "DaemonSet", replicas=int(spec.get("replicas", 1)),
                                      groups=groups, instance_types=types))
        elif kind == "InferenceEndpointConfig":
            worker = spec.get("worker", {})
            required = spec.get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution")
            groups, types = _placement({}, required)
            preferred = spec.get("nodeAffinity", {}).get("preferredDuringSchedulingIgnoredDuringExecution", [])
            if "instanceType" in spec:
                types = frozenset({spec["instanceType"]})
            # An autoscaled deployment may grow to its maximum: the nodes must hold that many.
            replicas = max(int(spec.get("replicas", 1)), int(spec.get("autoScalingSpec", {}).get("maxReplicaCount", 0)))
            workloads.append(Workload(f"model {name}", _container_requests([worker]),
                                      replicas=replicas, groups=groups, instance_types=types,
                                      preference=_preferred_groups(preferred)))
    return workloads


def _preferred_groups(preferred: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The instance groups of single-group preferred affinity terms, heaviest first."""
    weighted = []
    for term in preferred:
        expressions = term.get("preference", {}).get("matchExpressions", [])
        if len(expressions) == 1 and expressions[0].get("key") == INSTANCE_GROUP_LABEL \
                and expressions[0].get("operator") == "In" and len(expressions[0].get("values", [])) == 1:
            weighted.append((-int(term.get("weight", 0)), expressions[0]["values"][0]))
    return tuple(group for _, group in sorted(weighted, key=lambda w: w[0]))
