"""What a model server needs: its container image, where its model is (model buckets), the settings it is
told, and the host AMI its CUDA needs."""

from hyperwarm._internal.deprecation import attach_renamed

__getattr__, __dir__, __all__ = attach_renamed(__name__, __file__)  # names renamed in 0.2.0 work, with a warning
