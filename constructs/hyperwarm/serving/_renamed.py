"""The names ``hyperwarm.serving`` had before 0.2.0 (``_renamed.pyi`` types them as deprecated). The package answers
them itself, with a warning; this module only lets lazy_loader's eager import (``EAGER_IMPORT``) resolve them."""

from .images import ServingImage as ContainerImage, ServingImageConfig as ContainerImageConfig

__all__ = ["ContainerImage", "ContainerImageConfig"]
