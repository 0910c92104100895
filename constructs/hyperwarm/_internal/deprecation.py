"""Names renamed in 0.2.0, kept for one release: reading an old one warns (``DeprecationWarning``) and gives the new.

The packages load their names lazily (lazy_loader reads ``__init__.pyi``). Their stubs import each old name from a
``_renamed`` module whose own stub declares it a deprecated subclass of the new class (PEP 702: type checkers and
editors flag its use); at run time :func:`attach_renamed` answers an old name with the new class and a warning, and
leaves the old names out of ``__all__`` and ``dir()``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import lazy_loader

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



def attach_renamed(module: str, file: str) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """A package's ``__getattr__``, ``__dir__`` and ``__all__`` from its stub (lazy_loader), the old names of
    :data:`RENAMED` answered by :func:`with_renamed` and left out of the other two."""
    lazy_getattr, _, names = lazy_loader.attach_stub(module, file)
    public = [name for name in names if name not in RENAMED]
    return with_renamed(module, lazy_getattr), lambda: list(public), public
