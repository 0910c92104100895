"""The base every configuration model shares: strict, closed and immutable."""

from __future__ import annotations

from typing import Iterable

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Unknown keys and type coercions are errors; parsed configuration never changes."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def repeated(names: Iterable[str]) -> list[str]:
    """Names that occur more than once, sorted: for "must be unique" rules."""
    names = list(names)
    return sorted({n for n in names if names.count(n) > 1})
