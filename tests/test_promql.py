"""hyperwarm.functions.endpoint_metrics.promql: the TTFT queries of SageMaker detailed observability, escaping, and
reading them back."""

from __future__ import annotations

import re

import pytest

from hyperwarm.functions.endpoint_metrics import promql
from hyperwarm.observability.metric_catalog import PROMQL_METRICS, find_promql

# SageMaker's documented example (monitoring-detailed-observability-promql), endpoint "chat".
DOCUMENTED = ("histogram_quantile(0.99, sum by (le) (rate(vllm_time_to_first_token_seconds_bucket"
              "{'aws.sagemaker.endpoint.name'=\"chat\"}[5m])))")


def test_the_query_is_sagemakers_documented_example_scoped_to_the_variant():
    query = promql.ttft_quantile(0.99, endpoint="chat", variant="main")
    assert query == DOCUMENTED.replace('"chat"}', '"chat", \'aws.sagemaker.variant.name\'="main"}')


def test_the_alarm_query_carries_its_threshold():
    assert promql.ttft_above(2.5, endpoint="chat", variant="main") == \
        promql.ttft_quantile(0.99, endpoint="chat", variant="main") + " > 2.5"


def test_sglang_reads_its_own_histogram():
    query = promql.ttft_quantile(0.5, endpoint="chat", variant="main", engine="sglang", window="20m")
    assert query.startswith("histogram_quantile(0.5, sum by (le) (rate(sglang_time_to_first_token_seconds_bucket{")
    assert query.endswith("}[20m])))")


@pytest.mark.parametrize("value, literal", [
    ("plain-name-1", '"plain-name-1"'),
    ('say "hi"', '"say \\"hi\\""'),
    ("back\\slash", '"back\\\\slash"'),
    ("two\nlines", '"two\\nlines"'),
    ("${Token[TOKEN.42]}", '"${Token[TOKEN.42]}"'),
])
def test_label_values_are_escaped_as_promql_strings(value, literal):
    assert promql.quote(value) == literal


@pytest.mark.parametrize("endpoint, variant", [
    ("chat", "main"), ('a"}b', "x"), ("c\\", 'v"'), ("braces}{", "new\nline")])
def test_selectors_read_back_exactly_what_was_written(endpoint, variant):
    query = promql.ttft_above(5, endpoint=endpoint, variant=variant)
    assert promql.selectors(query) == [("vllm_time_to_first_token_seconds_bucket", {
        promql.ENDPOINT_LABEL: endpoint, promql.VARIANT_LABEL: variant})]


def test_an_injected_label_value_cannot_widen_the_selector():
    query = promql.ttft_quantile(0.5, endpoint='x", \'aws.sagemaker.endpoint.name\'=~".*', variant="main")
    ((_, labels),) = promql.selectors(query)
    assert labels[promql.ENDPOINT_LABEL] == 'x", \'aws.sagemaker.endpoint.name\'=~".*'
    outside_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', query)
    assert "=~" not in outside_strings and outside_strings.count("=") == 2


@pytest.mark.parametrize("call, message", [
    (lambda: promql.ttft_quantile(1.5, endpoint="e", variant="v"), "quantile = 1.5 -- allowed: between 0 and 1"),
    (lambda: promql.ttft_quantile(0.5, endpoint="e", variant="v", engine="tgi"), "engine = 'tgi' -- allowed: vllm, sglang"),
    (lambda: promql.ttft_above(0, endpoint="e", variant="v"), "threshold_seconds = 0 -- must be positive"),
])
def test_bad_arguments_name_field_value_and_rule(call, message):
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(")):
        call()


def test_every_engine_metric_is_catalogued_with_its_source_and_labels():
    assert {m.name for m in PROMQL_METRICS} == {*promql.TTFT_METRICS.values(), *promql.PREFIX_CACHE_COUNTERS}
    for metric in PROMQL_METRICS:
        assert metric.source.startswith("https://docs.aws.amazon.com/sagemaker/")
        assert metric.container_metric == metric.name.replace("_", ":", 1)
        assert {promql.ENDPOINT_LABEL, promql.VARIANT_LABEL} <= set(metric.labels)
    assert find_promql("vllm_time_to_first_token_seconds_bucket").container_metric == "vllm:time_to_first_token_seconds"
    with pytest.raises(KeyError, match="catalogued: vllm_time_to_first_token_seconds"):
        find_promql("tgi_time_to_first_token_seconds")


def test_the_bridges_ttft_query_sums_each_bucket_per_minute_over_the_alarms_window():
    query = promql.ttft_buckets_per_minute(endpoint="chat", variant="main", window="8m")
    assert query == ("sum by (le) (rate(vllm_time_to_first_token_seconds_bucket{'aws.sagemaker.endpoint.name'=\"chat\", "
                     "'aws.sagemaker.variant.name'=\"main\"}[8m])) * 60")
    assert promql.selectors(promql.ttft_buckets_per_minute(endpoint="chat", variant="s", engine="sglang")) == [
        ("sglang_time_to_first_token_seconds_bucket", promql.variant_labels("chat", "s"))]


def test_the_prefix_cache_hit_rate_divides_the_variants_hits_by_its_queries():
    query = promql.prefix_cache_hit_rate(endpoint="chat", variant="main")
    assert query.startswith("100 * sum(increase(vllm_prefix_cache_hits_total{") and query.endswith("}[5m]))")
    assert " / sum(increase(vllm_prefix_cache_queries_total{" in query
    assert promql.selectors(query) == [(name, promql.variant_labels("chat", "main"))
                                       for name in promql.PREFIX_CACHE_COUNTERS]
    for name in promql.PREFIX_CACHE_COUNTERS:
        assert find_promql(name).labels == (promql.ENDPOINT_LABEL, promql.VARIANT_LABEL)
