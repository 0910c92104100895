"""The Kubernetes side of a warm rollout: stage a version in caches of its own, read whether they are
ready on every node, switch the deployment, read its rollout, retire the caches no pod reads.

Every call is idempotent (a create of an existing cache, a delete of a gone one, a patch to where the
object points already change nothing), so a step that crashed between two calls is simply run again.
Readiness is read from the objects' ``status`` as the vendored CRDs define it: a
``ModelWeightsCacheConfig`` is ready when ``state`` is Ready, ``readyNodes`` covers every Ready node its
``nodeSelector`` matches (counted from the cluster now, not from configuration) and a condition's
``observedGeneration`` is the object's ``metadata.generation`` (the status describes this spec); an
``InferenceEndpointConfig`` has rolled out when ``status.observedGeneration`` reached the generation of
the switch, ``state`` is DeploymentComplete and every replica is updated and available with none
terminating (then no pod of the previous version is left to read its cache).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from ..config import HyperPodTarget
from ..errors import PermanentError, TransientError
from ..events import ManifestCreated
from ..naming import staged_cache_name
from .hyperpod import CONFLICT_RETRIES, Kube, repoint

CACHE = "ModelWeightsCacheConfig"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
"""Where a cache names no nodeSelector, the deployment's pods go to nodes of its ``instanceType``."""
STAGED_LABEL = "hyperwarm.io/staged-version"
"""On every cache a warm rollout creates: the version it holds (``kubectl get mwcc -l`` finds them)."""


@dataclass(frozen=True)
class Staging:
    """How far the staged caches are: ``ready`` on every node, or ``failed`` (the operator's message)."""

    ready_nodes: int
    target_nodes: int
    ready: bool
    failed: str | None = None


def source_of(obj: dict[str, Any]) -> dict[str, str]:
    """What the deployment reads now (to point it back after a failed switch)."""
    spec = obj.get("spec") or {}
    source = spec.get("modelSourceConfig") or {}
    return {"location": str(source.get("modelLocation") or ""),
            "bucket": str((source.get("s3Storage") or {}).get("bucketName") or ""),
            "version": str(spec.get("modelVersion") or "")}


def staged_names(target: HyperPodTarget, version: str) -> list[str]:
    return [staged_cache_name(cache, version) for cache in target.caches]


def stage(kube: Kube, target: HyperPodTarget, created: ManifestCreated, serving: list[str]) -> list[str]:
    """Create the caches of ``created``'s version beside ``serving`` (the caches the pods use, in the
    order of ``target.caches``), each a copy of its serving cache's spec with the new location.
    Returns the names created now (none on a rerun)."""
    made = []
    for base, current in zip(target.caches, serving, strict=True):
        template = kube.get(CACHE, target.namespace, current)
        spec = copy.deepcopy(template.get("spec") or {})
        source = spec.get("modelSourceConfig") or {}
        if source.get("modelSourceType") != "s3":
            raise PermanentError("target-rejected", f"{CACHE} {current}: model source is "
                                                    f"{source.get('modelSourceType')!r}; a warm rollout stages s3 sources")
        source["modelLocation"] = created.location
        source.setdefault("s3Storage", {})["bucketName"] = created.bucket
        name = staged_cache_name(base, created.version)
        labels = {**((template.get("metadata") or {}).get("labels") or {}), STAGED_LABEL: created.version[:63]}
        if kube.create(CACHE, target.namespace, {"metadata": {"name": name, "namespace": target.namespace,
                                                              "labels": labels}, "spec": spec}):
            made.append(name)
    return made


def _node_ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return ready and not (node.get("spec") or {}).get("unschedulable", False)


def _current(obj: dict[str, Any]) -> bool:
    """The status describes the object's spec as it is now (a condition observed this generation)."""
    generation = (obj.get("metadata") or {}).get("generation")
    observed = [c.get("observedGeneration") for c in (obj.get("status") or {}).get("conditions") or []]
    return generation is not None and generation in observed


def staging(kube: Kube, target: HyperPodTarget, staged: list[str], instance_type: str | None) -> Staging:
    """Where the staged caches stand: the fewest ready nodes over them against the nodes they must fill."""
    ready_nodes, target_nodes, ready, failed = None, 0, True, []
    for name in staged:
        obj = kube.get(CACHE, target.namespace, name)
        status = obj.get("status") or {}
        selector = (obj.get("spec") or {}).get("nodeSelector") or (
            {INSTANCE_TYPE_LABEL: instance_type} if instance_type else {})
        nodes = sum(1 for node in kube.nodes(selector) if _node_ready(node))
        filled = int(status.get("readyNodes") or 0)
        if status.get("state") == "Failed":
            failed.append(f"{name}: {status.get('message') or 'Failed'}")
        ready = ready and status.get("state") == "Ready" and _current(obj) and nodes > 0 and filled >= nodes
        ready_nodes = filled if ready_nodes is None else min(ready_nodes, filled)
        target_nodes = max(target_nodes, nodes)
    return Staging(ready_nodes or 0, target_nodes, ready and not failed, "; ".join(failed) or None)


def switch(kube: Kube, target: HyperPodTarget, created: ManifestCreated) -> int:
    """Point the deployment at the staged version (no-op when it does); its generation to wait for."""
    repoint(kube, target.resource, target.namespace, target.name, created)
    return int(kube.get(target.resource, target.namespace, target.name)["metadata"].get("generation", 0))


def point_back(kube: Kube, target: HyperPodTarget, previous: dict[str, str]) -> int:
    """Point the deployment at what it read before the switch (the old version, whose caches stay)."""
    for _ in range(CONFLICT_RETRIES):
        obj = kube.get(target.resource, target.namespace, target.name)
        if source_of(obj) == previous:
            return int(obj["metadata"].get("generation", 0))
        spec: dict[str, Any] = {"modelSourceConfig": {"s3Storage": {"bucketName": previous["bucket"]},
                                                      "modelLocation": previous["location"]}}
        spec["modelVersion"] = previous["version"] or None  # merge-patch null: the field goes, as it was
        status, data = kube.merge_patch(target.resource, target.namespace, target.name,
                                        {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                                         "spec": spec})
        if status != 409:
            return int((data.get("metadata") or {}).get("generation", 0)) or int(
                kube.get(target.resource, target.namespace, target.name)["metadata"].get("generation", 0))
    raise TransientError("target-conflict", f"{target.resource} {target.namespace}/{target.name}: changed concurrently")


def rollout(kube: Kube, target: HyperPodTarget, generation: int) -> tuple[str, str]:
    """(``complete`` | ``failed`` | ``running``, the operator's words) of the deployment's rollout."""
    obj = kube.get(target.resource, target.namespace, target.name)
    status = obj.get("status") or {}
    words = str((status.get("deploymentStatus") or {}).get("message") or status.get("state") or "")
    if int(status.get("observedGeneration") or 0) < generation:
        return "running", "the operator has not seen the switch yet"
    if status.get("state") == "DeploymentFailed":
        return "failed", words
    pods = (status.get("deploymentStatus") or {}).get("status") or {}
    replicas = pods.get("replicas")
    done = (status.get("state") == "DeploymentComplete" and replicas is not None
            and pods.get("updatedReplicas") == replicas and pods.get("availableReplicas") == replicas
            and not pods.get("terminatingReplicas"))
    return ("complete" if done else "running"), words


def retire(kube: Kube, namespace: str, names: list[str], keep: list[str]) -> list[str]:
    """Delete the caches in ``names`` but never one in ``keep`` (what serves); returns those deleted now."""
    return [name for name in names if name not in keep and kube.delete(CACHE, namespace, name)]
