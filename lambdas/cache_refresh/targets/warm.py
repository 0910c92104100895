"""The Kubernetes side of a warm version change on a node-cached model (:mod:`..node_cache.layout`).

What a rollout step reads and changes, each call idempotent (a patch to what the object says already changes
nothing), so a step that died between two calls is simply run again:

- the model's filler DaemonSet: the versions it keeps on every node (:func:`keep`), serving first, at most two,
  never dropping one a pod still mounts;
- the nodes of the model's instance group: which can host its pods (Ready, schedulable, untainted), which carry
  the ready label of a version (set by the filler only once the copy is verified), and which say a version
  failed there (:func:`staging`);
- the deployment (``InferenceEndpointConfig``): pointed at a version's directory with required affinity on its
  ready label (:func:`point`), and its pods, read directly (:func:`rollout`): which version each mounts, whether
  it is ready or terminating, and whether its node carried the ready label of what it mounts.

Decisions are per node and per pod, from what the kubelet and the scheduler report, never from a count the
operator keeps: an operator status that lags or is absent only delays; an object being deleted
(``deletionTimestamp``) is neither ready nor failed but gone for the rollout.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from ...node_cache import layout
from ..config import HyperPodTarget
from ..errors import PermanentError, TransientError
from .hyperpod import CONFLICT_RETRIES, Kube, node_cache_volumes as _volumes, served_from_node_cache

served = served_from_node_cache
"""The version a node-cached deployment's pods read (its model volume's directory)."""

FILLER = "DaemonSet"
POD = "Pod"
_BLOCKING_TAINTS = ("NoSchedule", "NoExecute")


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def deleting(obj: dict[str, Any]) -> bool:
    """Being deleted (finalizers still run): neither ready nor failed, and not to be changed."""
    return bool(_meta(obj).get("deletionTimestamp"))


def _model(target: HyperPodTarget) -> tuple[str, str]:
    assert target.node_cache is not None  # only node-cached targets roll out warm
    return target.node_cache.model, target.node_cache.host_path


# -- what the deployment reads ---------------------------------------------------------------------------------

def point(kube: Kube, target: HyperPodTarget, version: str) -> int:
    """Point the deployment at ``version``'s directory and require its ready label (a no-op when it does);
    returns the deployment's generation to wait for. Conflicts (409) are re-read and retried."""
    model, host_path = _model(target)
    for _ in range(CONFLICT_RETRIES):
        obj = kube.get(target.resource, target.namespace, target.name)
        if deleting(obj):
            raise PermanentError("target-deleting", f"{target.resource} {target.namespace}/{target.name} is being "
                                 "deleted")
        spec = obj.get("spec") or {}
        if served(target, obj) == version and _required_label(spec, model) == layout.ready_label(model, version):
            return int(_meta(obj).get("generation", 0))
        volumes = [v for v in _volumes(spec) if v.get("name") != layout.MODEL_VOLUME]
        volumes.append(layout.volume(layout.version_dir(host_path, model, version)))
        patch = {"metadata": {"resourceVersion": _meta(obj)["resourceVersion"]},
                 "spec": {"modelVersion": version, "kubernetes": {"volumes": volumes},
                          "nodeAffinity": _affinity(spec, model, version)}}
        status, data = kube.merge_patch(target.resource, target.namespace, target.name, patch)
        if status != 409:
            return int(_meta(data).get("generation", 0)) or int(_meta(
                kube.get(target.resource, target.namespace, target.name)).get("generation", 0))
    raise TransientError("target-conflict", f"{target.resource} {target.namespace}/{target.name}: changed concurrently")


def _terms(spec: dict[str, Any]) -> list[dict[str, Any]]:
    required = (spec.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    return list(required.get("nodeSelectorTerms") or [{}])


def _required_label(spec: dict[str, Any], model: str) -> str | None:
    keys = [e.get("key") for t in _terms(spec) for e in t.get("matchExpressions") or []]
    return next((k for k in keys if isinstance(k, str) and k.startswith(layout.label_prefix(model))), None)


def _affinity(spec: dict[str, Any], model: str, version: str) -> dict[str, Any]:
    """The deployment's node affinity with every term requiring ``version``'s ready label instead of another's."""
    affinity = copy.deepcopy(spec.get("nodeAffinity") or {})
    terms = []
    for term in _terms(spec):
        kept = [e for e in term.get("matchExpressions") or []
                if not str(e.get("key", "")).startswith(layout.label_prefix(model))]
        terms.append({**term, "matchExpressions": [*kept, layout.ready_requirement(model, version)]})
    affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
    return affinity


def group_selectors(obj: dict[str, Any]) -> list[dict[str, str]]:
    """A label selector per instance group the deployment's pods may use (the required ``In`` expression on the
    group label: its first group, then the fallback groups)."""
    for term in _terms(obj.get("spec") or {}):
        for expression in term.get("matchExpressions") or []:
            values = expression.get("values") or []
            if expression.get("key") == layout.GROUP_LABEL and expression.get("operator") == "In" and values:
                return [{layout.GROUP_LABEL: str(value)} for value in values]
    raise PermanentError("target-rejected", f"{_meta(obj).get('name')}: no required instance-group affinity "
                         f"({layout.GROUP_LABEL} In [groups]): the nodes its pods may use are unknown")


# -- the filler ---------------------------------------------------------------------------------------------------

def kept(kube: Kube, target: HyperPodTarget) -> list[layout.Version]:
    """The versions the model's filler keeps now."""
    return layout.filler_versions(_filler(kube, target))


def _filler(kube: Kube, target: HyperPodTarget) -> dict[str, Any]:
    obj = kube.get(FILLER, target.namespace, layout.filler_name(_model(target)[0]))
    if deleting(obj):
        raise PermanentError("target-deleting", f"{FILLER} {target.namespace}/{_meta(obj).get('name')} is being deleted")
    return obj


def keep(kube: Kube, target: HyperPodTarget, versions: list[layout.Version]) -> list[str]:
    """Make the filler keep ``versions`` (serving first) and drop the rest from every node, except a version a pod
    still mounts (any pod, terminating ones too): that one stays, and the versions it displaces wait. Returns the
    versions kept beyond ``versions`` because a pod reads them (empty when the filler keeps exactly ``versions``)."""
    name = layout.filler_name(_model(target)[0])
    for _ in range(CONFLICT_RETRIES):
        obj = _filler(kube, target)
        now = layout.filler_versions(obj)
        in_use = mounted(kube, target)
        held = [v for v in now if v.version in in_use and v.version not in {w.version for w in versions}]
        wanted = (held + [v for v in versions if v.version not in {h.version for h in held}])[:layout.MAX_VERSIONS]
        if [v.version for v in wanted] == [v.version for v in now] and wanted == now:
            return [v.version for v in held]
        patch = {"metadata": {"resourceVersion": _meta(obj)["resourceVersion"]}, **layout.filler_patch(wanted)}
        status, _ = kube.merge_patch(FILLER, target.namespace, name, patch)
        if status != 409:
            return [v.version for v in held]
    raise TransientError("target-conflict", f"{FILLER} {target.namespace}/{name}: changed concurrently")


# -- nodes ----------------------------------------------------------------------------------------------------

def hostable(node: dict[str, Any]) -> bool:
    """Can a pod of the deployment run there now: Ready, not cordoned, no NoSchedule/NoExecute taint (the
    operator's pods tolerate none: HyperPod's health-check taint keeps them off), not being deleted."""
    spec, status = node.get("spec") or {}, node.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    tainted = any(t.get("effect") in _BLOCKING_TAINTS for t in spec.get("taints") or [])
    return ready and not spec.get("unschedulable", False) and not tainted and not deleting(node)


def _gpus(node: dict[str, Any]) -> int:
    try:
        return int(((node.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu") or 0)
    except ValueError:
        return 0


@dataclass(frozen=True)
class Staging:
    """Where a version stands on the nodes that can host the deployment's pods."""

    ready_nodes: list[str]
    """Hostable nodes labelled ready for the version."""
    waiting_nodes: list[str]
    """Hostable nodes not (yet) labelled."""
    failed: dict[str, str] = field(default_factory=dict)
    """Node -> why the version cannot be filled there (the filler's annotation)."""
    room: bool = False
    """The ready nodes can hold every replica of the deployment."""

    @property
    def ready(self) -> bool:
        """Every node that can host a pod holds the version, and they can hold every replica."""
        return bool(self.ready_nodes) and not self.waiting_nodes and self.room and not self.failed


def staging(kube: Kube, target: HyperPodTarget, version: str) -> Staging:
    """Per node, from the nodes of the deployment's instance group as they are now."""
    model, _ = _model(target)
    deployment = kube.get(target.resource, target.namespace, target.name)
    label = layout.ready_label(model, version)
    ready, waiting, failed, capacity = [], [], {}, 0
    gpus = _pod_gpus(deployment)
    for node in (node for selector in group_selectors(deployment) for node in kube.nodes(selector)):
        name = _meta(node)["name"]
        note = (_meta(node).get("annotations") or {}).get(label)
        if isinstance(note, str) and note.startswith("failed"):
            failed[name] = note
        if not hostable(node):
            continue
        if (_meta(node).get("labels") or {}).get(label) == "true":
            ready.append(name)
            capacity += _gpus(node) // gpus if gpus else 1
        else:
            waiting.append(name)
    return Staging(sorted(ready), sorted(waiting), failed, capacity >= replicas(deployment))


def _pod_gpus(deployment: dict[str, Any]) -> int:
    requests = ((((deployment.get("spec") or {}).get("worker") or {}).get("resources") or {}).get("requests") or {})
    try:
        return int(requests.get("nvidia.com/gpu") or 0)
    except ValueError:
        return 0


def replicas(deployment: dict[str, Any]) -> int:
    """The pods the deployment runs: its spec's, or more when its autoscaler reports more."""
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    wanted = spec.get("replicas")
    return max(1 if wanted is None else int(wanted), int(status.get("replicas") or 0))


# -- pods -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Pod:
    """A pod that mounts a version of the model's node cache."""

    uid: str
    node: str | None
    version: str
    ready: bool
    terminating: bool
    """Being deleted: it may still run, and read its version, until its containers stop."""
    done: bool
    """Succeeded or Failed (an evicted pod stays listed so): its containers read nothing any more."""


def pods(kube: Kube, target: HyperPodTarget) -> list[Pod]:
    """The pods that mount one of this model's node-cache directories (whoever created them), any state."""
    model, host_path = _model(target)
    found = []
    for pod in kube.items(POD, target.namespace):
        paths = [str((v.get("hostPath") or {}).get("path") or "") for v in (pod.get("spec") or {}).get("volumes") or []]
        versions = [v for v in (layout.version_of_path(p, host_path, model) for p in paths) if v]
        if not versions:
            continue
        status = pod.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        found.append(Pod(str(_meta(pod).get("uid") or _meta(pod).get("name")), (pod.get("spec") or {}).get("nodeName"),
                         versions[0], ready, deleting(pod), status.get("phase") in ("Succeeded", "Failed")))
    return found


def mounted(kube: Kube, target: HyperPodTarget) -> set[str]:
    """Every version some pod mounts, terminating pods included (a copy under a reader is never dropped)."""
    return {p.version for p in pods(kube, target) if not p.done}


@dataclass(frozen=True)
class Rollout:
    """How far the deployment's move to a version is, from its pods and (for failure only) its status."""

    state: str
    """``complete`` (every pod reads the version, enough of them ready, no other left), ``failed`` (the operator
    reports the deployment failed for this generation) or ``running``."""
    words: str
    new_pods: list[Pod]


def rollout(kube: Kube, target: HyperPodTarget, version: str, generation: int) -> Rollout:
    deployment = kube.get(target.resource, target.namespace, target.name)
    if deleting(deployment):
        raise PermanentError("target-deleting", f"{target.resource} {target.namespace}/{target.name} is being deleted")
    status = deployment.get("status") or {}
    words = str((status.get("deploymentStatus") or {}).get("message") or status.get("state") or "")
    found = pods(kube, target)
    new = [p for p in found if p.version == version and not p.done]
    others = [p for p in found if p.version != version and not p.done]
    current = int(status.get("observedGeneration") or 0) >= generation
    if current and status.get("state") == "DeploymentFailed":
        return Rollout("failed", words or "DeploymentFailed", new)
    serving = [p for p in new if p.ready and not p.terminating]
    if not others and len(serving) >= replicas(deployment):
        return Rollout("complete", words, new)
    return Rollout("running", f"{len(serving)} of {replicas(deployment)} pods ready on {version}, "
                   f"{len(others)} of other versions left" + (f"; {words}" if words else ""), new)


def cold(kube: Kube, target: HyperPodTarget, version: str, new_pods: list[Pod], seen: set[str]) -> tuple[list[str], int]:
    """The pods of ``version`` not looked at before (by uid): whether each sits on a node without the version's
    ready label (a cold start: it would read a missing or partial copy). Returns (their uids, how many are cold)."""
    model, _ = _model(target)
    fresh = [p for p in new_pods if p.uid not in seen and p.node]
    if not fresh:
        return [], 0
    label = layout.ready_label(model, version)
    labelled = {_meta(n)["name"] for n in kube.nodes({label: "true"})}
    return [p.uid for p in fresh], sum(1 for p in fresh if p.node not in labelled)
