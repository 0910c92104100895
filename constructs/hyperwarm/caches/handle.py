"""A handle on one cached model: what a refresh target, a dashboard or an alarm needs to know of it.

:class:`~hyperwarm.caches.CachedModels` gives one per model (``models``, ``model(name)``), so other constructs take
the model itself, never its name: a misspelt name fails where it is looked up, and what follows from the model (a
warm version change for a node-cached one, its object kind, its size, its source) is read from it, not restated.
A handle built by hand (tests, a model applied outside this app) is taken at its word.
"""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk

from hyperwarm.caches.sources import AnyModelSource, DeploymentKind
from hyperwarm.cluster.interfaces import IHyperPodCluster
from hyperwarm.functions.cache_refresh import contract


@dataclass(frozen=True)
class CachedModelHandle:
    """One model of a :class:`~hyperwarm.caches.CachedModels`, as others refer to it."""

    name: str
    """The model's name, also its deployment object's (``CachedModelSpec.name``)."""
    cluster: IHyperPodCluster
    """The cluster it is cached on."""
    namespace: str
    """The Kubernetes namespace of its deployment object."""
    kind: DeploymentKind
    """Its deployment object's kind: ``JumpStartModel`` for a JumpStart source, else ``InferenceEndpointConfig``."""
    node_cached: bool
    """Its weights are in hyperwarm's node cache (``weights_cache="node"``): a new version changes warm."""
    size: cdk.Size
    """Its weights' size (``CachedModelSpec.size``)."""
    refreshed: bool = False
    """Its nodes keep room for two versions side by side (``CachedModelsProps.refreshed``), which a refresh needs.
    Default: false."""
    source: AnyModelSource | None = None
    """Where its weights come from (``CachedModelSpec.source``): a refresh target checks it reads the refreshed
    prefix. Default: unknown (not checked)."""

    @property
    def target_id(self) -> str:
        """The refresh function's id of its deployment (the ``target`` dimension of its rollout metrics)."""
        return contract.hyperpod_target_id(self.cluster.eks_cluster.cluster_name, self.namespace, self.kind, self.name)
