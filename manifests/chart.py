"""The environment's cache objects: the library's chart with this app's labels and namespace, written to files.

The same chart goes to the cluster (``stacks.caches_stack``, through :class:`~hyperwarm.caches.CachedModels`) and
to ``dist/manifests/<env>/`` for review and GitOps users. It takes the library's props, never the app's
configuration: the app (``stacks.caches_stack.chart_props``) builds them, so the rendered objects import nothing above
the library.
"""

from __future__ import annotations

from pathlib import Path

import cdk8s
import yaml

from hyperwarm.caches import MANAGED_BY, CachesChart, CachesChartProps


def environment_labels(env_name: str) -> dict[str, str]:
    """The labels of every object of the environment's caches."""
    return {**MANAGED_BY, "hyperwarm.io/environment": env_name}


def build_chart(env_name: str, props: CachesChartProps) -> CachesChart:
    """The environment's chart under its own ``cdk8s.App`` (never inside the CDK app's tree)."""
    return CachesChart(cdk8s.App(), f"hyperwarm-{env_name}-caches", props)


def write_manifests(env_name: str, props: CachesChartProps, root: Path) -> list[Path]:
    """Write one YAML file per object to ``root/<env>/`` (stale files removed); none without caches."""
    directory = root / env_name
    for stale in directory.glob("*.yaml"):
        stale.unlink()
    objects = build_chart(env_name, props).to_json()
    if not objects:
        return []
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, obj in enumerate(objects):
        path = directory / f"{index:02d}-{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump(obj, sort_keys=False))
        paths.append(path)
    return paths
