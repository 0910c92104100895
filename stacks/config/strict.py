"""The base every configuration model shares: strict, closed and immutable."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from hyperwarm import caches
from hyperwarm.constraints import (
    repeated,  # re-exported: one rule for app and library
)

__all__ = ["BUCKET", "KEY_PREFIX", "REGION", "StrictModel", "by_rule", "described", "library_default", "pattern_in_words",
           "repeated"]


class StrictModel(BaseModel):
    """Unknown keys and type coercions are errors; parsed configuration never changes."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


_PATTERN_WORDS: dict[str, str] = {}


def described(pattern: str, words: str) -> str:
    """Register what a field's regular expression allows, in words with an example.

    Returns the pattern, for ``Field(pattern=described(...))``: errors then say the words, never the
    expression (``tests/test_config.py`` checks that every pattern in the configuration has words).
    """
    _PATTERN_WORDS[pattern] = words
    return pattern


def pattern_in_words(pattern: str) -> str:
    return f"must be {_PATTERN_WORDS[pattern]}" if pattern in _PATTERN_WORDS else f"must match {pattern}"


# The library's patterns (with their words), for the app's own fields of the same kinds.
REGION = described(caches.REGION.pattern, caches.REGION.words)
BUCKET = described(caches.BUCKET.pattern, caches.BUCKET.words)
KEY_PREFIX = described(caches.KEY_PREFIX.pattern, caches.KEY_PREFIX.words)
KMS_KEY = described(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]{1,128}$",
                    "a KMS key ARN, e.g. arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab")
PRINCIPAL = described(r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[A-Za-z0-9+=,.@_/-]{1,512}$",
                      "an IAM role or user ARN, e.g. arn:aws:iam::123456789012:role/platform-admins")


def by_rule(rule: Callable[[Any], str | list[str] | None]) -> Callable[[Any], Any]:
    """A field check from one of the library's rules (what is wrong, in words: one problem, a list, or none):
    each rule is written once, in the library, and cdk.json fails with its words
    (``field_validator("x")(by_rule(rule))``). An unset optional field (None) is not checked."""
    def check(value: Any) -> Any:
        problem = rule(value) if value is not None else None
        if problem:
            raise ValueError(problem if isinstance(problem, str) else "; ".join(problem))
        return value
    return check


def field_default(field: dataclasses.Field[Any]) -> Any:
    """A props field's default (its factory's value), or ``...`` when it has none (pydantic's "required")."""
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return ...


def library_default(props: type, name: str) -> Any:
    """The default of field ``name`` of the library's props dataclass ``props``: cdk.json's default is the
    library's, written once (``Field(default=library_default(DataCapture, "sampling_percentage"))``)."""
    default = field_default({f.name: f for f in dataclasses.fields(props)}[name])
    if default is ...:
        raise ValueError(f"{props.__name__}.{name} has no default")
    return default

