"""HyperPod's in-cluster dependencies as Kubernetes objects packaged with the stack.

AWS ships these in the HyperPod Helm chart, which is published only in git; applying that at
deploy time is not reproducible. These are the parts an inference cluster needs, pinned:
the ``aws-hyperpod`` namespace (its name is fixed by HyperPod), the health monitoring agent
(node resilience: it marks faulty nodes for automatic recovery) and the NVIDIA device plugin
(schedules ``nvidia.com/gpu``). Training operators, MPI and the EFA/Neuron plugins are left
out: single-node inference does not use them.
"""

from __future__ import annotations

from typing import Any

from .catalog import CATALOG

NAMESPACE = "aws-hyperpod"
HEALTH_AGENT = "health-monitoring-agent"
HEALTH_AGENT_TAG = "1.0.935.0_1.0.282.0"
NVIDIA_DEVICE_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.16.1"

# ECR registry accounts that publish the health monitoring agent, per region.
HEALTH_AGENT_ACCOUNTS = {
    "us-east-1": "767398015722", "us-west-2": "905418368575", "us-east-2": "851725546812",
    "us-west-1": "011528288828", "eu-central-1": "211125453373", "eu-north-1": "654654141839",
    "eu-west-1": "533267293120", "eu-west-2": "011528288831", "ap-northeast-1": "533267052152",
    "ap-south-1": "011528288864", "ap-southeast-1": "905418428165", "ap-southeast-2": "851725636348",
    "sa-east-1": "025066253954",
}

_GPU_TYPES = sorted(t for t, spec in CATALOG.items() if spec.gpus)
_TOLERATE_ALL = [{"operator": "Exists", "effect": "NoSchedule"}, {"operator": "Exists", "effect": "NoExecute"}]


def health_agent_image(region: str) -> str:
    """The agent image for ``region``; raises naming the supported regions."""
    if region not in HEALTH_AGENT_ACCOUNTS:
        raise ValueError(f"region {region!r}: the HyperPod health monitoring agent is published in "
                         f"{', '.join(sorted(HEALTH_AGENT_ACCOUNTS))}")
    account = HEALTH_AGENT_ACCOUNTS[region]
    return f"{account}.dkr.ecr.{region}.amazonaws.com/hyperpod-health-monitoring-agent:{HEALTH_AGENT_TAG}"


def _gpu_node_affinity() -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": _GPU_TYPES}]}
    ]}}}


def _health_agent(region: str) -> list[dict[str, Any]]:
    meta = {"name": HEALTH_AGENT, "namespace": NAMESPACE}
    node_env = [
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
    ]
    host_paths = {"log": ("/var/log/", "/var/log", False), "kmsg": ("/dev/kmsg", "/dev/kmsg", True),
                  "localtime": ("/etc/localtime", "/etc/localtime", True)}
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": HEALTH_AGENT},
         "rules": [
             {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
             {"apiGroups": [""], "resources": ["nodes", "nodes/status"], "verbs": ["patch"]},
             {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]},
         ]},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": HEALTH_AGENT},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": HEALTH_AGENT},
         "subjects": [{"kind": "ServiceAccount", **meta}]},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {**meta, "labels": {"app": HEALTH_AGENT}},
         "spec": {"selector": {"matchLabels": {"app": HEALTH_AGENT}}, "template": {
             "metadata": {"labels": {"app": HEALTH_AGENT}},
             "spec": {
                 "serviceAccountName": HEALTH_AGENT,
                 "affinity": _gpu_node_affinity(),
                 "tolerations": _TOLERATE_ALL,
                 "containers": [{
                     "name": HEALTH_AGENT, "image": health_agent_image(region), "imagePullPolicy": "IfNotPresent",
                     "resources": {"requests": {"cpu": "500m", "memory": "512Mi"},
                                   "limits": {"cpu": "500m", "memory": "512Mi"}},
                     "securityContext": {"runAsUser": 1000, "runAsGroup": 2000},
                     "env": node_env,
                     "volumeMounts": [{"name": n, "mountPath": m, "readOnly": ro} for n, (_, m, ro) in host_paths.items()],
                 }],
                 "volumes": [{"name": n, "hostPath": {"path": p}} for n, (p, _, _) in host_paths.items()],
             }}}},
    ]


def _nvidia_device_plugin() -> list[dict[str, Any]]:
    name = "nvidia-device-plugin-daemonset"
    return [{
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"name": name}},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {"metadata": {"labels": {"name": name}}, "spec": {
                "priorityClassName": "system-node-critical",
                "affinity": _gpu_node_affinity(),
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                                *_TOLERATE_ALL],
                "containers": [{
                    "name": "nvidia-device-plugin-ctr", "image": NVIDIA_DEVICE_PLUGIN_IMAGE,
                    "env": [{"name": "FAIL_ON_INIT_ERROR", "value": "false"}],
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                    "volumeMounts": [{"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"}],
                }],
                "volumes": [{"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}],
            }},
        },
    }]


def objects(region: str) -> list[dict[str, Any]]:
    """Every object, namespace first, in apply order."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    return [namespace, *_health_agent(region), *_nvidia_device_plugin()]
