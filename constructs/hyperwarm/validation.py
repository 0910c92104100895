"""Rules shared by the constructs and the apps that configure them; imports no constructs."""

from __future__ import annotations

from typing import Iterable

SUPPORTED_KUBERNETES_VERSIONS = ("1.30", "1.31", "1.32", "1.33", "1.34", "1.35")
"""EKS versions the HyperPod constructs are tested with (one kubectl layer per version, pyproject.toml)."""


def repeated(names: Iterable[str]) -> list[str]:
    """Names that occur more than once, sorted: for "must be unique" rules."""
    names = list(names)
    return sorted({n for n in names if names.count(n) > 1})
