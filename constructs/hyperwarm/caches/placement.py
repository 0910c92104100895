"""Where cached models may go: the instance group exists, holds caches, has the GPUs, and its NVMe fits them all.

One set of rules for :class:`~hyperwarm.caches.CachedModels` (on a cluster's instance groups) and for an app that
checks its configuration before building anything (on its own description of the groups).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

from hyperwarm._internal.constraints import in_gigabytes
from hyperwarm.caches.capacity import CacheFootprint, capacity_problems
from hyperwarm.caches.jumpstart import image_key, is_jumpstart, shared_type_problems
from hyperwarm.caches.objects import model_server_settings
from hyperwarm.caches.props import CachedModelSpec
from hyperwarm.caches.sources import JumpStartModelSource
from hyperwarm.cluster.catalog import instance_spec


class CacheGroup(Protocol):
    """What these rules read of an instance group (the cluster's ``InstanceGroup`` fits)."""

    @property
    def name(self) -> str: ...

    @property
    def instance_type(self) -> str: ...

    @property
    def holds_caches(self) -> bool: ...

    @property
    def taints(self) -> Sequence[Any]: ...


def footprint(model: CachedModelSpec, *, refreshed: bool = False) -> CacheFootprint:
    """What ``model`` puts on each node of its group at the peak (for the capacity guard): two versions when
    ``refreshed`` (a refresh prefix targets it), else one (:mod:`hyperwarm.caches.capacity`)."""
    # The serving image is on every node that runs the model, cached or not (a JumpStart model's is its hub content's).
    image = image_key(model.source) if isinstance(model.source, JumpStartModelSource) else str(model.image)
    images = {image: in_gigabytes(model.image_size), **{e.image: in_gigabytes(e.size) for e in model.extra_images}}
    return CacheFootprint(model.name, in_gigabytes(model.size), model.weights_cache != "off", images,
                          versions=2 if refreshed else 1)


def _group_problem(at: str, name: str, groups: Mapping[str, CacheGroup]) -> str | None:
    group = groups.get(name)
    if group is None:
        return f"{at}: {name!r} -- no such instance group; allowed: {', '.join(groups)}"
    if not group.holds_caches:
        allowed = [n for n, g in groups.items() if g.holds_caches]
        return (f"{at}: {name!r} -- holds_caches is false for this group; "
                f"allowed: {', '.join(allowed) or 'none (set holds_caches true)'}")
    blocking = [f"{t.key}={t.value}:{t.effect}" for t in group.taints if t.effect != "PreferNoSchedule"]
    if blocking:
        return (f"{at}: {name!r} -- the group is tainted ({', '.join(blocking)}) "
                "and InferenceEndpointConfig has no tolerations, so its pods could never run there; "
                "allowed: an untainted group")
    return None


def _group_fields(path: str, model: CachedModelSpec) -> list[tuple[str, str]]:
    """(field path, group) of every group the model may run on, first the preferred one."""
    return [(f"{path}.instance_group", model.instance_group),
            *((f"{path}.fallback_groups[{i}]", g) for i, g in enumerate(model.fallback_groups))]


def placement_problems(models: Sequence[CachedModelSpec], groups: Sequence[CacheGroup], nvme_headroom_percent: int,
                       path: str = "models", refreshed: Collection[str] = ()) -> list[str]:
    """Every model on a group that can serve it, then every group's NVMe holding its caches (two versions of the
    models named in ``refreshed``); each problem names its field path (``<path>[i].field``) and value, or the
    instance group."""
    by_name = {g.name: g for g in groups}
    problems = []
    for index, model in enumerate(models):
        at = f"{path}[{index}]"
        for field, name in _group_fields(at, model):
            problem = _group_problem(field, name, by_name)
            if problem:
                problems.append(problem)
                continue
            if is_jumpstart(model):  # its hub content sizes its pod and configures its server
                continue
            instance_type = by_name[name].instance_type
            spec = instance_spec(instance_type)
            if model.resources.gpus > spec.gpus:
                problems.append(f"{at}.resources.gpus: {model.resources.gpus} -- {instance_type} (instance group "
                                f"{name}) has {spec.gpus} GPU(s); allowed: 0..{spec.gpus}")
        if not is_jumpstart(model):
            problems += [p.at(at) for p in model_server_settings(model).problems]
    problems += shared_type_problems(models, groups, path)
    if problems:
        return problems
    placed = {name: [footprint(m, refreshed=m.name in refreshed) for m in models if name in m.instance_groups]
              for name in by_name}
    return capacity_problems(
        {name: instance_spec(g.instance_type).nvme_gb for name, g in by_name.items() if placed[name]},
        placed, nvme_headroom_percent, {name: g.instance_type for name, g in by_name.items()})
