"""The names ``hyperwarm.caches`` had before 0.2.0, for type checkers: each a deprecated subclass of its new name
(PEP 702), so an editor strikes it through and ``mypy --enable-error-code deprecated`` reports it. At run time the
package answers each with its new class and a ``DeprecationWarning`` (``hyperwarm._internal.deprecation``)."""

from typing_extensions import deprecated

from .autoscaling import HyperPodAutoscaling
from .props import CachedModelSpec

@deprecated("CachedModelProps is deprecated: use CachedModelSpec (the old name goes in hyperwarm 0.3.0)")
class CachedModelProps(CachedModelSpec): ...

@deprecated("HyperPodAutoScaling is deprecated: use HyperPodAutoscaling (the old name goes in hyperwarm 0.3.0)")
class HyperPodAutoScaling(HyperPodAutoscaling): ...
