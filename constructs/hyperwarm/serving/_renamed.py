"""``hyperwarm.serving``'s names before 0.2.0: see ``hyperwarm.caches._renamed``."""

from .images import ServingImage as ContainerImage, ServingImageConfig as ContainerImageConfig

__all__ = ["ContainerImage", "ContainerImageConfig"]
