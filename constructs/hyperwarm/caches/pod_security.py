"""Pod Security admission labels of the models namespace, at the highest level its pods can run under.

The Kubernetes Pod Security Standards (https://kubernetes.io/docs/concepts/security/pod-security-standards/)
define three levels; the namespace's ``pod-security.kubernetes.io/enforce`` label rejects pods that break its
level. What runs in the models namespace:

- the node-cache fillers (``weights_cache="node"``): a hostPath volume (the node's NVMe) and root, to write the
  versions every pod of the model reads. hostPath breaks Baseline.
- the operator's inference pods: with a weights cache they read the weights from a hostPath volume (ours with
  ``"node"``, the operator's own with ``"operator"``, the default), which breaks Baseline. Their containers'
  security contexts are the operator's, not rendered here: at best Baseline is known of them, never Restricted.
- the image pre-pull DaemonSets: Restricted (non-root, no privilege escalation, every capability dropped,
  RuntimeDefault seccomp, no volume).

So the namespace enforces ``privileged`` where a model caches weights on the nodes and ``baseline`` otherwise, and
warns and audits at ``restricted`` either way, so every departure stays visible (a warning to whoever applies a
pod, an audit annotation) without refusing what the cache needs. :func:`pod_problems` is the check of the Standards'
controls that the level is chosen by, on what the chart renders.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

PSS_VERSION = "v1.30"
"""The Standards' version the labels pin: the oldest Kubernetes HyperPod supports, so a control added in a later
release does not start refusing pods on a cluster upgrade."""
LEVELS = ("privileged", "baseline", "restricted")
_PREFIX = "pod-security.kubernetes.io/"
_BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
                          "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
_RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected",
                       "secret"}


def labels(enforce: str) -> dict[str, str]:
    """The namespace's labels: ``enforce`` at its level, ``warn`` and ``audit`` at Restricted, each version pinned."""
    levels = {"enforce": enforce, "warn": "restricted", "audit": "restricted"}
    return {**{_PREFIX + mode: level for mode, level in levels.items()},
            **{f"{_PREFIX}{mode}-version": PSS_VERSION for mode in levels}}


def _containers(pod: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from pod.get(key) or []


def pod_problems(pod: Mapping[str, Any], level: str) -> list[str]:
    """What in a pod spec breaks ``level`` (``baseline`` or ``restricted``; ``privileged`` allows anything)."""
    if level == "privileged":
        return []
    problems = [f"host namespace {key}" for key in ("hostNetwork", "hostPID", "hostIPC") if pod.get(key)]
    problems += [f"hostPath volume {v.get('name')}" for v in pod.get("volumes") or [] if "hostPath" in v]
    pod_context = pod.get("securityContext") or {}
    for container in _containers(pod):
        name, context = container.get("name"), container.get("securityContext") or {}
        if context.get("privileged"):
            problems.append(f"{name}: privileged")
        added = set((context.get("capabilities") or {}).get("add") or [])
        if added - _BASELINE_CAPABILITIES:
            problems.append(f"{name}: adds {sorted(added - _BASELINE_CAPABILITIES)}")
        if any(p.get("hostPort") for p in container.get("ports") or []):
            problems.append(f"{name}: hostPort")
        if level != "restricted":
            continue
        if context.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation not false")
        if "ALL" not in ((context.get("capabilities") or {}).get("drop") or []) or added - {"NET_BIND_SERVICE"}:
            problems.append(f"{name}: capabilities not dropped ALL (NET_BIND_SERVICE alone may be added)")
        non_root = context.get("runAsNonRoot", pod_context.get("runAsNonRoot"))
        if non_root is not True or context.get("runAsUser", pod_context.get("runAsUser")) == 0:
            problems.append(f"{name}: may run as root")
        seccomp = (context.get("seccompProfile") or pod_context.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{name}: seccomp profile {seccomp}")
    if level == "restricted":
        problems += [f"volume {v.get('name')} of a kind Restricted does not allow" for v in pod.get("volumes") or []
                     if not set(v) - {"name"} <= _RESTRICTED_VOLUMES]
    return problems


def enforce_level(objects: Sequence[Mapping[str, Any]]) -> str:
    """The highest level every pod of the namespace's ``objects`` meets: the DaemonSets' pod templates as rendered,
    and each inference deployment at Baseline unless it reads a hostPath (its own volumes, or the operator's weights
    cache), since the operator writes its pods' security contexts."""
    best = "restricted"

    def lower(to: str) -> None:
        nonlocal best
        best = min(best, to, key=LEVELS.index)

    for obj in objects:
        if obj.get("kind") == "DaemonSet":
            pod = obj["spec"]["template"]["spec"]
            lower(next((level for level in reversed(LEVELS) if not pod_problems(pod, level)), "privileged"))
        elif obj.get("apiVersion", "").startswith("inference.sagemaker.aws.amazon.com/"):
            spec = obj.get("spec") or {}
            volumes = (spec.get("kubernetes") or {}).get("volumes") or []
            cached = ((spec.get("modelCacheConfig") or {}).get("weightsCache") or {}).get("enabled")
            lower("privileged" if cached or any("hostPath" in v for v in volumes) else "baseline")
    return best
