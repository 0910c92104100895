"""What a HyperPod EKS cluster allows, as plain data and functions (no CDK, no pydantic).

The cluster's parts (:mod:`hyperwarm.cluster.nodes`, :mod:`hyperwarm.cluster.control_plane`) and the app's cdk.json model
both apply these rules, so each exists once. A rule returns what is wrong, without the field path
(the caller knows it), or None.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal, get_args

from hyperwarm._internal.tokens import resolved, unresolved
from hyperwarm.cluster.catalog import CATALOG

OPERATOR_API_GROUP = "inference.sagemaker.aws.amazon.com"

# Each choice is a Literal type (what a type checker and pydantic read) and the tuple of its values (what
# error messages list), one derived from the other.
KubernetesVersion = Literal["1.30", "1.31", "1.32", "1.33", "1.34", "1.35"]
"""EKS versions the HyperPod constructs are tested with."""
SUPPORTED_KUBERNETES_VERSIONS: tuple[str, ...] = get_args(KubernetesVersion)
DEFAULT_KUBERNETES_VERSION: KubernetesVersion = "1.33"
DEFAULT_KUBECTL = "1.34"
"""The kubectl of the default layer (``aws-cdk.lambda-layer-kubectl-v34``, the ``hyperpod`` extra: one layer)."""
DEFAULT_KUBECTL_SERVES: tuple[str, ...] = tuple(
    v for v in SUPPORTED_KUBERNETES_VERSIONS if abs(int(v.split(".")[1]) - int(DEFAULT_KUBECTL.split(".")[1])) <= 1)
"""Control planes the default kubectl may talk to: one minor version either way (kubectl's version skew policy,
https://kubernetes.io/releases/version-skew-policy/#kubectl)."""
DeepHealthCheck = Literal["InstanceStress", "InstanceConnectivity"]
"""``OnStartDeepHealthChecks`` values HyperPod accepts."""
DEEP_HEALTH_CHECKS: tuple[str, ...] = get_args(DeepHealthCheck)
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
"""Kubernetes taint effects."""
TAINT_EFFECTS: tuple[str, ...] = get_args(TaintEffect)
NodeRecovery = Literal["Automatic", "None"]
"""HyperPod's ``NodeRecovery``."""
NODE_RECOVERY: tuple[str, ...] = get_args(NodeRecovery)
ThreadsPerCore = Literal[1, 2]
THREADS_PER_CORE: tuple[int, ...] = get_args(ThreadsPerCore)
INSTANCE_COUNT = range(0, 1001)
EBS_VOLUME_GB = range(1, 16385)
"""``EbsVolumeConfig.VolumeSizeInGB`` (the volume mounts at /opt/sagemaker)."""

INFERENCE_OPERATOR_ADDON = "amazon-sagemaker-hyperpod-inference"


def kubectl_layer_problem(kubernetes_version: str) -> str:
    """Why the default kubectl layer cannot serve ``kubernetes_version`` (one outside
    :data:`DEFAULT_KUBECTL_SERVES`), and which layer to give instead."""
    minor = int(kubernetes_version.split(".")[1])
    return (f"the default kubectl {DEFAULT_KUBECTL} serves Kubernetes {', '.join(DEFAULT_KUBECTL_SERVES)} "
            f"(kubectl's version skew policy: one minor version either way); give kubectl_layer=KubectlV{minor}Layer"
            f"(scope, 'Kubectl') from the PyPI package aws-cdk.lambda-layer-kubectl-v{minor}")

Version = tuple[int, ...]
"""An operator version, (major, minor)."""

OPERATOR_ADDON_BUILDS: dict[str, Version] = {
    # The first build of the add-on, and the oldest AWS supports ("minimum version: v1.0.0-eksbuild.1",
    # https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-setup.html). Operator
    # 3.0 is the release that introduced the add-on (HyperPod Inference release notes, v3.0, 2026-02-23,
    # https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-inference-release-notes.html), and
    # aws/sagemaker-hyperpod-cli added helm_to_addon.sh, which installs this build, with chart 2.0.0 (operator
    # 3.0, 2026-02-17). The script still installed it at chart 2.2.2 (operator 3.2, 2026-06-19), before the
    # caching CRDs existed: whatever minor it carries, it predates model caching. It is also the AddonVersion
    # default of AWS's reference stack (aws/sagemaker-hyperpod-cluster-setup,
    # eks/cloudformation/inference-operator-addon-template.yaml).
    "v1.0.0-eksbuild.1": (3, 0),
    # "Introducing Amazon SageMaker HyperPod Inference Gateway" (AWS Machine Learning blog, 2026-09-21,
    # https://aws.amazon.com/blogs/machine-learning/introducing-amazon-sagemaker-hyperpod-inference-gateway/)
    # installs this build with "inferenceGateway" enabled; the gateway opt-in arrived with operator 3.6 (HyperPod
    # Inference release notes, v3.6). So it carries 3.6 or later; 3.6 is the conservative reading. Not verified:
    # the post was read through verbatim copies, not on AWS's site, and AWS's gateway page is said to ask for
    # v2.0.0-eksbuild.2 or later for the gateway itself (which hyperwarm does not use).
    "v2.0.0-eksbuild.1": (3, 6),
}
"""Add-on builds whose operator version AWS's sources establish. AWS publishes no table of builds to
operator versions; a build not listed here is judged by its order among these (see :func:`operator_pin_problem`)."""

OLDEST_ADDON_OPERATOR: Version = min(OPERATOR_ADDON_BUILDS.values())
"""What EKS may install when no build is pinned: any build, so the oldest."""

OPERATOR_FIELDS: dict[str, Version] = {
    # The model-caching release, chart 2.3.0 (the CRDs in hyperwarm/caches/crds, aws/sagemaker-hyperpod-cli 0986f2cc).
    "ModelWeightsCacheConfig": (3, 3),
    "ModelImageCache": (3, 3),
    "InferenceEndpointConfig.spec.modelCacheConfig": (3, 3),
    "InferenceEndpointConfig.spec.loadBalancer.idleTimeoutSeconds": (3, 3),
    # Chart 2.1.0, operator 3.1 (aws/sagemaker-hyperpod-cli d5e7256, 2026-04-03): absent from chart 2.0.0's CRD.
    "InferenceEndpointConfig.spec.tlsConfig.customCertificateConfig": (3, 1),
    # The node cache's deployments: custom volumes came with operator 3.1 ("Custom Kubernetes Pod Configuration"),
    # the kubernetesVolume model source with 3.1.2 ("Local NVMe Model Deployment", HyperPod Inference release
    # notes, v3.1.2, 2026-05-06).
    "InferenceEndpointConfig.spec.kubernetes": (3, 1, 2),
    "InferenceEndpointConfig.spec.worker.requestLimits": (3, 1),
    # A JumpStart model's JumpStartModel: its caches and ALB idle timeout came with chart 2.3.0 too (absent from chart
    # 2.2.2's CRD, aws/sagemaker-hyperpod-cli a00b22d), its custom certificate with chart 2.1.0 (d5e7256).
    "JumpStartModel.spec.modelCacheConfig": (3, 3),
    "JumpStartModel.spec.loadBalancer.idleTimeoutSeconds": (3, 3),
    "JumpStartModel.spec.tlsConfig.customCertificateConfig": (3, 1),
}
"""Kinds and fields (``Kind.spec.path``) newer than the oldest add-on operator, with the first operator whose
CRDs have them (the CRD history of aws/sagemaker-hyperpod-cli, helm_chart/HyperPodHelmChart/charts/
inference-operator/config/crd). Every other field hyperwarm writes (probes, autoscaling, routing, KV cache,
metrics, node affinity) is in operator 3.0's CRD. An operator older than a field drops it without an error;
one older than a kind has no CRD for it."""

_ADDON_BUILD = re.compile(r"^v(\d+)\.(\d+)\.(\d+)-eksbuild\.(\d+)$")
_ADDON_BUILD_WORDS = "an EKS add-on build such as v2.0.0-eksbuild.1"
_FIND_BUILDS = (f"aws eks describe-addon-versions --addon-name {INFERENCE_OPERATOR_ADDON} "
                "--kubernetes-version <version> --query 'addons[].addonVersions[].addonVersion'")

GROUP_NAME_PATTERN = r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"
GROUP_NAME_WORDS = "1..63 letters, digits or hyphens, starting and ending with a letter or digit, e.g. inference-p5"


def instance_type_problem(instance_type: str) -> str | None:
    if instance_type in CATALOG:
        return None
    return f"unknown instance type; allowed: {', '.join(sorted(CATALOG))}"


PODS_PER_NODE = range(1, 251)
"""What a pods-per-node override may say: a sanity bound, far above the addresses one network interface offers
the types in the catalog (at most 50)."""


def pods_per_node_problem(instance_type: str, pods: int) -> str | None:
    """Why ``pods`` cannot be the pods-per-node figure of ``instance_type``, or None."""
    problem = instance_type_problem(instance_type)
    if problem:
        return problem
    if unresolved(pods) or (isinstance(pods, int) and not isinstance(pods, bool) and pods in PODS_PER_NODE):
        return None
    return f"allowed: an integer {PODS_PER_NODE.start}..{PODS_PER_NODE.stop - 1}"


def nvme_problem(name: str, instance_type: str, holds_caches: bool) -> str | None:
    """Model caches live on the local NVMe instance store: a group holding them needs one."""
    if not holds_caches or instance_type not in CATALOG or CATALOG[instance_type].has_nvme:
        return None
    with_nvme = sorted(t for t, s in CATALOG.items() if s.has_nvme)
    return (f"instance group {name!r} holds caches but {instance_type} has no local NVMe; "
            f"use a type with NVMe ({', '.join(with_nvme)}) or set holds_caches false")


def taints_problem(name: str, has_taints: bool, has_deep_health_checks: bool) -> str | None:
    """HyperPod rejects custom taints on a group with deep health checks (it taints those nodes itself)."""
    if has_taints and has_deep_health_checks:
        return f"instance group {name!r}: custom taints are not allowed while deep health checks are on"
    return None


def addon_build_problem(version: str | None) -> str | None:
    """Why ``version`` is not an EKS add-on build name, or None (also for none and for a token)."""
    if not resolved(version) or _ADDON_BUILD.match(str(version)):
        return None
    return f"allowed: {_ADDON_BUILD_WORDS} (list them with {_FIND_BUILDS})"


def operator_fields(objects: Iterable[Mapping[str, Any]]) -> dict[str, Version]:
    """The kinds and fields of ``objects`` (operator objects) newer than the oldest add-on operator."""
    used: dict[str, Version] = {}
    for obj in objects:
        kind = obj.get("kind")
        if not isinstance(kind, str) or not str(obj.get("apiVersion", "")).startswith(OPERATOR_API_GROUP + "/"):
            continue
        for name in (kind, *_paths(f"{kind}.spec", obj.get("spec", {}))):
            if name in OPERATOR_FIELDS:
                used[name] = OPERATOR_FIELDS[name]
    return used


def _paths(prefix: str, value: Any) -> Iterable[str]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield f"{prefix}.{key}"
            yield from _paths(f"{prefix}.{key}", item)


def _build_key(version: str) -> tuple[int, ...] | None:
    match = _ADDON_BUILD.match(version)
    return tuple(int(part) for part in match.groups()) if match else None


def _show(version: Version) -> str:
    return ".".join(map(str, version))


def operator_pin_problem(pin: str | None, objects: Iterable[Mapping[str, Any]]) -> str | None:
    """Why the inference operator add-on build ``pin`` cannot serve ``objects``, or None.

    Objects that use nothing newer than the oldest add-on operator need no pin. Otherwise a build must be
    pinned (EKS installs its default build without one, which may be older), and it must not be a build
    known, or ordered no later than one known, to carry an older operator. A build newer than every such
    build passes; :func:`operator_pin_unverified` says when hyperwarm cannot name its operator.
    """
    used = operator_fields(objects)
    if not used:
        return None
    need = max(used.values())
    newest = sorted(name for name, version in used.items() if version == need)
    needs = f"{', '.join(newest)} need{'s' if len(newest) == 1 else ''} operator {_show(need)} or later"
    if pin is None:
        return (f"no build is pinned, so EKS installs its default build, which may be older, and {needs} (an older "
                f"operator drops fields it does not know without an error); pin a build carrying operator "
                f"{_show(need)} or later, e.g. "
                f"{_oldest_build_with(need) or 'one newer than every build hyperwarm knows'} "
                f"(list them with {_FIND_BUILDS})")
    if unresolved(pin):
        return None
    key = _build_key(pin)
    if key is None:
        return addon_build_problem(pin)
    older = [(build, version) for build, version in OPERATOR_ADDON_BUILDS.items()
             if version < need and _build_key(build) >= key]  # type: ignore[operator]
    if older:
        build, version = max(older, key=lambda item: _build_key(item[0]))  # type: ignore[arg-type, return-value]
        carries = "carries" if build == pin else f"is no newer than {build}, which carries"
        return (f"{needs}, and this build {carries} operator {_show(version)}; "
                f"pin {_oldest_build_with(need) or 'a newer build'} or later")
    return None


def operator_pin_unverified(pin: str | None) -> str | None:
    """A warning when hyperwarm cannot name the operator version of build ``pin`` (not in its table)."""
    if not resolved(pin) or pin in OPERATOR_ADDON_BUILDS or _build_key(str(pin)) is None:
        return None
    return (f"add-on build {pin} is not in hyperwarm's table of builds (hyperwarm.cluster.rules.OPERATOR_ADDON_BUILDS):"
            " its operator version is assumed from its order; after the install, "
            "kubectl get crd modelweightscacheconfigs.inference.sagemaker.aws.amazon.com confirms model caching")


def _oldest_build_with(need: Version) -> str | None:
    fitting = [build for build, version in OPERATOR_ADDON_BUILDS.items() if version >= need]
    return min(fitting, key=_build_key) if fitting else None  # type: ignore[arg-type]
