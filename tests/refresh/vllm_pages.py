"""vLLM ``/metrics`` pages as a vLLM V1 server writes them (HELP/TYPE lines, colon names, an ``engine``
and ``model_name`` label on every series), for the exporter's tests."""

from __future__ import annotations

import math
from collections.abc import Mapping

# vLLM V1's bucket bounds of vllm:time_to_first_token_seconds (seconds)
TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
               20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)


def uniform_ttft(requests: float, up_to: float) -> dict[float, float]:
    """Cumulative bucket counts of ``requests`` first tokens spread uniformly over [0, ``up_to``] seconds."""
    out = {le: requests * min(le, up_to) / up_to for le in TTFT_BOUNDS}
    out[math.inf] = requests
    return out


def page(ttft: Mapping[float, float], *, requests: float | None = None, hits: float = 0.0, queries: float = 0.0,
         waiting: float = 0.0, model: str = "llama", old_names: bool = False, engines: int = 1) -> str:
    """A server with ``engines`` engines, each holding an equal share of every figure."""
    prefix = "vllm:gpu_prefix_cache" if old_names else "vllm:prefix_cache"
    lines = ["# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
             "# TYPE vllm:num_requests_waiting gauge"]
    labels = [f'engine="{e}",model_name="{model}"' for e in range(engines)]
    lines += [f"vllm:num_requests_waiting{{{lab}}} {waiting / engines}" for lab in labels]
    for name, value in ((f"{prefix}_queries", queries), (f"{prefix}_hits", hits)):
        lines += [f"# HELP {name}_total Prefix cache tokens.", f"# TYPE {name}_total counter"]
        lines += [f"{name}_total{{{lab}}} {value / engines}" for lab in labels]
    if requests is not None:
        lines += ["# HELP vllm:request_success_total Count of successfully processed requests.",
                  "# TYPE vllm:request_success_total counter"]
        lines += [f'vllm:request_success_total{{{lab},finished_reason="{r}"}} {requests / engines / 2}'
                  for lab in labels for r in ("stop", "length")]
    lines += ["# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.",
              "# TYPE vllm:time_to_first_token_seconds histogram"]
    for lab in labels:
        lines += [f'vllm:time_to_first_token_seconds_bucket{{{lab},le="{"+Inf" if math.isinf(le) else le}"}} '
                  f"{count / engines}" for le, count in sorted(ttft.items())]
        lines += [f"vllm:time_to_first_token_seconds_count{{{lab}}} {ttft[math.inf] / engines}",
                  f"vllm:time_to_first_token_seconds_sum{{{lab}}} 0.0"]
    return "\n".join(lines) + "\n"
