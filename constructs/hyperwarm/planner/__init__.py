"""hyperwarm planning tools.

The routing simulator and tuner for SageMaker routing strategies
lives in ``sim``, ``strategies``, ``workloads``, ``traces``, ``scenarios``,
``report``, ``tune`` and ``routing_cli``; see constructs/hyperwarm/planner/README.md.  Names are
loaded lazily so ``import hyperwarm.planner`` stays cheap for the other tools here.
"""

from typing import Any

__all__ = ["simulate", "simulate_many", "InstanceModel", "make_strategy"]


def __getattr__(name: str) -> Any:
    if name in ("simulate", "simulate_many", "InstanceModel"):
        from . import sim

        return getattr(sim, name)
    if name == "make_strategy":
        from .strategies import make_strategy

        return make_strategy
    raise AttributeError(f"module hyperwarm.planner has no attribute {name!r}")
