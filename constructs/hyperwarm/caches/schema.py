"""The constraints of the caches' props, declared once on the dataclass fields and checked from there.

Each field's ``Annotated[...]`` metadata says what it allows: ``annotated_types`` bounds
(``Interval``, ``MaxLen``) for numbers and strings, and three markers of this module for what
``annotated_types`` cannot say: :class:`Matches` (a regular expression, with the words an error
message shows), :class:`Seconds` (the range of an ``aws_cdk.Duration``) and :class:`Gigabytes`
(the range of an ``aws_cdk.Size``). :func:`field_problems` checks a props object against them
(its constructor calls it); an app that parses its own configuration into the props derives its
checks from the same metadata (this project's ``stacks/config/library.py``).
"""

from __future__ import annotations

import dataclasses
import re
import sys
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

import annotated_types
import aws_cdk as cdk

from hyperwarm._internal.tokens import resolved

_BYTES_PER_GB = 1_000_000_000


@dataclass(frozen=True)
class Matches:
    """A string field's regular expression, and what it allows in words with an example."""

    pattern: str
    words: str


@dataclass(frozen=True)
class Rule:
    """A field's own rule beyond its range or pattern: what is wrong with a value, in words, or None."""

    problem: Callable[[Any], str | None]


@dataclass(frozen=True)
class Seconds:
    """The range of a ``Duration`` field, in whole seconds (what the operator's CRD fields take)."""

    ge: int
    le: int


@dataclass(frozen=True)
class Gigabytes:
    """The range of a ``Size`` field, in GB (10^9 bytes, the unit of instance NVMe sizes): above ``gt``, at most ``le``."""

    gt: float
    le: float


def gigabytes(amount: float) -> cdk.Size:
    """A ``Size`` of ``amount`` GB (10^9 bytes): model and image sizes are published in GB."""
    return cdk.Size.bytes(amount * _BYTES_PER_GB)


def in_gigabytes(size: cdk.Size) -> float:
    """``size`` in GB (10^9 bytes), e.g. for the NVMe capacity guard."""
    return round(size.to_bytes(rounding=cdk.SizeRoundingBehavior.NONE) / _BYTES_PER_GB, 9)


def field_hint(cls: type, name: str) -> Any:
    """The annotation of field ``name`` of ``cls``, evaluated alone: a props class may name some types (a cluster,
    a bucket) only for type checkers, which the checks never need."""
    annotation = cls.__annotations__[name]
    if isinstance(annotation, str):
        annotation = eval(annotation, vars(sys.modules[cls.__module__]))
    return annotation


def field_metadata(cls: type, name: str) -> tuple[Any, ...]:
    """The ``Annotated`` metadata of field ``name`` of the props class ``cls`` (empty without)."""
    hint = field_hint(cls, name)
    return tuple(hint.__metadata__) if get_origin(hint) is typing.Annotated else ()


def _allowed_literal(hint: Any) -> tuple[Any, ...]:
    base = get_args(hint)[0] if get_origin(hint) is typing.Annotated else hint
    for arg in (base, *get_args(base)):
        if get_origin(arg) is Literal:
            return get_args(arg)
    return ()


def _constraint_problem(value: Any, rule: Any) -> str | None:
    if isinstance(rule, Matches):
        return None if re.match(rule.pattern, value) else f"allowed: {rule.words}"
    if isinstance(rule, Rule):
        return rule.problem(value)
    if isinstance(rule, Seconds):
        seconds = value.to_seconds()
        return None if rule.ge <= seconds <= rule.le else f"allowed: {rule.ge}..{rule.le} seconds"
    if isinstance(rule, Gigabytes):
        return None if rule.gt < in_gigabytes(value) <= rule.le else f"allowed: above {rule.gt} GB, up to {rule.le} GB"
    if isinstance(rule, annotated_types.Interval):
        ok = ((rule.ge is None or value >= rule.ge) and (rule.gt is None or value > rule.gt)
              and (rule.le is None or value <= rule.le) and (rule.lt is None or value < rule.lt))
        low = f"{rule.ge}.." if rule.ge is not None else f"above {rule.gt}, up to "
        return None if ok else f"allowed: {low}{rule.le}"
    if isinstance(rule, annotated_types.MaxLen):
        return None if len(value) <= rule.max_length else f"allowed: at most {rule.max_length} characters"
    return None


def show(value: Any) -> str:
    """A field value in a message: seconds for a Duration, GB for a Size."""
    if isinstance(value, cdk.Duration):
        return f"{value.to_seconds()} s"
    if isinstance(value, cdk.Size):
        return f"{in_gigabytes(value):g} GB"
    return repr(value)


class PropsError(ValueError):
    """Invalid props: every problem (``field = value -- rule``) in one error."""

    def __init__(self, props: str, problems: list[str]) -> None:
        super().__init__(f"{props}: invalid props:\n  " + "\n  ".join(problems))
        self.problems = problems


def check(props: Any, rules: list[str]) -> None:
    """Raise every problem of ``props`` at once: its fields' constraints, then ``rules`` across fields."""
    problems = field_problems(props) + rules
    if problems:
        raise PropsError(type(props).__name__, problems)


def field_problems(props: Any, prefix: str = "") -> list[str]:
    """Each field of ``props`` (a props dataclass) outside what its metadata allows: ``field = value -- rule``.

    Nested props are checked by their own constructors; unresolved tokens are skipped.
    """
    problems = []
    for item in dataclasses.fields(props):
        value = getattr(props, item.name)
        if not isinstance(value, (str, int, float, cdk.Duration, cdk.Size)) or not resolved(value):
            continue  # nested props check themselves; tokens are known only at deploy
        hint = field_hint(type(props), item.name)
        allowed = _allowed_literal(hint)
        if allowed and value not in allowed:
            problems.append(f"{prefix}{item.name} = {value!r} -- allowed: {', '.join(map(str, allowed))}")
            continue
        for rule in field_metadata(type(props), item.name):
            problem = _constraint_problem(value, rule)
            if problem:
                problems.append(f"{prefix}{item.name} = {show(value)} -- {problem}")
    return problems
