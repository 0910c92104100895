"""The app's cdk8s output: each environment's cached models as the library's chart (:mod:`hyperwarm.caches`)."""

from .chart import build_chart, environment_labels, write_manifests

__all__ = ["build_chart", "environment_labels", "write_manifests"]
