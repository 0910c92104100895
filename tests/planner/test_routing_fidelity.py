"""Fidelity: the documented scenarios reproduce the shape of AWS's published
prefix-aware routing results (Llama 3.1 70B, 7 x ml.p5.48xlarge).

AWS, long context (8,000-token shared prefixes): KV hit ~25 % -> 82 %, P50
TTFT -71..77 %, P90 -33..37 %, per-instance share 13.3..15.4 %, throughput +15..16 %.
AWS, short context (ShareGPT-like): hit ~30 % -> 80 %, P50 -13..16 %,
P90 -24..37 %.  Nothing in the scenarios encodes these numbers; they come
out of the cache and queueing model (see constructs/hyperwarm/planner/scenarios.py).
"""
import pytest

from hyperwarm.planner.scenarios import get_scenario
from hyperwarm.planner.sim import simulate
from hyperwarm.planner.strategies import PrefixAware, Random, remap_share
from hyperwarm.planner.workloads import Workload, shared_prefix


def _pair(name):
    sc = get_scenario(name)
    w = sc.workload(0, None)
    rnd = simulate(w, Random(), sc.instances, sc.model)
    pa = simulate(w, PrefixAware(sc.prefix_length, sc.concurrency_threshold), sc.instances, sc.model)
    return sc, rnd, pa


@pytest.fixture(scope="module")
def long_ctx():
    return _pair("aws-long-context")


@pytest.fixture(scope="module")
def short_ctx():
    return _pair("aws-short-context")


def test_long_context_setup_matches_published_test(long_ctx):
    sc, rnd, pa = long_ctx
    assert sc.instances == 7
    first = next(iter(sc.workload(0, None)))
    assert first[3][0][1] == 8000  # 8,000-token shared prefix
    assert rnd.requests == pa.requests >= 28000


def test_long_context_random_hit_rate_near_25_percent(long_ctx):
    _, rnd, _ = long_ctx
    assert 0.18 <= rnd.kv_hit_rate <= 0.33


def test_long_context_prefix_aware_hit_rate_at_least_80_percent(long_ctx):
    _, _, pa = long_ctx
    # seed 0: 81.3 %; seeds 0..4: 78.8..81.3 %, 1 to 3 points under AWS's 82 % (constructs/hyperwarm/planner/README.md)
    assert pa.kv_hit_rate >= 0.80


def test_long_context_p50_ttft_reduced_by_70_percent(long_ctx):
    _, rnd, pa = long_ctx
    assert pa.ttft_ms["p50"] <= 0.30 * rnd.ttft_ms["p50"]


def test_long_context_p50_and_p90_cuts_inside_aws_ranges(long_ctx):
    # published: P50 -71..77 %, P90 -33..37 %. Measured on seeds 0..4: P50 -75.3..75.6 %,
    # P90 -35.0..36.2 %: the run-to-run spread (1 point) fits inside both ranges.
    _, rnd, pa = long_ctx
    assert 0.71 <= 1 - pa.ttft_ms["p50"] / rnd.ttft_ms["p50"] <= 0.77
    assert 0.33 <= 1 - pa.ttft_ms["p90"] / rnd.ttft_ms["p90"] <= 0.37


def test_model_is_calibrated_to_aws_published_ttft_range():
    # AWS's TTFTs span 63..280 ms: 280 ms is a full miss of the median 8,800-token
    # prompt (RANDOM's P50), 63 ms a hit with its 800 uncached tokens (PREFIX_AWARE's
    # P50). Simulated on one instance, an hour apart so nothing queues; the router's
    # 1.6 ms is outside the engine. Percentiles have 1 % resolution.
    m = get_scenario("aws-long-context").model
    miss = (0.0, 8800, 1, ((1, 8000), (2, 8800)), None, None)
    hit = (3600.0, 8800, 1, ((1, 8000), (3, 8800)), None, None)
    res = simulate(Workload("calibration", lambda: iter([miss, hit]), n_requests=2), Random(), 1, m)
    assert res.kv_hit_rate == pytest.approx(7999 / 17600, abs=0.01)  # the second prompt's prefix, in whole blocks
    assert res.ttft_ms["p99"] + 1.6 == pytest.approx(280, rel=0.015)
    assert res.ttft_ms["p50"] + 1.6 == pytest.approx(63, rel=0.015)


def test_long_context_p90_reduced_less_than_p50(long_ctx):
    # published: P90 improves far less (-33..37 %) than P50, because the
    # misses left (first sight of a prefix, spills) sit in the tail
    _, rnd, pa = long_ctx
    p90_cut = 1 - pa.ttft_ms["p90"] / rnd.ttft_ms["p90"]
    p50_cut = 1 - pa.ttft_ms["p50"] / rnd.ttft_ms["p50"]
    assert 0.2 <= p90_cut < p50_cut


def test_long_context_each_instance_share_within_13_to_16_percent(long_ctx):
    _, _, pa = long_ctx
    assert len(pa.instance_share) == 7
    assert all(0.13 <= s <= 0.16 for s in pa.instance_share), pa.instance_share


def test_short_context_hit_rate_30_to_80(short_ctx):
    _, rnd, pa = short_ctx
    assert 0.22 <= rnd.kv_hit_rate <= 0.40
    assert 0.72 <= pa.kv_hit_rate <= 0.90


def test_short_context_latency_gain_is_modest(short_ctx):
    # short prompts: the fixed part of TTFT dominates, so P50 gains little
    # published: P50 -13..16 %, P90 -24..37 %; measured on seeds 0..4: P50 -13.1 % on every
    # seed, P90 -25.9..26.7 % (the lower P50 bound allows one point of run-to-run noise)
    _, rnd, pa = short_ctx
    p50_cut = 1 - pa.ttft_ms["p50"] / rnd.ttft_ms["p50"]
    p90_cut = 1 - pa.ttft_ms["p90"] / rnd.ttft_ms["p90"]
    assert 0.12 <= p50_cut <= 0.16
    assert 0.24 <= p90_cut <= 0.37
    assert all(0.12 <= s <= 0.17 for s in pa.instance_share)


def test_scale_out_7_to_8_remaps_at_most_20_percent(long_ctx):
    _, _, pa = long_ctx
    assert pa.remap is not None
    assert pa.remap["scale_out"] <= 0.20
    w = get_scenario("aws-long-context").workload(0, 3000)
    keys = list({r[3][0][0] for r in w})
    assert remap_share(keys, 7, 8) <= 0.20
    assert remap_share(keys, 7, 8, "modulo") >= 0.80  # ~7/8 would move


def test_hot_prefix_threshold_bounds_busiest_instance():
    sc = get_scenario("hot-prefix")
    w = sc.workload(0, 12000)
    unbounded = simulate(w, PrefixAware(4096, 1024), 7, sc.model)
    bounded = simulate(w, PrefixAware(4096, 8), 7, sc.model)
    assert max(unbounded.instance_share) >= 0.55  # the hot prefix piles onto one instance
    assert max(bounded.instance_share) <= 2 / 7  # at most twice the fair share
    assert bounded.spill_rate > 0


def test_too_short_prefix_length_funnels_too_long_scatters():
    # 600-token system prompt (~2.4 KB): PrefixLength 1024 sees only the
    # shared prompt and funnels everything to one home; 65536 covers the
    # whole body, spreading even requests of the same group.
    w = shared_prefix(groups=1, prefix_tokens=600, question_tokens=300, n_requests=3000, rate_rps=4.0)
    sc = get_scenario("aws-long-context")
    funnel = simulate(w, PrefixAware(1024, 1024), 7, sc.model)
    scatter = simulate(w, PrefixAware(65536, 1024), 7, sc.model)
    assert max(funnel.instance_share) == 1.0
    assert max(scatter.instance_share) < 0.2


@pytest.mark.parametrize("seed", [0, 3])
def test_closed_loop_throughput_gain_inside_aws_range(seed):
    # published: +15..16 % with fixed-concurrency clients. 56 clients is the open loop's mean
    # in flight (8 per instance). The gain comes from prefill/decode interference (vLLM V1's
    # 8,192-token steps, the default): RANDOM's decodes share the GPU with 72 % misses.
    # Seeds 0..4: +15.4..15.6 %; windows 3.2..12.8 s: +15.5..15.7 % (constructs/hyperwarm/planner/README.md).
    from hyperwarm.planner.sim import simulate_many

    sc = get_scenario("aws-long-context")
    assert sc.model.prefill_chunk_tokens == 8192
    rnd, pa = simulate_many(sc.workload(seed, 28800), [Random(), PrefixAware(4096, 12)], 7, sc.model, clients=56)
    assert 0.15 <= pa.throughput_rps / rnd.throughput_rps - 1 <= 0.16
    assert pa.kv_hit_rate > rnd.kv_hit_rate + 0.5


def test_without_interference_the_gain_is_only_the_ttft_saved():
    # off, a request is its TTFT plus 256 tokens of undisturbed decode; PREFIX_AWARE saves
    # ~0.2 s of ~7.5 s, so the gain is about 3 %, far below AWS's +15..16 %
    from dataclasses import replace

    from hyperwarm.planner.sim import simulate_many

    sc = get_scenario("aws-long-context")
    m = replace(sc.model, prefill_chunk_tokens=0)
    rnd, pa = simulate_many(sc.workload(0, 28800), [Random(), PrefixAware(4096, 12)], 7, m, clients=56)
    assert 0.01 <= pa.throughput_rps / rnd.throughput_rps - 1 <= 0.04
