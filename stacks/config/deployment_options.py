"""What a cached model's HyperPod deployment may set beyond its model: scaling and serving options.

Every option is the library's props (:mod:`hyperwarm.caches.props`, :mod:`hyperwarm.caches.autoscaling`), derived
field by field (:mod:`stacks.config.library`): the library holds every range and default. Only the autoscaling
trigger has a cdk.json form of its own: one key (``cloudwatch``, ``prometheus`` or ``exporter``) names its kind.
Everything is opt-in: a model without these keys gets the operator's defaults.
"""

from __future__ import annotations

from typing import Any

from pydantic import model_validator

from hyperwarm import caches

from .library import config_model, register
from .strict import StrictModel

CloudWatchTrigger = config_model(caches.CloudWatchTrigger)
PrometheusTrigger = config_model(caches.PrometheusTrigger)
ExporterTrigger = config_model(caches.ExporterTrigger)
"""Rendered as a CloudWatch trigger on ``Hyperwarm/Caches`` with the exporter's dimensions; the exporter runs while
``observability.enabled`` (checked at synth)."""


class Trigger(StrictModel):
    """Exactly one of ``cloudwatch``, ``prometheus`` and ``exporter``."""

    cloudwatch: CloudWatchTrigger | None = None  # type: ignore[valid-type]
    prometheus: PrometheusTrigger | None = None  # type: ignore[valid-type]
    exporter: ExporterTrigger | None = None  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _one(self) -> Trigger:
        if sum(t is not None for t in (self.cloudwatch, self.prometheus, self.exporter)) != 1:
            raise ValueError("give exactly one of cloudwatch, prometheus and exporter")
        return self

    def to_spec(self) -> Any:
        """The library's trigger (an exporter trigger is resolved by the construct, which knows the cluster)."""
        chosen: Any = next(t for t in (self.cloudwatch, self.prometheus, self.exporter) if t is not None)
        return chosen.props


AutoScaling = register(caches.HyperPodAutoscaling, config_model(caches.HyperPodAutoscaling, overrides={
    "trigger": (Trigger, ..., lambda t: t.to_spec())}))
"""The operator's ``autoScalingSpec`` (KEDA): replicas between min and max, driven by one trigger (``*_s``: its
Durations in whole seconds)."""

Probes = config_model(caches.Probes)
Metrics = config_model(caches.Metrics)
KvCache = config_model(caches.KvCache)
LoadBalancer = config_model(caches.LoadBalancer)
Tls = config_model(caches.Tls)
RequestLimits = config_model(caches.RequestLimits)
