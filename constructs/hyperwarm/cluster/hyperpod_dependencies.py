"""HyperPod's in-cluster dependencies as Kubernetes objects packaged with the stack.

AWS requires the HyperPod Helm chart on the EKS cluster before ``AWS::SageMaker::Cluster`` is
created, and publishes it only in git; applying it at deploy time is not reproducible. These
objects are what that chart installs by default for an inference cluster, written here and pinned:

- the ``aws-hyperpod`` namespace (HyperPod fixes its name);
- the health monitoring agent (marks faulty nodes for automatic recovery), with its RBAC;
- the deep-health-check service account and RBAC (HyperPod's on-start deep health checks);
- the job-auto-restart and hyperpod-patching RBAC, bound to the user ``hyperpod-service-linked-role``
  (HyperPod's resiliency and rolling AMI patching evict and restart pods through them);
- the NVIDIA device plugin (schedules ``nvidia.com/gpu``) and, on EFA instance types, the EFA
  device plugin (``vpc.amazonaws.com/efa``).

Mirrors aws/sagemaker-hyperpod-cli ``helm_chart/HyperPodHelmChart`` chart 0.1.0 at commit
011ca927123e02b35a399935bbb3ab1905fe33c7 (2026-06-22): health monitoring agent
1.0.1892.0_1.0.424.0, nvidia-device-plugin chart 0.16.1, aws-efa-k8s-device-plugin chart 0.5.20
(aws/eks-charts, image v0.5.13). RBAC rules are the chart's. Deliberate differences: the device
plugins tolerate every taint (the chart lists a few), so a group's custom taints never hide its
GPUs; the EFA plugin image comes from the cluster's own region (the chart pulls it from us-west-2).
Left out: training operators, MPI operator, Kueue/MLflow/storage (training), the Neuron device
plugin and the non-NVIDIA health agent (no Trainium/Inferentia types in the catalog).
"""

from __future__ import annotations

from typing import Any

from hyperwarm._internal.acknowledgments import checkov_annotations
from hyperwarm.cluster.catalog import CATALOG, EFA_INSTANCE_TYPES

NAMESPACE = "aws-hyperpod"
HEALTH_AGENT = "health-monitoring-agent"
HEALTH_AGENT_TAG = "1.0.1892.0_1.0.424.0"
NVIDIA_DEVICE_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.16.1"
EFA_DEVICE_PLUGIN = "aws-efa-k8s-device-plugin"
EFA_DEVICE_PLUGIN_TAG = "v0.5.13"
DEEP_HEALTH_CHECK_SERVICE_ACCOUNT = "deep-health-check-service-account"
HYPERPOD_SERVICE_USER = "hyperpod-service-linked-role"
"""The Kubernetes user HyperPod's service-linked role maps to."""

# ECR registry accounts that publish the health monitoring agent, per region (the chart's table).
HEALTH_AGENT_ACCOUNTS = {
    "us-east-1": "767398015722", "us-west-2": "905418368575", "us-east-2": "851725546812",
    "us-west-1": "011528288828", "eu-central-1": "211125453373", "eu-north-1": "654654141839",
    "eu-west-1": "533267293120", "eu-west-2": "011528288831", "eu-south-2": "626887787726",
    "ap-northeast-1": "533267052152", "ap-south-1": "011528288864", "ap-southeast-1": "905418428165",
    "ap-southeast-2": "851725636348", "ap-southeast-3": "971422672635", "ap-southeast-4": "084375568333",
    "ca-central-1": "843976229209", "sa-east-1": "025066253954",
}
# Amazon EKS add-on image registries that differ from 602401143452 among those regions
# (https://docs.aws.amazon.com/eks/latest/userguide/add-ons-images.html).
_EKS_REGISTRY_ACCOUNTS = {"ap-southeast-3": "296578399912", "ap-southeast-4": "491585149902",
                          "eu-south-2": "455263428931"}

GPU_TYPES = tuple(sorted(t for t, spec in CATALOG.items() if spec.gpus))
EFA_TYPES = tuple(sorted(EFA_INSTANCE_TYPES))
_TOLERATE_ALL = [{"operator": "Exists", "effect": "NoSchedule"}, {"operator": "Exists", "effect": "NoExecute"}]
_RBAC = "rbac.authorization.k8s.io"

# checkov findings on these upstream node agents, acknowledged on each DaemonSet: they run as the
# chart ships them, and tightening what their publishers test against could break node health.
_NODE_AGENT = {
    "CKV2_K8S_6": "a node agent that serves no traffic; the HyperPod chart ships no NetworkPolicy for it",
    "CKV_K8S_8": "the chart defines no probe and the agent serves no endpoint to probe",
    "CKV_K8S_9": "the agent serves no traffic and no Service selects it, so readiness has no meaning here",
    "CKV_K8S_15": "pinned to a fixed tag; IfNotPresent as in the chart, so a node restart does not wait on the "
                  "registry",
    "CKV_K8S_43": "pinned to the exact version tag the chart pins (never latest), so every upgrade is deliberate",
}
_HEALTH_AGENT_AS_SHIPPED = ("as the HyperPod chart ships it; tightening it is untested against the agent, which "
                            "reads host logs and /dev/kmsg")
_HEALTH_AGENT_ACKNOWLEDGED = checkov_annotations({
    **_NODE_AGENT,
    **{check: f"security context {_HEALTH_AGENT_AS_SHIPPED}"
       for check in ("CKV_K8S_20", "CKV_K8S_22", "CKV_K8S_28", "CKV_K8S_29", "CKV_K8S_31", "CKV_K8S_37")},
    "CKV_K8S_38": "the agent patches its node's status and writes events through the Kubernetes API with this token",
    "CKV_K8S_40": f"runs as UID 1000 {_HEALTH_AGENT_AS_SHIPPED}",
})
_NO_LIMITS = ("as the chart ships it: the plugin is system-node-critical, and an OOM kill would take the node's "
              "devices out of scheduling")
_ROOT_SOCKET = "runs as root to create its socket in the host's root-owned /var/lib/kubelet/device-plugins"
_NVIDIA_DEVICE_PLUGIN_ACKNOWLEDGED = checkov_annotations({
    **_NODE_AGENT,
    **{check: f"no requests or limits {_NO_LIMITS}" for check in ("CKV_K8S_10", "CKV_K8S_11", "CKV_K8S_12",
                                                                   "CKV_K8S_13")},
    **{check: _ROOT_SOCKET for check in ("CKV_K8S_23", "CKV_K8S_40")},
    **{check: "security context as the chart ships it (no privilege escalation, every capability dropped); "
              "the plugin is system-node-critical" for check in ("CKV_K8S_22", "CKV_K8S_29", "CKV_K8S_31")},
})
_EFA_PRIVILEGED = ("privileged on the host network as the chart runs it: it registers the host's EFA devices "
                   "under /dev/infiniband with kubelet")
_EFA_DEVICE_PLUGIN_ACKNOWLEDGED = checkov_annotations({
    **_NODE_AGENT,
    **{check: f"no limits {_NO_LIMITS}" for check in ("CKV_K8S_11", "CKV_K8S_13")},
    **{check: _ROOT_SOCKET for check in ("CKV_K8S_23", "CKV_K8S_40")},
    **{check: _EFA_PRIVILEGED for check in ("CKV_K8S_16", "CKV_K8S_19", "CKV_K8S_20", "CKV_K8S_22", "CKV_K8S_28",
                                            "CKV_K8S_29", "CKV_K8S_31", "CKV_K8S_37")},
})


def _check_region(region: str) -> None:
    if region not in HEALTH_AGENT_ACCOUNTS:
        raise ValueError(f"region {region!r}: the HyperPod health monitoring agent is published in "
                         f"{', '.join(sorted(HEALTH_AGENT_ACCOUNTS))}")


def health_agent_image(region: str) -> str:
    """The agent image for ``region``; raises naming the supported regions."""
    _check_region(region)
    account = HEALTH_AGENT_ACCOUNTS[region]
    return f"{account}.dkr.ecr.{region}.amazonaws.com/hyperpod-health-monitoring-agent:{HEALTH_AGENT_TAG}"


def eks_registry_account(region: str) -> str:
    """The account of ``region``'s Amazon EKS add-on image registry (EKS add-ons and HyperPod's own
    images, e.g. ``602401143452.dkr.ecr.us-west-2.amazonaws.com/hyperpod/...``)."""
    return _EKS_REGISTRY_ACCOUNTS.get(region, "602401143452")


def efa_device_plugin_image(region: str) -> str:
    """The EFA device plugin from the EKS add-on registry of ``region``."""
    _check_region(region)
    return f"{eks_registry_account(region)}.dkr.ecr.{region}.amazonaws.com/eks/{EFA_DEVICE_PLUGIN}:{EFA_DEVICE_PLUGIN_TAG}"


def _instance_type_affinity(types: tuple[str, ...], *extra: dict[str, Any]) -> dict[str, Any]:
    expressions = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(types)}, *extra]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": expressions}]}}}


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def _cluster_role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": f"{_RBAC}/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules}


def _binding(name: str, role: str, subject: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": f"{_RBAC}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": _RBAC, "kind": "ClusterRole", "name": role}, "subjects": [subject]}


def _service_account(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": NAMESPACE}}


def _service_account_subject(name: str) -> dict[str, str]:
    return {"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}


_HYPERPOD_USER = {"kind": "User", "name": HYPERPOD_SERVICE_USER, "apiGroup": _RBAC}


def _health_agent(region: str) -> list[dict[str, Any]]:
    node_env = [
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
    ]
    host_paths = {"log": ("/var/log/", "/var/log", False), "kmsg": ("/dev/kmsg", "/dev/kmsg", True),
                  "localtime": ("/etc/localtime", "/etc/localtime", True)}
    labels = {"app": HEALTH_AGENT}
    return [
        _cluster_role(HEALTH_AGENT, [
            _rule([""], ["nodes"], ["get"]),
            _rule([""], ["nodes", "nodes/status"], ["patch"]),
            _rule(["", "events.k8s.io"], ["events"], ["create", "patch", "update"]),
        ]),
        _service_account(HEALTH_AGENT),
        _binding(HEALTH_AGENT, HEALTH_AGENT, _service_account_subject(HEALTH_AGENT)),
        {"apiVersion": "apps/v1", "kind": "DaemonSet",
         "metadata": {"name": HEALTH_AGENT, "namespace": NAMESPACE, "labels": labels,
                      "annotations": _HEALTH_AGENT_ACKNOWLEDGED},
         "spec": {"selector": {"matchLabels": labels}, "template": {
             "metadata": {"labels": labels},
             "spec": {
                 "serviceAccountName": HEALTH_AGENT,
                 "affinity": _instance_type_affinity(GPU_TYPES),
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


def _deep_health_check() -> list[dict[str, Any]]:
    role = f"{DEEP_HEALTH_CHECK_SERVICE_ACCOUNT}-role"
    return [
        _service_account(DEEP_HEALTH_CHECK_SERVICE_ACCOUNT),
        _cluster_role(role, [
            _rule([""], ["nodes"], ["get", "list"]),
            _rule([""], ["pods"], ["get", "list", "patch"]),
        ]),
        _binding(f"{role}-binding", role, _service_account_subject(DEEP_HEALTH_CHECK_SERVICE_ACCOUNT)),
    ]


def _job_auto_restart() -> list[dict[str, Any]]:
    name = "job-auto-restart"
    return [
        _cluster_role(name, [
            _rule([""], ["nodes", "nodes/status", "pods", "pods/status"], ["get", "list", "watch"]),
            _rule([""], ["pods"], ["delete", "deletecollection"]),
            _rule([""], ["nodes", "nodes/status"], ["patch"]),
            _rule(["", "events.k8s.io"], ["events"], ["create"]),
            _rule(["kubeflow.org"], ["pytorchjobs", "pytorchjobs/status"],
                  ["get", "list", "watch", "delete", "patch", "update", "describe"]),
            _rule(["coordination.k8s.io"], ["leases"], ["get", "create", "update", "delete"]),
        ]),
        _service_account(name),
        _binding(name, name, _HYPERPOD_USER),
    ]


def _hyperpod_patching() -> list[dict[str, Any]]:
    name = "hyperpod-patching"
    return [
        _cluster_role(name, [_rule([""], ["pods"], ["list"]), _rule([""], ["pods/eviction"], ["create"])]),
        _binding(name, name, _HYPERPOD_USER),
    ]


def _nvidia_device_plugin() -> list[dict[str, Any]]:
    name = "nvidia-device-plugin-daemonset"
    return [{
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system", "annotations": _NVIDIA_DEVICE_PLUGIN_ACKNOWLEDGED},
        "spec": {
            "selector": {"matchLabels": {"name": name}},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {"metadata": {"labels": {"name": name}}, "spec": {
                "priorityClassName": "system-node-critical",
                # The plugin talks to kubelet over its socket only, never to the Kubernetes API.
                "automountServiceAccountToken": False,
                "affinity": _instance_type_affinity(GPU_TYPES),
                "tolerations": _TOLERATE_ALL,
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


def _efa_device_plugin(region: str) -> list[dict[str, Any]]:
    labels = {"name": EFA_DEVICE_PLUGIN}
    host_paths = {"device-plugin": ("/var/lib/kubelet/device-plugins", None),
                  "infiniband-volume": ("/dev/infiniband/", None),
                  "neuron-tools": ("/opt/aws/neuron/", "DirectoryOrCreate")}
    not_auto_mode = {"key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": ["auto"]}
    return [{
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": EFA_DEVICE_PLUGIN, "namespace": "kube-system", "labels": labels,
                     "annotations": _EFA_DEVICE_PLUGIN_ACKNOWLEDGED},
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {"metadata": {"labels": labels}, "spec": {
                "automountServiceAccountToken": False,
                "priorityClassName": "system-node-critical",
                "hostNetwork": True,
                "affinity": _instance_type_affinity(EFA_TYPES, not_auto_mode),
                "tolerations": _TOLERATE_ALL,
                "containers": [{
                    "name": EFA_DEVICE_PLUGIN, "image": efa_device_plugin_image(region),
                    # Registers the EFA devices of the host with kubelet: privileged, as the chart runs it.
                    "securityContext": {"allowPrivilegeEscalation": True, "privileged": True,
                                        "runAsNonRoot": False, "runAsUser": 0},
                    "resources": {"requests": {"cpu": "10m", "memory": "20Mi"}},
                    "volumeMounts": [{"name": n, "mountPath": p} for n, (p, _) in host_paths.items()],
                }],
                "volumes": [{"name": n, "hostPath": {"path": p, **({"type": t} if t else {})}}
                            for n, (p, t) in host_paths.items()],
            }},
        },
    }]


def objects(region: str) -> list[dict[str, Any]]:
    """Every object, namespace first, in apply order."""
    namespace = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": NAMESPACE, "labels": {"name": NAMESPACE}}}
    return [namespace, *_health_agent(region), *_deep_health_check(), *_job_auto_restart(),
            *_hyperpod_patching(), *_nvidia_device_plugin(), *_efa_device_plugin(region)]
