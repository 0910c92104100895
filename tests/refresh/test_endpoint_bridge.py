"""The endpoint metrics bridge (lambdas/endpoint_metrics) against an in-process QueryMetrics
API that checks each request's SigV4 signature, and moto's CloudWatch."""

from __future__ import annotations

import datetime
import json
import math
import time
import types
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
import urllib3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from moto import mock_aws

from hyperwarm.functions.endpoint_metrics import handler as bridge, promql
from hyperwarm.functions.endpoint_metrics.query_metrics import QueryError, cumulative_buckets, instant
from hyperwarm.functions.metric_publishing.ttft import bucket_counts
from hyperwarm.observability.metric_catalog import ENDPOINTS_NAMESPACE, PUBLISHED_METRICS

REGION = "us-west-2"
NOW = datetime.datetime(2026, 11, 29, 18, 0, tzinfo=datetime.UTC)
CHAT = dict(endpoint="chat", variant="random")
CODE = dict(endpoint="code", variant="main")


def _entry(scope: dict[str, str]) -> dict[str, str]:
    """What the construct puts into HYPERWARM_VARIANTS for a vLLM variant: names, engine and window only."""
    return promql.Variant(**scope).entry()


def _v(scope: dict[str, str]) -> promql.Variant:
    """The variant whose queries the function writes (and the fake answers by)."""
    return promql.Variant(**scope)


def vector(*series: tuple[dict[str, str], str]) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "vector",
                                          "result": [{"metric": m, "value": [NOW.timestamp(), v]} for m, v in series]}}


def buckets(**cumulative: float) -> dict[str, Any]:
    """A ``sum by (le)`` answer: ``le_0_5=3`` is ``{le="0.5"} 3``, ``inf`` is ``+Inf``."""
    return vector(*(({"le": "+Inf" if k == "inf" else k.removeprefix("le_").replace("_", ".")}, str(v))
                    for k, v in cumulative.items()))


class _Response:
    def __init__(self, status: int, payload: Any) -> None:
        self.status = status
        self.data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()


class FakeQueryMetrics:
    """CloudWatch's QueryMetrics as the function meets it: POST /api/v1/query, SigV4 for `monitoring`, form body.
    Answers by query text; a query mapped to an int gets that HTTP status, to an exception is raised."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers, self.requests = answers, []

    def request(self, method: str, url: str, *, body: bytes, headers: dict[str, str], timeout: urllib3.Timeout,
                retries: bool) -> _Response:
        parts = urlsplit(url)
        assert (method, parts.scheme, parts.netloc, parts.path) == (
            "POST", "https", f"monitoring.{REGION}.amazonaws.com", "/api/v1/query")
        assert headers["Content-Type"] == "application/x-www-form-urlencoded" and timeout.total > 0 and retries is False
        _verify_signature(method, url, body, headers)
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        self.requests.append(form)
        answer = self.answers.get(form["query"], vector())
        if isinstance(answer, Exception):
            raise answer
        return _Response(answer, "throttled") if isinstance(answer, int) else _Response(200, answer)


class TricklingQueryMetrics(FakeQueryMetrics):
    """Answers after ``seconds``, a byte every ``step``, and times out as urllib3 2.x does: a float is the
    limit of each socket read (never reached here), only ``Timeout(total=...)`` bounds the whole request."""

    def __init__(self, seconds: float, step: float = 0.05) -> None:
        super().__init__({})
        self.seconds, self.step, self.timeouts = seconds, step, []

    def request(self, method: str, url: str, *, body: bytes, headers: dict[str, str], timeout: Any,
                retries: bool) -> _Response:
        self.timeouts.append(timeout)
        total = timeout.total if isinstance(timeout, urllib3.Timeout) else None
        per_read = timeout if isinstance(timeout, (int, float)) else None
        start = time.monotonic()
        while time.monotonic() - start < self.seconds:
            if per_read is not None and self.step > per_read:
                raise urllib3.exceptions.ReadTimeoutError(None, url, "read timed out")
            time.sleep(self.step)
            if total is not None and time.monotonic() - start >= total:
                raise urllib3.exceptions.ReadTimeoutError(None, url, "timed out (total)")
        self.requests.append({"query": "answered"})
        return _Response(200, vector())


def _context(seconds_left: float) -> Any:
    return types.SimpleNamespace(get_remaining_time_in_millis=lambda: int(seconds_left * 1000))


def _verify_signature(method: str, url: str, body: bytes, headers: dict[str, str]) -> None:
    """Recompute SigV4 over what arrived (service `monitoring`): the signature covers method, path and body."""
    credentials = boto3.Session().get_credentials().get_frozen_credentials()
    authorization = headers["Authorization"]
    scope = authorization.split("Credential=")[1].split(",")[0].split("/")
    assert authorization.startswith("AWS4-HMAC-SHA256 ") and scope[0] == credentials.access_key
    assert scope[2:] == [REGION, "monitoring", "aws4_request"]
    assert headers["X-Amz-Security-Token"] == credentials.token
    request = AWSRequest(method=method, url=url, data=body,
                         headers={k: v for k, v in headers.items() if k != "Authorization"})
    request.context["timestamp"] = headers["X-Amz-Date"]
    signer = SigV4Auth(credentials, "monitoring", REGION)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    assert authorization.endswith(f"Signature={expected}")


def _run(fake: FakeQueryMetrics, *scopes: dict[str, str]) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    """metric_data through the fake, by (endpoint, variant) and metric name."""
    credentials = boto3.Session().get_credentials()
    selected = bridge.variants(json.dumps([_entry(s) for s in scopes]))
    data = bridge.metric_data(selected, lambda q: instant(fake, q, NOW.timestamp(), REGION, credentials), NOW)
    out: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for datum in data:
        key = tuple(d["Value"] for d in datum["Dimensions"])
        out.setdefault(key, {})[datum["MetricName"]] = datum
    return out


def test_each_query_is_a_signed_post_of_the_promql_at_the_runs_minute():
    fake = FakeQueryMetrics({})
    _run(fake, CHAT)
    assert fake.requests == [{"query": _v(CHAT).ttft, "time": f"{NOW.timestamp():.3f}"},
                             {"query": _v(CHAT).hit_rate, "time": f"{NOW.timestamp():.3f}"}]


def test_a_tampered_body_fails_the_signature_check():
    """The fake's check is real: the same signed headers over another query do not verify."""
    credentials = boto3.Session().get_credentials()
    from hyperwarm.functions.endpoint_metrics.query_metrics import signed

    request = signed("up", NOW.timestamp(), REGION, credentials)
    with pytest.raises(AssertionError):
        _verify_signature("POST", request.url, b"query=down&time=0", dict(request.headers.items()))


def test_cumulative_le_buckets_become_counts_per_bucket_with_inf_above_the_last_bound():
    result = buckets(le_0_1=2, le_0_5=5, le_1_0=5, inf=6)["data"]["result"]
    assert bucket_counts(cumulative_buckets(result)) == {(0.0, 0.1): 2, (0.1, 0.5): 3, (1.0, math.inf): 1}


def test_nan_values_and_series_without_le_are_left_out():
    result = vector(({"le": "0.5"}, "NaN"), ({"le": "1"}, "4"), ({}, "9"), ({"le": "x"}, "1"), ({"le": "2"}, "+Inf"))
    assert cumulative_buckets(result["data"]["result"]) == {1.0: 4.0}


def test_ttft_is_published_as_a_distribution_in_milliseconds_per_variant():
    fake = FakeQueryMetrics({_v(CHAT).ttft: buckets(le_0_1=10, le_0_5=40, inf=40)})
    chat = _run(fake, CHAT)["chat", "random"]
    ttft = chat["TimeToFirstToken"]
    assert ttft["Unit"] == "Milliseconds" and ttft["Timestamp"] == NOW
    assert sum(ttft["Counts"]) == pytest.approx(40)
    assert min(ttft["Values"]) > 0 and max(ttft["Values"]) < 500  # inside the (0, 0.5 s] buckets
    below_100ms = sum(c for v, c in zip(ttft["Values"], ttft["Counts"], strict=True) if v < 100)
    assert below_100ms == pytest.approx(10)
    assert chat["QueryFailures"]["Value"] == 0


def test_no_first_tokens_and_no_prefix_series_publish_only_the_series_and_failure_counts():
    fake = FakeQueryMetrics({_v(CHAT).ttft: buckets(le_0_1=0, inf=0)})  # hit rate: empty vector
    published = _run(fake, CHAT)["chat", "random"]
    assert set(published) == {"SeriesReturned", "QueryFailures"}
    assert published["SeriesReturned"]["Value"] == 2  # an idle variant's histogram still answers


def test_an_empty_answer_publishes_zero_series_so_a_blind_query_is_seen():
    """No OTel enrichment, detailed observability off, or an engine without the histogram: the query
    succeeds and returns nothing. The bridge says so with SeriesReturned 0 (its no-series alarm reads it)."""
    published = _run(FakeQueryMetrics({}), CHAT)["chat", "random"]
    assert published["SeriesReturned"] == {
        "MetricName": "SeriesReturned", "Value": 0, "Unit": "Count", "Timestamp": NOW,
        "Dimensions": [{"Name": "EndpointName", "Value": "chat"}, {"Name": "VariantName", "Value": "random"}]}
    assert published["QueryFailures"]["Value"] == 0


def test_the_prefix_cache_hit_rate_is_published_when_finite():
    fake = FakeQueryMetrics({_v(CHAT).hit_rate: vector(({}, "62.5")),
                             _v(CODE).hit_rate: vector(({}, "NaN"))})
    published = _run(fake, CHAT, CODE)
    assert published["chat", "random"]["PrefixCacheHitRate"] == {
        "MetricName": "PrefixCacheHitRate", "Value": 62.5, "Unit": "Percent", "Timestamp": NOW,
        "Dimensions": [{"Name": "EndpointName", "Value": "chat"}, {"Name": "VariantName", "Value": "random"}]}
    assert "PrefixCacheHitRate" not in published["code", "main"]  # 0/0: no queries this window


@pytest.mark.parametrize("failure", [500, urllib3.exceptions.ReadTimeoutError(None, "/", "timed out"),
                                     {"status": "error", "errorType": "bad_data", "error": "parse error"}])
def test_a_failed_query_is_counted_and_the_other_variants_still_publish(failure):
    fake = FakeQueryMetrics({_v(CHAT).ttft: failure, _v(CODE).ttft: buckets(le_1=3, inf=3),
                             _v(CHAT).hit_rate: vector(({}, "50"))})
    published = _run(fake, CHAT, CODE)
    assert published["chat", "random"]["QueryFailures"]["Value"] == 1
    assert "TimeToFirstToken" not in published["chat", "random"]
    assert "SeriesReturned" not in published["chat", "random"]  # unknown, not zero: QueryFailures says so
    assert published["chat", "random"]["PrefixCacheHitRate"]["Value"] == 50  # its other query still ran
    assert published["code", "main"]["QueryFailures"]["Value"] == 0
    assert sum(published["code", "main"]["TimeToFirstToken"]["Counts"]) == pytest.approx(3)


def test_an_answer_that_is_not_a_vector_is_a_failure():
    with pytest.raises(QueryError, match="resultType 'matrix'"):
        instant(FakeQueryMetrics({"q": {"status": "success", "data": {"resultType": "matrix", "result": []}}}),
                "q", 0, REGION, boto3.Session().get_credentials())


def test_every_published_metric_is_catalogued():
    fake = FakeQueryMetrics({_v(CHAT).ttft: buckets(le_1=3, inf=3), _v(CHAT).hit_rate: vector(({}, "5"))})
    catalogued = {m.name: m for m in PUBLISHED_METRICS if m.namespace == ENDPOINTS_NAMESPACE}
    for name, datum in _run(fake, CHAT)["chat", "random"].items():
        assert datum["Unit"] == catalogued[name].unit
        assert tuple(d["Name"] for d in datum["Dimensions"]) == catalogued[name].dimensions
    assert set(catalogued) == {"TimeToFirstToken", "PrefixCacheHitRate", "SeriesReturned", "QueryFailures"}


def test_the_handler_publishes_botocore_valid_data_to_its_namespace(monkeypatch):
    fake = FakeQueryMetrics({_v(CHAT).ttft: buckets(**{f"le_{i}": i * 10 for i in range(1, 40)}, inf=400),
                             _v(CHAT).hit_rate: vector(({}, "12"))})
    monkeypatch.setattr(bridge, "HTTP", fake)
    monkeypatch.setenv(bridge.VARIANTS, json.dumps([_entry(CHAT), _entry(CODE)]))
    sent: list[dict] = []
    with mock_aws():
        cw = boto3.client("cloudwatch", region_name=REGION)
        monkeypatch.setattr(bridge.boto3, "client", lambda *a, **k: cw)
        cw.meta.events.register("provide-client-params.monitoring.PutMetricData",  # after botocore validated them
                                lambda params, **_: sent.append(params))
        answer = bridge.lambda_handler({}, None)
        listed = {(m["MetricName"], m["Dimensions"][0]["Value"])
                  for m in cw.list_metrics(Namespace=ENDPOINTS_NAMESPACE)["Metrics"]}
    assert answer == {"variants": ["chat/random", "code/main"], "metrics": 6, "query_failures": 0}
    assert {p["Namespace"] for p in sent} == {ENDPOINTS_NAMESPACE}
    (ttft,) = [d for p in sent for d in p["MetricData"] if "Values" in d]
    assert len(ttft["Values"]) == len(ttft["Counts"]) <= 150
    assert listed == {("TimeToFirstToken", "chat"), ("PrefixCacheHitRate", "chat"), ("QueryFailures", "chat"),
                      ("SeriesReturned", "chat"), ("SeriesReturned", "code"), ("QueryFailures", "code")}


@pytest.mark.parametrize("remaining_s", [None, 900], ids=["no-context", "invocation-has-more-time"])
def test_queries_past_the_runs_fixed_budget_are_skipped_and_counted(monkeypatch, remaining_s):
    """The fixed budget bounds the queries with or without an invocation's remaining time beyond it."""
    fake = FakeQueryMetrics({})
    monkeypatch.setattr(bridge, "HTTP", fake)
    monkeypatch.setattr(bridge, "BUDGET", 0.0)
    monkeypatch.setenv(bridge.VARIANTS, json.dumps([_entry(CHAT)]))
    with mock_aws(), pytest.raises(bridge.AllQueriesFailed):
        bridge.lambda_handler({}, None if remaining_s is None else _context(remaining_s))
    assert fake.requests == []


def test_a_slowly_trickling_answer_is_cut_at_the_runs_deadline_and_the_run_still_publishes(monkeypatch):
    """Old: ``timeout=10.0`` bounded each read only, so a 1 s trickle (a read every 50 ms) was waited out
    past the deadline; the deadline came from the fixed budget, not the invocation's remaining time."""
    fake = TricklingQueryMetrics(seconds=1.0)
    monkeypatch.setattr(bridge, "HTTP", fake)
    monkeypatch.setenv(bridge.VARIANTS, json.dumps([_entry(CHAT)]))
    sent: list[dict] = []
    with mock_aws():
        cw = boto3.client("cloudwatch", region_name=REGION)
        monkeypatch.setattr(bridge.boto3, "client", lambda *a, **k: cw)
        cw.meta.events.register("provide-client-params.monitoring.PutMetricData", lambda params, **_: sent.append(params))
        with pytest.raises(bridge.AllQueriesFailed):
            bridge.lambda_handler({}, _context(bridge.RESERVE + 0.3))  # 0.3 s left for queries
    assert fake.requests == []  # the first query was cut, the second not sent
    (timeout,) = fake.timeouts
    assert isinstance(timeout, urllib3.Timeout) and 0 < timeout.total <= 0.3
    (datum,) = [d for p in sent for d in p["MetricData"]]
    assert (datum["MetricName"], datum["Value"]) == ("QueryFailures", 2)


def test_a_run_where_every_query_failed_raises_after_publishing_its_failures(monkeypatch):
    """Old: caught and returned success, so the bridge's Errors alarm never fired while it read nothing."""
    fake = FakeQueryMetrics({_v(CHAT).ttft: 500, _v(CHAT).hit_rate: 403, _v(CODE).ttft: 500,
                             _v(CODE).hit_rate: urllib3.exceptions.ReadTimeoutError(None, "/", "timed out")})
    monkeypatch.setattr(bridge, "HTTP", fake)
    monkeypatch.setenv(bridge.VARIANTS, json.dumps([_entry(CHAT), _entry(CODE)]))
    with mock_aws():
        cw = boto3.client("cloudwatch", region_name=REGION)
        monkeypatch.setattr(bridge.boto3, "client", lambda *a, **k: cw)
        with pytest.raises(bridge.AllQueriesFailed, match="all 4 queries of 2 variants"):
            bridge.lambda_handler({}, None)
        failures = cw.list_metrics(Namespace=ENDPOINTS_NAMESPACE, MetricName="QueryFailures")["Metrics"]
    assert len(failures) == 2


def test_one_answered_query_keeps_the_run_a_success(monkeypatch):
    fake = FakeQueryMetrics({_v(CHAT).ttft: 500, _v(CODE).ttft: 500, _v(CODE).hit_rate: 500})
    monkeypatch.setattr(bridge, "HTTP", fake)
    monkeypatch.setenv(bridge.VARIANTS, json.dumps([_entry(CHAT), _entry(CODE)]))
    with mock_aws():
        assert bridge.lambda_handler({}, None)["query_failures"] == 3


def test_the_function_writes_each_variants_queries_from_its_compact_entry():
    sglang = {**CODE, "engine": "sglang", "window": "8m"}
    (chat, code) = bridge.variants(json.dumps([_entry(CHAT), sglang]))
    assert (chat.ttft, chat.hit_rate) == (promql.ttft_buckets_per_minute(**CHAT),
                                          promql.prefix_cache_hit_rate(**CHAT))
    assert (code.ttft, code.hit_rate) == (promql.ttft_buckets_per_minute(**CODE, engine="sglang", window="8m"), None)
