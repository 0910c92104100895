"""PromQL for SageMaker AI detailed observability: the one place hyperwarm writes (and reads) its queries.

With detailed observability on (``MetricsConfig.EnableDetailedObservability``), SageMaker scrapes the
serving container's Prometheus metrics and stores them in CloudWatch as OpenTelemetry metrics, queried
with PromQL rather than named by namespace and metric name. The container's ``vllm:`` prefix reads
``vllm_`` there, and label names containing dots are quoted: SageMaker's documented example is
``histogram_quantile(0.99, sum by (le) (rate(vllm_time_to_first_token_seconds_bucket{
'aws.sagemaker.endpoint.name'="$endpoint"}[5m])))``
(https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-detailed-observability-promql.html).

The PromQL alarm, the dashboard's text widget and the endpoint metrics bridge (which republishes TTFT and
the prefix-cache hit rate as CloudWatch metrics) all take their query from here, and the catalog test and
the deploy rehearsal read alarms back with :func:`selectors`. Pure (no aws-cdk, no boto3): it lives in
the bridge's function package so the function writes its queries from a compact :class:`Variant`
entry, and the constructs import it as ``hyperwarm.functions.endpoint_metrics.promql``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ENDPOINT_LABEL = "aws.sagemaker.endpoint.name"
VARIANT_LABEL = "aws.sagemaker.variant.name"
TTFT_METRICS = {"vllm": "vllm_time_to_first_token_seconds", "sglang": "sglang_time_to_first_token_seconds"}
"""The TTFT histogram of each engine, as detailed observability names it (``vllm:`` -> ``vllm_``)."""
PREFIX_CACHE_COUNTERS = ("vllm_prefix_cache_hits_total", "vllm_prefix_cache_queries_total")
"""vLLM's prefix-cache counters (tokens), as detailed observability would name them (not in SageMaker's
published metric list: the bridge skips a variant whose query returns nothing)."""

_PLAIN_LABEL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SELECTOR = re.compile(r"""([A-Za-z_:][A-Za-z0-9_:]*)\{((?:"(?:[^"\\]|\\.)*"|'[^']*'|[^}"'])*)\}""")
_MATCHER = re.compile(r"""\s*('[^']+'|"[^"]+"|[A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?""")


def quote(value: str) -> str:
    """``value`` as a PromQL double-quoted string: backslash, double quote and line breaks escaped.

    SageMaker's endpoint and variant names (letters, digits, hyphens) never need it, but a query must
    not change meaning for any input; a CDK token string (``${Token[...]}``) passes unchanged.
    """
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "r": "\r"}.get(m[1], m[1]), text)


def selector(metric: str, labels: Mapping[str, str]) -> str:
    """``metric{'a.b'="v", ...}``: label names with dots single-quoted, as SageMaker's docs write them."""
    matchers = [f"{name if _PLAIN_LABEL.fullmatch(name) else repr(name)}={quote(value)}"
                for name, value in labels.items()]
    return f"{metric}{{{', '.join(matchers)}}}"


def variant_labels(endpoint: str, variant: str) -> dict[str, str]:
    """The labels that scope a query to one production variant of one endpoint."""
    return {ENDPOINT_LABEL: endpoint, VARIANT_LABEL: variant}


def _ttft_buckets(endpoint: str, variant: str, engine: str) -> str:
    if engine not in TTFT_METRICS:
        raise ValueError(f"engine = {engine!r} -- allowed: {', '.join(TTFT_METRICS)}")
    return selector(f"{TTFT_METRICS[engine]}_bucket", variant_labels(endpoint, variant))


def ttft_quantile(quantile: float, *, endpoint: str, variant: str, engine: str = "vllm", window: str = "5m") -> str:
    """The ``quantile`` (0..1) of time to first token, in seconds, of one variant over ``window``."""
    if not 0 < quantile < 1:
        raise ValueError(f"quantile = {quantile} -- allowed: between 0 and 1")
    return f"histogram_quantile({quantile:g}, sum by (le) (rate({_ttft_buckets(endpoint, variant, engine)}[{window}])))"


def ttft_buckets_per_minute(*, endpoint: str, variant: str, engine: str = "vllm", window: str = "5m") -> str:
    """First tokens per minute in each cumulative ``le`` bucket of the variant, averaged over ``window``
    (one series per ``le``): the bridge's TTFT source. Averaged because ``increase`` over a single minute
    holds at most one sample at SageMaker's one-minute publish frequency and would return nothing."""
    return f"sum by (le) (rate({_ttft_buckets(endpoint, variant, engine)}[{window}])) * 60"


def prefix_cache_hit_rate(*, endpoint: str, variant: str, window: str = "5m") -> str:
    """Percent of prompt tokens vLLM found in its prefix cache, over every instance of the variant and
    ``window``: one series, NaN without queries, nothing where the counters are not published."""
    hits, queries = (f"sum(increase({selector(name, variant_labels(endpoint, variant))}[{window}]))"
                     for name in PREFIX_CACHE_COUNTERS)
    return f"100 * {hits} / {queries}"


def ttft_above(threshold_seconds: float, **scope: str) -> str:
    """A PromQL alarm's query: p99 TTFT of the variant, returned (so breaching) only above the threshold."""
    if not threshold_seconds > 0:
        raise ValueError(f"threshold_seconds = {threshold_seconds} -- must be positive")
    return f"{ttft_quantile(0.99, **scope)} > {threshold_seconds:g}"


def selectors(query: str) -> list[tuple[str, dict[str, str]]]:
    """(metric, {label: value}) of each ``metric{...}`` selector with equality matchers in ``query``."""
    found = []
    for metric, body in _SELECTOR.findall(query):
        labels = {}
        for name, op, value in _MATCHER.findall(body):
            if op == "=":
                labels[name.strip("'\"")] = _unquote(value)
        found.append((metric, labels))
    return found


@dataclass(frozen=True)
class Variant:
    """One production variant as the endpoint metrics bridge reads it: its entry in ``HYPERWARM_VARIANTS``
    is only these four fields (:meth:`entry`), the queries are written from them where they run."""

    endpoint: str
    variant: str
    engine: str = "vllm"
    """Whose TTFT histogram to read (a key of :data:`TTFT_METRICS`)."""
    window: str = "5m"
    """The queries' ``rate`` window."""

    @property
    def ttft(self) -> str:
        """First tokens per minute in each cumulative ``le`` bucket (seconds), one series per ``le``."""
        return ttft_buckets_per_minute(endpoint=self.endpoint, variant=self.variant, engine=self.engine,
                                       window=self.window)

    @property
    def hit_rate(self) -> str | None:
        """Prefix-cache hit rate in percent; None for SGLang (it exposes a hit-rate gauge, not these counters)."""
        if self.engine != "vllm":
            return None
        return prefix_cache_hit_rate(endpoint=self.endpoint, variant=self.variant, window=self.window)

    @property
    def queries(self) -> int:
        return 1 + (self.hit_rate is not None)

    def entry(self) -> dict[str, str]:
        return {"endpoint": self.endpoint, "variant": self.variant, "engine": self.engine, "window": self.window}

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> Variant:
        return cls(entry["endpoint"], entry["variant"], entry["engine"], entry["window"])
