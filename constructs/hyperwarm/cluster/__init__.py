"""The HyperPod EKS cluster: network, EKS control plane, HyperPod nodes and their instance groups, in-cluster
add-ons, and the rules they follow."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
