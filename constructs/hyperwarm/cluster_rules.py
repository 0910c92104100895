"""What a HyperPod EKS cluster allows, as plain data and functions (no CDK, no pydantic).

The cluster's parts (:mod:`hyperwarm.nodes`, :mod:`hyperwarm.control_plane`) and the app's cdk.json model
both apply these rules, so each exists once. A rule returns what is wrong, without the field path
(the caller knows it), or None.
"""

from __future__ import annotations

import re

from .catalog import CATALOG

SUPPORTED_KUBERNETES_VERSIONS = ("1.30", "1.31", "1.32", "1.33", "1.34", "1.35")
"""EKS versions the HyperPod constructs are tested with (one kubectl layer per version, pyproject.toml)."""
DEFAULT_KUBERNETES_VERSION = "1.33"
DEEP_HEALTH_CHECKS = ("InstanceStress", "InstanceConnectivity")
"""``OnStartDeepHealthChecks`` values HyperPod accepts."""
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
NODE_RECOVERY = ("Automatic", "None")
THREADS_PER_CORE = (1, 2)
INSTANCE_COUNT = range(0, 1001)
EBS_VOLUME_GB = range(1, 16385)
"""``EbsVolumeConfig.VolumeSizeInGB`` (the volume mounts at /opt/sagemaker)."""

INFERENCE_OPERATOR_ADDON = "amazon-sagemaker-hyperpod-inference"
MIN_OPERATOR_FOR_CACHING = (3, 3)
"""Operator 3.3 (chart 2.3.0, aws/sagemaker-hyperpod-cli) is the first whose CRDs have
``modelCacheConfig``, ``ModelWeightsCacheConfig`` and ``ModelImageCache``; chart 2.2.2 (operator 3.2) has none."""

GROUP_NAME_PATTERN = r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"
GROUP_NAME_WORDS = "1..63 letters, digits or hyphens, starting and ending with a letter or digit, e.g. inference-p5"


def instance_type_problem(instance_type: str) -> str | None:
    if instance_type in CATALOG:
        return None
    return f"unknown instance type; allowed: {', '.join(sorted(CATALOG))}"


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


def operator_version_problem(version: str | None) -> str | None:
    """Why a pinned inference operator add-on ``version`` cannot hold model caches, or None (also for
    no pin, and for a version this cannot read, such as a token)."""
    match = re.match(r"^v?(\d+)\.(\d+)", version or "")
    if match is None or (int(match[1]), int(match[2])) >= MIN_OPERATOR_FOR_CACHING:
        return None
    low = ".".join(map(str, MIN_OPERATOR_FOR_CACHING))
    return (f"addon_versions[{INFERENCE_OPERATOR_ADDON!r}] = {version!r} -- model caches need operator "
            f"v{low} or later (the first with ModelWeightsCacheConfig and ModelImageCache)")
