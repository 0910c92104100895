"""Routing strategies with SageMaker's documented semantics.

Why closures: the simulator calls ``route`` once per request, a million
times per strategy, so each strategy's ``bind`` returns a small closure over
local lists instead of a method that looks attributes up every call.

``route(req, sb)`` gets the request tuple (see :mod:`planner.workloads`) and
``sb``, its prompt as ``(key, blocks)`` pairs (only segments that own at
least one full KV block), and returns the instance index.  Strategies read
the live ``inflight`` counts and, for KV_AWARE, the instances' caches; they
never mutate them.  ``spills`` counts requests not sent to the strategy's
first choice.

Assumptions where SageMaker does not publish the details (documented in
``docs/performance.md``):

* PREFIX_AWARE places prefixes on a consistent-hash ring (1,000 virtual
  nodes per instance).  When the owner has ``concurrency_threshold``
  requests in flight the request spills to the instance with the least
  outstanding requests (default, ``spill="least-outstanding"``), or, with
  ``spill="ring"``, to the next instance clockwise below the threshold (the
  bounded-load walk of KubeAI's CHWBL), least outstanding if none is.
* KV_AWARE scores each instance by ``matched prompt share - 0.1 x (its
  in-flight - the minimum in-flight)`` and falls back to least outstanding
  requests when no instance holds the prompt start.
* ORACLE is not a SageMaker strategy: least outstanding requests over one
  cache shared by all instances, an upper bound on what any router can hit.
"""
from __future__ import annotations

import random
import zlib
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any

from hyperwarm.endpoints.routing import (  # SageMaker's limits, one place
    CONCURRENCY_THRESHOLD_RANGE as CONCURRENCY_THRESHOLD_RANGE,
    PREFIX_LENGTH_RANGE as PREFIX_LENGTH_RANGE,
)

from .workloads import Request, Workload

Blocks = Sequence[tuple[int, int]]
"""A prompt as ``(key, full KV blocks)`` pairs: what ``route`` reads besides the request."""
Route = Callable[[Request, Blocks], int]
"""``route(req, sb)`` -> the instance index."""
Caches = list[Any]
"""The instances' KV caches (the simulator's ordered dicts of block keys); KV_AWARE reads them."""

VNODES = 1000
_RING_SALT = 0x5A17


def _range_error(field: str, value: object, lo: int, hi: int, unit: str) -> ValueError:
    return ValueError(
        f"{field}={value!r} is outside the allowed range {lo}..{hi} ({unit})"
    )


def body_key(prefix: bytes) -> int:
    """Deterministic 64-bit key of a byte string: CRC-32 and Adler-32 (both
    run in C; Python's own ``hash(bytes)`` is salted per process) mixed by
    the int-tuple hash into the same signed 64-bit space as the ring."""
    return hash((zlib.crc32(prefix), zlib.adler32(prefix), len(prefix)))


_M64 = (1 << 64) - 1


def mix64(x: int) -> int:
    """SplitMix64 finaliser: spreads any int key uniformly over 0..2**64-1.
    Python's int/tuple hashes are fast but not uniform enough to place keys
    on a ring (seven instances got 6 %..37 % of keys in a test)."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def _ring_point(instance: int, vnode: int, salt: int = 0) -> int:
    return mix64((_RING_SALT + salt) * 1_000_003 + instance * 1_000_000 + vnode)


@lru_cache(maxsize=512)
def _ring_layout(n: int, vnodes: int, salt: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The ring's sorted points and the instance owning each: a pure function of its arguments, and most of a
    simulation's set-up time in pure Python, so every ring of the same shape shares one (a tuning run builds
    the same few shapes for every strategy and seed)."""
    placed = sorted((_ring_point(i, v, salt), i) for i in range(n) for v in range(vnodes))
    return tuple(p for p, _ in placed), tuple(i for _, i in placed)


class Ring:
    """Consistent-hash ring over instance ids ``0..n-1``.

    Adding instance ``n`` only adds its own points, so only the keys that
    now fall on them move (about 1/(n+1)); modulo hashing moves ~n/(n+1).
    ``salt`` places the points differently: SageMaker's hash is not
    published, so which instance owns which prefix is part of the
    run-to-run noise that :func:`planner.tune.tune` measures across seeds.
    """

    def __init__(self, n: int, vnodes: int = VNODES, salt: int = 0) -> None:
        self.points, self.owners = _ring_layout(n, vnodes, salt)
        self._pref: dict[int, tuple[int, ...]] = {}
        self.n = n

    def position(self, key: int) -> int:
        pos = bisect_right(self.points, mix64(key))
        return pos if pos < len(self.points) else 0

    def preference(self, pos: int) -> tuple[int, ...]:
        """Distinct instances clockwise from ring position ``pos`` (cached:
        only positions that ever spill are computed)."""
        pref = self._pref.get(pos)
        if pref is None:
            owners, m = self.owners, len(self.owners)
            seen: list[int] = []
            j = pos
            while len(seen) < self.n:
                o = owners[j % m]
                if o not in seen:
                    seen.append(o)
                j += 1
            pref = self._pref[pos] = tuple(seen)
        return pref

    def owner(self, key: int) -> int:
        return self.owners[self.position(key)]


def remap_share(keys: Iterable[int], n_from: int, n_to: int, scheme: str = "ring", salt: int = 0) -> float:
    """Share of ``keys`` whose owning instance changes when the variant goes
    from ``n_from`` to ``n_to`` instances (``scheme`` 'ring' or 'modulo')."""
    keys = list(keys)
    if not keys:
        return 0.0
    if scheme == "modulo":
        moved = sum(1 for k in keys if k % n_from != k % n_to)
    elif scheme == "ring":
        a, b = Ring(n_from, salt=salt), Ring(n_to, salt=salt)
        moved = sum(1 for k in keys if a.owner(k) != b.owner(k))
    else:
        raise ValueError(f"scheme={scheme!r} is not one of 'ring', 'modulo'")
    return moved / len(keys)


def _lor(inflight: list[int], rnd: Callable[[], float]) -> int:
    m = min(inflight)
    if inflight.count(m) == 1:
        return inflight.index(m)
    cands = [j for j, v in enumerate(inflight) if v == m]
    return cands[int(rnd() * len(cands))]


class Strategy:
    """Base class: ``name``, ``params()`` for reports, ``bind()`` for runs."""

    name = "?"
    shared_cache = False
    routing_overhead_ms = 0.0

    def __init__(self) -> None:
        self.spills = 0

    def params(self) -> dict[str, object]:
        return {}

    def label(self) -> str:
        return self.name

    def bind(self, n: int, caches: Caches, inflight: list[int], workload: Workload, seed: int = 0) -> Route:
        raise NotImplementedError

    def routing_config(self) -> dict[str, object]:
        """The variant's cdk.json ``routing`` object for this strategy."""
        return {"strategy": self.name}


class Random(Strategy):
    """RANDOM (SageMaker's default): uniform choice, blind to load and cache."""

    name = "RANDOM"

    def bind(self, n: int, caches: Caches, inflight: list[int], workload: Workload, seed: int = 0) -> Route:
        self.spills = 0
        rnd = random.Random(seed).random

        def route(req: Request, sb: Blocks) -> int:
            return int(rnd() * n)

        return route


class LeastOutstanding(Strategy):
    """LEAST_OUTSTANDING_REQUESTS: fewest in-flight requests, random ties."""

    name = "LEAST_OUTSTANDING_REQUESTS"

    def bind(self, n: int, caches: Caches, inflight: list[int], workload: Workload, seed: int = 0) -> Route:
        self.spills = 0
        rnd = random.Random(seed).random

        def route(req: Request, sb: Blocks) -> int:
            return _lor(inflight, rnd)

        return route


class PrefixAware(Strategy):
    """PREFIX_AWARE(PrefixLength, ConcurrencyThreshold).

    Hashes the first ``prefix_length`` bytes of the serialised body onto a
    consistent-hash ring; spills to the next instance on the ring below the
    threshold when the owner has ``concurrency_threshold`` requests in
    flight.  With fewer than two instances it routes everything to one
    instance, as SageMaker does not apply prefix routing there.
    """

    name = "PREFIX_AWARE"
    routing_overhead_ms = 1.6  # AWS measured 1.3..1.9 ms

    SPILL_MODES = ("least-outstanding", "ring")

    def __init__(
        self, prefix_length: int = 4096, concurrency_threshold: int = 8, spill: str = "least-outstanding"
    ) -> None:
        super().__init__()
        if spill not in self.SPILL_MODES:
            raise ValueError(f"spill={spill!r} is not one of {', '.join(self.SPILL_MODES)}")
        self.spill = spill
        lo, hi = PREFIX_LENGTH_RANGE
        if not isinstance(prefix_length, int) or not lo <= prefix_length <= hi:
            raise _range_error("prefix_length", prefix_length, lo, hi, "bytes of the request body")
        lo, hi = CONCURRENCY_THRESHOLD_RANGE
        if not isinstance(concurrency_threshold, int) or not lo <= concurrency_threshold <= hi:
            raise _range_error(
                "concurrency_threshold", concurrency_threshold, lo, hi, "in-flight requests per instance"
            )
        self.prefix_length = prefix_length
        self.concurrency_threshold = concurrency_threshold
        self.ring: Ring | None = None
        self.keys_seen: set[int] = set()
        self.salt = 0

    #: distinct routing keys remembered for the remap statistic (bounded)
    MAX_KEYS = 65536

    def params(self) -> dict[str, object]:
        return {"prefix_length": self.prefix_length, "concurrency_threshold": self.concurrency_threshold}

    def label(self) -> str:
        return f"PREFIX_AWARE({self.prefix_length},{self.concurrency_threshold})"

    def routing_config(self) -> dict[str, object]:
        return {
            "strategy": self.name,
            "prefix_length": self.prefix_length,
            "concurrency_threshold": self.concurrency_threshold,
        }

    def bind(self, n: int, caches: Caches, inflight: list[int], workload: Workload, seed: int = 0) -> Route:
        self.spills = 0
        self.keys_seen = keys = set[int]()
        self.salt = seed
        rnd = random.Random(seed).random
        L = self.prefix_length
        T = self.concurrency_threshold
        ptok = (L - workload.header_bytes) / workload.bytes_per_token
        if n < 2:
            return lambda req, sb: 0
        ring = self.ring = Ring(n, salt=seed)
        points, owners, preference = ring.points, ring.owners, ring.preference
        npts = len(points)
        maxk = self.MAX_KEYS
        me = self
        M64 = _M64
        ring_spill = self.spill == "ring"

        def route(req: Request, sb: Blocks) -> int:
            body = req[5]
            if body is not None:
                k = body_key(body[:L])
            else:
                segs = req[3]
                k = segs[-1][0]
                for key, end in segs:
                    if end > ptok:
                        k = key
                        break
            if len(keys) < maxk:
                keys.add(k)
            x = (k + 0x9E3779B97F4A7C15) & M64  # mix64, inlined
            x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
            x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
            pos = bisect_right(points, x ^ (x >> 31))
            if pos == npts:
                pos = 0
            first = owners[pos]
            if inflight[first] < T:
                return first
            me.spills += 1
            if ring_spill:
                for j in preference(pos):
                    if inflight[j] < T:
                        return j
            return _lor(inflight, rnd)

        return route

    def remap(self, n: int) -> dict[str, float]:
        """Share of the routing keys seen whose owner moves on scale-out
        (n -> n+1) and scale-in (n -> n-1)."""
        keys = list(self.keys_seen)
        out = {"scale_out": remap_share(keys, n, n + 1, salt=self.salt)}
        out["scale_in"] = remap_share(keys, n, n - 1, salt=self.salt) if n > 1 else 0.0
        return out


class KvAware(Strategy):
    """KV_AWARE: the instance whose cache holds the longest prompt start,
    weighed against its load; least outstanding requests when no instance
    holds any of it.  ``spills`` counts requests sent away from the
    best-matching instance because of load."""

    name = "KV_AWARE"
    routing_overhead_ms = 1.6

    def __init__(self, load_weight: float = 0.1) -> None:
        super().__init__()
        if not load_weight >= 0:
            raise ValueError(f"load_weight={load_weight!r} is outside the allowed range >= 0")
        self.load_weight = load_weight

    def bind(self, n: int, caches: Caches, inflight: list[int], workload: Workload, seed: int = 0) -> Route:
        self.spills = 0
        rnd = random.Random(seed).random
        w = self.load_weight
        rng_n = range(n)
        me = self

        def route(req: Request, sb: Blocks) -> int:
            total = 0
            for _, nb in sb:
                total += nb
            if not total:
                return _lor(inflight, rnd)
            first = sb[0][0]
            best_m = 0
            matches = [0] * n
            for j in rng_n:
                c = caches[j]
                if first in c:
                    m = 0
                    for key, nb in sb:
                        if key in c:
                            m += nb
                        else:
                            break
                    matches[j] = m
                    if m > best_m:
                        best_m = m
            if not best_m:
                return _lor(inflight, rnd)
            lo = min(inflight)
            best, best_s = 0, -1e18
            top = -1
            for j in rng_n:
                m = matches[j]
                if m == best_m and top < 0:
                    top = j
                s = m / total - w * (inflight[j] - lo)
                if s > best_s:
                    best, best_s = j, s
            if matches[best] != best_m:
                me.spills += 1
            return best

        return route


class Oracle(Strategy):
    """Upper bound: one cache shared by every instance, least-outstanding
    placement.  Not deployable; shows what the cache could give at best."""

    name = "ORACLE"
    shared_cache = True

    def bind(self, n: int, caches: Caches, inflight: list[int], workload: Workload, seed: int = 0) -> Route:
        self.spills = 0
        rnd = random.Random(seed).random

        def route(req: Request, sb: Blocks) -> int:
            return _lor(inflight, rnd)

        return route


STRATEGY_NAMES = ("RANDOM", "LEAST_OUTSTANDING_REQUESTS", "PREFIX_AWARE", "KV_AWARE", "ORACLE")


def make_strategy(name: str, *, prefix_length: int = 4096, concurrency_threshold: int = 8) -> Strategy:
    """Build a strategy by its SageMaker name (or ORACLE)."""
    key = name.strip().upper().replace("-", "_")
    if key in ("LOR", "LEAST_OUTSTANDING"):
        key = "LEAST_OUTSTANDING_REQUESTS"
    if key == "RANDOM":
        return Random()
    if key == "LEAST_OUTSTANDING_REQUESTS":
        return LeastOutstanding()
    if key == "PREFIX_AWARE":
        return PrefixAware(prefix_length, concurrency_threshold)
    if key == "KV_AWARE":
        return KvAware()
    if key == "ORACLE":
        return Oracle()
    raise ValueError(f"strategy={name!r} is not one of {', '.join(STRATEGY_NAMES)}")
