"""The environment's cache objects: the library's chart with this app's labels and namespace, written to files.

The same chart goes to the cluster (``stacks.caches_stack``, through :class:`~hyperwarm.caches.CachedModels`) and
to ``dist/manifests/<env>/`` for review and GitOps users.
"""

from __future__ import annotations

from pathlib import Path

import cdk8s
import yaml

from hyperwarm.caches.cached_models import CLUSTER_NAME_PLACEHOLDER
from hyperwarm.caches.chart import CachesChart, CachesChartProps
from hyperwarm.caches.props import MANAGED_BY
from stacks.config import EnvironmentConfig


def environment_labels(env_name: str) -> dict[str, str]:
    """The labels of every object of the environment's caches."""
    return {**MANAGED_BY, "hyperwarm.io/environment": env_name}


def chart_props(env_name: str, config: EnvironmentConfig,
                cluster_name: str = CLUSTER_NAME_PLACEHOLDER) -> CachesChartProps:
    """What the library's chart renders for the environment; ``dist/manifests`` keep
    :data:`~hyperwarm.caches.cached_models.CLUSTER_NAME_PLACEHOLDER` for a GitOps user to fill in."""
    return CachesChartProps(
        config.caches.models, region=config.region, cluster_name=cluster_name, namespace=config.caches.namespace,
        labels=environment_labels(env_name),
        group_taints={g.name: tuple(g.to_spec().taints) for g in config.instance_groups},
        filler_image=config.caches.filler_image, nvme_headroom_percent=config.caches.nvme_headroom_percent,
        instance_types={g.name: g.instance_type for g in config.instance_groups},
        group_nodes={g.name: g.instance_count for g in config.instance_groups})


def build_chart(env_name: str, config: EnvironmentConfig,
                cluster_name: str = CLUSTER_NAME_PLACEHOLDER) -> CachesChart:
    """The environment's chart under its own ``cdk8s.App`` (never inside the CDK app's tree)."""
    return CachesChart(cdk8s.App(), f"hyperwarm-{env_name}-caches", chart_props(env_name, config, cluster_name))


def write_manifests(env_name: str, config: EnvironmentConfig, root: Path) -> list[Path]:
    """Write one YAML file per object to ``root/<env>/`` (stale files removed); none without caches."""
    directory = root / env_name
    for stale in directory.glob("*.yaml"):
        stale.unlink()
    objects = build_chart(env_name, config).to_json()
    if not objects:
        return []
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, obj in enumerate(objects):
        path = directory / f"{index:02d}-{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump(obj, sort_keys=False))
        paths.append(path)
    return paths
