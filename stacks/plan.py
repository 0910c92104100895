"""``python -m stacks plan cache --env prod``: does each instance group's cache fit, and what does it buy?

For every cached model: NVMe use of its group at the peak (two versions of each refreshed model), the time
until a new pod serves when its node is cold (image pull + S3 download at a per-node bandwidth, then the
engine's start) and when it is warm (image already on the node, weights read from NVMe, then the engine's
start), each part on its own, and a scale-out of K pods of which the first W land on pre-warmed nodes (each
new pod on its own node, the usual case for GPU-bound serving pods). K defaults to an autoscaled model's
range (``max_replicas - replicas``), with the case beyond the warm nodes beside it, else to 5.

A refresh per cached model: staging the new version on every node of the group (all nodes download at once,
each at the per-node rate), the NVMe it holds at the peak, the switch (the pods rolled one by one, each a
warm start, as a rolling deployment), and the cold share without staging beside the one with it.

The estimates are the library's :class:`~hyperwarm.caches.cold_start.ColdStart` (AWS's published HyperPod
figures, and vLLM's measured engine start: its docstring cites each), which also sizes the startup probe of a
cached model.

``--scenario`` adds the events the dashboard watches (``hyperwarm.caches.events``): a scale-out of K
pods onto W warm nodes, a rolling deployment (``--version-changed`` for a new model version), a warm
node replaced, a spot interruption of K pods; each with the dashboard's names (``cold_share``,
``hit_rate_scale_out``, ``cold_pods``, ``cold_pod_share``, ``cache_fill_s``, ``time_to_serve_all_s``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from dataclasses import asdict, dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from hyperwarm.caches import (
    DEFAULT_BANDWIDTH_GBPS,
    DEFAULT_COMPILE_S,
    DEFAULT_CONTAINER_START_S,
    DEFAULT_CUDA_GRAPH_S,
    DEFAULT_IMAGE_PULL_MIN,
    HUB_BANDWIDTH_GBPS,
    PERFORMANCE_DOCS,
    CachedModelSpec,
    ColdStart,
    FsxModelSource,
    StartBreakdown,
    events as cache_events,
    file_system_readers,
    footprint,
    group_usage,
    rate_basis,
    readers,
)
from hyperwarm.cluster import instance_spec
from hyperwarm.constraints import in_gigabytes
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
    cold_start: StartBreakdown
    warm_start: StartBreakdown
    refresh: cache_events.RefreshForecast
    beyond_fleet: cache_events.EventForecast
    """A scale-out one pod past the W warm nodes: that pod starts on a node without the caches."""
    autoscaling: tuple[int, int] | None = None
    """``(min_replicas, max_replicas)`` of an autoscaled model."""
    events: tuple[cache_events.EventForecast, ...] = ()
    """The ``--scenario`` events, in the order of :data:`hyperwarm.caches.events.EVENTS`."""
    source: str = "s3"
    """Where the weights come from (``s3``, ``fsx``, ``huggingface``, ``jumpstart``)."""
    rate_gbps: float = DEFAULT_BANDWIDTH_GBPS
    """The per-node download rate from that source (:meth:`ColdStart.rate_gbps`)."""
    rate_basis: str = ""
    """How a source's own rate came about (FSx for Lustre: the file system's throughput shared by its readers);
    empty for the S3 rate of the table's title."""


@dataclass(frozen=True)
class GroupPlan:
    group: str
    instance_type: str
    nvme_gb: float
    usable_gb: float
    used_gb: float
    """At the peak: two versions of each refreshed model."""
    fits: bool
    models: tuple[ModelPlan, ...]
    refreshed: tuple[str, ...] = ()
    """Models of the group a refresh prefix targets."""


@dataclass(frozen=True)
class Scenarios:
    """Which events to forecast and how."""

    events: tuple[str, ...] = cache_events.EVENTS
    version_changed: bool = False
    """The rolling deployment brings a new model version (a new cache location)."""


def default_scale_out(model: CachedModelSpec) -> int:
    """K when not given: an autoscaled model's range above its starting replicas, else 5."""
    return model.max_replicas - model.replicas if model.autoscaling else DEFAULT_SCALE_OUT


def with_fsx_readers(cold_start: ColdStart, config: EnvironmentConfig) -> ColdStart:
    """``cold_start`` with the environment's FSx readers: every model on a file system, every node of a cached
    model's groups (:func:`hyperwarm.caches.fsx.file_system_readers`), as the startup probes are sized."""
    nodes = {g.name: g.instance_count for g in config.instance_groups}
    return dataclasses.replace(cold_start, fsx_readers=file_system_readers(config.caches.models, nodes))


def plan_model(model: CachedModelSpec, config: EnvironmentConfig, cold_start: ColdStart, scale_out: int | None,
               prewarmed: int | None, scenarios: Scenarios = Scenarios()) -> ModelPlan:
    cold_start = with_fsx_readers(cold_start, config)
    cold, warm, fill = cold_start.cold_s(model), cold_start.warm_s(model), cold_start.fill_s(model)
    group = config.instance_group(model.instance_group)
    if prewarmed is None:
        # The operator warms every node of the group; nodes already serving this model take no new pod.
        prewarmed = max(0, group.instance_count - model.replicas) if model.weights_cached or model.image_cache else 0
    if scale_out is None:
        scale_out = default_scale_out(model)
    growth = cache_events.scale_out(scale_out, prewarmed, model.replicas, cold, warm, fill)
    forecasts = {
        cache_events.SCALE_OUT: lambda: growth,
        cache_events.ROLLING_DEPLOYMENT: lambda: cache_events.rolling_deployment(
            model.replicas, cold, warm, fill, version_changed=scenarios.version_changed,
            prefilled=model.weights_cache == "node"),
        cache_events.NODE_REPLACED: lambda: cache_events.node_replaced(1, model.replicas, cold, fill),
        cache_events.SPOT_INTERRUPTION: lambda: cache_events.spot_interruption(scale_out, model.replicas, cold, fill),
    }
    refreshed = model.name in config.refresh.cached_models
    # A node-cached model's refresh stages the new version on every node beside the one the pods read.
    rollout = cache_events.refresh(model.replicas, group.instance_count, cold, warm, fill,
                                   footprint(model, refreshed=refreshed).peak_gb, refreshed=refreshed,
                                   staged=model.weights_cache == "node")
    scaling = model.autoscaling
    return ModelPlan(model.instance_group, model.name, in_gigabytes(model.size), cold, warm, cold / warm if warm else math.inf,
                     scale_out, prewarmed, growth.time_to_serve_all_s, growth.cold_share,
                     cold_start.breakdown(model, warm=False), cold_start.breakdown(model, warm=True), rollout,
                     cache_events.scale_out(prewarmed + 1, prewarmed, model.replicas, cold, warm, fill),
                     (scaling.min_replicas, scaling.max_replicas) if scaling else None,
                     tuple(forecasts[event]() for event in scenarios.events),
                     source=model.source.kind, rate_gbps=cold_start.rate_gbps(model),
                     rate_basis=_rate_basis(model, cold_start, {g.name: g.instance_count for g in config.instance_groups}))


def _rate_basis(model: CachedModelSpec, cold_start: ColdStart, group_nodes: dict[str, int]) -> str:
    if not isinstance(model.source, FsxModelSource):
        return ""
    own, total = readers(model, group_nodes), cold_start.fsx_reader_count(model)
    why = (f"the operator fills the weights cache of every node of {', '.join(model.instance_groups)} at once"
           if own > model.max_replicas else "its max_replicas load at once")
    if total > own:
        why += f", beside {total - own} node read(s) of the other models on this file system"
    return f"{rate_basis(model.source, total)} ({why}; disk baseline per TiB: {PERFORMANCE_DOCS})"


def plan(config: EnvironmentConfig, cold_start: ColdStart = ColdStart(), scale_out: int | None = None,
         prewarmed: int | None = None, scenarios: Scenarios = Scenarios()) -> list[GroupPlan]:
    """The plan of every instance group holding at least one cached model."""
    groups = []
    refreshed = config.refresh.cached_models
    for group in config.instance_groups:
        models = [m for m in config.caches.models if m.instance_group == group.name]
        if not models:
            continue
        nvme = instance_spec(group.instance_type).nvme_gb
        usage = group_usage(group.name, nvme, [footprint(m, refreshed=m.name in refreshed) for m in models],
                            config.caches.nvme_headroom_percent)
        groups.append(GroupPlan(group.name, group.instance_type, nvme, usage.have_gb, usage.need_gb, usage.fits,
                                tuple(plan_model(m, config, cold_start, scale_out, prewarmed, scenarios)
                                      for m in models),
                                tuple(m.name for m in models if m.name in refreshed)))
    return groups


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def _seconds(seconds: float) -> str:
    """Seconds, as the ``*_s`` names say, with minutes beside them for reading."""
    return f"{seconds:,.0f} ({_minutes(seconds)})" if seconds >= 60 else f"{seconds:,.0f}"


def _engine(cold_start: ColdStart) -> str:
    return (f"engine: container {cold_start.container_start_s:g} s, load to GPU {cold_start.gpu_load_gb_per_s:g} GB/s, "
            f"torch.compile {cold_start.compile_s:g} s, CUDA graphs {cold_start.cuda_graph_s:g} s")


def render(env_name: str, groups: list[GroupPlan], cold_start: ColdStart, console: Console) -> None:
    table = Table(title=f"model caches of {env_name}: S3 {cold_start.bandwidth_gbps:g} Gbit/s per node, image pull "
                        f"{_minutes(cold_start.image_pull_s)}, NVMe {cold_start.nvme_gb_per_s:g} GB/s; "
                        f"{_engine(cold_start)}",
                  title_justify="left")
    for column in ("instance group", "model", "weights", "fits", "NVMe at peak/usable", "cold", "warm", "speed-up",
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
    for group in groups:
        for m in group.models:
            if m.rate_basis:
                console.print(f"{m.model}: weights from {m.rate_basis}")
            elif m.rate_gbps != cold_start.bandwidth_gbps or m.source != "s3":
                console.print(f"{m.model}: weights from {_SOURCE_WORDS.get(m.source, m.source)} at "
                              f"{m.rate_gbps:g} Gbit/s per node")
        if group.refreshed:
            console.print(f"NVMe at peak of {group.group}: two versions of each refreshed model "
                          f"({', '.join(group.refreshed)}: the new version stages beside the serving one until the "
                          "switch), one of the others")
        for m in group.models:
            line = fleet_line(m)
            if line:
                console.print(line)


_SOURCE_WORDS = {"s3": "S3", "fsx": "FSx for Lustre", "jumpstart": "JumpStart (its bucket's S3 objects, at S3's rate)",
                 "huggingface": "the Hugging Face Hub (an assumption: no published per-node figure)"}


def fleet_line(m: ModelPlan) -> str | None:
    """An autoscaled model's scale-out within its warm nodes, and beyond them."""
    if m.autoscaling is None:
        return None
    low, high = m.autoscaling
    beyond = m.beyond_fleet
    return (f"{m.model}: autoscaling {low}..{high}: a scale-out of K={m.scale_out} onto W={m.prewarmed_nodes} "
            f"pre-warmed nodes starts {m.cold_share:.0%} cold, all serve in {_minutes(m.all_serving_s)}; beyond the "
            f"fleet (pod {m.prewarmed_nodes + 1} on a node without the caches: a higher max_replicas or new nodes) "
            f"{beyond.cold_started} of {beyond.pods_started} starts cold, all serve in "
            f"{_minutes(beyond.time_to_serve_all_s)}")


_START_PARTS = (("image pull", "image_s"), ("weights", "weights_s"), ("container", "container_s"),
                ("load to GPU", "load_s"), ("torch.compile", "compile_s"), ("CUDA graphs", "cuda_graph_s"))


def render_starts(env_name: str, groups: list[GroupPlan], console: Console) -> None:
    """Where a new pod's start goes, on a cold node (S3 download) and on a warm one (NVMe read)."""
    table = Table(title=f"start of one new pod of {env_name}, seconds: weights from the source (cold) or NVMe (warm), then "
                        "the engine", title_justify="left")
    for column in ("model", "node", *(name for name, _ in _START_PARTS), "total"):
        table.add_column(column, justify="left" if column in ("model", "node") else "right", no_wrap=True)
    for group in groups:
        for m in group.models:
            for node, start in (("cold", m.cold_start), ("warm", m.warm_start)):
                table.add_row(m.model if node == "cold" else "", node,
                              *(f"{getattr(start, part):,.0f}" for _, part in _START_PARTS), _seconds(start.total_s))
    console.print(table)


def render_refresh(env_name: str, groups: list[GroupPlan], console: Console) -> None:
    """Per cached model: a new version staged on every node, then switched, against the same without staging."""
    table = Table(title=f"refresh of {env_name}: a new version staged on every node at once, then the pods rolled "
                        "one by one (warm starts)", title_justify="left")
    for column in ("model", "refreshed", "staged on", "staging", "NVMe at peak", "switch", "cold_share without",
                   "all serve without", "cold_share with staging", "all serve with"):
        table.add_column(column, justify="left" if column in ("model", "refreshed", "staged on") else "right",
                         no_wrap=True)
    for group in groups:
        for m in group.models:
            r, staged = m.refresh, m.refresh.with_staging
            table.add_row(
                m.model, "yes" if r.refreshed else "no (a deploy)",
                f"{r.nodes} nodes" if r.staged else ("- (not node-cached)" if r.refreshed else "-"),
                _minutes(r.staging_s) if staged else "-", f"{r.peak_gb:,.0f} GB",
                f"{_minutes(r.switch_s)} ({m.refresh.without_staging.pods_started} x {_minutes(m.warm_s)})"
                if staged else "-",
                f"{r.without_staging.cold_share:.0%}", _minutes(r.without_staging.time_to_serve_all_s),
                f"{staged.cold_share:.0%}" if staged else "-",
                _minutes(staged.time_to_serve_all_s) if staged else "-")
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
        data["models"] = [{**asdict(m), "events": [e.as_dict() for e in m.events], "refresh": m.refresh.as_dict(),
                           "beyond_fleet": m.beyond_fleet.as_dict(),
                           "cold_start": {**asdict(m.cold_start), "total_s": m.cold_start.total_s},
                           "warm_start": {**asdict(m.warm_start), "total_s": m.warm_start.total_s}}
                          for m in group.models]
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
    cold_start = ColdStart(bandwidth_gbps=args.bandwidth_gbps, hub_bandwidth_gbps=args.hub_bandwidth_gbps,
                           image_pull_s=args.image_pull_min * 60,
                           container_start_s=args.container_start_s, compile_s=args.compile_s,
                           cuda_graph_s=args.cuda_graph_s)
    events = cache_events.EVENTS if args.scenario == "all" else (args.scenario,)
    groups = plan(environments[args.env], cold_start, args.scale_out, args.prewarmed,
                  Scenarios(events, version_changed=args.version_changed))
    if args.json:
        print(json.dumps(as_json(args.env, groups, cold_start), indent=2))
    elif not groups:
        console.print(f"environment {args.env} caches no models")
    else:
        render(args.env, groups, cold_start, console)
        render_starts(args.env, groups, console)
        render_events(args.env, groups, console)
        render_refresh(args.env, groups, console)
    return 0


def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value
    return parse


def _non_negative(kind: type) -> Any:
    def parse(text: str) -> Any:
        value = kind(text)
        if value < 0:
            raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
        return value
    return parse


_non_negative_int = _non_negative(int)


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
    cache.add_argument("--hub-bandwidth-gbps", type=_positive(float), default=HUB_BANDWIDTH_GBPS,
                       help=f"effective Hugging Face Hub download rate per node, Gbit/s (default "
                            f"{HUB_BANDWIDTH_GBPS:g}: an assumption, no published figure)")
    cache.add_argument("--image-pull-min", type=_positive(float), default=DEFAULT_IMAGE_PULL_MIN,
                       help=f"cold image pull, minutes (default {DEFAULT_IMAGE_PULL_MIN:g}; AWS: 5..7)")
    cache.add_argument("--container-start-s", type=_non_negative(float), default=DEFAULT_CONTAINER_START_S,
                       help=f"server process up on a node with its image, seconds (default {DEFAULT_CONTAINER_START_S:g}: "
                            "an assumption, no published figure)")
    cache.add_argument("--compile-s", type=_non_negative(float), default=DEFAULT_COMPILE_S,
                       help=f"torch.compile per pod, seconds (default {DEFAULT_COMPILE_S:g}: vLLM, Llama 3 70B, no "
                            "compile cache)")
    cache.add_argument("--cuda-graph-s", type=_non_negative(float), default=DEFAULT_CUDA_GRAPH_S,
                       help=f"CUDA-graph capture per pod, seconds (default {DEFAULT_CUDA_GRAPH_S:g}: vLLM, Llama 3 70B; "
                            "0 with --enforce-eager)")
    cache.add_argument("--scale-out", type=_non_negative_int, default=None, metavar="K",
                       help=f"new pods in a scale-out, pods losing their nodes in a spot interruption (default: an "
                            f"autoscaled model's max_replicas - replicas, else {DEFAULT_SCALE_OUT})")
    cache.add_argument("--prewarmed", type=_non_negative_int, default=None, metavar="W",
                       help="pre-warmed nodes free for new pods (default: the group's nodes not yet serving the model)")
    cache.add_argument("--scenario", choices=("all", *cache_events.EVENTS), default="all",
                       help="events to forecast (default all): new pods on cold nodes, time until all serve")
    cache.add_argument("--version-changed", action="store_true",
                       help="the rolling deployment brings a new model version (its cache starts empty)")
    cache.set_defaults(func=run)
    return plan_parser

