"""``hyperwarm routing simulate|tune``: the command-line front end.

Why a separate ``add_parser``: the project's ``hyperwarm`` console script
owns the top-level parser; it calls :func:`add_parser` with its
sub-parsers object, and ``python -m hyperwarm.planner`` builds a stand-alone parser
the same way.  Every command sets ``func(args) -> int`` (exit code).
Results go to stdout (the table, or one JSON object with ``--json``);
progress bars and notes go to stderr.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from functools import partial
from typing import TYPE_CHECKING, Any

from .scenarios import SCENARIOS, get_scenario
from .sim import InstanceModel, mean_over_seeds, simulate_many
from .strategies import STRATEGY_NAMES, make_strategy
from .tune import DEFAULT_SEEDS, FINALISTS
from .workloads import Workload

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from .scenarios import Scenario

#: seeds ``routing simulate`` averages by default: one seed's hit rate moves by up to 2.8 points with the seed
#: (aws-long-context, PREFIX_AWARE); the mean of 5 moves by about 1 and the report shows the seeds' spread
SIMULATE_SEEDS = 5


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None


def _common(p: argparse.ArgumentParser) -> None:
    _source(p)
    p.add_argument("--instances", type=int, help="instances in the variant (default: scenario's, or 4)")
    p.add_argument("--kv-capacity-tokens", type=int, help="KV cache per instance, tokens")
    p.add_argument("--prefill-tokens-per-s", type=float, help="prefill throughput per instance")
    p.add_argument("--overhead-ms", type=float, help="fixed TTFT part of a fully cached prompt")
    p.add_argument("--tpot-ms", type=float, help="decode time per output token")
    p.add_argument(
        "--prefill-chunk-tokens",
        type=int,
        help="engine token budget per step, for prefill/decode interference (default 8192, vLLM V1's "
        "on H100; 0 = off, an engine without chunked prefill)",
    )
    p.add_argument(
        "--clients",
        type=int,
        help="closed loop: K users, each sending its next request when the last completes "
        "(ignores trace timestamps; makes throughput comparable)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def _source(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--scenario", choices=sorted(SCENARIOS), help="built-in scenario")
    src.add_argument("--trace", metavar="FILE", help="trace file, glob or directory (JSONL or data capture)")
    p.add_argument("--format", choices=("auto", "jsonl", "capture"), default="auto", help="trace format")
    p.add_argument("--requests", type=int, help="only the first N requests")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--context-length",
        type=int,
        help=f"model context length in tokens; longer trace requests are errors (default {InstanceModel().context_tokens:,})",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Register ``routing`` with ``simulate``, ``tune`` and ``trace`` on ``subparsers``."""
    routing = subparsers.add_parser(
        "routing",
        help="simulate and tune SageMaker routing strategies",
        description="Simulate SageMaker routing strategies on a workload and tune prefix-aware routing.",
    )
    sub = routing.add_subparsers(dest="routing_command", metavar="{simulate,tune,trace}")
    sub.required = True

    sim = sub.add_parser("simulate", help="compare routing strategies on a scenario or trace")
    _common(sim)
    sim.add_argument(
        "--strategies",
        default=",".join(STRATEGY_NAMES),
        help=f"comma-separated, from {', '.join(STRATEGY_NAMES)}",
    )
    sim.add_argument(
        "--seeds",
        type=int,
        default=SIMULATE_SEEDS,
        help=f"run seeds --seed .. --seed+N-1 and report their mean, with the lowest..highest seed's KV hit "
        f"rate (default {SIMULATE_SEEDS}; 1: one seed alone)",
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
    tn.add_argument(
        "--seeds",
        type=int,
        default=DEFAULT_SEEDS,
        help=f"fresh seeds on which the winner must beat the run-to-run noise (default {DEFAULT_SEEDS}, >= 2)",
    )
    tn.set_defaults(func=cmd_tune)

    tr = sub.add_parser(
        "trace",
        help="write a scenario as a trace, or convert data-capture files to one",
        description="Write a hyperwarm JSONL trace from a built-in scenario, or from SageMaker "
        "data-capture files (checked, sorted into time order).",
    )
    _source(tr)
    tr.add_argument("--out", metavar="FILE", required=True, help="trace to write (JSON Lines)")
    tr.set_defaults(func=cmd_trace)
    return routing


class _Fail(Exception):
    pass


def _positive(args: argparse.Namespace, *names: str) -> None:
    """Given numbers must be >= 1: a zero is an error, never "use the default"."""
    for name in names:
        v = getattr(args, name, None)
        if v is not None and not v >= 1:
            raise _Fail(f"{name.replace('_', '-')}={v} is outside the allowed range >= 1")


def _setup(args: argparse.Namespace, prog: Progress | None = None
           ) -> tuple[str, Workload, int, InstanceModel, Scenario | None]:
    """(name, workload, instances, model, scenario or None) from the args."""
    from dataclasses import replace

    from .traces import TraceError, open_trace

    _positive(args, "instances", "requests", "clients", "context_length", "kv_capacity_tokens",
              "prefill_tokens_per_s")
    for name in ("seed", "prefill_chunk_tokens"):
        v = getattr(args, name, None)
        if v is not None and v < 0:
            raise _Fail(f"{name.replace('_', '-')}={v} is outside the allowed range >= 0")
    sc = get_scenario(args.scenario) if args.scenario or not args.trace else None
    model = sc.model if sc else InstanceModel()
    over: dict[str, Any] = {}
    for field_name, flag in (
        ("kv_capacity_tokens", "kv_capacity_tokens"), ("prefill_tokens_per_s", "prefill_tokens_per_s"),
        ("overhead_ms", "overhead_ms"), ("tpot_ms", "tpot_ms"), ("context_tokens", "context_length"),
        ("prefill_chunk_tokens", "prefill_chunk_tokens"),
    ):
        v = getattr(args, flag, None)
        if v is not None:
            over[field_name] = v
    if over:
        model = replace(model, **over)
    if args.trace:
        task = prog.add_task("reading trace", total=None) if prog is not None else None
        try:
            wl: Workload = open_trace(
                args.trace, args.format, context_tokens=model.context_tokens,
                progress=partial(prog.advance, task) if prog is not None and task is not None else None,
            )
        except (TraceError, OSError) as e:
            raise _Fail(str(e)) from e
        if prog is not None and task is not None:
            prog.remove_task(task)
        name = args.trace
    else:
        assert sc is not None  # without a trace, a scenario (the default one without --scenario)
        wl = sc.workload(args.seed, args.requests)
        name = sc.name
    n = getattr(args, "instances", None)
    if n is None:
        n = sc.instances if sc else 4
    if args.requests is not None:
        wl = wl.limit(args.requests)
    return name, wl, n, model, sc


def _assumptions(model: InstanceModel, sc: Scenario | None, args: argparse.Namespace) -> list[str]:
    """What the run assumes, stated in every report (issue: a trace written
    from a scenario gave another hit rate with no word why: the scenario's
    FP8 KV cache holds twice the tokens of the default BF16 one)."""
    from .scenarios import P5_70B_FP8KV

    src = "given" if args.kv_capacity_tokens is not None else (
        f"scenario {sc.name}" if sc else "default: Llama 3.1 70B, BF16 KV cache, ml.p5.48xlarge"
    )
    lines = [f"model ({src}): {model.describe()}"]
    if sc is None and args.kv_capacity_tokens is None:
        lines.append(
            f"the aws-* scenarios assume an FP8 KV cache of {P5_70B_FP8KV.kv_capacity_tokens:,} tokens: "
            f"add --kv-capacity-tokens {P5_70B_FP8KV.kv_capacity_tokens} to compare a trace with them"
        )
    return lines


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    c = Console(stderr=stderr)
    if not c.is_terminal and not stderr:
        c = Console(width=210)  # pipes and logs: keep the table unwrapped
    return c


def _progress(args: argparse.Namespace) -> Progress:
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


def cmd_simulate(args: argparse.Namespace) -> int:
    from .report import render_table, to_json, write_chart

    if getattr(args, "list_scenarios", False):
        for s in SCENARIOS.values():
            print(f"{s.name:32s} {s.description}")
        return 0
    try:
        _positive(args, "seeds")
        with _progress(args) as prog:
            name, wl, n, model, sc = _setup(args, prog)
            pl = args.prefix_length if args.prefix_length is not None else (sc.prefix_length if sc else 4096)
            th = (
                args.concurrency_threshold if args.concurrency_threshold is not None
                else (sc.concurrency_threshold if sc else 8)
            )
            strategies = [
                make_strategy(s, prefix_length=pl, concurrency_threshold=th)
                for s in args.strategies.split(",") if s.strip()
            ]
            if not strategies:
                raise _Fail("strategies: at least one strategy is needed")
            seeds = range(args.seed, args.seed + args.seeds)
            total = wl.n_requests * len(seeds) if wl.n_requests is not None else None
            task = prog.add_task(f"{len(strategies)} strategies, {_seed_text(seeds)}", total=total)
            runs = []
            for seed in seeds:
                # a scenario draws new requests per seed; a trace is the same requests on every seed
                wl_s = sc.workload(seed, args.requests) if sc is not None and not args.trace else wl
                # one pass over the workload for all strategies
                runs.append(simulate_many(
                    wl_s, strategies, n, model, seed=seed, clients=args.clients,
                    progress=lambda k: prog.advance(task, k),
                ))
            results = mean_over_seeds(runs)
    except (ValueError, _Fail) as e:  # trace errors may also surface while streaming
        print(f"error: {e}", file=sys.stderr)
        return 2

    assumed = _assumptions(model, sc, args)
    chart = None
    if not args.no_chart and (args.chart or not args.json):
        stem = sc.name if sc else "trace"
        chart = write_chart(results, args.chart or f"routing-{stem}.png", title=f"{name}, {n} instances")
    if args.json:
        print(to_json(name, results, instances=n, requests=results[0].requests if results else 0,
                      seeds=list(seeds), model=asdict(model), assumptions=assumed, trace_notes=wl.notes))
        if chart:
            print(f"chart: {chart}", file=sys.stderr)
        return 0
    con = _console()
    title = f"{name}: {n} instances, {results[0].requests:,} requests"
    if len(seeds) > 1:
        title += f", mean of {_seed_text(seeds)}"
    con.print(render_table(results, title=title, closed_loop=args.clients is not None))
    for line in assumed + [f"trace: {note}" for note in wl.notes] + (sc.notes if sc else []):
        con.print(f"[dim]- {line}[/dim]", highlight=False)
    if chart:
        con.print(f"chart written to {chart}")
    return 0


def _seed_text(seeds: range) -> str:
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}..{seeds[-1]}"


def cmd_tune(args: argparse.Namespace) -> int:
    from .report import render_table, results_to_dict
    from .tune import DEFAULT_PREFIX_LENGTHS, DEFAULT_THRESHOLDS, tune

    try:
        if not args.trace and not args.scenario:
            raise _Fail("tune needs --trace FILE or --scenario NAME")
        with _progress(args) as prog:
            name, wl, n, model, sc = _setup(args, prog)
            pls = args.prefix_lengths or list(DEFAULT_PREFIX_LENGTHS)
            ths = args.thresholds or list(DEFAULT_THRESHOLDS)
            # a scenario gets new requests per seed; a trace is the same on every seed
            source = (lambda s: sc.workload(s, args.requests)) if sc else wl
            task = prog.add_task("tuning", total=2 + len(set(pls)) * len(set(ths)) + (2 + FINALISTS) * args.seeds)
            res = tune(
                source,
                n,
                model,
                prefix_lengths=pls,
                thresholds=ths,
                max_share_deviation=args.max_share_deviation,
                seed=args.seed,
                seeds=args.seeds,
                clients=args.clients,
                on_run=lambda label: prog.update(task, advance=1, description=label),
            )
    except (ValueError, _Fail) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    assumed = _assumptions(model, sc, args)
    if args.json:
        d = results_to_dict(name, res.baselines + [res.best_prefix_aware], instances=n,
                            model=asdict(model), assumptions=assumed, trace_notes=wl.notes)
        d["recommended"] = {"routing": res.routing}
        d["prefix_aware_benefit"] = res.prefix_aware_benefit
        d["reason"] = res.reason
        d["noise"] = {"seeds": res.seeds, "comparisons": [c.to_dict() for c in res.comparisons]}
        print(json.dumps(d, indent=2))
        return 0
    con = _console()
    top = sorted(res.candidates, key=lambda r: r.ttft_ms["p90"])[:5]
    con.print(render_table(res.baselines + top, title=f"{name}: {n} instances, best PREFIX_AWARE settings by p90",
                           closed_loop=args.clients is not None))
    for line in assumed + [f"trace: {note}" for note in wl.notes]:
        con.print(f"[dim]- {line}[/dim]", highlight=False)
    r = res.best
    con.print(
        f"\nRecommended: [bold]{r.label}[/bold]: {res.reason}.\n"
        f"KV hit {r.kv_hit_rate:.1%}, TTFT p50 {r.ttft_ms['p50']:.0f} ms, p90 {r.ttft_ms['p90']:.0f} ms, "
        f"p95 {r.ttft_ms['p95']:.0f} ms, p99 {r.ttft_ms['p99']:.0f} ms, "
        f"instance share {min(r.instance_share):.1%}..{max(r.instance_share):.1%}.\n"
        "Add to the variant's entry under environments.<env>.endpoints[].variants[] in cdk.json:",
        highlight=False,
    )
    print(res.cdk_snippet())
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    """Write the chosen scenario or (data-capture) trace as a hyperwarm trace."""
    from .traces import write_trace

    try:
        with _progress(args) as prog:
            name, wl, _, _, sc = _setup(args, prog)
            task = prog.add_task(f"writing {args.out}", total=wl.n_requests)
            count = write_trace(wl, args.out, progress=lambda k: prog.advance(task, k))
    except (ValueError, OSError, _Fail) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {count:,} requests from {name} to {args.out}")
    for note in wl.notes:
        print(f"- {note}")
    if sc is not None:
        print(
            f"- to reproduce the scenario's figures from the trace, give its variant, model and seed: "
            f"--instances {sc.instances} --kv-capacity-tokens {sc.model.kv_capacity_tokens} "
            f"--seed {args.seed} --seeds 1, against the scenario's run with --seeds 1 "
            f"(a trace carries one seed's requests only; without these a --trace run assumes 4 instances and "
            f"{InstanceModel().kv_capacity_tokens:,} KV tokens)"
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry: ``python -m hyperwarm.planner routing simulate ...``."""
    parser = argparse.ArgumentParser(prog="python -m hyperwarm.planner")
    subs = parser.add_subparsers(dest="command", metavar="{routing}")
    subs.required = True
    add_parser(subs)
    args = parser.parse_args(argv)
    return int(args.func(args))
