"""A Prometheus histogram's new counts as a CloudWatch distribution (``Values``/``Counts``).

CloudWatch computes p50/p95/p99 over any period from the values a metric received. A histogram only
says how many requests fell into each bucket, so each bucket's count is spread evenly over a few
points inside it: linear interpolation within the bucket, the assumption Prometheus'
``histogram_quantile`` makes. The first bucket starts at 0; the +Inf bucket sits at the last finite
bound (``histogram_quantile`` answers the same). With k filled buckets each gets
n = min(:data:`MAX_POINTS_PER_BUCKET`, :data:`MAX_VALUES` // k) points (at least 1), so a percentile is
within half of 1/n of its bucket's width from ``histogram_quantile``'s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

MAX_VALUES = 150
"""PutMetricData's most distinct values per metric in one request."""
MAX_POINTS_PER_BUCKET = 10


def bucket_counts(cumulative: Mapping[float, float]) -> dict[tuple[float, float], float]:
    """``le`` -> cumulative count as (lower, upper) -> count in that bucket alone (``upper`` may be inf).

    A negative difference (a histogram read mid-update) counts as 0."""
    out: dict[tuple[float, float], float] = {}
    lower, below = 0.0, 0.0
    for le in sorted(cumulative):
        count = cumulative[le]
        if count - below > 0:
            out[(lower, le)] = count - below
        lower, below = le, max(count, below)
    return out


def distribution(buckets: Mapping[tuple[float, float], float], scale: float = 1000.0
                 ) -> tuple[list[float], list[float]] | None:
    """(Values, Counts) of one datum, at most :data:`MAX_VALUES` distinct values, values multiplied by
    ``scale`` (seconds to milliseconds); None without counts. A histogram with more non-empty buckets
    than that (vLLM's has 23) has neighbouring buckets merged until it fits."""
    filled = _coalesced(sorted((b, c) for b, c in buckets.items() if c > 0))
    if not filled:
        return None
    points = max(1, min(MAX_POINTS_PER_BUCKET, MAX_VALUES // len(filled)))
    merged: dict[float, float] = {}
    for (lower, upper), count in filled:
        for value, share in _spread(lower, upper, count, points):
            merged[value * scale] = merged.get(value * scale, 0.0) + share
    values = sorted(merged)
    return values, [merged[v] for v in values]


def _coalesced(filled: list[tuple[tuple[float, float], float]]) -> list[tuple[tuple[float, float], float]]:
    while len(filled) > MAX_VALUES:
        pairs = [filled[i:i + 2] for i in range(0, len(filled), 2)]
        filled = [((p[0][0][0], p[-1][0][1]), sum(c for _, c in p)) for p in pairs]
    return filled


def _spread(lower: float, upper: float, count: float, points: int) -> Iterable[tuple[float, float]]:
    if math.isinf(upper):  # above the last finite bound: nothing says how far
        return [(lower, count)]
    width = (upper - lower) / points
    return [(lower + (i + 0.5) * width, count / points) for i in range(points)]
