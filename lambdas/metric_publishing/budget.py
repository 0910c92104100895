"""How long a run may spend reading before it must publish: shared by the exporter and the bridge."""

from __future__ import annotations

import time
from typing import Any


def deadline(context: Any, budget: float, reserve: float) -> float:
    """The ``time.monotonic()`` by which reading must end: ``budget`` seconds at most, and never later
    than the invocation's remaining time (``context.get_remaining_time_in_millis()``) less ``reserve``
    seconds kept for what follows (publishing), so a slow minute still publishes before the function
    times out. Without a context (a local call), ``budget``."""
    seconds = budget
    if context is not None:
        seconds = min(budget, context.get_remaining_time_in_millis() / 1000.0 - reserve)
    return time.monotonic() + max(0.0, seconds)
