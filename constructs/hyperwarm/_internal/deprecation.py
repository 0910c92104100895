"""Names renamed in 0.2.0, kept for one release: reading an old one warns (``DeprecationWarning``) and gives the new.

The packages load their names lazily (lazy_loader reads ``__init__.pyi``, whose imports name only the new names:
an old one is an assignment there, for type checkers, which lazy_loader does not read); a package's or a module's
``__getattr__`` answers the old names through :func:`with_renamed`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

RENAMED = {
    "CachedModelProps": "CachedModelSpec",
    "HyperPodAutoScaling": "HyperPodAutoscaling",
    "ContainerImage": "ServingImage",
    "ContainerImageConfig": "ServingImageConfig",
}
"""Old name -> new name (removed in 0.3.0)."""
PACKAGES = {"hyperwarm.caches": ("CachedModelProps", "HyperPodAutoScaling"),
            "hyperwarm.serving": ("ContainerImage", "ContainerImageConfig")}
"""The old names a package had (``hyperwarm`` itself had them all)."""
REMOVED_IN = "0.3.0"


def with_renamed(module: str, getattr_: Callable[[str], Any]) -> Callable[[str], Any]:
    """``module``'s ``__getattr__``: an old name of :data:`RENAMED` warns and gives its new name's object; any other
    name goes to ``getattr_`` (the lazy loader's, or a module's own lookup)."""
    def __getattr__(name: str) -> Any:  # noqa: N807 - a module's __getattr__
        new = RENAMED.get(name) if name in PACKAGES.get(module, RENAMED) else None
        if new is None:
            return getattr_(name)
        warnings.warn(f"{module}.{name} is deprecated: use {module}.{new} (the old name goes in hyperwarm "
                      f"{REMOVED_IN})", DeprecationWarning, stacklevel=2)
        return getattr_(new)
    return __getattr__

