"""Simulator speed benchmark (``make bench``).

Why: tuning runs dozens of simulations per trace, so the simulator must
handle >= 1,000,000 requests per strategy in <= 60 s on a 2-core machine,
with memory bounded by the cache sizes rather than the trace length.  This
streams each scenario's workload (generation included in the timing)
through every strategy and prints simulated requests per second and the
process's peak resident memory after each run -- if memory depended on
trace length, the peak would keep growing run after run.

    python -m hyperwarm.planner.bench                      # 1,000,000 requests per strategy
    python -m hyperwarm.planner.bench --requests 200000 --scenarios aws-long-context
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.progress import Progress

from .scenarios import get_scenario
from .sim import simulate
from .strategies import STRATEGY_NAMES, make_strategy

TARGET_REQUESTS = 1_000_000
TARGET_SECONDS = 60.0


def _peak_rss_mb() -> float:
    # ru_maxrss is KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _progress(show: bool) -> Progress:
    """A rich progress bar on stderr (a run takes seconds; the whole bench minutes)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    err = Console(stderr=True)
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err, transient=True, disable=not (show and err.is_terminal),
    )


def run(requests: int, scenarios: Sequence[str], strategies: Sequence[str],
        show_progress: bool = True) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with _progress(show_progress) as prog:
        for name in scenarios:
            rows.extend(_run_scenario(prog, name, requests, strategies))
    return rows


def _run_scenario(prog: Progress, name: str, requests: int, strategies: Sequence[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    sc = get_scenario(name)
    wl = sc.workload(0, requests)
    for sname in strategies:
        s = make_strategy(sname, prefix_length=sc.prefix_length, concurrency_threshold=sc.concurrency_threshold)
        task = prog.add_task(f"{name} {s.label()}", total=wl.n_requests)
        t0 = time.perf_counter()
        r = simulate(wl, s, sc.instances, sc.model, progress=partial(prog.advance, task))
        dt = time.perf_counter() - t0
        prog.remove_task(task)
        rows.append(
            {
                "scenario": name,
                "strategy": s.label(),
                "requests": r.requests,
                "seconds": round(dt, 2),
                "requests_per_s": round(r.requests / dt),
                "peak_rss_mb": round(_peak_rss_mb(), 1),
                "kv_hit_rate": round(r.kv_hit_rate, 4),
            }
        )
        prog.console.print(  # stderr, above the bar
            f"{name:18s} {s.label():28s} {r.requests:>9,} req in {dt:6.2f} s = "
            f"{r.requests / dt:>9,.0f} req/s  peak RSS {_peak_rss_mb():7.1f} MB  hit {r.kv_hit_rate:.1%}",
            highlight=False,
            soft_wrap=True,
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hyperwarm.planner.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=TARGET_REQUESTS)
    p.add_argument("--scenarios", default="aws-long-context,aws-short-context")
    p.add_argument("--strategies", default=",".join(STRATEGY_NAMES))
    p.add_argument("--json", action="store_true", help="print the rows as JSON on stdout")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    a = p.parse_args(argv)
    if a.requests < 1:
        p.error(f"--requests={a.requests} is outside the allowed range >= 1")
    rows = run(a.requests, a.scenarios.split(","), a.strategies.split(","), not a.no_progress)
    worst = max(rows, key=lambda r: r["seconds"])
    ok = worst["requests"] >= TARGET_REQUESTS and worst["seconds"] <= TARGET_SECONDS
    if a.json:
        print(json.dumps({"rows": rows, "target_met": ok}, indent=2))
    else:
        print(
            f"slowest: {worst['strategy']} on {worst['scenario']}: {worst['requests']:,} requests in "
            f"{worst['seconds']} s ({worst['requests_per_s']:,} req/s); target >= {TARGET_REQUESTS:,} "
            f"requests per strategy in <= {TARGET_SECONDS:.0f} s: {'met' if ok else 'NOT met'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
