"""A module imported on first use, for annotations a pure module writes for type checkers only."""

from __future__ import annotations

import importlib
from typing import Any


class on_first_use:  # noqa: N801 - stands in for a module name
    """``name``'s module, imported when an attribute is first read (``typing.get_type_hints`` resolving
    ``cdk.Size``), so the module that holds it loads without it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)
