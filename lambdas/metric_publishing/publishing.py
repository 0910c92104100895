"""PutMetricData in batches: shared by the cache exporter and the endpoint metrics bridge."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

BATCH = 1000  # PutMetricData's most MetricData entries per call


def publish(cloudwatch: Any, namespace: str, data: Sequence[dict[str, Any]]) -> None:
    for start in range(0, len(data), BATCH):
        cloudwatch.put_metric_data(Namespace=namespace, MetricData=list(data[start:start + BATCH]))
