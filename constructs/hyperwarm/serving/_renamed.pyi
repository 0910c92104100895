"""``hyperwarm.serving``'s names before 0.2.0, typed as deprecated: see ``hyperwarm.caches._renamed``."""

from typing_extensions import deprecated

from .images import ServingImage, ServingImageConfig

@deprecated("ContainerImage is deprecated: use ServingImage (the old name goes in hyperwarm 0.3.0)")
class ContainerImage(ServingImage): ...

@deprecated("ContainerImageConfig is deprecated: use ServingImageConfig (the old name goes in hyperwarm 0.3.0)")
class ContainerImageConfig(ServingImageConfig): ...
