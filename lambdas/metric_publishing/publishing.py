"""PutMetricData in batches: shared by the cache exporter and the endpoint metrics bridge."""

from __future__ import annotations

from typing import Any, Sequence

BATCH = 1000  # PutMetricData's most MetricData entries per call


def publish(cloudwatch: Any, namespace: str, data: Sequence[dict[str, Any]]) -> None:
    for start in range(0, len(data), BATCH):
        cloudwatch.put_metric_data(Namespace=namespace, MetricData=list(data[start:start + BATCH]))
