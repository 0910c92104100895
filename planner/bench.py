"""Simulator speed benchmark (``make bench``).

Why: tuning runs dozens of simulations per trace, so the simulator must
handle >= 1,000,000 requests per strategy in <= 60 s on a 2-core machine,
with memory bounded by the cache sizes rather than the trace length.  This
streams each scenario's workload (generation included in the timing)
through every strategy and prints simulated requests per second and the
process's peak resident memory after each run -- if memory depended on
trace length, the peak would keep growing run after run.

    python -m planner.bench                      # 1,000,000 requests per strategy
    python -m planner.bench --requests 200000 --scenarios aws-long-context
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from typing import List, Optional, Sequence

from .scenarios import get_scenario
from .sim import simulate
from .strategies import STRATEGY_NAMES, make_strategy

TARGET_REQUESTS = 1_000_000
TARGET_SECONDS = 60.0


def _peak_rss_mb() -> float:
    # ru_maxrss is KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run(requests: int, scenarios: Sequence[str], strategies: Sequence[str]) -> List[dict]:
    rows = []
    for name in scenarios:
        sc = get_scenario(name)
        wl = sc.workload(0, requests)
        for sname in strategies:
            s = make_strategy(sname, prefix_length=sc.prefix_length, concurrency_threshold=sc.concurrency_threshold)
            t0 = time.perf_counter()
            r = simulate(wl, s, sc.instances, sc.model)
            dt = time.perf_counter() - t0
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
            print(
                f"{name:18s} {s.label():28s} {r.requests:>9,} req in {dt:6.2f} s = "
                f"{r.requests / dt:>9,.0f} req/s  peak RSS {_peak_rss_mb():7.1f} MB  hit {r.kv_hit_rate:.1%}",
                file=sys.stderr,
                flush=True,
            )
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m planner.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=TARGET_REQUESTS)
    p.add_argument("--scenarios", default="aws-long-context,aws-short-context")
    p.add_argument("--strategies", default=",".join(STRATEGY_NAMES))
    p.add_argument("--json", action="store_true", help="print the rows as JSON on stdout")
    a = p.parse_args(argv)
    rows = run(a.requests, a.scenarios.split(","), a.strategies.split(","))
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
