"""The names ``hyperwarm.serving`` had before 0.2.0, for type checkers: each a deprecated subclass of its new name
(PEP 702), so an editor strikes it through and ``mypy --enable-error-code deprecated`` reports it. At run time the
package answers each with its new class and a ``DeprecationWarning`` (``hyperwarm._internal.deprecation``)."""

from typing_extensions import deprecated

from .images import ServingImage, ServingImageConfig

@deprecated("ContainerImage is deprecated: use ServingImage (the old name goes in hyperwarm 0.3.0)")
class ContainerImage(ServingImage): ...

@deprecated("ContainerImageConfig is deprecated: use ServingImageConfig (the old name goes in hyperwarm 0.3.0)")
class ContainerImageConfig(ServingImageConfig): ...
