"""A HyperPod refresh target, in a module that loads no construct: what a dashboard's props name too.

Its staging timeout defaults from the model's size (:func:`default_staging_timeout`), which the rollout's workflow
sizes its backstop by.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import aws_cdk as cdk

from hyperwarm._internal.constraints import in_gigabytes, in_seconds, is_token, known
from hyperwarm._internal.tokens import unresolved
from hyperwarm.caches.cold_start import DEFAULT_BANDWIDTH_GBPS
from hyperwarm.caches.handle import CachedModelHandle
from hyperwarm.caches.sources import AnyModelSource, ModelSource
from hyperwarm.cluster.interfaces import IHyperPodCluster
from hyperwarm.functions.cache_refresh import contract
from hyperwarm.refresh.timeouts import RolloutTimeout

STAGING_SAFETY_FACTOR = 2.0
"""The default staging timeout is this many times one node's cache fill at the planner's rate
(:data:`hyperwarm.caches.cold_start.DEFAULT_BANDWIDTH_GBPS`, AWS's published ~1 Gbit/s effective per node):
nodes fill side by side, and the slowest one counts; twice the estimate lets a node fill at half the rate."""

def refresh_source_problem(source: AnyModelSource | None, bucket_name: str | None, prefix: str) -> str | None:
    """Why a model reading ``source`` is not moved by new versions under ``s3://<bucket_name>/<prefix>/``, or None.

    An upload refreshes only an S3 source reading that bucket and prefix: any other would stay on its version (the
    refresh stages the new one from where it lands, which the model is not granted to read). A bucket name that is
    None or a token is not compared (it is not known at synth); nor is a model without a known source."""
    if source is None:
        return None
    if not isinstance(source, ModelSource):
        return f"reads a {source.kind} source; an S3 upload refreshes S3 sources only"
    bucket_known = bucket_name is not None and not unresolved(bucket_name)
    if source.prefix == prefix and (not bucket_known or unresolved(source.bucket) or source.bucket == bucket_name):
        return None
    refreshed = f"s3://{bucket_name}/{prefix}/" if bucket_known else f"prefix {prefix!r}"
    return f"reads s3://{source.bucket}/{source.prefix}/, not the refreshed {refreshed}"


def default_staging_timeout(model_size: cdk.Size | None, bandwidth_gbps: float = DEFAULT_BANDWIDTH_GBPS) -> cdk.Duration:
    """The staging timeout of a target whose model has ``model_size`` weights: one node's cache fill at
    ``bandwidth_gbps`` times :data:`STAGING_SAFETY_FACTOR`, within ``contract.TIMEOUT_SECONDS_RANGE``
    (145 GB: 2,320 s; 16 GB: 300 s, the least). Unknown size: ``contract.DEFAULT_STAGING_TIMEOUT_SECONDS``."""
    if model_size is None or is_token(model_size):
        return known(cdk.Duration.seconds(contract.DEFAULT_STAGING_TIMEOUT_SECONDS),
                     seconds=contract.DEFAULT_STAGING_TIMEOUT_SECONDS)
    fill_s = in_gigabytes(model_size) * 8 / bandwidth_gbps
    low, high = contract.TIMEOUT_SECONDS_RANGE
    seconds = min(high, max(low, math.ceil(fill_s * STAGING_SAFETY_FACTOR)))
    return known(cdk.Duration.seconds(seconds), seconds=seconds)



_LEGACY = frozenset({"cluster", "namespace", "name", "node_cache", "model_size", "resource"})
"""0.1's fields of a HyperPod refresh target, which the model's handle replaced."""


def whole_seconds(duration: cdk.Duration) -> int:
    """A timeout as the contract's whole seconds (a fraction rounds up: never shorter than asked)."""
    return math.ceil(in_seconds(duration))


@dataclass(frozen=True)
class HyperPodRefreshTarget:
    """A cached model's deployment on a HyperPod cluster (its ``InferenceEndpointConfig`` or ``JumpStartModel``).

    Everything the refresh needs follows from the model's handle: its cluster, namespace, object, whether its
    version changes warm (a node-cached model) and its size."""

    model: CachedModelHandle
    """The model, from :attr:`CachedModels.models <hyperwarm.caches.CachedModels.models>`: a new version of a
    node-cached one (``weights_cache="node"``) changes warm: its filler stages it on every node beside the serving
    one, the deployment moves once the nodes that can host its pods hold it, then the filler drops the previous one
    (the hook's rollout workflow); any other is repointed at once (the operator's own source change may start cold
    pods)."""
    staging_timeout: RolloutTimeout | None = None
    """Warm rollout: the new version ready on every node within this, 300..86400 s; else the rollout fails
    (dead-lettered) and the old version keeps serving. Default: :func:`~hyperwarm.refresh.rollout.default_staging_timeout`
    of the model's size, twice one node's cache fill at the planner's 1 Gbit/s, at least 5 minutes (145 GB:
    2,320 s)."""
    switch_timeout: RolloutTimeout = field(
        default_factory=lambda: cdk.Duration.seconds(contract.DEFAULT_SWITCH_TIMEOUT_SECONDS))
    """Warm rollout: the deployment's rollout to the staged version finished within this, 300..86400 s; else it
    is pointed back at the old version. Default: 30 minutes."""

    def __new__(cls, *args: Any, **kwargs: Any) -> HyperPodRefreshTarget:
        """Refuses 0.1's call shapes (``cluster, namespace, name``, ``node_cache=``, ``model_size=``, ``resource=``)
        with the migration, before the dataclass's own signature error could hide it."""
        model = args[0] if args else kwargs.get("model")
        legacy = sorted(_LEGACY & kwargs.keys())
        if legacy or not isinstance(model, CachedModelHandle) or any(isinstance(a, str) for a in args[1:]):
            given = ", ".join([*(repr(a) for a in args), *(f"{k}=..." for k in kwargs)])
            raise TypeError(f"HyperPodRefreshTarget({given}) -- allowed: HyperPodRefreshTarget(model, "
                            "staging_timeout=..., switch_timeout=...), model a cached model's handle, "
                            "CachedModels.model(name) (since 0.2.0 the target takes the model, not cluster, namespace "
                            "and name: HyperPodRefreshTarget(cluster, ns, name, node_cache=...) becomes "
                            "HyperPodRefreshTarget(caches.model(name)); the node cache, kind and size come from it)")
        return super().__new__(cls)

    @property
    def cluster(self) -> IHyperPodCluster:
        return self.model.cluster

    @property
    def node_cache(self) -> bool:
        """The version changes warm (the model is node-cached)."""
        return self.model.node_cached

    def to_contract(self) -> contract.HyperPodTarget:
        """The target as the function reads it."""
        model = self.model
        staging = self.staging_timeout or default_staging_timeout(model.size)
        return contract.HyperPodTarget(cluster=model.cluster.eks_cluster.cluster_name, namespace=model.namespace,
                                       name=model.name, resource=model.kind,
                                       node_cache=contract.NodeCache(model.name) if model.node_cached else None,
                                       staging_timeout_seconds=whole_seconds(staging),
                                       switch_timeout_seconds=whole_seconds(self.switch_timeout))
