"""Field constraints of the props dataclasses, read from their ``typing.Annotated`` metadata.

The props are the one definition of every field, default and range. A number field states its range
with ``annotated_types`` (``Annotated[int, Interval(ge=1, le=200)]``); a ``Duration`` or ``Size`` field
states it in the number cdk.json gives, seconds or MiB (``Annotated[Duration, seconds(Interval(ge=60,
le=3600))]``). The constructs check values with :func:`field_problems`; the app parses cdk.json with the
same metadata: pydantic honours ``annotated_types``, and :class:`Measured` tells it how a number becomes
a ``Duration`` or ``Size``. No aws-cdk and no pydantic is imported here.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Union

import annotated_types as at

from hyperwarm._internal.tokens import unresolved


@dataclass(frozen=True)
class Measured:
    """A ``Duration`` or ``Size`` field's constraints, on the field in ``unit`` (``seconds`` or ``MiB``)."""

    unit: str
    constraints: tuple[at.BaseMetadata | at.GroupedMetadata, ...]
    fractional: bool = False
    """Whether a fraction is allowed (an alarm threshold of 0.75 s); SageMaker's ``*InSeconds`` are integers."""

    def number(self, value: Any) -> float:
        """The value in :attr:`unit`."""
        if self.unit == "seconds":
            return float(value.to_seconds(integral=False))
        return float(value.to_mebibytes(rounding=_size_rounding()))

    def make(self, number: float) -> Any:
        """A ``Duration`` or ``Size`` of ``number`` :attr:`unit` (aws-cdk loads here, when a value is parsed)."""
        import aws_cdk as cdk

        if self.unit != "seconds":
            return cdk.Size.mebibytes(number)
        return cdk.Duration.seconds(number) if float(number).is_integer() else cdk.Duration.millis(round(number * 1000))

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> dict[str, Any]:
        """For pydantic (duck-typed, so the library needs no pydantic): an integer in :attr:`unit` with
        the constraints, then made a ``Duration`` or ``Size``; errors name the number as given."""
        kind = float if self.fractional else int
        number = handler.generate_schema(typing.Annotated[(kind, *self.constraints)] if self.constraints else kind)
        return {"type": "function-after", "function": {"type": "no-info", "function": self.make}, "schema": number,
                "serialization": {"type": "function-plain", "function": self.number}}


def seconds(*constraints: at.BaseMetadata | at.GroupedMetadata, fractional: bool = False) -> Measured:
    """A ``Duration`` field's range in seconds: whole ones, as SageMaker's ``*InSeconds`` fields take them,
    unless ``fractional``."""
    return Measured("seconds", constraints, fractional)


def mebibytes(*constraints: at.BaseMetadata | at.GroupedMetadata) -> Measured:
    """A ``Size`` field's range in MiB, as SageMaker's ``*InMB`` fields take it."""
    return Measured("MiB", constraints)


def _size_rounding() -> Any:
    import aws_cdk as cdk

    return cdk.SizeRoundingBehavior.NONE


@dataclass(frozen=True)
class Constraint:
    """One constrained field of a props class: its constraints, and the unit of a ``Duration``/``Size``."""

    field: str
    constraints: tuple[at.BaseMetadata, ...]
    unit: str | None = None

    def allowed(self) -> str:
        """What the field allows, in words: ``1..200``, ``a multiple of 1024``, ``60..3600 seconds``."""
        words = ", ".join(_words(c) for c in _merged(self.constraints))
        return f"{words} {self.unit}" if self.unit else words

    def problem(self, value: Any) -> str | None:
        """``field = value -- allowed: ...`` when ``value`` breaks a constraint, else None (tokens pass)."""
        if value is None or (value.is_unresolved() if self.unit else _scalar(value) and unresolved(value)):
            return None
        number = _measured_number(self.unit, value)
        shown = f"{number:g} {self.unit}" if self.unit else repr(value)
        if all(_holds(c, number) for c in self.constraints):
            return None
        return f"{self.field} = {shown} -- allowed: {self.allowed()}"


def constraints_of(cls: type) -> dict[str, Constraint]:
    """Every constrained field of the props dataclass ``cls``, read from its ``Annotated`` metadata."""
    found: dict[str, Constraint] = {}
    for name, hint in _hints(cls).items():
        metadata = _metadata(hint)
        measured = [m for m in metadata if isinstance(m, Measured)]
        own = measured[0].constraints if measured else tuple(
            m for m in metadata if isinstance(m, (at.BaseMetadata, at.GroupedMetadata)))
        if own:
            found[name] = Constraint(name, _flat(own), measured[0].unit if measured else None)
    return found


def field_problems(props: Any, prefix: str = "", *, exclude: tuple[str, ...] = ()) -> list[str]:
    """``field = value -- allowed: ...`` for each field of the dataclass instance ``props`` (and of the
    dataclasses it holds) that breaks its ``Annotated`` constraints; unresolved tokens are skipped.
    ``exclude``: dotted paths of fields whose own rule reports their ranges (``"guardrails.traffic.percent"``)."""
    problems: list[str] = []
    rules = constraints_of(type(props))
    for item in dataclasses.fields(props):
        if prefix + item.name in exclude:
            continue
        value = getattr(props, item.name)
        rule = rules.get(item.name)
        if rule is not None and (problem := rule.problem(value)):
            problems.append(prefix + problem)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            problems += field_problems(value, f"{prefix}{item.name}.", exclude=exclude)
    return problems


def _hints(cls: type) -> dict[str, Any]:
    """The fields' annotations, resolved one by one: a field typed by an interface imported only for type
    checkers (an ``IHyperPodCluster``, so that props load without the constructs) has no constraints and is
    left out; a constraint (``Annotated``) that cannot be resolved is an error."""
    module = vars(sys.modules[cls.__module__])
    hints: dict[str, Any] = {}
    for owner in reversed(cls.__mro__):
        for name, annotation in getattr(owner, "__annotations__", {}).items():
            try:
                hints[name] = typing.get_type_hints(
                    type("_Field", (), {"__annotations__": {name: annotation}}), globalns=module,
                    include_extras=True)[name]
            except NameError:
                if "Annotated" in str(annotation):
                    raise
                hints.pop(name, None)
    return hints


def _metadata(hint: Any) -> tuple[Any, ...]:
    """The ``Annotated`` metadata of ``hint``, also inside ``X | None``."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        return tuple(m for arg in typing.get_args(hint) if arg is not type(None) for m in _metadata(arg))
    if typing.get_origin(hint) is typing.Annotated:
        return tuple(hint.__metadata__)
    return ()


def _flat(constraints: tuple[Any, ...]) -> tuple[at.BaseMetadata, ...]:
    """``Interval(ge=1, le=200)`` as ``Ge(1), Le(200)``: what a GroupedMetadata stands for."""
    flat: list[at.BaseMetadata] = []
    for item in constraints:
        flat += [c for c in item if isinstance(c, at.BaseMetadata)] if isinstance(item, at.GroupedMetadata) else [item]
    return tuple(flat)


def _scalar(value: Any) -> bool:
    """A number or string, which may be a token (a list is checked by its length, never a token itself)."""
    return isinstance(value, (int, float, str))


def _measured_number(unit: str | None, value: Any) -> Any:
    if unit is None:
        return value
    return Measured(unit, ()).number(value)


_CHECKS: dict[type, Callable[[Any, Any], bool]] = {
    at.Ge: lambda c, v: v >= c.ge, at.Gt: lambda c, v: v > c.gt, at.Le: lambda c, v: v <= c.le,
    at.Lt: lambda c, v: v < c.lt, at.MultipleOf: lambda c, v: v % c.multiple_of == 0,
    at.MinLen: lambda c, v: len(v) >= c.min_length, at.MaxLen: lambda c, v: len(v) <= c.max_length,
}


def _holds(constraint: at.BaseMetadata, value: Any) -> bool:
    try:
        return _CHECKS[type(constraint)](constraint, value)
    except TypeError:  # not a number (or not sized): never within a range
        return False


def _merged(constraints: tuple[at.BaseMetadata, ...]) -> Iterator[Any]:
    """``Ge`` and ``Le`` as one ``low..high``; the rest as they are."""
    ge = next((c.ge for c in constraints if isinstance(c, at.Ge)), None)
    le = next((c.le for c in constraints if isinstance(c, at.Le)), None)
    if ge is not None and le is not None:
        yield f"{ge}..{le}"
    for c in constraints:
        if not (ge is not None and le is not None and isinstance(c, (at.Ge, at.Le))):
            yield c


def _words(c: Any) -> str:
    if isinstance(c, str):
        return c
    words = {at.Ge: lambda: f">= {c.ge}", at.Gt: lambda: f"> {c.gt}", at.Le: lambda: f"<= {c.le}",
             at.Lt: lambda: f"< {c.lt}", at.MultipleOf: lambda: f"a multiple of {c.multiple_of}",
             at.MinLen: lambda: f"at least {c.min_length} item(s)", at.MaxLen: lambda: f"at most {c.max_length} item(s)"}
    return words[type(c)]()
