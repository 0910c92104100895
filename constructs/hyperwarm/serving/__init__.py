"""What a model server needs: its container image, where its model is (model buckets), the settings it is
told, and the host AMI its CUDA needs."""

import lazy_loader

from hyperwarm._internal.deprecation import with_renamed

_lazy_getattr, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
__getattr__ = with_renamed(__name__, _lazy_getattr)  # names renamed in 0.2.0 still work, with a warning
