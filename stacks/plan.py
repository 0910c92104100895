"""``python -m stacks plan cache --env prod``: does each instance group's cache fit, and what does it buy?

For every cached model: NVMe use of its group, the time until a new pod serves when its node is
cold (image pull + S3 download at a per-node bandwidth) and when it is warm (image already on the
node, weights read from NVMe), and a scale-out of K pods of which the first W land on pre-warmed
nodes (each new pod on its own node, the usual case for GPU-bound serving pods).

The estimates are the library's :class:`~hyperwarm.caches.cold_start.ColdStart` (AWS's published HyperPod
figures), which also sizes the startup probe of a cached model.

``--scenario`` adds the events the dashboard watches (``hyperwarm.caches.events``): a scale-out of K
pods onto W warm nodes, a rolling deployment (``--version-changed`` for a new model version), a warm
node replaced, a spot interruption of K pods; each with the dashboard's names (``cold_share``,
``hit_rate_scale_out``, ``cold_pods``, ``cold_pod_share``, ``cache_fill_s``, ``time_to_serve_all_s``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from hyperwarm._internal.constraints import in_gigabytes
from hyperwarm.caches import events as cache_events
from hyperwarm.caches.capacity import group_usage
from hyperwarm.caches.cold_start import DEFAULT_BANDWIDTH_GBPS, DEFAULT_IMAGE_PULL_MIN, ColdStart
from hyperwarm.caches.events import EVENTS, EventForecast
from hyperwarm.caches.placement import footprint
from hyperwarm.caches.props import CachedModelProps
from hyperwarm.cluster.catalog import instance_spec
from stacks.config.environment import ConfigError, EnvironmentConfig, load_context, parse_environments

DEFAULT_SCALE_OUT = 5


@dataclass(frozen=True)
class ModelPlan:
    group: str
    model: str
    size_gb: float
    cold_s: float
    warm_s: float
    speedup: float
    scale_out: int
    prewarmed_nodes: int
    all_serving_s: float
    cold_share: float
    """Share of the K new pods that land on unprepared nodes."""
    events: tuple[EventForecast, ...] = ()
    """The ``--scenario`` events, in the order of :data:`hyperwarm.caches.events.EVENTS`."""


@dataclass(frozen=True)
class GroupPlan:
    group: str
    instance_type: str
    nvme_gb: float
    usable_gb: float
    used_gb: float
    fits: bool
    models: tuple[ModelPlan, ...]


@dataclass(frozen=True)
class Scenarios:
    """Which events to forecast and how."""

    events: tuple[str, ...] = EVENTS
    version_changed: bool = False
    """The rolling deployment brings a new model version (a new cache location)."""


def plan_model(model: CachedModelProps, config: EnvironmentConfig, cold_start: ColdStart, scale_out: int,
               prewarmed: int | None, scenarios: Scenarios = Scenarios()) -> ModelPlan:
    cold, warm, fill = cold_start.cold_s(model), cold_start.warm_s(model), cold_start.fill_s(model)
    if prewarmed is None:
        # The operator warms every node of the group; nodes already serving this model take no new pod.
        group = config.instance_group(model.instance_group)
        prewarmed = max(0, group.instance_count - model.replicas) if model.weights_cache or model.image_cache else 0
    growth = cache_events.scale_out(scale_out, prewarmed, model.replicas, cold, warm, fill)
    forecasts = {
        cache_events.SCALE_OUT: lambda: growth,
        cache_events.ROLLING_DEPLOYMENT: lambda: cache_events.rolling_deployment(
            model.replicas, cold, warm, fill, version_changed=scenarios.version_changed,
            prefilled=model.prewarm and model.weights_cache),
        cache_events.NODE_REPLACED: lambda: cache_events.node_replaced(1, model.replicas, cold, fill),
        cache_events.SPOT_INTERRUPTION: lambda: cache_events.spot_interruption(scale_out, model.replicas, cold, fill),
    }
    return ModelPlan(model.instance_group, model.name, in_gigabytes(model.size), cold, warm, cold / warm if warm else math.inf,
                     scale_out, prewarmed, growth.time_to_serve_all_s, growth.cold_share,
                     tuple(forecasts[event]() for event in scenarios.events))


def plan(config: EnvironmentConfig, cold_start: ColdStart = ColdStart(), scale_out: int = DEFAULT_SCALE_OUT,
         prewarmed: int | None = None, scenarios: Scenarios = Scenarios()) -> list[GroupPlan]:
    """The plan of every instance group holding at least one cached model."""
    groups = []
    for group in config.instance_groups:
        models = [m for m in config.caches.models if m.instance_group == group.name]
        if not models:
            continue
        nvme = instance_spec(group.instance_type).nvme_gb
        usage = group_usage(group.name, nvme, [footprint(m) for m in models], config.caches.nvme_headroom_percent)
        groups.append(GroupPlan(group.name, group.instance_type, nvme, usage.have_gb, usage.need_gb, usage.fits,
                                tuple(plan_model(m, config, cold_start, scale_out, prewarmed, scenarios)
                                      for m in models)))
    return groups


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def _seconds(seconds: float) -> str:
    """Seconds, as the ``*_s`` names say, with minutes beside them for reading."""
    return f"{seconds:,.0f} ({_minutes(seconds)})" if seconds >= 60 else f"{seconds:,.0f}"


def render(env_name: str, groups: list[GroupPlan], cold_start: ColdStart, console: Console) -> None:
    table = Table(title=f"model caches of {env_name}: S3 {cold_start.bandwidth_gbps:g} Gbit/s per node, image pull "
                        f"{_minutes(cold_start.image_pull_s)}, NVMe {cold_start.nvme_gb_per_s:g} GB/s",
                  title_justify="left")
    for column in ("instance group", "model", "weights", "fits", "NVMe used/usable", "cold", "warm", "speed-up",
                   "K (W warm)", "all K serve", "on cold nodes"):
        table.add_column(column, justify="left" if column in ("instance group", "model", "fits") else "right",
                         no_wrap=True)
    for group in groups:
        for index, m in enumerate(group.models):
            first = index == 0
            table.add_row(
                f"{group.group} ({group.instance_type})" if first else "", m.model, f"{m.size_gb:,g} GB",
                ("yes" if group.fits else "[red]NO[/red]") if first else "",
                f"{group.used_gb:,.0f} / {group.usable_gb:,.0f} GB" if first else "",
                _minutes(m.cold_s), _minutes(m.warm_s), f"{m.speedup:.0f}x",
                f"{m.scale_out} ({m.prewarmed_nodes})", _minutes(m.all_serving_s), f"{m.cold_share:.0%}")
    console.print(table)


_EVENT_COLUMNS = ("pods_started", "cold_share", "hit_rate_scale_out", "cold_pods", "cold_pod_share",
                  "time_to_serve_all_s", "cache_fill_s")


def render_events(env_name: str, groups: list[GroupPlan], console: Console) -> None:
    """One row per model and event; the columns carry the names the dashboard uses."""
    table = Table(title=f"events of {env_name}: new pods on cold nodes and time until all serve", title_justify="left")
    for column in ("model", "event", *_EVENT_COLUMNS):
        table.add_column(column, justify="left" if column in ("model", "event") else "right", no_wrap=True)
    for group in groups:
        for m in group.models:
            for index, e in enumerate(m.events):
                table.add_row(m.model if index == 0 else "", e.event, str(e.pods_started), f"{e.cold_share:.0%}",
                              f"{e.hit_rate_scale_out:.0%}", str(e.cold_pods), f"{e.cold_pod_share:.0%}",
                              _seconds(e.time_to_serve_all_s), _seconds(e.cache_fill_s))
    console.print(table)


def as_json(env_name: str, groups: list[GroupPlan], cold_start: ColdStart) -> dict[str, Any]:
    out = []
    for group in groups:
        data = asdict(group)
        data["models"] = [{**asdict(m), "events": [e.as_dict() for e in m.events]} for m in group.models]
        out.append(data)
    return {"environment": env_name, "assumptions": asdict(cold_start), "groups": out}


def run(args: argparse.Namespace) -> int:
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)  # pipes and CI logs: keep rows on one line
    try:
        environments = parse_environments(load_context("cdk.json").get("environments"))
    except ConfigError as exc:
        print(f"python -m stacks plan cache: {exc}", file=sys.stderr)
        return 2
    if args.env not in environments:
        print(f"python -m stacks plan cache: --env {args.env!r} is not configured; environments: "
              f"{', '.join(environments)}", file=sys.stderr)
        return 2
    cold_start = ColdStart(bandwidth_gbps=args.bandwidth_gbps, image_pull_s=args.image_pull_min * 60)
    events = EVENTS if args.scenario == "all" else (args.scenario,)
    groups = plan(environments[args.env], cold_start, args.scale_out, args.prewarmed,
                  Scenarios(events, version_changed=args.version_changed))
    if args.json:
        print(json.dumps(as_json(args.env, groups, cold_start), indent=2))
    elif not groups:
        console.print(f"environment {args.env} caches no models")
    else:
        render(args.env, groups, cold_start, console)
        render_events(args.env, groups, console)
    return 0


def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value
    return parse


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``plan`` with the sub-command ``cache`` on ``subparsers``."""
    plan_parser = subparsers.add_parser("plan", help="plan model caches: NVMe fit and cold vs warm scale-out time",
                                        description="Planning tools for an environment in ./cdk.json.")
    sub = plan_parser.add_subparsers(dest="plan_command", metavar="{cache}")
    sub.required = True
    cache = sub.add_parser("cache", help="NVMe fit and cold vs warm time to serve per instance group and model",
                           description=__doc__)
    cache.add_argument("--env", required=True, help="environment in cdk.json")
    cache.add_argument("--json", action="store_true", help="print JSON instead of a table")
    cache.add_argument("--bandwidth-gbps", type=_positive(float), default=DEFAULT_BANDWIDTH_GBPS,
                       help=f"effective S3 download rate per node, Gbit/s (default {DEFAULT_BANDWIDTH_GBPS:g})")
    cache.add_argument("--image-pull-min", type=_positive(float), default=DEFAULT_IMAGE_PULL_MIN,
                       help=f"cold image pull, minutes (default {DEFAULT_IMAGE_PULL_MIN:g}; AWS: 5..7)")
    cache.add_argument("--scale-out", type=_non_negative_int, default=DEFAULT_SCALE_OUT, metavar="K",
                       help=f"new pods in a scale-out, pods losing their nodes in a spot interruption "
                            f"(default {DEFAULT_SCALE_OUT})")
    cache.add_argument("--prewarmed", type=_non_negative_int, default=None, metavar="W",
                       help="pre-warmed nodes free for new pods (default: the group's nodes not yet serving the model)")
    cache.add_argument("--scenario", choices=("all", *EVENTS), default="all",
                       help="events to forecast (default all): new pods on cold nodes, time until all serve")
    cache.add_argument("--version-changed", action="store_true",
                       help="the rolling deployment brings a new model version (its cache starts empty)")
    cache.set_defaults(func=run)
    return plan_parser

