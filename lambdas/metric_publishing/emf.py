"""One log line in CloudWatch's embedded metric format: Lambda sends its log to CloudWatch Logs, which extracts the
metrics, so a function publishes counts with no CloudWatch permission
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any


def emf_line(namespace: str, dimension_sets: Sequence[Sequence[str]], counts: Mapping[str, float],
             **fields: Any) -> str:
    """``counts`` (metric name -> value, unit Count) under each of ``dimension_sets``; ``fields`` give the
    dimensions' values and anything else the line should carry (it stays searchable in the log)."""
    return json.dumps({"_aws": {"Timestamp": int(time.time() * 1000), "CloudWatchMetrics": [{
        "Namespace": namespace, "Dimensions": [list(d) for d in dimension_sets],
        "Metrics": [{"Name": name, "Unit": "Count"} for name in counts]}]}, **fields, **counts})
