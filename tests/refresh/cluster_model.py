"""A HyperPod cluster with the inference operator, modelled in process over simulated time, behind the Kubernetes
API calls a warm version change makes (``targets.hyperpod.Kube``: get, merge-patch, list pods, list nodes).

The objects start as the caches construct renders them (the deployment of a node-cached model and its filler
DaemonSet: ``hyperwarm.caches``), so the function is tested against the shapes it will meet. What moves:

- the API server: 404 for a missing object, 409 for a stale ``resourceVersion``, ``generation`` raised by a spec
  change, ``deletionTimestamp`` while finalizers run, and RBAC: every call is checked against the refresh's
  rendered Role and ClusterRole (403 for anything else), and each patch against its admission policy;
- nodes: Ready or not, cordoned, tainted (HyperPod's health check), GPUs, NVMe capacity; they join, leave and are
  replaced (a new node has an empty instance store);
- the filler (the DaemonSet's pods): on each Ready node of the group it keeps the listed versions, filling one
  version every ``fill_seconds``, checking room first, labelling the node only once a copy is complete, and
  removing what is not listed unless a pod on that node mounts it (as ``node_cache.fill`` does);
- the Deployment controller behind the operator: a rolling update with Kubernetes' default surge and
  unavailability (25 %), a progress deadline, pods scheduled only where the required affinity and the GPUs allow,
  started ``start_seconds`` after placement, terminating for ``terminate_seconds``;
- the operator's status: late by ``observe_seconds``, or absent, or stuck on an old generation.

It records what must never happen: a pod started on a node without a complete copy of its version (cold), a copy
deleted while a pod reads it, a call the RBAC forbids.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from admission import Request, denials
from fake_kube import merge_patch
from wire import Count, freeze, fresh, sent, thaw

from hyperwarm.caches.node_cache import filler_daemonset
from hyperwarm.caches.objects import inference_endpoint_config
from hyperwarm.caches.props import DEFAULT_FILLER_IMAGE, CachedModelSpec, ModelSource, WorkerResources, gigabytes
from hyperwarm.functions.cache_refresh.errors import PermanentError
from hyperwarm.functions.node_cache import layout
from hyperwarm.refresh.access import RBAC_GROUP
from hyperwarm.refresh.admission import TEMPLATE_GENERATION

DEPLOYMENT, FILLER, POD = "InferenceEndpointConfig", "DaemonSet", "Pod"
HEALTH_TAINT = {"key": "sagemaker.amazonaws.com/node-health-status", "value": "Unschedulable", "effect": "NoSchedule"}
HOST = layout.DEFAULT_HOST_PATH
DT = 5.0
"""The simulation's step in seconds (every duration below is a multiple of it)."""
MODEL, NAMESPACE = "llama", "models"
IMAGE = "763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:0.27.1-gpu-py312-cu130-ubuntu22.04-sagemaker"


def manifest_digest(version: str) -> str:
    """The SHA-256 the worlds' gate answers for a version's manifest (what the filler is pinned to)."""
    return hashlib.sha256(f"manifest of {version}".encode()).hexdigest()


def rendered(bucket: str, prefix: str, version: str, *, replicas: int = 4,
             gpus: int = 4) -> tuple[dict[str, Any], dict[str, Any]]:
    """The deployment and the filler of a node-cached model, as the caches construct renders them."""
    return thaw(_rendered(bucket, prefix, version, replicas, gpus))  # type: ignore[no-any-return]


@functools.lru_cache(maxsize=32)  # rendering crosses into jsii (Size); the model worlds ask for the same few
def _rendered(bucket: str, prefix: str, version: str, replicas: int, gpus: int) -> bytes:
    props = CachedModelSpec(name=MODEL, source=ModelSource(bucket, prefix, version), size=gigabytes(100), image=IMAGE,
                             instance_group="inference", weights_cache="node", replicas=replicas,
                             resources=WorkerResources(gpus=gpus, cpu="8", memory="64Gi"))
    deployment = inference_endpoint_config(props, namespace=NAMESPACE, region="us-west-2", labels={}, cluster_name="c")
    filler = filler_daemonset(props, namespace=NAMESPACE, labels={}, region="us-west-2", image=DEFAULT_FILLER_IMAGE,
                              code="code", headroom_percent=10)
    return freeze((deployment, filler))


@dataclass
class Node:
    name: str
    gpus: int = 8
    nvme_gb: float = 1000.0
    ready: bool = True
    unschedulable: bool = False
    taints: list[dict[str, str]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    disk: dict[str, float] = field(default_factory=dict)
    """Version -> GB of it on the instance store (complete at the model's size)."""
    filler_generation: int = -1
    """The filler DaemonSet generation this node's filler pod runs (a new one restarts it)."""
    failed: dict[str, str] = field(default_factory=dict)
    not_ready_since: float | None = None
    filler_running: bool = True
    """False: the node's filler pod is stuck (its labels stay as they are, whatever lies on the disk)."""


@dataclass
class SimPod:
    uid: str
    version: str
    label: str | None
    """The ready label its node must carry (None: the deployment's affinity requires none)."""
    created: float
    node: str | None = None
    ready_at: float | None = None
    terminating_until: float | None = None
    cold: bool = False


class Forbidden(PermanentError):
    def __init__(self, what: str) -> None:
        super().__init__("target-forbidden", f"{what}: HTTP 403")


@dataclass
class Cluster:
    """One node-cached model's deployment and filler on an instance group; ``now`` moves with :meth:`tick`."""

    deployment: dict[str, Any]
    filler: dict[str, Any]
    size_gb: float = 100.0
    fill_seconds: float = 120.0
    """One version onto one node."""
    nodes: dict[str, Node] = field(default_factory=dict)
    start_seconds: float = 60.0
    terminate_seconds: float = 30.0
    observe_seconds: float = 90.0
    progress_deadline: float = 600.0
    eviction_seconds: float = 300.0
    status: str = "normal"
    """``normal``, ``absent`` (the operator writes none) or ``stale`` (observedGeneration never moves)."""
    now: float = 1_800_000_000.0
    rbac: list[tuple[str, str, frozenset[str], frozenset[str]]] | None = None
    """(namespace or "" for cluster-wide, resource, verbs, resourceNames) the refresh may use; None: no check."""
    admission: dict[str, Any] | None = None
    """The refresh's admission policy (``refresh/admission.py``): a refresh patch it denies is a violation and a 403,
    as the API server would answer. None: no check."""
    filler_guards_mounts: bool = True
    """The filler keeps a version a pod on its node mounts (as ``fill`` does); False tests the function alone."""
    fail_fill: dict[str, str] = field(default_factory=dict)
    """Version -> why the filler cannot fill it (a checksum mismatch), on every node."""
    crash_versions: set[str] = field(default_factory=set)
    """Pods of these versions never become ready (a bad model); the deployment's progress deadline fails it."""
    replicas_override: int | None = None
    """The autoscaler's replica count (the deployment's status reports it)."""
    calls: list[str] = field(default_factory=list)
    on_call: Callable[[str], None] | None = None
    violations: list[str] = field(default_factory=list)
    sources: set[tuple[str, str]] = field(default_factory=set)
    """Every (bucket, location) a filler was ever told to fill from."""
    unpinned: set[str] = field(default_factory=set)
    """Every version the refresh told a filler to keep without a manifest pin (fill whatever manifest S3 holds)."""
    cold_starts: list[SimPod] = field(default_factory=list)
    peak_gb: float = 0.0
    pods: list[SimPod] = field(default_factory=list)
    _rv: Count = field(default_factory=Count)
    _uid: Count = field(default_factory=Count)
    _seen_generation: int = 1
    _seen_at: float = 0.0
    _progress_at: float = 0.0
    """When the deployment last changed, or one more of its new pods became ready (the progress deadline's clock)."""
    _ready_new: int = 0
    _failed_generation: int | None = None

    # -- set-up ------------------------------------------------------------------------------------------------
    @classmethod
    def serving(cls, deployment: dict[str, Any], filler: dict[str, Any], node_names: list[str], **options: Any) -> Cluster:
        """As ``cdk deploy`` leaves it once settled: every node filled with the deployed version, its pods running."""
        nodes = {n: Node(n) for n in node_names}
        cluster = cls(deployment, filler, nodes=nodes, **options)
        for obj in (cluster.deployment, cluster.filler):
            obj["metadata"].update(uid=f"uid-{next(cluster._uid)}", generation=1, resourceVersion=str(next(cluster._rv)))
        version = cluster.reads()
        for node in nodes.values():
            node.labels.update({layout.GROUP_LABEL: cluster.group, layout.ready_label(cluster.model, version): "true"})
            node.disk[version] = cluster.size_gb
            node.filler_generation = 1
        cluster._roll()
        cluster._schedule()
        for pod in cluster.pods:
            pod.ready_at = cluster.now
        cluster._write_status()
        cluster._seen_at = cluster.now
        return cluster

    @property
    def model(self) -> str:
        return str(self.filler["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"])

    @property
    def group(self) -> str:
        terms = self.filler["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        return str(terms[0]["matchExpressions"][0]["values"][0])

    @property
    def pod_gpus(self) -> int:
        return int(self.deployment["spec"]["worker"]["resources"]["requests"].get("nvidia.com/gpu", 0))

    def reads(self) -> str:
        """The version the deployment's spec reads (its volume's directory)."""
        volume = next(v for v in self.deployment["spec"]["kubernetes"]["volumes"] if v["name"] == layout.MODEL_VOLUME)
        version = layout.version_of_path(volume["hostPath"]["path"], HOST, self.model)
        assert version is not None
        return version

    def _required_label(self) -> str | None:
        terms = self.deployment["spec"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"]
        return next((e["key"] for e in terms[0]["matchExpressions"] if e["key"].startswith(layout.LABEL_DOMAIN)), None)

    def kept(self) -> list[str]:
        return [v.version for v in layout.filler_versions(self.filler)]

    def copies(self) -> dict[str, set[str]]:
        """Node -> the complete versions on it."""
        return {n.name: {v for v, gb in n.disk.items() if gb >= self.size_gb} for n in self.nodes.values()}

    @property
    def replicas(self) -> int:
        return self.replicas_override if self.replicas_override is not None else int(self.deployment["spec"]["replicas"])

    # -- the API server ----------------------------------------------------------------------------------------
    def _call(self, what: str, verb: str, resource: str, namespace: str, name: str = "") -> None:
        if self.on_call is not None:
            self.on_call(what)
        self.calls.append(what)
        if self.rbac is not None and not any(
                ns in ("", namespace) and res == resource and verb in verbs and (not names or name in names)
                for ns, res, verbs, names in self.rbac):
            self.violations.append(f"forbidden: {verb} {resource} {name}")
            raise Forbidden(f"{verb} {resource} {namespace}/{name}")

    def _object(self, kind: str, name: str) -> dict[str, Any]:
        obj = {DEPLOYMENT: self.deployment, FILLER: self.filler}.get(kind)
        if obj is None or obj["metadata"]["name"] != name:
            raise PermanentError("target-not-found", f"{kind} {name}: HTTP 404")
        return obj

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        self._call(f"get {kind}/{name}", "get", _RESOURCE[kind], namespace, name)
        return fresh(self._object(kind, name))

    def merge_patch(self, kind: str, namespace: str, name: str, patch: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self._call(f"patch {kind}/{name}", "patch", _RESOURCE[kind], namespace, name)
        return self._patch(kind, name, patch, by_refresh=True)

    def _patch(self, kind: str, name: str, patch: dict[str, Any], *, by_refresh: bool) -> tuple[int, dict[str, Any]]:
        obj, patch = self._object(kind, name), sent(patch)
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != obj["metadata"]["resourceVersion"]:
            return 409, {}
        updated = merge_patch(obj, {k: v for k, v in patch.items() if k != "metadata"})
        updated["metadata"] = dict(obj["metadata"])
        if updated["spec"] != obj["spec"]:
            updated["metadata"]["generation"] += 1
        if kind == FILLER and updated["spec"].get("template") != obj["spec"].get("template"):  # as the API server does
            updated["metadata"]["annotations"] = {**(obj["metadata"].get("annotations") or {}),
                                                  TEMPLATE_GENERATION: str(updated["metadata"]["generation"])}
        updated["metadata"]["resourceVersion"] = str(next(self._rv))
        if by_refresh and self.admission is not None:
            denied = admitted(self.admission, kind, obj, updated)
            if denied:
                self.violations.append(f"admission denied the refresh's patch of {kind}/{name}: {denied}")
                raise Forbidden(f"patch {kind} {name}")
        if kind == FILLER:
            self.sources |= {(v.bucket, v.location) for v in layout.filler_versions(updated)}
            if by_refresh:
                self.unpinned |= {v.version for v in layout.filler_versions(updated) if not v.manifest}
        if kind == FILLER and by_refresh:  # the refresh must never drop a copy a pod reads; a deploy's apply may
            dropped = set(self.kept()) - {v.version for v in layout.filler_versions(updated)}
            readers = [p.uid for p in self.pods if p.version in dropped]
            if readers:
                self.violations.append(f"the refresh dropped {sorted(dropped)} while pods {readers} read it")
        if kind == DEPLOYMENT:
            self.deployment = updated
            self._progress_at, self._ready_new = self.now, 0
        else:
            self.filler = updated
        return 200, fresh(updated)

    def items(self, kind: str, namespace: str) -> list[dict[str, Any]]:
        self._call(f"list {kind}", "list", _RESOURCE[kind], namespace)
        assert kind == POD
        return [self._pod_object(p) for p in self.pods]

    def nodes_api(self, selector: dict[str, str]) -> list[dict[str, Any]]:
        self._call("list nodes", "list", "nodes", "")
        return [self._node_object(n) for n in self.nodes.values()
                if all(n.labels.get(k) == v for k, v in selector.items())]

    def _pod_object(self, pod: SimPod) -> dict[str, Any]:
        path = layout.version_dir(HOST, self.model, pod.version)
        meta: dict[str, Any] = {"name": f"llama-{pod.uid}", "uid": pod.uid}
        if pod.terminating_until is not None:
            meta["deletionTimestamp"] = "2026-12-03T00:00:00Z"
        phase = "Running" if pod.node and pod.ready_at is not None else "Pending"
        ready = "True" if self._ready(pod) else "False"
        return {"metadata": meta, "spec": {"nodeName": pod.node, "volumes": [
                    {"name": layout.MODEL_VOLUME, "hostPath": {"path": path, "type": "Directory"}}]},
                "status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]}}

    def _ready(self, pod: SimPod) -> bool:
        node = self.nodes.get(pod.node or "")
        return (pod.ready_at is not None and pod.ready_at <= self.now and pod.terminating_until is None
                and node is not None and node.ready)

    def _node_object(self, node: Node) -> dict[str, Any]:
        return {"metadata": {"name": node.name, "labels": dict(node.labels), "annotations": dict(node.annotations)},
                "spec": {"unschedulable": node.unschedulable, "taints": list(node.taints)},
                "status": {"conditions": [{"type": "Ready", "status": "True" if node.ready else "False"}],
                           "allocatable": {"nvidia.com/gpu": str(node.gpus)}}}

    # -- what happens to the cluster ---------------------------------------------------------------------------
    def add_node(self, name: str, **options: Any) -> None:
        """A node joins the group (a new instance: empty instance store, no labels but the group's)."""
        self.nodes[name] = Node(name, labels={layout.GROUP_LABEL: self.group}, **options)

    def remove_node(self, name: str) -> None:
        """A node leaves (replaced, scaled in): its pods are gone with it."""
        del self.nodes[name]
        self.pods = [p for p in self.pods if p.node != name]

    def replace_node(self, name: str) -> None:
        self.remove_node(name)
        self.add_node(f"{name}-r")

    def apply(self, deployment: dict[str, Any], filler: dict[str, Any]) -> None:
        """``kubectl apply`` of a deploy's manifest (a stack rollback's too): both specs replaced as rendered
        (not the refresh's call: no RBAC check, no call numbered)."""
        for kind, obj in ((DEPLOYMENT, deployment), (FILLER, filler)):
            name = obj["metadata"]["name"]
            self._patch(kind, name, {"spec": {k: None for k in self._object(kind, name)["spec"]}}, by_refresh=False)
            self._patch(kind, name, {"spec": obj["spec"]}, by_refresh=False)

    def delete_deployment(self) -> None:
        """``kubectl delete``: the operator's finalizer keeps the object, marked, until it has cleaned up."""
        self.deployment["metadata"]["deletionTimestamp"] = "2026-12-03T00:00:00Z"
        self.deployment["metadata"]["finalizers"] = ["inference.sagemaker.aws.amazon.com/finalizer"]

    # -- time --------------------------------------------------------------------------------------------------
    def tick(self, seconds: float) -> None:
        end = self.now + seconds
        while self.now + DT <= end + 1e-9:
            self.now += DT
            self._fill()
            self._evict()
            self._roll()
            self._schedule()
            self._write_status()
            if self._steady():  # nothing moves until something outside changes the cluster: skip to the end
                break
        self.now = end

    def _steady(self) -> bool:
        """Every filler done with its list, every pod of the read version placed, ready and counted, the status
        caught up: the next steps would change nothing."""
        version, kept = self.reads(), self.kept()
        generation = self.filler["metadata"]["generation"]
        for node in self.nodes.values():
            if not node.ready:
                if any(p.node == node.name for p in self.pods):
                    return False
                continue
            if node.filler_running and node.labels.get(layout.GROUP_LABEL) == self.group and (
                    node.filler_generation != generation
                    or any(node.disk.get(v, 0.0) < self.size_gb and v not in node.failed for v in kept)):
                return False
        pods_settled = len(self.pods) == self.replicas and all(
            p.version == version and p.node and p.terminating_until is None and p.ready_at is not None
            and p.ready_at <= self.now for p in self.pods)
        status_settled = self._seen_generation == self.deployment["metadata"]["generation"] or self.status != "normal"
        return pods_settled and status_settled

    def _mounted(self, node: str) -> set[str]:
        return {p.version for p in self.pods if p.node == node}

    def _fill(self) -> None:
        versions = self.kept()
        generation = int(self.filler["metadata"]["generation"])
        label_prefix = layout.label_prefix(self.model)
        for node in self.nodes.values():
            if not node.ready or not node.filler_running or node.labels.get(layout.GROUP_LABEL) != self.group:
                continue
            if node.filler_generation != generation:  # the filler pod restarts with the new list
                node.filler_generation = generation
                node.failed = {}
                for version in list(node.disk):
                    if version in versions or (self.filler_guards_mounts and version in self._mounted(node.name)):
                        continue
                    readers = [p.uid for p in self.pods if p.node == node.name and p.version == version]
                    if readers:
                        self.violations.append(f"{version} deleted on {node.name} while pods {readers} read it")
                    del node.disk[version]
                for key in [k for k in node.labels if k.startswith(label_prefix)]:
                    if key not in {layout.ready_label(self.model, v) for v in versions}:
                        del node.labels[key]
                for key in [k for k in node.annotations if k.startswith(label_prefix)]:
                    del node.annotations[key]
            self._fill_node(node, versions)
        used = max((sum(n.disk.values()) for n in self.nodes.values()), default=0.0)
        self.peak_gb = max(self.peak_gb, used)

    def _fill_node(self, node: Node, versions: list[str]) -> None:
        for version in versions:
            label = layout.ready_label(self.model, version)
            if node.disk.get(version, 0.0) >= self.size_gb:
                node.labels[label] = "true"
                continue
            node.labels.pop(label, None)  # a copy that is not complete is never labelled ready
            why = self.fail_fill.get(version) or node.failed.get(version)
            if why is None and version not in node.disk and \
                    sum(node.disk.values()) + self.size_gb > node.nvme_gb * 0.9:
                why = f"no room: {self.size_gb:g} GB to download plus 10 % headroom"
            if why is not None:
                node.failed[version] = why
                node.annotations[label] = f"failed: {why}"
                return
            node.disk[version] = min(self.size_gb, node.disk.get(version, 0.0) + self.size_gb * DT / self.fill_seconds)
            return  # one version at a time

    def _evict(self) -> None:
        """Pods on a node NotReady for ``eviction_seconds`` are evicted (Kubernetes' default toleration)."""
        for node in self.nodes.values():
            node.not_ready_since = None if node.ready else (node.not_ready_since or self.now)
            if node.not_ready_since is not None and self.now - node.not_ready_since >= self.eviction_seconds:
                self.pods = [p for p in self.pods if p.node != node.name]
        self.pods = [p for p in self.pods if p.terminating_until is None or p.terminating_until > self.now]

    def _roll(self) -> None:
        """The Deployment controller: surge ceil(25 %), unavailable floor(25 %) of the replicas."""
        version, label, want = self.reads(), self._required_label(), self.replicas
        if self.deployment["metadata"].get("deletionTimestamp"):
            return
        live = [p for p in self.pods if p.terminating_until is None]
        new = [p for p in live if p.version == version]
        old = [p for p in live if p.version != version]
        surge, unavailable = math.ceil(want * 0.25), math.floor(want * 0.25)
        while len(new) + len(old) < want + surge and len(new) < want:
            pod = SimPod(f"p{next(self._uid)}", version, label, self.now)
            self.pods.append(pod)
            new.append(pod)
        for pod in new[want:]:  # scaled in
            pod.terminating_until = self.now + self.terminate_seconds
        available = sum(1 for p in new[:want] + old if self._ready(p))
        for pod in sorted(old, key=self._ready):
            ready = self._ready(pod)
            if ready and available - 1 < want - unavailable:
                continue
            if not ready or len(new) + len(old) > want:
                pod.terminating_until = self.now + self.terminate_seconds
                old.remove(pod)
                available -= ready

    def _schedule(self) -> None:
        used: dict[str, int] = {}
        for pod in self.pods:
            if pod.node:
                used[pod.node] = used.get(pod.node, 0) + self.pod_gpus
        for pod in self.pods:
            if pod.node is None and pod.terminating_until is None:
                # Kubernetes' default scoring spreads pods: the least allocated node that fits and matches.
                fits = [n for n in self.nodes.values()
                        if self._hostable(n) and (pod.label is None or n.labels.get(pod.label) == "true")
                        and n.gpus - used.get(n.name, 0) >= self.pod_gpus]
                host = min(fits, key=lambda n: (used.get(n.name, 0) - n.gpus, n.name), default=None)
                if host is not None:
                    pod.node = host.name
                    used[host.name] = used.get(host.name, 0) + self.pod_gpus
                    pod.cold = host.disk.get(pod.version, 0.0) < self.size_gb
                    if pod.cold:
                        self.cold_starts.append(pod)
            if pod.node and pod.ready_at is None and pod.version not in self.crash_versions \
                    and self.nodes[pod.node].ready:
                pod.ready_at = self.now + self.start_seconds

    @staticmethod
    def _hostable(node: Node) -> bool:
        return node.ready and not node.unschedulable and not any(
            t["effect"] in ("NoSchedule", "NoExecute") for t in node.taints)

    def _write_status(self) -> None:
        meta = self.deployment["metadata"]
        if self._seen_generation != meta["generation"] and self.now - self._progress_at >= self.observe_seconds:
            self._seen_generation = meta["generation"]
        version = self.reads()
        ready_new = sum(1 for p in self.pods if p.version == version and self._ready(p))
        if ready_new > self._ready_new:
            self._progress_at = self.now
        self._ready_new = ready_new
        old = any(p.version != version for p in self.pods)
        if self.now - self._progress_at > self.progress_deadline and (old or ready_new < self.replicas):
            self._failed_generation = meta["generation"]
        if self.status == "absent":
            self.deployment.pop("status", None)
            return
        observed = 1 if self.status == "stale" else self._seen_generation
        state = ("DeploymentFailed" if self._failed_generation == observed else
                 "DeploymentComplete" if not old and ready_new >= self.replicas else "DeploymentInProgress")
        self.deployment["status"] = {"state": state, "observedGeneration": observed, "replicas": self.replicas,
                                     "deploymentStatus": {"message": "pods of the new version crash-loop"
                                                          if state == "DeploymentFailed" else state}}


_RESOURCE = {DEPLOYMENT: "inferenceendpointconfigs", FILLER: "daemonsets", POD: "pods"}
_GROUP = {DEPLOYMENT: "inference.sagemaker.aws.amazon.com", FILLER: "apps"}
_UNREAD = ("resourceVersion", "generation", "uid")
"""Metadata the admission policy never reads (nor ``status``): left out of the cache key of :func:`admitted`."""


def admitted(policy: dict[str, Any], kind: str, old: dict[str, Any], new: dict[str, Any]) -> tuple[str, ...]:
    """What the refresh's admission policy denies of its update ``old`` -> ``new`` (empty: admitted)."""
    def key(obj: dict[str, Any]) -> bytes:
        meta = {k: v for k, v in obj["metadata"].items() if k not in _UNREAD}
        return freeze({**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta})

    return _admitted(freeze(policy), kind, old["metadata"]["namespace"], old["metadata"]["name"], key(old), key(new))


@functools.lru_cache(maxsize=4096)  # a rollout's patches recur across the modelled histories; CEL in Python is slow
def _admitted(policy: bytes, kind: str, namespace: str, name: str, old: bytes, new: bytes) -> tuple[str, ...]:
    request = Request("UPDATE", kind, _GROUP[kind], _RESOURCE[kind], namespace, name,
                      username="arn:aws:sts::111122223333:assumed-role/refresh/session",
                      groups=(RBAC_GROUP, "system:authenticated"))
    return tuple(denials(thaw(policy), request, thaw(old), thaw(new)) or ())


class ClusterKube:
    """The function's ``Kube`` over a :class:`Cluster` (its node list under the protocol's name)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        return self.cluster.get(kind, namespace, name)

    def merge_patch(self, kind: str, namespace: str, name: str, patch: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return self.cluster.merge_patch(kind, namespace, name, patch)

    def items(self, kind: str, namespace: str) -> list[dict[str, Any]]:
        return self.cluster.items(kind, namespace)

    def nodes(self, selector: dict[str, str]) -> list[dict[str, Any]]:
        return self.cluster.nodes_api(selector)


def rbac_rules(objects: list[dict[str, Any]]) -> list[tuple[str, str, frozenset[str], frozenset[str]]]:
    """The rules of rendered Roles and ClusterRoles, as :attr:`Cluster.rbac` takes them."""
    return [(obj["metadata"].get("namespace", ""), resource, frozenset(rule["verbs"]),
             frozenset(rule.get("resourceNames") or ()))
            for obj in objects if obj["kind"] in ("Role", "ClusterRole")
            for rule in obj["rules"] for resource in rule["resources"]]


class Crash(BaseException):
    """The step's process dies at this call (the Lambda runtime is gone; nothing after it runs)."""
