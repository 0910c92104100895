"""The HyperPod inference operator, modelled in process over simulated time, behind the Kubernetes API
calls a warm rollout makes (``targets.hyperpod.Kube``: get, merge-patch, create, delete, list nodes).

What it models, from the vendored CRDs and FACTS.md section 3:
- API server: 404 for a missing object (as ``KubeApi`` classifies it), 409 for a stale
  ``resourceVersion`` or a create of an existing name, ``metadata.generation`` raised by every spec
  change, ``uid`` per object.
- ``ModelWeightsCacheConfig``: fills node by node (one node every ``fill_seconds``) on the Ready nodes its
  ``nodeSelector`` matches; ``status.state`` Downloading -> Ready (or Failed when told), ``readyNodes``,
  ``targetNodes``, a Ready condition carrying ``observedGeneration``; a node where it is ready holds the
  version its ``modelLocation`` names.
- ``InferenceEndpointConfig``: ``replicas`` pods, one per node; a spec change rolls them one node at a time
  (one pod every ``pod_seconds``), ``status.state`` DeploymentInProgress -> DeploymentComplete (or
  DeploymentFailed when told), ``observedGeneration``, ``deploymentStatus.status`` replica counts. A pod
  is cold when its node holds no ready cache of its version.
It also records what must never happen: a pod started cold, or a cache deleted while a pod reads it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fake_kube import merge_patch
from wire import Count, fresh, sent

from hyperwarm.functions.cache_refresh.errors import PermanentError

CACHE, DEPLOYMENT = "ModelWeightsCacheConfig", "InferenceEndpointConfig"
INSTANCE_TYPE = "ml.g5.8xlarge"


@dataclass
class Pod:
    node: str
    version: str
    cold: bool
    started: float


@dataclass
class Operator:
    """Objects of one namespace, the cluster's nodes and the operator's progress; ``now`` moves with :meth:`tick`."""

    node_names: list[str] = field(default_factory=lambda: [f"node-{i}" for i in range(4)])
    fill_seconds: float = 120.0
    pod_seconds: float = 30.0
    now: float = 1_800_000_000.0
    objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    pods: list[Pod] = field(default_factory=list)
    cold_starts: list[Pod] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    fail_caches: set[str] = field(default_factory=set)
    """Names of caches the operator fails (state Failed) at their next tick."""
    fail_rollouts: bool = False
    """The next deployment rollout ends DeploymentFailed."""
    observe_seconds: float = 90.0
    """How long the operator takes to notice a deployment's new spec (its status describes the previous
    generation until then): longer than a workflow poll, so a step reads a stale status at least once."""
    terminating: list[tuple[Pod, float]] = field(default_factory=list)
    """Replaced pods still shutting down (until the time given): they read their version's cache till then."""
    restored: set[str] = field(default_factory=set)
    """Versions a stack rollback put back: their pods may start cold (a deploy's doing, not a refresh's)."""
    calls: list[str] = field(default_factory=list)
    crash_at: int | None = None
    """Raise :class:`Crash` at this call number (counted over every call, from 0): a step dies mid-way."""
    _rv: Count = field(default_factory=Count)
    _uid: Count = field(default_factory=Count)
    _filled: dict[str, list[str]] = field(default_factory=dict)   # cache name -> nodes ready, in order
    _created: dict[str, float] = field(default_factory=dict)
    _statuses: dict[str, tuple[int, int, dict[str, Any]]] = field(default_factory=dict)
    """Cache name -> (ready nodes, generation, the status written for them): a tick that changes neither
    leaves that status as it is instead of writing an equal one."""
    _rolling: dict[str, Any] | None = None

    # -- set-up --------------------------------------------------------------------------------------
    def deploy(self, name: str, cache: str, bucket: str, location: str, version: str) -> None:
        """As ``cdk deploy`` leaves it: the deployment and its stand-alone cache on ``location``, warm everywhere."""
        source = {"modelSourceType": "s3", "s3Storage": {"bucketName": bucket}, "modelLocation": location}
        self._store(CACHE, {"metadata": {"name": cache}, "spec": {
            "modelSourceConfig": copy.deepcopy(source), "nodeSelector": {"node.kubernetes.io/instance-type": INSTANCE_TYPE}}})
        self._filled[cache] = list(self.node_names)
        self._cache_status(cache)
        self._store(DEPLOYMENT, {"metadata": {"name": name}, "spec": {
            "modelSourceConfig": source, "modelVersion": version, "instanceType": INSTANCE_TYPE,
            "replicas": len(self.node_names)}})
        self.pods = [Pod(node, version, False, self.now) for node in self.node_names]
        self._deployment_status(name, "DeploymentComplete")

    # -- the API calls ---------------------------------------------------------------------------------
    on_call: Callable[[str], None] | None = None
    """Numbers every API call instead of :attr:`crash_at` (a world that crashes at any of its ports' calls)."""

    def _call(self, what: str) -> None:
        if self.on_call is not None:
            self.on_call(what)
            return
        if self.crash_at is not None and len(self.calls) == self.crash_at:
            self.calls.append(what)
            raise Crash(what)
        self.calls.append(what)

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        self._call(f"get {kind}/{name}")
        if (kind, name) not in self.objects:
            raise PermanentError("target-not-found", f"{kind} {namespace}/{name}: HTTP 404")
        return fresh(self.objects[(kind, name)])

    def merge_patch(self, kind: str, namespace: str, name: str, patch: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self._call(f"patch {kind}/{name}")
        obj, patch = self.objects.get((kind, name)), sent(patch)
        if obj is None:
            raise PermanentError("target-not-found", f"{kind} {namespace}/{name}: HTTP 404")
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != obj["metadata"]["resourceVersion"]:
            return 409, {}
        updated = merge_patch(obj, {k: v for k, v in patch.items() if k != "metadata"})
        if updated["spec"] != obj["spec"]:
            updated["metadata"]["generation"] += 1
            if kind == DEPLOYMENT:
                self._start_rolling(name, updated)
        updated["metadata"]["resourceVersion"] = str(next(self._rv))
        self.objects[(kind, name)] = updated
        return 200, fresh(updated)

    def create(self, kind: str, namespace: str, obj: dict[str, Any]) -> bool:
        self._call(f"create {kind}/{obj['metadata']['name']}")
        if (kind, obj["metadata"]["name"]) in self.objects:
            return False
        self._store(kind, sent(obj))
        self._filled[obj["metadata"]["name"]] = []
        self._created[obj["metadata"]["name"]] = self.now
        self._cache_status(obj["metadata"]["name"])
        return True

    def delete(self, kind: str, namespace: str, name: str) -> bool:
        self._call(f"delete {kind}/{name}")
        if (kind, name) not in self.objects:
            return False
        if kind == CACHE:
            version = self.version_of(name)
            self.terminating = [(p, until) for p, until in self.terminating if until > self.now]
            readers = [p for p in [*self.pods, *(p for p, _ in self.terminating)]
                       if p.version == version and p.node in self._filled.get(name, [])]
            if readers:
                self.violations.append(f"{name} ({version}) deleted while {len(readers)} pods read it")
            self._filled.pop(name, None)
        del self.objects[(kind, name)]
        return True

    def nodes(self, selector: dict[str, str]) -> list[dict[str, Any]]:
        self._call("list nodes")
        labels = {"node.kubernetes.io/instance-type": INSTANCE_TYPE}
        if any(labels.get(k) != v for k, v in selector.items()):
            return []
        return [{"metadata": {"name": n, "labels": labels},
                 "status": {"conditions": [{"type": "Ready", "status": "True"}]}} for n in self.node_names]

    # -- the operator over time --------------------------------------------------------------------------
    def tick(self, seconds: float) -> None:
        """Let ``seconds`` pass: from one pod start to the next (each judged cold or warm by the caches filled at
        its own moment; a cache fills by the clock, so nothing between two pod starts needs visiting)."""
        end = self.now + seconds
        while self._rolling is not None and self._rolling["next"] <= end:
            self.now = max(self.now, self._rolling["next"])
            self._fill_all()
            self._roll()
        self.now = end
        self._fill_all()
        if self._rolling is not None:
            self._roll()
        else:  # pods replaced last may still be shutting down: the status counts them until they are gone
            for (kind, _), obj in self.objects.items():
                if kind == DEPLOYMENT and self.pods and (obj.get("status") or {}).get("deploymentStatus"):
                    self._replica_counts(obj, self.pods[0].version)

    def _fill_all(self) -> None:
        for name in [n for (k, n) in self.objects if k == CACHE]:
            self._fill(name)

    def version_of(self, cache: str) -> str:
        return self.objects[(CACHE, cache)]["spec"]["modelSourceConfig"]["modelLocation"].rsplit("/", 1)[-1]

    def serving(self, name: str = "llama") -> str:
        return str(self.objects[(DEPLOYMENT, name)]["spec"]["modelSourceConfig"]["modelLocation"].rsplit("/", 1)[-1])

    def caches(self) -> dict[str, str]:
        return {n: self.version_of(n) for (k, n) in self.objects if k == CACHE}

    # -- internals -------------------------------------------------------------------------------------------
    def _store(self, kind: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        meta.update(namespace="models", uid=f"uid-{next(self._uid)}", generation=1, resourceVersion=str(next(self._rv)))
        obj.setdefault("status", {})
        self.objects[(kind, meta["name"])] = obj

    def _cache_status(self, name: str, state: str | None = None) -> None:
        obj = self.objects[(CACHE, name)]
        ready = len(self._filled[name])
        state = state or ("Ready" if ready >= len(self.node_names) else "Downloading")
        obj["status"] = {"state": state, "readyNodes": ready, "targetNodes": len(self.node_names),
                         "conditions": [{"type": "Ready", "status": "True" if state == "Ready" else "False",
                                         "observedGeneration": obj["metadata"]["generation"]}]}
        self._statuses[name] = (ready, obj["metadata"]["generation"], obj["status"])

    def _fill(self, name: str) -> None:
        obj = self.objects[(CACHE, name)]
        if obj["status"].get("state") == "Failed":
            return
        if name in self.fail_caches:
            self.fail_caches.discard(name)
            self._cache_status(name, "Failed")
            obj["status"]["message"] = "download failed: AccessDenied"
            return
        done = self._filled[name]
        created = self._created.get(name, self.now)
        due = min(len(self.node_names), int((self.now - created) // self.fill_seconds))
        for node in self.node_names[len(done):due]:
            done.append(node)
        if self._statuses.get(name) != (len(done), obj["metadata"]["generation"], obj["status"]):
            self._cache_status(name)

    def _holds(self, node: str, version: str) -> bool:
        return any(self.version_of(c) == version and node in nodes for c, nodes in self._filled.items()
                   if (CACHE, c) in self.objects)

    def _start_rolling(self, name: str, obj: dict[str, Any]) -> None:
        version = obj["spec"]["modelSourceConfig"]["modelLocation"].rsplit("/", 1)[-1]
        self._rolling = {"name": name, "version": version, "next": self.now + self.observe_seconds,
                         "seen": self.now + self.observe_seconds, "fail": self.fail_rollouts}
        self.fail_rollouts = False  # the status still describes the previous generation until the operator looks

    def _roll(self) -> None:
        rolling = self._rolling
        assert rolling is not None
        obj = self.objects[(DEPLOYMENT, rolling["name"])]
        if rolling["seen"] > self.now:  # not noticed yet: the status still describes the previous generation
            return
        if obj["status"].get("observedGeneration") != obj["metadata"]["generation"]:
            obj["status"].update(state="DeploymentInProgress", observedGeneration=obj["metadata"]["generation"])
        if rolling["next"] <= self.now:  # one pod per call: tick visits each start at its own moment
            stale = [p for p in self.pods if p.version != rolling["version"]]
            if stale and rolling["fail"]:
                obj["status"]["state"] = "DeploymentFailed"
                obj["status"]["deploymentStatus"]["message"] = "pods of the new version crash-loop"
                self._rolling = None
                return
            if stale:
                pod = stale[0]
                new = Pod(pod.node, rolling["version"], not self._holds(pod.node, rolling["version"]), rolling["next"])
                self.pods[self.pods.index(pod)] = new
                self.terminating.append((pod, rolling["next"] + self.pod_seconds))
                if new.cold and new.version not in self.restored:
                    self.cold_starts.append(new)
            rolling["next"] += self.pod_seconds
        if all(p.version == rolling["version"] for p in self.pods):
            obj["status"]["state"] = "DeploymentComplete"
            self._rolling = None
        self._replica_counts(obj, rolling["version"])

    def _replica_counts(self, obj: dict[str, Any], version: str) -> None:
        """While pods roll, the one replaced last is still terminating (it may read its version's cache)."""
        updated = sum(p.version == version for p in self.pods)
        self.terminating = [(p, until) for p, until in self.terminating if until > self.now]
        obj["status"]["deploymentStatus"] = {"status": {
            "replicas": len(self.pods), "updatedReplicas": updated, "availableReplicas": len(self.pods),
            "terminatingReplicas": len(self.terminating)}}

    def _deployment_status(self, name: str, state: str) -> None:
        obj = self.objects[(DEPLOYMENT, name)]
        obj["status"] = {"state": state, "observedGeneration": obj["metadata"]["generation"]}
        self._replica_counts(obj, self.pods[0].version)


class Crash(BaseException):
    """The step's process dies at this call (the Lambda runtime is gone; nothing after it runs)."""
