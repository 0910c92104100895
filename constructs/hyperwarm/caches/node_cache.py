"""The Kubernetes objects of hyperwarm's node cache (``weights_cache="node"``): a filler per model, and its rights.

A model whose weights are node-cached is served from ``<hostPath>/hyperwarm/<model>/<version>`` on each node
(``modelSourceType: kubernetesVolume``, as AWS documents in "Deploy models from local NVMe storage"), and its
pods may only run on nodes labelled ready for that version (required node affinity). Who fills the directory
and sets the label is the model's filler: a DaemonSet on the model's instance group, one pod per node, running
:mod:`hyperwarm.functions.node_cache.fill` (shipped here in a ConfigMap) in a stock Python image with boto3.

Its rights: S3 read of the model's prefix through EKS Pod Identity (the construct's role), and in the cluster
``get``/``patch`` on nodes (RBAC cannot narrow a patch), narrowed by a ValidatingAdmissionPolicy to the labels
and annotations under ``weights.hyperwarm.io/`` of the node the pod runs on (the service-account token's
``authentication.kubernetes.io/node-name``, Kubernetes 1.30 and later). The layout (paths, labels, the
versions annotation) is :mod:`hyperwarm.functions.node_cache.layout`, shared with the filler and the refresh.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hyperwarm._internal.acknowledgments import checkov_annotations
from hyperwarm._internal.bundling import ASSET_INIT
from hyperwarm.caches.objects import PRIORITY_CLASS, group_requirement, node_agent_tolerations
from hyperwarm.caches.props import CachedModelSpec
from hyperwarm.caches.sources import ModelSource
from hyperwarm.cluster.instance_group import NVME_PATH, NodeTaint
from hyperwarm.functions import cache_refresh, node_cache
from hyperwarm.functions.node_cache import layout

SERVICE_ACCOUNT = "hyperwarm-node-cache"
"""The fillers' service account (one per namespace): its Pod Identity role reads the node-cached models' prefixes."""
CODE_MOUNT = "/opt/hyperwarm"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
"""The node a pod's bound service-account token was issued for (Kubernetes ``ServiceAccountTokenPodNodeInfo``,
beta and on from 1.30, GA in 1.32): how the admission policy knows which node is the filler's own."""
_CODE = {  # ConfigMap key -> path below CODE_MOUNT: the package layout the filler imports, nothing else
    "hyperwarm.py": "hyperwarm/__init__.py",
    "functions.py": "hyperwarm/functions/__init__.py",
    "node_cache.py": "hyperwarm/functions/node_cache/__init__.py",
    "layout.py": "hyperwarm/functions/node_cache/layout.py",
    "fill.py": "hyperwarm/functions/node_cache/fill.py",
    "cache_refresh.py": "hyperwarm/functions/cache_refresh/__init__.py",
    "errors.py": "hyperwarm/functions/cache_refresh/errors.py",
    "manifest.py": "hyperwarm/functions/cache_refresh/manifest.py",
    "formats.py": "hyperwarm/functions/cache_refresh/formats.py",
}
_CHECKOV = {
    "CKV_K8S_23": "the filler writes the model's directory on the node's instance store, which kubelet creates "
                  "owned by root; it runs as root with every capability dropped and no privilege escalation",
    "CKV_K8S_40": "runs as root (uid 0) to own the node-cache directory kubelet creates; no capability is kept",
    "CKV_K8S_8": "the filler's one job is a download loop; its readiness says whether the node holds every listed "
                 "version, and a hung download is bounded by S3's own timeouts",
    "CKV2_K8S_6": "the filler only calls S3 and the API server for its own node; it opens no port",
    "CKV_K8S_15": "IfNotPresent keeps a restart of the filler from pulling its image again",
    "CKV_K8S_43": "the image is CachedModelsProps.filler_image as configured (a digest is recommended there)",
    "CKV_K8S_38": "the filler labels its own node through the API server: its token is what the admission policy "
                  "narrows to that node's weights labels",
}


def _source(package: Any, name: str) -> str:
    return (Path(package.__file__).parent / name).read_text()


def code_config_map(namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    """The filler's code: :mod:`hyperwarm.functions.node_cache` and the manifest parser it shares with the refresh."""
    files = {
        "hyperwarm.py": ASSET_INIT["hyperwarm"], "functions.py": ASSET_INIT["hyperwarm/functions"],
        "node_cache.py": _source(node_cache, "__init__.py"), "layout.py": _source(node_cache, "layout.py"),
        "fill.py": _source(node_cache, "fill.py"), "cache_refresh.py": _source(cache_refresh, "__init__.py"),
        "errors.py": _source(cache_refresh, "errors.py"), "manifest.py": _source(cache_refresh, "manifest.py"),
        "formats.py": _source(cache_refresh, "formats.py"),
    }
    digest = hashlib.sha256("".join(files[k] for k in sorted(files)).encode()).hexdigest()[:10]
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": code_config_map_name(digest), "namespace": namespace, "labels": labels},
            "data": files}


def code_config_map_name(digest: str) -> str:
    """Named by the code's digest: new code is a new ConfigMap, so the fillers restart onto it."""
    return f"hyperwarm-node-cache-code-{digest}"


def filler_daemonset(model: CachedModelSpec, *, namespace: str, labels: dict[str, str], region: str,
                     image: str, code: str, headroom_percent: int,
                     group_taints: Sequence[NodeTaint] = ()) -> dict[str, Any]:
    """The model's filler: on every node of its instance group, keep the listed versions (the deployed one here;
    a warm rollout adds the next and then drops the previous) and label the node when each is complete."""
    name = layout.filler_name(model.name)
    selector = {"app.kubernetes.io/name": "hyperwarm-node-cache", "app.kubernetes.io/instance": name}
    source = model.source
    assert isinstance(source, ModelSource)  # CachedModelSpec' rule: the node cache fills from S3
    version = layout.Version(source.version, source.bucket, source.location, source.region or "")
    container = _fill_container(model, region=region, image=image, headroom_percent=headroom_percent)
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "labels": labels,
                     "annotations": checkov_annotations(_CHECKOV)},
        "spec": {
            "selector": {"matchLabels": selector},
            # Every node fills at once: a filler pod's restart never touches what serves (the labels stay).
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
            "template": {
                "metadata": {"labels": {**labels, **selector},
                             "annotations": {layout.VERSIONS_ANNOTATION: layout.versions_json([version])}},
                "spec": {
                    "serviceAccountName": SERVICE_ACCOUNT, "priorityClassName": PRIORITY_CLASS,
                    "affinity": {"nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": group_requirement(model.instance_groups)}},
                    "tolerations": node_agent_tolerations(group_taints),
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "enableServiceLinks": False, "terminationGracePeriodSeconds": 30,
                    "containers": [container],
                    "volumes": [
                        {"name": "cache", "hostPath": {"path": layout.model_dir(NVME_PATH, model.name),
                                                       "type": "DirectoryOrCreate"}},
                        {"name": "code", "configMap": {"name": code, "items": [
                            {"key": k, "path": p} for k, p in sorted(_CODE.items())]}},
                        {"name": "status", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
                    ],
                },
            },
        },
    }


def _fill_container(model: CachedModelSpec, *, region: str, image: str, headroom_percent: int) -> dict[str, Any]:
    """The filler's container: what it fills (its environment), when it is ready (the listed versions are
    complete), what it may use and where it writes."""
    env = [
        {"name": layout.MODEL_ENV, "value": model.name},
        {"name": layout.NODE_ENV, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": layout.NAMESPACE_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": layout.VERSIONS_ENV, "valueFrom": {"fieldRef": {
            "fieldPath": f"metadata.annotations['{layout.VERSIONS_ANNOTATION}']"}}},
        {"name": layout.HEADROOM_ENV, "value": str(headroom_percent)},
        {"name": "AWS_REGION", "value": region},
        {"name": "PYTHONPATH", "value": CODE_MOUNT},
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
    ]
    ready = f"import os,sys; sys.exit(not os.path.exists({layout.READY_FILE!r}))"
    return {
        "name": "fill", "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["python3", "-m", "hyperwarm.functions.node_cache.fill"], "env": env,
        "readinessProbe": {"exec": {"command": ["python3", "-c", ready]}, "periodSeconds": 30},
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "4", "memory": "2Gi"}},
        "securityContext": {"runAsUser": 0, "runAsNonRoot": False, "allowPrivilegeEscalation": False,
                            "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": [{"name": "cache", "mountPath": layout.MOUNT},
                         {"name": "code", "mountPath": CODE_MOUNT, "readOnly": True},
                         {"name": "status", "mountPath": layout.STATUS_DIR},
                         {"name": "tmp", "mountPath": "/tmp"}],
    }


def filler_access(namespace: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    """The fillers' service account, its rights (its node's labels; the pods of its namespace, to keep a version a
    pod on its node still reads), and the admission policy that narrows the node rights."""
    user = f"system:serviceaccount:{namespace}:{SERVICE_ACCOUNT}"
    name = f"{SERVICE_ACCOUNT}-{namespace}"[:63]
    meta = {"name": name, "labels": labels}
    local = {"name": SERVICE_ACCOUNT, "namespace": namespace, "labels": labels}
    subjects = [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": namespace}]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": local},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": local,
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": local,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SERVICE_ACCOUNT},
         "subjects": subjects},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta,
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": subjects},
        admission_policy(name, user, labels),
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": meta, "spec": {"policyName": name, "validationActions": ["Deny"]}},
    ]


def admission_policy(name: str, user: str, labels: dict[str, str]) -> dict[str, Any]:
    """What a filler may change on a node: only its own node's labels and annotations under
    ``weights.hyperwarm.io/``; never the spec (taints, cordon), never another key."""
    ours = f"'{layout.LABEL_DOMAIN}/'"

    def only_ours(field: str) -> str:
        new, old = f"variables.new_{field}", f"variables.old_{field}"
        return (f"{new}.all(k, k.startsWith({ours}) || (k in {old} && {old}[k] == {new}[k])) && "
                f"{old}.all(k, k.startsWith({ours}) || k in {new})")

    variables = [{"name": f"{age}_{field}",
                  "expression": f"has({obj}.metadata.{field}) ? {obj}.metadata.{field} : {{}}"}
                 for age, obj in (("new", "object"), ("old", "oldObject")) for field in ("labels", "annotations")]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                    "operations": ["UPDATE"], "resources": ["nodes"]}]},
            "matchConditions": [{"name": "node-cache-filler", "expression": f"request.userInfo.username == '{user}'"}],
            "variables": variables,
            "validations": [
                {"expression": f"'{NODE_NAME_EXTRA}' in request.userInfo.extra && "
                               f"request.userInfo.extra['{NODE_NAME_EXTRA}'][0] == object.metadata.name",
                 "message": "the node-cache filler may change only the node its pod runs on"},
                {"expression": "object.spec == oldObject.spec",
                 "message": "the node-cache filler may not change a node's spec (taints, cordon)"},
                {"expression": only_ours("labels"),
                 "message": f"the node-cache filler may change only labels under {layout.LABEL_DOMAIN}/"},
                {"expression": only_ours("annotations"),
                 "message": f"the node-cache filler may change only annotations under {layout.LABEL_DOMAIN}/"},
            ],
        },
    }
