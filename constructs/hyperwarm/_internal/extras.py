"""The error for a feature whose optional dependency is not installed: which extra installs it."""

from __future__ import annotations


def missing_extra(error: ModuleNotFoundError, extra: str, feature: str) -> ModuleNotFoundError:
    """``error`` (an import that failed) restated for users: ``feature`` needs hyperwarm's ``extra``."""
    return ModuleNotFoundError(f"{feature} needs the module {error.name!r}, which hyperwarm's {extra!r} extra "
                               f"installs: pip install 'hyperwarm[{extra}]'", name=error.name)
