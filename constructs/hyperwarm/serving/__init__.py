"""What a model server needs: its container image, where its model is (model buckets), the settings it is
told, and the host AMI its CUDA needs."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
