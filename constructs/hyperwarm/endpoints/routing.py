"""Request routing of a SageMaker production variant (``ProductionVariant.RoutingConfig``) and its rules.

Pure Python: the construct and the app's ``endpoints`` config model check routing with the same
function, :func:`routing_problems`, so both say the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args

from annotated_types import Interval

from hyperwarm._internal.tokens import resolved

EndpointRoutingStrategy = Literal["RANDOM", "LEAST_OUTSTANDING_REQUESTS", "PREFIX_AWARE", "KV_AWARE"]
"""A SageMaker production variant's ``RoutingStrategy`` (a cached model's is ``CacheRoutingStrategy``)."""
ROUTING_STRATEGIES: tuple[str, ...] = get_args(EndpointRoutingStrategy)
PREFIX_LENGTH_RANGE = (1024, 65536)
"""Bytes of the request body (characters of message text for the OpenAI-compatible API)."""
CONCURRENCY_THRESHOLD_RANGE = (1, 1024)
"""In-flight requests on an instance (or inference-component copy) before a request spills over."""
_CACHE_AWARE = ("PREFIX_AWARE", "KV_AWARE")


@dataclass(frozen=True)
class Routing:
    """How a variant spreads requests over its instances. Use the static factories."""

    strategy: EndpointRoutingStrategy = "RANDOM"
    """One of :data:`ROUTING_STRATEGIES`. Default: RANDOM."""
    prefix_length: Annotated[int, Interval(ge=PREFIX_LENGTH_RANGE[0], le=PREFIX_LENGTH_RANGE[1])] | None = None
    """PREFIX_AWARE only: bytes of the request that choose the instance. Default: none."""
    concurrency_threshold: Annotated[
        int, Interval(ge=CONCURRENCY_THRESHOLD_RANGE[0], le=CONCURRENCY_THRESHOLD_RANGE[1])] | None = None
    """PREFIX_AWARE only: in-flight requests before a request spills over. Default: none."""

    @staticmethod
    def random() -> Routing:
        """SageMaker's default: any instance."""
        return Routing("RANDOM")

    @staticmethod
    def least_outstanding_requests() -> Routing:
        """The instance with the fewest in-flight requests: for uneven, long-running LLM requests."""
        return Routing("LEAST_OUTSTANDING_REQUESTS")

    @staticmethod
    def prefix_aware(*, prefix_length: int, concurrency_threshold: int) -> Routing:
        """Requests whose first ``prefix_length`` bytes match go to the same instance, so its KV cache
        is reused, until it has ``concurrency_threshold`` requests in flight."""
        return Routing("PREFIX_AWARE", prefix_length, concurrency_threshold)

    @staticmethod
    def kv_aware() -> Routing:
        """The instance whose KV cache holds the prompt start, weighed against load (vLLM DLC only)."""
        return Routing("KV_AWARE")

    def api_shape(self) -> dict[str, Any]:
        """``ProductionVariantRoutingConfig`` as the SageMaker API (and CloudFormation) spell it."""
        shape: dict[str, Any] = {"RoutingStrategy": self.strategy}
        if self.prefix_length is not None or self.concurrency_threshold is not None:
            prefix: dict[str, Any] = {}
            if self.prefix_length is not None:
                prefix["PrefixLength"] = self.prefix_length
            if self.concurrency_threshold is not None:
                prefix["ConcurrencyThreshold"] = self.concurrency_threshold
            shape["PrefixAwareRoutingConfig"] = prefix
        return shape


def routing_problems(routing: Routing, *, serverless: bool = False, min_instances: Any = 1,
                     max_instances: Any = 1) -> tuple[list[str], list[str]]:
    """(errors, warnings) of ``routing`` on a variant, each as ``field = value -- rule``; tokens are skipped."""
    strategy = routing.strategy
    errors = [f"routing.strategy = {strategy!r} -- serverless variants take no routing; "
              "remove routing or give the variant an instance type"] if serverless else []
    if resolved(strategy) and strategy not in ROUTING_STRATEGIES:
        errors.append(f"routing.strategy = {strategy!r} -- allowed: {', '.join(ROUTING_STRATEGIES)}")
    errors += _prefix_problems(routing)
    warnings: list[str] = []
    if strategy in _CACHE_AWARE and not serverless and resolved(max_instances) and resolved(min_instances):
        if max_instances < 2:
            errors.append(f"routing.strategy = {strategy!r} -- the variant is fixed at {max_instances} instance "
                          f"and {strategy} only routes between two or more; raise the instance count or the "
                          "autoscaling max to 2+, or use LEAST_OUTSTANDING_REQUESTS")
        elif min_instances < 2:
            warnings.append(f"routing.strategy = {strategy!r} -- has no effect while the variant runs "
                            f"{min_instances} instance; it applies once autoscaling adds a second")
    return errors, warnings


def _prefix_problems(routing: Routing) -> list[str]:
    """PREFIX_AWARE needs both prefix settings in range; every other strategy takes neither."""
    errors: list[str] = []
    strategy = routing.strategy
    for name, value, (low, high) in (("prefix_length", routing.prefix_length, PREFIX_LENGTH_RANGE),
                                     ("concurrency_threshold", routing.concurrency_threshold,
                                      CONCURRENCY_THRESHOLD_RANGE)):
        if strategy == "PREFIX_AWARE":
            if value is None:
                errors.append(f"routing.{name} = None -- PREFIX_AWARE needs both prefix_length "
                              f"({PREFIX_LENGTH_RANGE[0]}..{PREFIX_LENGTH_RANGE[1]}) and concurrency_threshold "
                              f"({CONCURRENCY_THRESHOLD_RANGE[0]}..{CONCURRENCY_THRESHOLD_RANGE[1]})")
            elif resolved(value) and not (isinstance(value, int) and low <= value <= high):
                errors.append(f"routing.{name} = {value!r} -- allowed: an integer {low}..{high}")
        elif value is not None and resolved(strategy):
            errors.append(f"routing.{name} = {value!r} -- only PREFIX_AWARE takes {name}; strategy is {strategy}")
    return errors
