"""What a refreshed prefix admits, as props declare it (one definition: the hook's :class:`RefreshedPrefix` and
cdk.json's refresh entries). Light on purpose, like :mod:`.timeouts`: parsing the app's configuration imports it."""

from __future__ import annotations

from typing import Annotated

from annotated_types import Ge

from hyperwarm._internal.constraints import Rule
from hyperwarm.functions.cache_refresh import contract


def _pattern_problem(value: object) -> str | None:
    problems = contract.admission_problems(contract.Admission(versions=value))  # type: ignore[arg-type]
    return problems[0].rule if problems else None


VersionPattern = Annotated[str, Rule(_pattern_problem)]
"""A regular expression every new version folder name of the prefix must match whole, e.g. ``v\\d+``."""
MaxStep = Annotated[int, Ge(1)]
"""How far a numeric version may move past the one that serves, in the first part that differs: 1 or more."""
