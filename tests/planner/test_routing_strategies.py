"""Routing strategies: SageMaker semantics, ranges, consistent hashing."""
from collections import Counter

import pytest

from hyperwarm.planner.sim import InstanceModel, simulate
from hyperwarm.planner.strategies import (
    KvAware,
    LeastOutstanding,
    PrefixAware,
    Random,
    Ring,
    make_strategy,
    remap_share,
)
from hyperwarm.planner.workloads import HEADER_BYTES, shared_prefix


class _W:
    header_bytes = HEADER_BYTES
    bytes_per_token = 4.0


def _route(strategy, n, inflight, caches=None):
    caches = caches if caches is not None else [{} for _ in range(n)]
    return strategy.bind(n, caches, inflight, _W(), 0)


def synth(segs):
    return (0.0, segs[-1][1], 10, tuple(segs), None, None)


@pytest.mark.parametrize("value", [1023, 65537, 0, -5, 4096.0])
def test_prefix_length_range_error_names_field_value_and_range(value):
    with pytest.raises(ValueError) as e:
        PrefixAware(prefix_length=value)
    msg = str(e.value)
    assert "prefix_length" in msg and repr(value) in msg and "1024..65536" in msg


@pytest.mark.parametrize("value", [0, 1025])
def test_concurrency_threshold_range_error(value):
    with pytest.raises(ValueError, match=r"concurrency_threshold=.*1\.\.1024"):
        PrefixAware(concurrency_threshold=value)


def test_unknown_strategy_lists_choices():
    with pytest.raises(ValueError, match="KV_AWARE"):
        make_strategy("ROUND_ROBIN")


def test_range_bounds_are_accepted():
    PrefixAware(1024, 1)
    PrefixAware(65536, 1024)


def test_prefix_key_uses_segment_holding_the_prefix_length_byte():
    inflight = [0] * 7
    s = PrefixAware(prefix_length=4096, concurrency_threshold=100)
    route = _route(s, 7, inflight)
    # 4096 bytes = ~1,000 tokens: inside a 2,000-token shared prefix
    same = {route(synth([(99, 2000), (q, 2100)]), []) for q in range(200)}
    assert len(same) == 1
    # with PrefixLength beyond the prefix, the question decides: spread out
    s2 = PrefixAware(prefix_length=16384, concurrency_threshold=100)
    route2 = _route(s2, 7, inflight)
    spread = Counter(route2(synth([(99, 2000), (q * 7919, 5000)]), []) for q in range(700))
    assert len(spread) == 7 and max(spread.values()) < 160


def test_prefix_key_hashes_body_bytes():
    inflight = [0] * 7
    route = _route(PrefixAware(prefix_length=1024, concurrency_threshold=100), 7, inflight)
    head = b'{"inputs": "' + b"s" * 2000
    a = (0.0, 600, 10, ((1, 600),), None, head + b"question one")
    b = (0.0, 600, 10, ((2, 600),), None, head + b"another question")
    assert route(a, []) == route(b, [])
    picks = {route((0.0, 10, 10, ((1, 10),), None, b"%d" % i + head), []) for i in range(100)}
    assert len(picks) > 3


def test_spills_at_threshold_and_only_then():
    inflight = [0] * 4
    s = PrefixAware(prefix_length=1024, concurrency_threshold=3)
    route = _route(s, 4, inflight)
    r = synth([(5, 1000), (6, 1100)])
    home = route(r, [])
    inflight[home] = 2
    assert route(r, []) == home and s.spills == 0
    inflight[home] = 3
    other = route(r, [])
    assert other != home and s.spills == 1
    assert inflight[other] == min(inflight)


def test_ring_spill_walks_to_next_instance_below_threshold():
    inflight = [0] * 5
    s = PrefixAware(1024, 2, spill="ring")
    route = _route(s, 5, inflight)
    r = synth([(5, 1000)])
    home = route(r, [])
    inflight[home] = 2
    nxt = route(r, [])
    pref = s.ring.preference(s.ring.position(5))
    assert pref[0] == home and nxt == pref[1]


def test_single_instance_gets_everything():
    route = _route(PrefixAware(), 1, [0])
    assert route(synth([(1, 10)]), []) == 0


def test_least_outstanding_picks_minimum():
    inflight = [3, 1, 2, 5]
    route = _route(LeastOutstanding(), 4, inflight)
    assert route(synth([(1, 10)]), []) == 1


def test_kv_aware_prefers_match_but_yields_to_load():
    caches = [{}, {11: 5, 12: 5}, {11: 5}]
    inflight = [0, 0, 0]
    s = KvAware(load_weight=0.1)
    route = _route(s, 3, inflight, caches)
    sb = [(11, 5), (12, 5), (13, 5)]
    assert route(synth([(11, 80), (12, 160), (13, 240)]), sb) == 1
    inflight[1] = 20  # far busier than the others: load wins
    choice = route(synth([(11, 80), (12, 160), (13, 240)]), sb)
    assert choice == 2 and s.spills == 1
    # no instance has the prompt start: least outstanding
    inflight[:] = [4, 2, 3]
    assert route(synth([(99, 80)]), [(99, 5)]) == 1


def test_ring_balances_keys():
    keys = [hash((3, i)) for i in range(20000)]
    ring = Ring(7)
    c = Counter(ring.owner(k) for k in keys)
    assert all(0.125 < v / len(keys) < 0.161 for v in c.values())


def test_consistent_hashing_moves_a_bounded_share():
    keys = [hash((5, i)) for i in range(5000)]
    out = remap_share(keys, 7, 8)
    assert 0.08 < out <= 0.20
    assert remap_share(keys, 7, 8, "modulo") > 0.8
    assert 0.09 < remap_share(keys, 7, 6) <= 0.20
    with pytest.raises(ValueError, match="scheme"):
        remap_share(keys, 7, 8, "rendezvous")


def test_random_spreads_uniformly():
    w = shared_prefix(groups=4, n_requests=7000, seed=1)
    r = simulate(w, Random(), 7, InstanceModel())
    assert all(0.13 < s < 0.156 for s in r.instance_share)
    assert r.spill_rate == 0.0 and r.remap is None
