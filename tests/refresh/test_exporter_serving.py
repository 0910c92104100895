"""The exporter's serving figures from the pods' own vLLM metrics: parsing, per-minute deltas, the TTFT
distribution (quantiles against analytic expectations) and the per-model figures."""

from __future__ import annotations

import datetime
import math

import pytest
from vllm_pages import TTFT_BOUNDS, page, uniform_ttft

from hyperwarm.functions.cache_exporter.counters import Scrape, Snapshots
from hyperwarm.functions.cache_exporter.placement import metrics_target
from hyperwarm.functions.cache_exporter.serving import PodServing, serving_figures
from hyperwarm.functions.cache_exporter.vllm import EngineSample, NotVllm, parse
from hyperwarm.functions.metric_publishing.ttft import MAX_VALUES, bucket_counts, distribution

T0 = datetime.datetime(2026, 11, 29, 17, 0, tzinfo=datetime.UTC)
MINUTE = datetime.timedelta(minutes=1)


def quantile(values: list[float], counts: list[float], q: float) -> float:
    """The q-quantile of a distribution: the smallest value with at least q of the weight at or below it."""
    total, running = sum(counts), 0.0
    for value, count in sorted(zip(values, counts, strict=True)):
        running += count
        if running >= q * total - 1e-9:
            return value
    raise AssertionError("empty distribution")


def sample(requests: float, *, hits: float = 0.0, queries: float = 0.0, waiting: float = 0.0,
           up_to: float = 1.0) -> EngineSample:
    return parse(page(uniform_ttft(requests, up_to), requests=requests, hits=hits, queries=queries, waiting=waiting))


# --- parsing -------------------------------------------------------------------------------------------

def test_parse_sums_every_engine_and_label_set():
    s = parse(page(uniform_ttft(100, 2.5), requests=90, hits=30, queries=120, waiting=4, engines=2))
    assert s.ttft_buckets[math.inf] == 100 and s.ttft_buckets[1.0] == pytest.approx(40)
    assert (s.requests, s.counters["prefix_hits"], s.counters["prefix_queries"], s.waiting) == (90, 30, 120, 4)


def test_parse_accepts_the_earlier_v1_gpu_prefix_names_and_counts_requests_by_ttft_without_success():
    s = parse(page(uniform_ttft(50, 1.0), hits=3, queries=9, old_names=True))
    assert (s.counters["prefix_hits"], s.counters["prefix_queries"]) == (3, 9)
    assert s.requests == 50  # no vllm:request_success_total: the TTFT histogram's count


@pytest.mark.parametrize("text", [
    "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12.5\n",  # a server, not vLLM
    "<html>502 Bad Gateway</html>",  # not the text format at all
    'x{,\t="1"} 3\n',  # malformed labels: prometheus_client raises IndexError, not ValueError
    "vllm:time_to_first_token_seconds_bucket 3\n",  # a bucket without its le label
])
def test_a_page_without_vllms_ttft_histogram_is_not_vllm(text):
    with pytest.raises(NotVllm):
        parse(text)


@pytest.mark.parametrize("spec, expected", [
    ({"metrics": {"modelMetrics": {"port": 9400, "path": "/stats"}}, "worker": {"modelInvocationPort": {
        "containerPort": 8000}}}, (9400, "/stats")),
    ({"metrics": {"enabled": True}, "worker": {"modelInvocationPort": {"containerPort": 8000}}}, (8000, "/metrics")),
    ({"worker": {}}, None),
])
def test_metrics_target_prefers_the_operators_model_metrics(spec, expected):
    assert metrics_target({"spec": spec}) == expected


# --- deltas --------------------------------------------------------------------------------------------

def test_since_subtracts_and_a_counter_that_went_down_counts_from_zero():
    before, after = sample(100, hits=10, queries=40), sample(130, hits=25, queries=80, waiting=3)
    delta = after.since(before)
    assert (delta.requests, delta.counters["prefix_hits"], delta.counters["prefix_queries"]) == (30, 15, 40)
    assert delta.ttft_buckets[math.inf] == 30 and delta.waiting == 3
    restarted = sample(7, hits=1, queries=2)
    assert restarted.since(after) is restarted  # the container restarted: all 7 are new


def test_a_cold_start_records_only_and_the_next_run_publishes_deltas():
    snapshots = Snapshots()
    first = snapshots.advance({"a": Scrape(T0 - 5 * MINUTE, sample(100))}, running={"a"}, now=T0)
    assert first == {}  # no previous run: nothing says which requests are new
    second = snapshots.advance({"a": Scrape(T0 - 5 * MINUTE, sample(160))}, running={"a"}, now=T0 + MINUTE)
    assert second["a"].requests == 60


def test_a_new_pod_counts_in_full_only_if_it_started_after_the_previous_run():
    snapshots = Snapshots(last_run=T0)
    deltas = snapshots.advance({"new": Scrape(T0 + 10 * datetime.timedelta(seconds=1), sample(12)),
                                "old": Scrape(T0 - 9 * MINUTE, sample(500))}, running={"new", "old"}, now=T0 + MINUTE)
    assert deltas["new"].requests == 12
    assert "old" not in deltas  # first seen, but served before the previous run: a baseline only
    assert set(snapshots.samples) == {"new", "old"}


def test_a_failed_scrape_keeps_the_baseline_and_a_gone_pod_is_forgotten():
    snapshots = Snapshots()
    snapshots.advance({"a": Scrape(None, sample(100)), "b": Scrape(None, sample(5))}, running={"a", "b"}, now=T0)
    snapshots.advance({}, running={"a"}, now=T0 + MINUTE)  # a: scrape failed; b: gone
    assert set(snapshots.samples) == {"a"}
    deltas = snapshots.advance({"a": Scrape(None, sample(150))}, running={"a"}, now=T0 + 2 * MINUTE)
    assert deltas["a"].requests == 50  # two minutes' requests, none lost


# --- the TTFT distribution ---------------------------------------------------------------------------

def histogram_quantile(q: float, cumulative: dict[float, float]) -> float:
    """Prometheus' histogram_quantile (linear within the bucket, the first starting at 0), in seconds."""
    bounds = sorted(cumulative)
    rank, lower, below = q * cumulative[math.inf], 0.0, 0.0
    for le in bounds:
        if cumulative[le] >= rank:
            if math.isinf(le):
                return lower
            return lower + (le - lower) * (rank - below) / (cumulative[le] - below)
        lower, below = le, cumulative[le]
    raise AssertionError("unreachable")


def _bucket_width(seconds: float) -> float:
    upper = min(b for b in TTFT_BOUNDS if b >= seconds)
    return upper - max((b for b in TTFT_BOUNDS if b < upper), default=0.0)


@pytest.mark.parametrize("up_to", [2.5, 1.0, 0.3, 7.0, 80.0])
def test_ttft_quantiles_match_histogram_quantile_and_the_truth_within_a_bucket(up_to):
    """Uniform first tokens over [0, up_to]: the true q-quantile is q x up_to. With k filled buckets each
    gets n = min(10, 150 // k) points, so the distribution's quantile is within half of 1/n of the bucket
    from histogram_quantile's (the README's statement), and within one bucket's width of the truth
    (within 1/n of it when up_to is a bucket bound: uniform within every bucket)."""
    cumulative = uniform_ttft(10_000, up_to)
    filled = len(bucket_counts(cumulative))
    points = max(1, min(10, MAX_VALUES // filled))
    values, counts = distribution(bucket_counts(cumulative))
    assert len(values) == len(counts) <= MAX_VALUES and len(set(values)) == len(values)
    assert sum(counts) == pytest.approx(10_000)
    for q in (0.5, 0.95, 0.99):
        width_ms = _bucket_width(q * up_to) * 1000
        got = quantile(values, counts, q)
        assert abs(got - histogram_quantile(q, cumulative) * 1000) <= width_ms / (2 * points) + 1e-6, q
        assert abs(got - q * up_to * 1000) <= width_ms, q
        if up_to in TTFT_BOUNDS:
            assert abs(got - q * up_to * 1000) <= width_ms / points + 1e-6, q


def test_requests_beyond_the_last_bound_sit_at_the_last_finite_bound():
    cumulative = {**{le: 0.0 for le in TTFT_BOUNDS}, math.inf: 5.0}
    assert distribution(bucket_counts(cumulative)) == ([2_560_000.0], [5.0])


def test_one_bucket_spreads_evenly_inside_it():
    values, counts = distribution({(0.1, 0.25): 100.0})
    assert values == pytest.approx([107.5 + 15 * i for i in range(10)]) and counts == [10.0] * 10


def test_more_buckets_than_one_request_takes_are_merged_with_their_neighbours():
    """PutMetricData takes up to 150 values per metric in a request: 400 one-millisecond buckets become
    100 of four milliseconds (two halvings), one value each, still spanning 0..400 ms."""
    buckets = {(i / 1000, (i + 1) / 1000): 1.0 for i in range(400)}
    values, counts = distribution(buckets)
    assert len(values) == len(counts) == 100 and sum(counts) == 400
    assert values[0] == pytest.approx(2.0) and values[-1] == pytest.approx(398.0)


def test_no_new_first_tokens_no_distribution():
    assert distribution(bucket_counts({0.1: 0.0, 1.0: 0.0, math.inf: 0.0})) is None
    assert bucket_counts({0.1: 3.0, 1.0: 3.0, math.inf: 3.0}) == {(0.0, 0.1): 3.0}


# --- per-model figures -------------------------------------------------------------------------------

def _datums(figures) -> dict[str, dict]:
    return {d["MetricName"]: d for d in figures.datums()}


def test_model_figures_hit_rate_cold_request_share_and_queue():
    warm = PodServing(cold=False, scraped=sample(1, waiting=2), delta=sample(30, hits=60, queries=100))
    cold = PodServing(cold=True, scraped=sample(1, waiting=5), delta=sample(10, hits=0, queries=100))
    failed = PodServing(cold=True, scraped=None, delta=None)
    d = _datums(serving_figures("llama", [warm, cold, failed]))
    assert d["PrefixCacheHitRate"]["Value"] == 30.0  # 60 hits of 200 queries
    assert (d["Requests"]["Value"], d["ColdRequests"]["Value"], d["ColdRequestShare"]["Value"]) == (40, 10, 25.0)
    assert d["ScrapeFailures"]["Value"] == 1
    assert d["TimeToFirstToken"]["Unit"] == "Milliseconds" and sum(d["TimeToFirstToken"]["Counts"]) == 40
    assert _datums(serving_figures("llama", [warm, cold]))["RequestsWaiting"]["Value"] == 7


def test_a_partial_scrape_publishes_no_queue_depth():
    """KEDA's Average divides the queue by every replica: a sum over the scraped pods only would under-report
    and scale in under load (old: 7 of a queue of 7 + the failed pod's was published). No data instead."""
    warm = PodServing(cold=False, scraped=sample(1, waiting=2), delta=None)
    cold = PodServing(cold=True, scraped=sample(1, waiting=5), delta=None)
    failed = PodServing(cold=True, scraped=None, delta=None)
    d = _datums(serving_figures("llama", [warm, cold, failed]))
    assert "RequestsWaiting" not in d and d["ScrapeFailures"]["Value"] == 1


def test_without_a_baseline_only_the_gauge_and_failures_are_published():
    d = _datums(serving_figures("llama", [PodServing(cold=False, scraped=sample(100, waiting=1), delta=None)]))
    assert set(d) == {"RequestsWaiting", "ScrapeFailures"}


def test_no_requests_and_no_queries_publish_no_shares():
    idle = EngineSample(ttft_buckets={math.inf: 0.0}, counters={"requests": 0.0, "prefix_queries": 0.0})
    d = _datums(serving_figures("llama", [PodServing(cold=True, scraped=idle, delta=idle)]))
    assert (d["Requests"]["Value"], d["ColdRequests"]["Value"]) == (0, 0)
    assert not {"ColdRequestShare", "PrefixCacheHitRate", "TimeToFirstToken"} & set(d)
