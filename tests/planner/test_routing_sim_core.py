"""Unit tests of the simulator core: cache accounting, timing, streaming."""
import itertools
import math

import pytest
from hypothesis import given, settings, strategies as st

from hyperwarm.planner.sim import _BINS_PER_E, _NBINS, _OFFSET, InstanceModel, _percentile, simulate, simulate_many
from hyperwarm.planner.strategies import LeastOutstanding, Oracle, PrefixAware, Random
from hyperwarm.planner.workloads import Workload, multi_turn_chat, shared_prefix

# 1,000 tokens/s prefill, 10 ms overhead: easy numbers to check by hand.
SIMPLE = InstanceModel(
    kv_capacity_tokens=1000, block_tokens=10, prefill_tokens_per_s=1000.0, overhead_ms=10.0, tpot_ms=0.0
)


def wl(reqs, name="hand"):
    return Workload(name, lambda: iter(reqs), n_requests=len(reqs))


def req(t, segs, out=1, out_key=None):
    return (t, segs[-1][1], out, tuple(segs), out_key, None)


def test_second_request_hits_cached_prefix_in_whole_blocks():
    # prefix 105 tokens: blocks 0..9 full (100 tokens), the 6th token block is
    # shared with the question and has a different chained key.
    r1 = req(0.0, [(1, 105), (2, 150)])
    r2 = req(10.0, [(1, 105), (3, 150)])
    res = simulate(wl([r1, r2]), Random(), 1, SIMPLE)
    # 100 of 300 prompt tokens hit
    assert res.kv_hit_rate == pytest.approx(100 / 300)
    # TTFT: 10 ms + 150 ms (miss) and 10 ms + 50 ms (hit 100)
    assert res.ttft_ms["p50"] == pytest.approx(60, rel=0.011)
    assert res.ttft_ms["p99"] == pytest.approx(160, rel=0.011)
    assert res.ttft_mean_ms == pytest.approx((160 + 60) / 2)


def test_fifo_prefill_queueing_adds_waiting_time():
    r1 = req(0.0, [(1, 100)])
    r2 = req(0.0, [(2, 100)])  # arrives together: waits for r1's 110 ms
    res = simulate(wl([r1, r2]), Random(), 1, SIMPLE)
    assert res.ttft_mean_ms == pytest.approx((110 + 220) / 2)


def test_lru_evicts_least_recent_prefix_first():
    # capacity 1000 tokens = 100 blocks; prefixes of 400 tokens
    a, b, c = (1, 400), (2, 400), (3, 400)
    reqs = [req(0, [a]), req(1, [b]), req(2, [a]), req(3, [c]), req(4, [a]), req(5, [b])]
    res = simulate(wl(reqs), Random(), 1, SIMPLE)
    # hits: third (a), fifth (a); b was evicted by c (a had been touched)
    hit_tokens = res.kv_hit_rate * 6 * 400
    assert hit_tokens == pytest.approx(2 * 399)  # full hit recomputes the last token


def test_parent_prefix_outlives_its_children():
    # 1000-token capacity: a 500-token parent with 300-token children
    reqs = [req(i, [(1, 500), (100 + i, 800)]) for i in range(5)]
    res = simulate(wl(reqs), Random(), 1, SIMPLE)
    # every request after the first reuses the parent (children get evicted)
    assert res.kv_hit_rate == pytest.approx(4 * 500 / (5 * 800))


def test_reply_is_cached_for_next_turn():
    turn1 = req(0, [(1, 100)], out=50, out_key=7)
    turn2 = req(5, [(1, 100), (7, 150), (8, 200)], out=10)
    res = simulate(wl([turn1, turn2]), Random(), 1, SIMPLE)
    assert res.kv_hit_rate == pytest.approx(150 / 300)
    res_no = simulate(wl([turn1[:4] + (None, None), turn2]), Random(), 1, SIMPLE)
    assert res_no.kv_hit_rate == pytest.approx(100 / 300)


def test_in_flight_counts_drive_least_outstanding():
    m = InstanceModel(kv_capacity_tokens=1000, block_tokens=10, prefill_tokens_per_s=1000.0, tpot_ms=1000.0)
    # each request decodes for 10 s: four quick arrivals must land on four instances
    reqs = [req(0.001 * i, [(i + 1, 100)], out=10) for i in range(4)]
    res = simulate(wl(reqs), LeastOutstanding(), 4, m)
    assert res.instance_share == [0.25] * 4


def test_oracle_shares_one_cache():
    reqs = [req(i, [(1, 500), (100 + i, 600)]) for i in range(20)]
    o = simulate(wl(reqs), Oracle(), 4, SIMPLE)
    r = simulate(wl(reqs), Random(), 4, SIMPLE)
    assert o.kv_hit_rate == pytest.approx(19 * 500 / (20 * 600))
    assert r.kv_hit_rate < o.kv_hit_rate


def test_streams_without_materialising_the_trace():
    # an endless generator: only a streaming simulator can finish
    def endless():
        for i in itertools.count():
            yield (i * 0.01, 200, 10, ((1, 100), (i + 2, 200)), None, None)

    res = simulate(Workload("endless", endless).limit(3000), Random(), 3, InstanceModel())
    assert res.requests == 3000


def test_percentile_histogram_is_within_one_percent():
    hist = [0] * _NBINS
    vals = [1.0, 2.0, 50.0, 75.0, 123.4, 400.0, 999.0, 1500.0, 2000.0, 5000.0]
    for v in vals:
        hist[int(math.log(v) * _BINS_PER_E) + _OFFSET] += 1
    assert _percentile(hist, len(vals), 0.5) == pytest.approx(123.4, rel=0.01)
    assert _percentile(hist, len(vals), 0.9) == pytest.approx(2000.0, rel=0.01)
    assert _percentile(hist, len(vals), 1.0) == pytest.approx(5000.0, rel=0.01)


@pytest.mark.parametrize(
    "field,value",
    [("kv_capacity_tokens", 0), ("block_tokens", 0), ("prefill_tokens_per_s", 0), ("overhead_ms", -1)],
)
def test_instance_model_names_bad_field(field, value):
    with pytest.raises(ValueError, match=field):
        InstanceModel(**{field: value})


def test_instances_must_be_positive():
    with pytest.raises(ValueError, match="instances=0"):
        simulate(wl([req(0, [(1, 10)])]), Random(), 0)


def test_generators_are_deterministic_and_reiterable():
    w = multi_turn_chat(n_requests=500, seed=3)
    assert list(w) == list(w)
    w2 = shared_prefix(groups=8, prompts_per_group=4, seed=1)
    a = list(w2)
    assert len(a) == 32 and a == list(w2)
    assert all(a[i][0] <= a[i + 1][0] for i in range(len(a) - 1))


def test_multi_turn_history_grows_and_reuses_reply_keys():
    w = multi_turn_chat(active_conversations=1, rounds=(3, 3), system_tokens=50, n_requests=3)
    r1, r2, r3 = list(w)
    assert r2[3][: len(r1[3])] == r1[3]
    assert r2[3][len(r1[3])][0] == r1[4]  # previous reply is the next segment
    assert r3[1] > r2[1] > r1[1]


def test_hot_share_sends_that_share_to_one_prefix():
    w = shared_prefix(groups=50, hot_share=0.7, n_requests=4000, seed=2)
    keys = [r[3][0][0] for r in w]
    top = max(keys.count(k) for k in set(keys))
    assert 0.68 < top / len(keys) < 0.75


@settings(max_examples=25, deadline=None)
@given(
    cap=st.integers(min_value=16, max_value=3000),
    n=st.integers(min_value=1, max_value=5),
    groups=st.integers(min_value=1, max_value=20),
    seed=st.integers(min_value=0, max_value=100),
)
def test_invariants_hold_for_any_workload(cap, n, groups, seed):
    model = InstanceModel(kv_capacity_tokens=cap, block_tokens=16)
    w = shared_prefix(groups=groups, prefix_tokens=300, question_tokens=50, question_jitter=0.5,
                      n_requests=300, seed=seed)
    for s in (Random(), LeastOutstanding(), PrefixAware(1024, 4), Oracle()):
        r = simulate(w, s, n, model)
        assert r.requests == 300
        assert 0.0 <= r.kv_hit_rate < 1.0
        assert sum(r.instance_share) == pytest.approx(1.0)
        assert 0.0 <= r.spill_rate <= 1.0
        assert r.ttft_ms["p50"] <= r.ttft_ms["p90"] <= r.ttft_ms["p95"] <= r.ttft_ms["p99"]
        # a 300-token prefix owns 18 full blocks (288 tokens); questions are unique
        assert r.kv_hit_rate <= 288 / 300
        if cap // 16 * (n if s.shared_cache else 1) < 18:  # the prefix cannot stay cached
            assert r.kv_hit_rate == 0.0


def test_simulate_many_matches_separate_runs():
    w = multi_turn_chat(n_requests=2000, seed=7)
    strategies = lambda: [Random(), LeastOutstanding(), PrefixAware(1024, 6), Oracle()]  # noqa: E731
    together = simulate_many(w, strategies(), 4, InstanceModel())
    apart = [simulate(w, s, 4, InstanceModel()) for s in strategies()]
    assert [r.to_dict() for r in together] == [r.to_dict() for r in apart]


def test_tiny_ttfts_land_in_the_lowest_bin_not_a_wrapped_one():
    m = InstanceModel(kv_capacity_tokens=100, block_tokens=10, prefill_tokens_per_s=1e9, overhead_ms=0.0)
    res = simulate(wl([req(0, [(1, 5)])]), Random(), 1, m)
    assert res.ttft_ms["p50"] < 0.02


def test_closed_loop_client_waits_for_its_previous_request():
    reqs = [req(0.0, [(1, 100)]), req(0.0, [(2, 100)])]
    open_loop = simulate(wl(reqs), Random(), 1, SIMPLE)
    closed = simulate(wl(reqs), Random(), 1, SIMPLE, clients=1)
    assert open_loop.ttft_mean_ms == pytest.approx(165)  # second queues behind the first
    assert closed.ttft_mean_ms == pytest.approx(110)  # second is sent after the first completes
    assert closed.throughput_rps == pytest.approx(2 / 0.22)
    with pytest.raises(ValueError, match="clients=0"):
        simulate(wl(reqs), Random(), 1, SIMPLE, clients=0)


def test_kv_memory_limit_holds_a_request_until_running_ones_free_their_blocks():
    # 1,000 KV tokens; each request needs 400 prompt + 300 output tokens while it runs
    m = InstanceModel(kv_capacity_tokens=1000, block_tokens=10, prefill_tokens_per_s=1000.0, overhead_ms=10.0,
                      tpot_ms=1.0, decode_knee=1e9)
    reqs = [req(0.0, [(1, 400)], out=300), req(0.0, [(2, 400)], out=300)]
    limited = simulate(wl(reqs), Random(), 1, m)
    free = simulate(wl(reqs), Random(), 1, InstanceModel(**{**m.__dict__, "kv_limit": False}))
    # without the limit the second prefill follows the first: 410 + 820 ms
    assert free.ttft_mean_ms == pytest.approx((410 + 820) / 2)
    # with it, the second waits for the first to finish (410 + 300 ms), then prefills (410 ms)
    assert limited.ttft_mean_ms == pytest.approx((410 + 1120) / 2)


def test_prefill_chunks_are_slowed_by_the_decode_batch_only_when_its_step_is_longer():
    # one request (10 tokens, 1 ms) decodes for a long time (20 ms steps); a 10,000-token
    # prompt then prefills. A step takes the longer of its chunk's compute and the decode
    # step (roofline): 4,096-token chunks take 410 ms each and hide the decode; 100-token
    # chunks would take 10 ms but the step lasts 20 ms. The last step's floor is the one
    # step inside the fixed TTFT (overhead_ms, here 0), so 99 of the 100 steps are floored.
    base = dict(kv_capacity_tokens=100_000, block_tokens=10, prefill_tokens_per_s=10_000.0, overhead_ms=0.0,
                tpot_ms=20.0, decode_knee=1e9)
    reqs = [req(0.0, [(1, 10)], out=10_000), req(10.0, [(2, 10_000)])]
    plain = simulate(wl(reqs), Random(), 1, InstanceModel(**base, prefill_chunk_tokens=0))
    big = simulate(wl(reqs), Random(), 1, InstanceModel(**base, prefill_chunk_tokens=4096))
    small = simulate(wl(reqs), Random(), 1, InstanceModel(**base, prefill_chunk_tokens=100))
    assert plain.ttft_mean_ms == pytest.approx((1 + 1000) / 2)
    assert big.ttft_mean_ms == pytest.approx((1 + 1000) / 2)
    assert small.ttft_mean_ms == pytest.approx((1 + 1000 + 99 * 10) / 2)


def test_a_short_prompt_under_decode_load_is_not_floored_twice():
    # the fixed TTFT already holds the one step a fully cached prompt runs, so a prompt
    # that fits one step costs overhead + compute even while a batch decodes (AWS's short
    # context test: its P50 cut of 13..16 % leaves no room for a second step)
    base = dict(kv_capacity_tokens=100_000, block_tokens=10, prefill_tokens_per_s=10_000.0, overhead_ms=40.0,
                tpot_ms=25.0, decode_knee=1e9)
    reqs = [req(0.0, [(1, 10)], out=10_000), req(10.0, [(2, 100)])]
    on = simulate(wl(reqs), Random(), 1, InstanceModel(**base))
    assert on.ttft_mean_ms == pytest.approx((41 + 50) / 2)


def test_a_short_prompts_one_step_lengthens_with_the_decode_batch():
    # the fixed TTFT holds one unloaded step (tpot 25 ms); with one sequence decoding and a knee of 8
    # the step takes 25 x (1 + 1/8) = 28.125 ms, so a one-step prompt pays the 3.125 ms more
    base = dict(kv_capacity_tokens=100_000, block_tokens=10, prefill_tokens_per_s=10_000.0, overhead_ms=40.0,
                tpot_ms=25.0, decode_knee=8.0)
    reqs = [req(0.0, [(1, 10)], out=10_000), req(10.0, [(2, 100)])]
    loaded = simulate(wl(reqs), Random(), 1, InstanceModel(**base))
    assert loaded.ttft_mean_ms == pytest.approx((41 + 40 + 10 + 3.125) / 2)
    off = simulate(wl(reqs), Random(), 1, InstanceModel(**base, prefill_chunk_tokens=0))
    assert off.ttft_mean_ms == pytest.approx((41 + 50) / 2)


def test_a_decode_is_not_slowed_by_its_own_prefill():
    # alone on its instance, a request's decode runs after its prefill: nothing else
    # prefills during it, so it takes out x tpot whatever the chunk size or window
    base = dict(kv_capacity_tokens=100_000, block_tokens=10, prefill_tokens_per_s=10_000.0, overhead_ms=10.0,
                tpot_ms=10.0, decode_knee=1e9)
    for chunk, window in ((0, 6.4), (1000, 6.4), (1000, 0.5), (8192, 60.0)):
        m = InstanceModel(**base, prefill_chunk_tokens=chunk, busy_window_s=window)
        alone = simulate(wl([req(0.0, [(1, 5000)], out=100)]), Random(), 1, m)
        assert 1 / alone.throughput_rps == pytest.approx(0.010 + 0.5 + 100 * 0.010), (chunk, window)


def test_decode_loses_only_the_part_of_each_prefill_step_beyond_its_own_step():
    # a 10-token request decodes 100 tokens (10 ms steps) right after a 5,000-token
    # prefill. Chunks of 2,000 tokens (200 ms steps) each take 190 ms beyond its 10 ms
    # step; chunks of 100 tokens (10 ms, no longer than its step) take nothing from it.
    base = dict(kv_capacity_tokens=100_000, block_tokens=10, prefill_tokens_per_s=10_000.0, overhead_ms=0.0,
                tpot_ms=10.0, decode_knee=1e9, busy_window_s=10.0)
    reqs = [req(0.0, [(1, 10)], out=1), req(0.001, [(2, 5000)], out=1), req(0.002, [(3, 10)], out=100)]
    plain = simulate(wl(reqs), Random(), 1, InstanceModel(**base, prefill_chunk_tokens=0))
    hidden = simulate(wl(reqs), Random(), 1, InstanceModel(**base, prefill_chunk_tokens=100))
    mixed = simulate(wl(reqs), Random(), 1, InstanceModel(**base, prefill_chunk_tokens=2000))
    assert hidden.throughput_rps == pytest.approx(plain.throughput_rps, rel=0.02)
    assert mixed.throughput_rps < plain.throughput_rps * 0.99


def test_decode_is_slowed_by_prefill_on_the_same_instance():
    base = dict(kv_capacity_tokens=100_000, block_tokens=10, prefill_tokens_per_s=10_000.0, overhead_ms=0.0,
                tpot_ms=10.0, decode_knee=1e9)
    reqs = [req(0.0, [(1, 5000)], out=10), req(0.1, [(2, 10)], out=100)]
    plain = simulate(wl(reqs), Random(), 1, InstanceModel(**base, prefill_chunk_tokens=0))
    chunked = simulate(wl(reqs), Random(), 1, InstanceModel(**base, prefill_chunk_tokens=8192))
    # the second request decodes while the GPU still spends time on prefill
    assert chunked.throughput_rps < plain.throughput_rps


def test_scale_out_window_estimate_sends_the_new_instance_its_fair_share_or_the_ring_s_moved_keys():
    w = shared_prefix(groups=40, prefix_tokens=2000, question_tokens=200, output_tokens=16, rate_rps=4.0,
                      n_requests=600, seed=3)
    rnd, pa = simulate_many(w, [Random(), PrefixAware(prefix_length=4096, concurrency_threshold=8)], 4, SIMPLE)
    # RANDOM: the fifth instance takes 1/5 of the requests and hits nothing at first
    assert rnd.cold_share == pytest.approx(1 / 5)
    assert rnd.hit_rate_scale_out == pytest.approx(rnd.kv_hit_rate * 4 / 5)
    # PREFIX_AWARE: the prefixes the ring hands to the new instance lose their cache
    assert pa.cold_share == pa.remap["scale_out"] and 0 < pa.cold_share < 0.5
    assert pa.hit_rate_scale_out == pytest.approx(pa.kv_hit_rate * (1 - pa.remap["scale_out"]))
    assert pa.ttft_percentiles() == {f"ttft_{q}_ms": v for q, v in pa.ttft_ms.items()}
