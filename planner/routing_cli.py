"""``hyperwarm routing simulate|tune``: the command-line front end.

Why a separate ``add_parser``: the project's ``hyperwarm`` console script
owns the top-level parser; it calls :func:`add_parser` with its
sub-parsers object, and ``python -m planner`` builds a stand-alone parser
the same way.  Every command sets ``func(args) -> int`` (exit code).
Results go to stdout (the table, or one JSON object with ``--json``);
progress bars and notes go to stderr.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional, Sequence

from .scenarios import SCENARIOS, get_scenario
from .sim import InstanceModel, simulate_many
from .strategies import STRATEGY_NAMES, make_strategy
from .workloads import Workload


def _ints(text: str) -> List[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None


def _common(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--scenario", choices=sorted(SCENARIOS), help="built-in scenario")
    src.add_argument("--trace", metavar="FILE", help="trace file, glob or directory (JSONL or data capture)")
    p.add_argument("--format", choices=("auto", "jsonl", "capture"), default="auto", help="trace format")
    p.add_argument("--instances", type=int, help="instances in the variant (default: scenario's, or 4)")
    p.add_argument("--requests", type=int, help="simulate only the first N requests")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kv-capacity-tokens", type=int, help="KV cache per instance, tokens")
    p.add_argument("--prefill-tokens-per-s", type=float, help="prefill throughput per instance")
    p.add_argument("--overhead-ms", type=float, help="fixed TTFT part of a fully cached prompt")
    p.add_argument("--tpot-ms", type=float, help="decode time per output token")
    p.add_argument(
        "--clients",
        type=int,
        help="closed loop: K users, each sending its next request when the last completes "
        "(ignores trace timestamps; makes throughput comparable)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``routing`` with ``simulate`` and ``tune`` on ``subparsers``."""
    routing = subparsers.add_parser(
        "routing",
        help="simulate and tune SageMaker routing strategies",
        description="Simulate SageMaker routing strategies on a workload and tune prefix-aware routing.",
    )
    sub = routing.add_subparsers(dest="routing_command", metavar="{simulate,tune}")
    sub.required = True

    sim = sub.add_parser("simulate", help="compare routing strategies on a scenario or trace")
    _common(sim)
    sim.add_argument(
        "--strategies",
        default=",".join(STRATEGY_NAMES),
        help=f"comma-separated, from {', '.join(STRATEGY_NAMES)}",
    )
    sim.add_argument("--prefix-length", type=int, help="PREFIX_AWARE PrefixLength, 1024..65536 bytes")
    sim.add_argument("--concurrency-threshold", type=int, help="PREFIX_AWARE ConcurrencyThreshold, 1..1024")
    sim.add_argument("--chart", metavar="PNG", help="chart path (default routing-<scenario>.png)")
    sim.add_argument("--no-chart", action="store_true", help="do not write a chart")
    sim.add_argument("--list-scenarios", action="store_true", help="list scenarios and exit")
    sim.set_defaults(func=cmd_simulate)

    tn = sub.add_parser("tune", help="recommend PrefixLength and ConcurrencyThreshold")
    _common(tn)
    tn.add_argument("--prefix-lengths", type=_ints, help="candidates, e.g. 1024,4096,16384")
    tn.add_argument("--thresholds", type=_ints, help="candidates, e.g. 4,8,16,32")
    tn.add_argument(
        "--max-share-deviation",
        type=float,
        default=0.2,
        help="largest allowed relative distance of an instance's share from fair (default 0.2)",
    )
    tn.set_defaults(func=cmd_tune)
    return routing


class _Fail(Exception):
    pass


def _setup(args):
    """(name, workload, instances, model, scenario or None) from the args."""
    from .traces import TraceError, open_trace

    sc = None
    if args.trace:
        try:
            wl: Workload = open_trace(args.trace, args.format)
        except (TraceError, OSError) as e:
            raise _Fail(str(e))
        name = args.trace
        n = args.instances or 4
        model = InstanceModel()
    else:
        sc = get_scenario(args.scenario or "aws-long-context")
        wl = sc.workload(args.seed, args.requests)
        name = sc.name
        n = args.instances or sc.instances
        model = sc.model
    if args.requests is not None:
        wl = wl.limit(args.requests)
    over = {}
    for field_name in ("kv_capacity_tokens", "prefill_tokens_per_s", "overhead_ms", "tpot_ms"):
        v = getattr(args, field_name)
        if v is not None:
            over[field_name] = v
    if over:
        from dataclasses import replace

        model = replace(model, **over)
    if n < 1:
        raise _Fail(f"instances={n} is outside the allowed range >= 1")
    return name, wl, n, model, sc


def _console(stderr: bool = False):
    from rich.console import Console

    c = Console(stderr=stderr)
    if not c.is_terminal and not stderr:
        c = Console(width=170)  # pipes and logs: keep the table unwrapped
    return c


def _progress(args):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    err = _console(stderr=True)
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=bool(args.no_progress or not err.is_terminal),
    )


def cmd_simulate(args) -> int:
    from .report import render_table, to_json, write_chart

    if getattr(args, "list_scenarios", False):
        for s in SCENARIOS.values():
            print(f"{s.name:32s} {s.description}")
        return 0
    try:
        name, wl, n, model, sc = _setup(args)
        pl = args.prefix_length or (sc.prefix_length if sc else 4096)
        th = args.concurrency_threshold or (sc.concurrency_threshold if sc else 8)
        strategies = [make_strategy(s, prefix_length=pl, concurrency_threshold=th) for s in args.strategies.split(",") if s.strip()]
        if not strategies:
            raise _Fail("strategies: at least one strategy is needed")
    except (ValueError, _Fail) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    try:
        with _progress(args) as prog:
            task = prog.add_task(f"{len(strategies)} strategies", total=wl.n_requests)
            # one pass over the workload for all strategies
            results = simulate_many(
                wl, strategies, n, model, seed=args.seed, clients=args.clients,
                progress=lambda k: prog.advance(task, k),
            )
    except ValueError as e:  # trace errors surface while streaming
        print(f"error: {e}", file=sys.stderr)
        return 2

    chart = None
    if not args.no_chart and (args.chart or not args.json):
        stem = sc.name if sc else "trace"
        chart = write_chart(results, args.chart or f"routing-{stem}.png", title=f"{name}, {n} instances")
    if args.json:
        print(to_json(name, results, instances=n, requests=results[0].requests if results else 0))
        if chart:
            print(f"chart: {chart}", file=sys.stderr)
        return 0
    con = _console()
    title = f"{name}: {n} instances, {results[0].requests:,} requests"
    con.print(render_table(results, title=title))
    if sc and sc.notes:
        for note in sc.notes:
            con.print(f"[dim]- {note}[/dim]")
    if chart:
        con.print(f"chart written to {chart}")
    return 0


def cmd_tune(args) -> int:
    from .report import render_table, results_to_dict
    from .tune import DEFAULT_PREFIX_LENGTHS, DEFAULT_THRESHOLDS, tune

    try:
        if not args.trace and not args.scenario:
            raise _Fail("tune needs --trace FILE or --scenario NAME")
        name, wl, n, model, _ = _setup(args)
        pls = args.prefix_lengths or list(DEFAULT_PREFIX_LENGTHS)
        ths = args.thresholds or list(DEFAULT_THRESHOLDS)
        with _progress(args) as prog:
            task = prog.add_task("tuning", total=2 + len(set(pls)) * len(set(ths)))
            res = tune(
                wl,
                n,
                model,
                prefix_lengths=pls,
                thresholds=ths,
                max_share_deviation=args.max_share_deviation,
                seed=args.seed,
                clients=args.clients,
                on_run=lambda label: prog.update(task, advance=1, description=label),
            )
    except (ValueError, _Fail) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    if args.json:
        d = results_to_dict(name, res.baselines + [res.best_prefix_aware], instances=n)
        d["recommended"] = {"routing": res.routing}
        d["reason"] = res.reason
        print(json.dumps(d, indent=2))
        return 0
    con = _console()
    top = sorted(res.candidates, key=lambda r: r.ttft_ms["p90"])[:5]
    con.print(render_table(res.baselines + top, title=f"{name}: {n} instances, best PREFIX_AWARE settings by p90"))
    r = res.best
    con.print(
        f"\nRecommended: [bold]{r.label}[/bold]: {res.reason}.\n"
        f"KV hit {r.kv_hit_rate:.1%}, TTFT p50 {r.ttft_ms['p50']:.0f} ms, p90 {r.ttft_ms['p90']:.0f} ms, "
        f"instance share {min(r.instance_share):.1%}..{max(r.instance_share):.1%}.\n"
        "Add to the variant's entry under environments.<env>.endpoints[].variants[] in cdk.json:"
    )
    print(res.cdk_snippet())
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Stand-alone entry: ``python -m planner routing simulate ...``."""
    parser = argparse.ArgumentParser(prog="python -m planner")
    subs = parser.add_subparsers(dest="command", metavar="{routing}")
    subs.required = True
    add_parser(subs)
    args = parser.parse_args(argv)
    return args.func(args)
