"""CloudWatch's Prometheus-compatible QueryMetrics API: one signed instant query, its vector parsed.

``POST https://monitoring.<region>.amazonaws.com/api/v1/query`` with the form fields ``query`` and
``time``, signed with SigV4 for the service ``monitoring``; the answer follows the Prometheus HTTP API
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch-PromQL-API-QueryMetrics.html).
botocore signs, urllib3 sends: both come with the Lambda runtime.
"""

from __future__ import annotations

import json
import math
from typing import Any, Protocol
from urllib.parse import urlencode

import urllib3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

SERVICE = "monitoring"
PATH = "/api/v1/query"
TIMEOUT = 10.0
"""Seconds per query, in total (connect and every read): ``urllib3.Timeout(total=...)``, since a bare
float bounds each socket read only and a slowly trickling answer could outlast the function."""


class QueryError(Exception):
    """The query could not be answered (transport, HTTP status, or a Prometheus error status)."""


class Http(Protocol):
    """What is used of ``urllib3.PoolManager``."""

    def request(self, method: str, url: str, *, body: bytes, headers: dict[str, str], timeout: urllib3.Timeout,
                retries: bool) -> Any: ...


def url(region: str) -> str:
    return f"https://{SERVICE}.{region}.amazonaws.com{PATH}"


def signed(query: str, at: float, region: str, credentials: Any) -> AWSRequest:
    """The POST of an instant ``query`` evaluated at ``at`` (Unix seconds), SigV4-signed."""
    body = urlencode({"query": query, "time": f"{at:.3f}"})
    request = AWSRequest(method="POST", url=url(region), data=body,
                         headers={"Content-Type": "application/x-www-form-urlencoded"})
    SigV4Auth(credentials, SERVICE, region).add_auth(request)
    return request


def instant(http: Http, query: str, at: float, region: str, credentials: Any,
            timeout: float = TIMEOUT) -> list[dict[str, Any]]:
    """The ``result`` of a vector answer: ``[{"metric": {...}, "value": [ts, "v"]}, ...]``, within
    ``timeout`` seconds in total."""
    request = signed(query, at, region, credentials)
    body = request.body.encode() if isinstance(request.body, str) else request.body
    try:
        # No retries and a total timeout: one query never outlasts `timeout`, so the run's deadline holds
        # (the next minute tries again).
        response = http.request("POST", request.url, body=body, headers=dict(request.headers.items()),
                                timeout=urllib3.Timeout(total=timeout), retries=False)
    except (urllib3.exceptions.HTTPError, OSError) as error:  # timeouts, connection resets
        raise QueryError(f"{type(error).__name__}: {error}") from error
    text = response.data.decode("utf-8", "replace")
    if response.status != 200:
        raise QueryError(f"HTTP {response.status}: {text[:300]}")
    try:
        answer = json.loads(text)
    except ValueError:
        raise QueryError(f"not JSON: {text[:300]}") from None
    if answer.get("status") != "success":
        raise QueryError(f"{answer.get('errorType', 'error')}: {answer.get('error', text[:300])}")
    data = answer.get("data") or {}
    if data.get("resultType") != "vector":
        raise QueryError(f"resultType {data.get('resultType')!r}, expected 'vector'")
    return list(data.get("result") or [])


def sample(series: dict[str, Any]) -> float | None:
    """A series' value, None when it is not a finite number (NaN from 0/0, +Inf, garbage)."""
    try:
        value = float(series["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def cumulative_buckets(result: list[dict[str, Any]]) -> dict[float, float]:
    """``le`` upper bound (``+Inf`` included) -> cumulative count, from ``sum by (le)`` series. Series
    without a parseable ``le`` or a finite value are left out."""
    out: dict[float, float] = {}
    for series in result:
        try:
            le = float(series.get("metric", {})["le"])
        except (KeyError, TypeError, ValueError):
            continue
        value = sample(series)
        if value is not None and not math.isnan(le):
            out[le] = value
    return out
