"""Search PrefixLength x ConcurrencyThreshold for one variant.

Why a grid: the two settings interact (a short PrefixLength funnels many
prompts onto one key, which only the threshold can spread; a long one
scatters them so the threshold hardly matters), the response is not
smooth, and one run over a trace is cheap.  The objective follows the
issue: the lowest p90 TTFT among settings whose per-instance request share
stays within ``max_share_deviation`` (relative) of the fair share.  If no
PREFIX_AWARE setting beats LEAST_OUTSTANDING_REQUESTS on p90, that is
recommended instead: prefix-aware routing is not worth it for the trace.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

from .sim import InstanceModel, StrategyResult, simulate_many
from .strategies import (
    CONCURRENCY_THRESHOLD_RANGE,
    PREFIX_LENGTH_RANGE,
    LeastOutstanding,
    PrefixAware,
    Random,
)
from .workloads import Workload

DEFAULT_PREFIX_LENGTHS = (1024, 2048, 4096, 8192, 16384, 32768, 65536)
DEFAULT_THRESHOLDS = (2, 4, 8, 12, 16, 24, 32, 64, 1024)


@dataclass
class TuneResult:
    best: StrategyResult  # the recommended strategy's run
    best_prefix_aware: StrategyResult  # the best PREFIX_AWARE run, recommended or not
    baselines: List[StrategyResult]  # RANDOM, LEAST_OUTSTANDING_REQUESTS
    candidates: List[StrategyResult]  # every PREFIX_AWARE run
    feasible: bool  # some PREFIX_AWARE run met the share constraint
    max_share_deviation: float
    reason: str = ""
    extra: Dict[str, object] = field(default_factory=dict)

    @property
    def routing(self) -> Dict[str, object]:
        return self.best.routing

    def cdk_snippet(self) -> str:
        """The variant's cdk.json ``routing`` entry, as the project prints it."""
        return json.dumps({"routing": self.routing})


def _validate(values: Sequence[int], field_name: str, rng) -> List[int]:
    lo, hi = rng
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise ValueError(f"{field_name}={v!r} is outside the allowed range {lo}..{hi}")
        out.append(v)
    if not out:
        raise ValueError(f"{field_name}: at least one value is needed")
    return sorted(set(out))


def tune(
    workload: Workload,
    n_instances: int,
    model: InstanceModel = InstanceModel(),
    *,
    prefix_lengths: Sequence[int] = DEFAULT_PREFIX_LENGTHS,
    thresholds: Sequence[int] = DEFAULT_THRESHOLDS,
    max_share_deviation: float = 0.2,
    seed: int = 0,
    on_run: Optional[Callable[[str], None]] = None,
    batch: int = 8,
    clients: Optional[int] = None,
) -> TuneResult:
    """Grid search; ``on_run(label)`` is called after every simulation.
    ``batch`` strategies share one pass over the trace (memory: one set of
    caches per strategy in the batch); ``clients`` as in
    :func:`planner.sim.simulate`."""
    if batch < 1:
        raise ValueError(f"batch={batch!r} is outside the allowed range >= 1")
    if n_instances < 2:
        raise ValueError(
            f"instances={n_instances} is outside the allowed range >= 2 "
            "(prefix-aware routing only applies with two or more instances)"
        )
    if not max_share_deviation > 0:
        raise ValueError(f"max_share_deviation={max_share_deviation!r} is outside the allowed range > 0")
    pls = _validate(prefix_lengths, "prefix_length", PREFIX_LENGTH_RANGE)
    ths = _validate(thresholds, "concurrency_threshold", CONCURRENCY_THRESHOLD_RANGE)
    tick = on_run or (lambda label: None)

    # one pass over the trace per batch of strategies: reading and parsing
    # a trace costs more than simulating one strategy on it
    todo = [Random(), LeastOutstanding()] + [PrefixAware(pl, th) for pl in pls for th in ths]
    done: List[StrategyResult] = []
    for i in range(0, len(todo), batch):
        group = todo[i:i + batch]
        done.extend(simulate_many(workload, group, n_instances, model, seed=seed, clients=clients))
        for s in group:
            tick(s.label())
    baselines, cands = done[:2], done[2:]

    ok = [r for r in cands if r.max_share_deviation <= max_share_deviation]
    feasible = bool(ok)
    pool = ok or cands

    def key(r: StrategyResult):
        # p90 first; the least imbalance and highest hit rate break near-ties
        return (round(r.ttft_ms["p90"], 1), r.max_share_deviation, -r.kv_hit_rate)

    best = min(pool, key=key) if feasible else min(pool, key=lambda r: (r.max_share_deviation, r.ttft_ms["p90"]))
    lor = baselines[1]
    if best.ttft_ms["p90"] >= lor.ttft_ms["p90"] or not feasible:
        reason = (
            "no PREFIX_AWARE setting kept every instance's share within "
            f"{max_share_deviation:.0%} of fair"
            if not feasible
            else f"no PREFIX_AWARE setting beat LEAST_OUTSTANDING_REQUESTS on p90 TTFT "
            f"({best.ttft_ms['p90']:.0f} ms vs {lor.ttft_ms['p90']:.0f} ms)"
        )
        chosen = lor
    else:
        reason = (
            f"lowest p90 TTFT ({best.ttft_ms['p90']:.0f} ms vs {lor.ttft_ms['p90']:.0f} ms least-outstanding, "
            f"{baselines[0].ttft_ms['p90']:.0f} ms random) with every instance within "
            f"{max_share_deviation:.0%} of its fair share"
        )
        chosen = best
    return TuneResult(
        best=chosen,
        best_prefix_aware=best,
        baselines=baselines,
        candidates=cands,
        feasible=feasible,
        max_share_deviation=max_share_deviation,
        reason=reason,
    )
