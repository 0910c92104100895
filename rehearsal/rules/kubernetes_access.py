"""What the Kubernetes objects the stacks apply allow: the refresh's RBAC and the models namespace's Pod Security.

The API server takes an RBAC rule without ``resourceNames`` and a namespace without Pod Security labels alike;
both then allow more than the job needs (every deployment of a namespace patched by the refresh; a privileged pod
in the namespace the cached models serve from).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from rehearsal.core import Assembly, Finding, rule

RBAC_GROUP = "hyperwarm:cache-refresh"
"""The Kubernetes group the refresh's access entries map to (``hyperwarm.refresh.access.RBAC_GROUP``), written out:
a rename there leaves this rule judging nothing, which its test on every synthesis catches."""
_NAMED_ONLY = ("list", "watch", "create", "deletecollection")
"""Verbs whose requests carry no object name, so ``resourceNames`` cannot restrict them (RBAC documentation)."""
_PSA = "pod-security.kubernetes.io/"
_OPERATOR_GROUP = "inference.sagemaker.aws.amazon.com/"


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _bound_roles(assembly: Assembly, group: str) -> set[tuple[str, str, str | None]]:
    """(stack, kind, namespace) -> names of the Roles and ClusterRoles bound to ``group``, as (stack, name, ns)."""
    bound = set()
    for stack, _, obj in assembly.kubernetes_objects():
        if obj.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if any(s.get("kind") == "Group" and s.get("name") == group for s in obj.get("subjects") or []):
            ref = obj.get("roleRef") or {}
            namespace = obj["metadata"].get("namespace") if ref.get("kind") == "Role" else None
            bound.add((stack, f"{ref.get('kind')}/{ref.get('name')}", namespace))
    return bound


def refresh_rbac_rules(assembly: Assembly) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(stack, ``Kind/name``, rule) of every rule of a Role or ClusterRole bound to the refresh's group."""
    bound = _bound_roles(assembly, RBAC_GROUP)
    for stack, _, obj in assembly.kubernetes_objects():
        kind, meta = obj.get("kind"), obj.get("metadata") or {}
        key = (stack, f"{kind}/{meta.get('name')}", meta.get("namespace") if kind == "Role" else None)
        if kind in ("Role", "ClusterRole") and key in bound:
            for item in obj.get("rules") or []:
                yield stack, f"{key[1]}" + (f" in {key[2]}" if key[2] else ""), item


@rule("kubernetes.refresh-rbac-named",
      source="https://kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-resources")
def refresh_rbac_named(assembly: Assembly) -> Iterator[Finding]:
    """Every rule of a Role or ClusterRole bound to the refresh's Kubernetes group (``hyperwarm:cache-refresh``)
    that allows a verb on a named object (``get``, ``patch``, ``update``, ``delete`` ...) lists the objects in
    ``resourceNames``, with no wildcard verb, resource or API group.

    The refresh moves production: it may get and patch the deployments and fillers it refreshes, by name, and no
    other object of their namespaces. Without ``resourceNames`` the rule covers every object of the resource in
    the namespace (or the cluster); only verbs without an object name (``list``, ``watch``, ``create``,
    ``deletecollection``) cannot be narrowed so, and the refresh has only ``list`` of them.
    """
    for stack, role, item in refresh_rbac_rules(assembly):
        verbs, names = _listed(item.get("verbs") or []), _listed(item.get("resourceNames") or [])
        wildcards = [f"{k} *" for k in ("verbs", "resources", "apiGroups") if "*" in _listed(item.get(k) or [])]
        named_verbs = [v for v in verbs if v not in _NAMED_ONLY]
        if wildcards or (named_verbs and (not names or "*" in names)):
            what = ", ".join(wildcards) or f"{'/'.join(named_verbs)} without resourceNames"
            yield Finding("kubernetes.refresh-rbac-named", stack, role,
                          f"lets the refresh {what} on {item.get('resources')}: every object of the kind, not only "
                          "the targets; name them (refresh.access.rbac_objects does)")


@rule("kubernetes.pod-security-labels",
      source="https://kubernetes.io/docs/concepts/security/pod-security-admission/")
def pod_security_labels(assembly: Assembly) -> Iterator[Finding]:
    """The namespace of hyperwarm's cached models (where its ``InferenceEndpointConfig`` objects are) carries
    ``pod-security.kubernetes.io/enforce``, ``warn`` and ``audit``, each with its ``-version``; ``warn`` and
    ``audit`` are ``restricted``; ``enforce`` is ``baseline`` or ``restricted``, or ``privileged`` only where a pod
    of the namespace reads a hostPath volume (a node-cache filler, a model reading cached weights), which the
    Baseline level of the Pod Security Standards forbids
    (https://kubernetes.io/docs/concepts/security/pod-security-standards/). Without an enforce label, Pod Security
    admission applies the cluster default, on EKS ``privileged``: any pod, host namespaces and privileged
    containers included, could start beside the models' weights.
    """
    namespaces: dict[tuple[str, str], dict[str, Any]] = {}
    holders: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for stack, _, obj in assembly.kubernetes_objects():
        meta = obj.get("metadata") or {}
        if obj.get("kind") == "Namespace":
            namespaces[(stack, meta.get("name"))] = meta.get("labels") or {}
        elif meta.get("namespace"):
            holders[(stack, meta["namespace"])].append(obj)
    for (stack, name), objects in sorted(holders.items()):
        if not any(o.get("apiVersion", "").startswith(_OPERATOR_GROUP) for o in objects) or (stack, name) not in namespaces:
            continue
        labels = namespaces[(stack, name)]
        problems = [f"no {_PSA}{mode}" for mode in ("enforce", "warn", "audit") if _PSA + mode not in labels]
        problems += [f"no {_PSA}{mode}-version" for mode in ("enforce", "warn", "audit")
                     if _PSA + mode in labels and _PSA + mode + "-version" not in labels]
        problems += [f"{mode} is {labels[_PSA + mode]!r}, not 'restricted'" for mode in ("warn", "audit")
                     if labels.get(_PSA + mode, "restricted") != "restricted"]
        enforce = labels.get(_PSA + "enforce")
        if enforce == "privileged" and not any(_reads_host_path(o) for o in objects):
            problems.append("enforce is 'privileged' though no pod of the namespace reads a hostPath: enforce baseline")
        elif enforce not in (None, "privileged", "baseline", "restricted"):
            problems.append(f"enforce is {enforce!r}, no Pod Security level")
        if problems:
            yield Finding("kubernetes.pod-security-labels", stack, f"Namespace/{name}",
                          f"Pod Security admission labels: {'; '.join(problems)} (hyperwarm.caches.pod_security)")


def _reads_host_path(obj: dict[str, Any]) -> bool:
    """A DaemonSet with a hostPath volume, or a deployment of the operator reading one (its own volumes or the
    operator's weights cache)."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == "DaemonSet":
        return any("hostPath" in v for v in ((spec.get("template") or {}).get("spec") or {}).get("volumes") or [])
    volumes = (spec.get("kubernetes") or {}).get("volumes") or []
    cache = ((spec.get("modelCacheConfig") or {}).get("weightsCache") or {}).get("enabled")
    return bool(cache) or any("hostPath" in v for v in volumes)
