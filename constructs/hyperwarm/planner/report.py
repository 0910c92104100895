"""Presenting simulation results: a rich table, a PNG chart, a JSON object.

Why three forms: the table is for reading in a terminal, the chart for a
design review, the JSON (``--json``) for scripts and CI; all three come
from the same :class:`planner.sim.StrategyResult` values.
"""
from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

from .sim import StrategyResult

if TYPE_CHECKING:
    from rich.table import Table


def _num(x: float, nd: int = 4) -> float | None:
    if x is None or (isinstance(x, float) and (math.isnan(x) or math.isinf(x))):
        return None
    return round(x, nd)


def results_to_dict(scenario: str, results: list[StrategyResult], **extra: object) -> dict[str, object]:
    """The ``--json`` object: ``{"scenario": ..., "strategies": {NAME: {...}}}``.

    When one strategy runs with several settings the later keys get the
    settings appended, e.g. ``PREFIX_AWARE(8192,16)``."""
    strategies: dict[str, object] = {}
    for r in results:
        key = r.strategy if r.strategy not in strategies else r.label
        strategies[key] = {
            "kv_hit_rate": _num(r.kv_hit_rate),
            **({"kv_hit_rate_seeds": [_num(x) for x in r.seed_kv_hit_rates]} if r.seed_kv_hit_rates else {}),
            "ttft_ms": {k: _num(v, 2) for k, v in r.ttft_ms.items()},
            **{k: _num(v, 2) for k, v in r.ttft_percentiles().items()},
            "hit_rate_scale_out": _num(r.hit_rate_scale_out),
            "cold_share": _num(r.cold_share),
            "ttft_mean_ms": _num(r.ttft_mean_ms, 2),
            "throughput_rps": _num(r.throughput_rps, 3),
            "instance_share": [_num(s) for s in r.instance_share],
            "spill_rate": _num(r.spill_rate),
            "remap_share": (
                {k: _num(v) for k, v in r.remap.items()} if r.remap is not None else None
            ),
            "requests": r.requests,
            "params": r.params,
        }
    out: dict[str, object] = {"scenario": scenario}
    out.update(extra)
    out["strategies"] = strategies
    return out


def to_json(scenario: str, results: list[StrategyResult], **extra: object) -> str:
    return json.dumps(results_to_dict(scenario, results, **extra), indent=2)


def kv_hit_cell(r: StrategyResult) -> str:
    """``81.3%``, or for a mean over seeds ``80.2% (78.8..81.3)``: the seeds' spread beside the mean, so a
    reader sees how far one run's hit rate may move with the seed."""
    cell = f"{r.kv_hit_rate:.1%}"
    if r.seed_kv_hit_rates:
        cell += f" ({min(r.seed_kv_hit_rates) * 100:.1f}..{max(r.seed_kv_hit_rates) * 100:.1f})"
    return cell


def render_table(results: list[StrategyResult], title: str = "", closed_loop: bool = False) -> Table:
    """A ``rich.table.Table`` with one row per strategy; ``closed_loop`` runs also give each
    strategy's throughput change (open-loop throughput is the offered rate)."""
    from rich.table import Table

    base = results[0] if results else None
    t = Table(title=title or None, show_lines=False)
    t.add_column("strategy", style="bold", no_wrap=True)
    t.add_column("kv_hit_rate", justify="right")
    for q in ("p50", "p90", "p95", "p99"):
        t.add_column(f"ttft_{q}_ms", justify="right")
    t.add_column("hit_rate_scale_out", justify="right")
    t.add_column("cold_share", justify="right")
    t.add_column("req/s", justify="right")
    t.add_column("share min..max", justify="right")
    t.add_column("spill", justify="right")
    t.add_column("remap out/in", justify="right")
    for r in results:
        cells = [r.label, kv_hit_cell(r)]
        for q in ("p50", "p90", "p95", "p99"):
            v = r.ttft_ms[q]
            cell = f"{v:,.0f}"
            if base is not None and r is not base and base.ttft_ms[q] > 0:
                cell += f" ({v / base.ttft_ms[q] - 1:+.0%})"
            cells.append(cell)
        rps = f"{r.throughput_rps:,.2f}"
        if closed_loop and base is not None and r is not base and base.throughput_rps > 0:
            rps += f" ({r.throughput_rps / base.throughput_rps - 1:+.1%})"
        cells += [f"{r.hit_rate_scale_out:.1%}", f"{r.cold_share:.1%}", rps]
        cells.append(f"{min(r.instance_share):.1%}..{max(r.instance_share):.1%}")
        cells.append(f"{r.spill_rate:.1%}")
        cells.append(
            f"{r.remap['scale_out']:.0%}/{r.remap['scale_in']:.0%}" if r.remap else "-"
        )
        t.add_row(*cells)
    if base is not None:
        t.caption = (f"changes in brackets are against {base.label}; hit_rate_scale_out and cold_share: "
                     "estimated start of a scale-out by one instance (its KV cache empty)")
        if base.seed_kv_hit_rates:
            t.caption += (f"; every figure is the mean of {len(base.seed_kv_hit_rates)} seeds, "
                          "kv_hit_rate's brackets the lowest..highest seed")
    return t


def write_chart(results: list[StrategyResult], path: str, title: str = "") -> str:
    """Bar charts (KV hit rate, TTFT percentiles, instance share) as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [
        r.label.replace("LEAST_OUTSTANDING_REQUESTS", "LEAST_OUTSTANDING\n_REQUESTS").replace("(", "\n(")
        for r in results
    ]
    x = list(range(len(results)))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.8))
    ax = axes[0]
    ax.bar(x, [r.kv_hit_rate * 100 for r in results], color="#4c72b0")
    ax.set_title("KV cache hit rate (%)")
    ax.set_ylim(0, 100)
    ax = axes[1]
    w = 0.2
    for j, q in enumerate(("p50", "p90", "p95", "p99")):
        ax.bar([i + (j - 1.5) * w for i in x], [r.ttft_ms[q] for r in results], w, label=q)
    ax.set_title("TTFT (ms)")
    ax.legend(fontsize=8)
    ax = axes[2]
    lo = [min(r.instance_share) * 100 for r in results]
    hi = [max(r.instance_share) * 100 for r in results]
    ax.bar(x, [high - low for low, high in zip(lo, hi, strict=True)], bottom=lo, color="#dd8452")
    if results:
        fair = 100 / len(results[0].instance_share)
        pad = max(0.5, 0.1 * (max(hi) - min(lo)))
        ax.set_ylim(min(min(lo), fair) - pad, max(max(hi), fair) + pad)
        ax.axhline(100 / len(results[0].instance_share), color="k", ls="--", lw=1, label="fair share")
        ax.legend(fontsize=8)
    ax.set_title("per-instance request share, min..max (%)")
    for ax in axes:
        ax.set_xticks(x)
        ax.set_xticklabels(labels, fontsize=7, rotation=30, ha="right")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
