"""Where a SageMaker variant's time to first token is read: its engine's histogram, the ``rate`` window, and
whether detailed observability publishes it at all.

Both readers of that source use these: the PromQL alarm and widgets
(:mod:`hyperwarm.observability.sagemaker_ttft`) and the endpoint metrics bridge
(:mod:`hyperwarm.observability.endpoint_metrics`), so they always query the same series.
"""

from __future__ import annotations

import math

from hyperwarm.endpoints.base import IInferenceEndpoint
from hyperwarm.functions.endpoint_metrics import promql


def variant_engine(endpoint: IInferenceEndpoint, variant: str) -> tuple[str, str]:
    """(engine whose TTFT metric to read, why): the variant's serving engine where the endpoint knows it;
    vLLM's metric otherwise, said so (LMI, TGI, custom servers, or an import that did not say)."""
    name = endpoint.serving_engine(variant)
    if name in promql.TTFT_METRICS:
        return name, f"the variant's container follows the {name} convention"
    if name is None:
        return "vllm", "assumed: the variant's engine is unknown; vLLM's metric is queried"
    return "vllm", f"assumed: the {name} container's TTFT metric is not known to hyperwarm; vLLM's is queried"


def query_window(endpoint: IInferenceEndpoint) -> str:
    """The ``rate`` window: 5 minutes (SageMaker's example), or 4 publish intervals where SageMaker publishes
    less often than every 75 s (``rate`` needs several samples in its window)."""
    frequency = endpoint.metric_publish_frequency
    seconds = frequency.to_seconds() if frequency is not None and not frequency.is_unresolved() else 60
    return f"{max(5, math.ceil(4 * seconds / 60))}m"


def detailed_observability_off(endpoint: IInferenceEndpoint) -> bool:
    """True when the endpoint is known to have detailed observability off (then no TTFT is published)."""
    return endpoint.detailed_observability is False
