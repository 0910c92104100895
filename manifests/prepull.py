"""Image pre-pull DaemonSet and its PriorityClass (built-in kinds).

For images the operator's image cache does not cover (sidecars, init images, operator versions
without image caching). Each image runs as a container that only sleeps: a running container keeps
its image in use, so kubelet's image garbage collection cannot evict it. Tiny requests, no service
account token, non-root, read-only root file system; tolerates the HyperPod health-check taint so
the image is in place when the node turns schedulable.
"""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

from hyperwarm import HEALTH_TAINT_KEY
from stacks.config.environment import Taint
from hyperwarm._internal.acknowledgments import checkov_annotations

from .inference import group_requirement, metadata

PRIORITY_CLASS = "hyperwarm-image-prepull"
PRIORITY_VALUE = 100_000
"""Above ordinary workloads (0) so they cannot preempt the pullers; ``preemptionPolicy: Never``
keeps the pullers from ever evicting a serving pod."""
KEEPALIVE_COMMAND = ("sleep", "infinity")
"""Every pre-pulled image must provide ``sleep`` (the vLLM and LMI DLCs do)."""
_CHECKOV_ACKNOWLEDGED = checkov_annotations({
    "CKV2_K8S_6": "its containers only sleep to keep images on the node; they open no port and make no connection",
    "CKV_K8S_8": "a container that only runs sleep has no health to probe; kubelet restarts it if it exits",
    "CKV_K8S_9": "the pods serve nothing and no Service selects them, so readiness has no meaning here",
    "CKV_K8S_15": "the point is keeping the cached image: Always would re-pull multi-GB images on every restart",
    "CKV_K8S_43": "images are the serving images exactly as configured (tag or digest, latest rejected at synth) "
                  "so the node keeps the very reference the model pods pull",
})


def priority_class(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": metadata(PRIORITY_CLASS, None, labels),
        "value": PRIORITY_VALUE,
        "preemptionPolicy": "Never",
        "globalDefault": False,
        "description": "hyperwarm image pre-pull pods: never preempt others, hard to preempt",
    }


def daemonset_name(group: str) -> str:
    return f"prepull-{group[:50]}"


def health_check_toleration() -> dict[str, str]:
    return {"key": HEALTH_TAINT_KEY, "operator": "Equal", "value": "Unschedulable", "effect": "NoSchedule"}


def _container(image: str) -> dict[str, Any]:
    return {
        "name": f"keep-{hashlib.sha256(image.encode()).hexdigest()[:10]}",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": list(KEEPALIVE_COMMAND),
        "resources": {"requests": {"cpu": "1m", "memory": "8Mi"}, "limits": {"cpu": "10m", "memory": "32Mi"}},
        "securityContext": {
            "runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
        },
    }


def prepull_daemonset(group: str, images: Sequence[str], *, namespace: str, labels: dict[str, str],
                      group_taints: Sequence[Taint] = ()) -> dict[str, Any]:
    """One DaemonSet per instance group keeping ``images`` on each of its nodes."""
    name = daemonset_name(group)
    selector = {"app.kubernetes.io/name": "hyperwarm-prepull", "app.kubernetes.io/instance": name}
    tolerations = [health_check_toleration()] + [
        {"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect} for t in group_taints]
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": metadata(name, namespace, labels, _CHECKOV_ACKNOWLEDGED),
        "spec": {
            "selector": {"matchLabels": selector},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {**labels, **selector}},
                "spec": {
                    "priorityClassName": PRIORITY_CLASS,
                    "affinity": {"nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": group_requirement(group)}},
                    "tolerations": tolerations,
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 5,
                    "containers": [_container(image) for image in sorted(set(images))],
                },
            },
        },
    }
