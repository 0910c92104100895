"""Routing simulator and tuner for SageMaker prefix-aware routing (issue 6).

See planner/README.md for the model, the trace format and the CLI.
"""

__all__ = ["simulate", "simulate_many", "InstanceModel", "make_strategy"]

from .sim import InstanceModel, simulate, simulate_many  # noqa: E402
from .strategies import make_strategy  # noqa: E402
