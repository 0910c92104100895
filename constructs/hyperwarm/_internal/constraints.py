"""Field constraints of the props dataclasses, read from their ``typing.Annotated`` metadata: the one
vocabulary of every props class of the library, and its one checker.

The props are the one definition of every field, default and range. A number field states its range
with ``annotated_types`` (``Annotated[int, Interval(ge=1, le=200)]``); a ``Duration`` or ``Size`` field
states it in the number a configuration gives, seconds, MiB or GB (``Annotated[Duration, seconds(Interval(ge=60,
le=3600))]``); a string states its pattern with :class:`Matches` (the words an error shows); a ``Literal``
states its choices; :class:`Rule` is a field's own check beyond these. The constructs check values with
:func:`field_problems` (or :func:`check`, which raises :class:`PropsError`); the app parses cdk.json with the
same metadata: pydantic honours ``annotated_types``, and :class:`Measured` tells it how a number becomes a
``Duration`` or ``Size``. No aws-cdk and no pydantic is imported here.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import sys
import types
import typing
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, Union

import annotated_types as at

from hyperwarm._internal.tokens import unresolved

T = TypeVar("T")
R = TypeVar("R")

_BYTES_PER_GB = 1_000_000_000
WRONG_TYPE = "wrong type; give"
"""How a value of the wrong type is reported (``size = 16 -- wrong type; give a cdk.Size, ...``)."""


@dataclass(frozen=True)
class Measured:
    """A ``Duration`` or ``Size`` field's constraints, on the field in ``unit`` (``seconds``, ``MiB`` or ``GB``)."""

    unit: str
    constraints: tuple[at.BaseMetadata | at.GroupedMetadata, ...]
    fractional: bool = False
    """Whether a fraction is allowed (an alarm threshold of 0.75 s); SageMaker's ``*InSeconds`` are integers."""
    key_suffix: str = ""
    """What a configuration that gives the bare number appends to the field's name (cdk.json's ``size_gb``
    for a cached model's ``size``): empty where the name alone is the key (an endpoint's ``wait``)."""

    def number(self, value: Any) -> float:
        """The value in :attr:`unit`."""
        if self.unit == "seconds":
            return in_seconds(value)
        if self.unit == "GB":
            return in_gigabytes(value)
        return measure(value, "MiB", lambda: float(value.to_mebibytes(rounding=_size_rounding())))

    def make(self, number: float) -> Any:
        """A ``Duration`` or ``Size`` of ``number`` :attr:`unit` (aws-cdk loads here, when a value is parsed)."""
        import aws_cdk as cdk

        if self.unit == "GB":
            return gigabytes(number)
        if self.unit != "seconds":
            return known(cdk.Size.mebibytes(number), MiB=float(number))
        if float(number).is_integer():
            return known(cdk.Duration.seconds(number), seconds=float(number))
        return cdk.Duration.millis(round(number * 1000))

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> dict[str, Any]:
        """For pydantic (duck-typed, so the library needs no pydantic): an integer in :attr:`unit` with
        the constraints, then made a ``Duration`` or ``Size``; errors name the number as given."""
        kind = float if self.fractional else int
        number = handler.generate_schema(typing.Annotated[(kind, *self.constraints)] if self.constraints else kind)
        return {"type": "function-after", "function": {"type": "no-info", "function": self.make}, "schema": number,
                "serialization": {"type": "function-plain", "function": self.number}}


def seconds(*constraints: at.BaseMetadata | at.GroupedMetadata, fractional: bool = False,
            key_suffix: str = "") -> Measured:
    """A ``Duration`` field's range in seconds: whole ones, as SageMaker's ``*InSeconds`` fields and the
    operator's CRD take them, unless ``fractional``."""
    return Measured("seconds", constraints, fractional, key_suffix)


def mebibytes(*constraints: at.BaseMetadata | at.GroupedMetadata) -> Measured:
    """A ``Size`` field's range in MiB, as SageMaker's ``*InMB`` fields take it."""
    return Measured("MiB", constraints)


def size_in_gb(*constraints: at.BaseMetadata | at.GroupedMetadata, key_suffix: str = "") -> Measured:
    """A ``Size`` field's range in GB (10^9 bytes, the unit of instance NVMe sizes), fractions allowed."""
    return Measured("GB", constraints, fractional=True, key_suffix=key_suffix)


def gigabytes(amount: float) -> Any:
    """A ``Size`` of ``amount`` GB (10^9 bytes): model and image sizes are published in GB. A negative or
    non-number amount is refused here, in words, rather than by aws-cdk-lib's ``Size`` deep in jsii."""
    import aws_cdk as cdk

    if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
        raise ValueError(f"gigabytes({amount!r}) -- a size is a number of GB, 0 or more, e.g. gigabytes(16)")
    return known(cdk.Size.bytes(amount * _BYTES_PER_GB), bytes=float(amount * _BYTES_PER_GB))


def in_gigabytes(size: Any) -> float:
    """``size`` (a ``Size``) in GB (10^9 bytes), e.g. for the NVMe capacity guard."""
    return round(measure(size, "bytes", lambda: float(size.to_bytes(rounding=_size_rounding()))) / _BYTES_PER_GB, 9)


def in_seconds(duration: Any) -> float:
    """``duration`` (a ``Duration``) in seconds, fractions kept."""
    return measure(duration, "seconds", lambda: float(duration.to_seconds(integral=False)))


def is_token(measured: Any) -> bool:
    """Whether a ``Duration`` or ``Size`` is unresolved (a deploy-time value)."""
    return bool(measure(measured, "unresolved", measured.is_unresolved))


def known(measured: T, **values: float) -> T:
    """``measured`` (a ``Duration`` or ``Size`` just made from a number), with what :func:`measure` will be asked
    answered already: it is not a token, and has ``values`` (``seconds``, ``bytes`` or ``MiB``)."""
    _measures[measured] = {"unresolved": False, **values}
    return measured


def measure(measured: Any, unit: str, read: Callable[[], R]) -> R:
    """``read()``, once per ``Duration`` or ``Size`` object and ``unit``: both are immutable, and each read is a
    round trip into jsii (props checks read hundreds per synth; docs/performance.md)."""
    try:
        values = _measures.setdefault(measured, {})
    except TypeError:  # not weakly referable (a test's stand-in): read each time
        return read()
    if unit not in values:
        values[unit] = read()
    return typing.cast(R, values[unit])


_measures: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Matches:
    """A string field's regular expression, and what it allows in words with an example."""

    pattern: str
    words: str


@dataclass(frozen=True)
class Rule:
    """A field's own rule beyond its range, pattern or choices: what is wrong with a value, in words, or None."""

    problem: Callable[[Any], str | None]


class PropsError(ValueError):
    """Invalid props: every problem (``field = value -- rule``) in one error."""

    def __init__(self, props: str, problems: list[str]) -> None:
        super().__init__(f"{props}: invalid props:\n  " + "\n  ".join(problems))
        self.problems = problems


def check(props: Any, rules: list[str] | Callable[[], list[str]]) -> None:
    """Raise every problem of ``props`` at once: its fields' constraints, then ``rules`` across fields. A field of
    the wrong type (an ``int`` where a ``Size`` belongs) is reported alone: ``rules`` (a callable, so that it runs
    only then) would read it as its type and fail on it."""
    problems = field_problems(props)
    if not wrong_type(problems):
        problems += rules() if callable(rules) else rules
    if problems:
        raise PropsError(type(props).__name__, problems)


def wrong_type(problems: list[str]) -> bool:
    """Whether ``problems`` report a value of the wrong type (then the rules across fields are not run)."""
    return any(WRONG_TYPE in problem for problem in problems)


def _size_rounding() -> Any:
    import aws_cdk as cdk

    return cdk.SizeRoundingBehavior.NONE


@dataclass(frozen=True)
class Constraint:
    """One constrained field of a props class: its bounds (with the unit of a ``Duration``/``Size``), its
    choices (a ``Literal``), and its patterns and rules."""

    field: str
    constraints: tuple[at.BaseMetadata, ...]
    unit: str | None = None
    choices: tuple[Any, ...] = ()
    rules: tuple[Matches | Rule, ...] = ()
    kinds: tuple[type, ...] = ()
    """The types a value must have (an ``int`` where a ``Size`` belongs is named as such, not an AttributeError
    later); empty where the field's type cannot be checked at run time (an interface, a collection)."""

    def allowed(self) -> str:
        """What the field's bounds allow, in words: ``1..200``, ``a multiple of 1024``, ``60..3600 seconds``."""
        words = ", ".join(_words(c) for c in _merged(self.constraints))
        return f"{words} {self.unit}" if self.unit else words

    def problems(self, value: Any) -> list[str]:
        """``field = value -- allowed: ...`` for each constraint ``value`` breaks (tokens pass); a value of the
        wrong type is its one problem."""
        if value is None:
            return []
        if self.kinds and not _is_kind(value, self.kinds):
            return [f"{self.field} = {value!r} -- {_kind_words(self.kinds)}"]
        if is_token(value) if self.unit else _scalar(value) and unresolved(value):
            return []
        number = _measured_number(self.unit, value)
        shown = f"{number:g} {self.unit}" if self.unit else repr(value)
        if self.choices and value not in self.choices:
            return [f"{self.field} = {shown} -- allowed: {', '.join(map(str, self.choices))}"]
        found = [] if all(_holds(c, number) for c in self.constraints) else [f"allowed: {self.allowed()}"]
        for rule in self.rules:
            if isinstance(rule, Matches):
                found += [] if isinstance(value, str) and re.match(rule.pattern, value) else [f"allowed: {rule.words}"]
            elif (problem := rule.problem(value)) is not None:
                found.append(problem)
        return [f"{self.field} = {shown} -- {words}" for words in found]


@functools.cache
def constraints_of(cls: type) -> dict[str, Constraint]:
    """Every constrained field of the props dataclass ``cls``, read from its ``Annotated`` metadata (once per class:
    every props object checks itself; the answer is shared, so read it, do not change it)."""
    found: dict[str, Constraint] = {}
    for name, hint in _hints(cls).items():
        metadata = _metadata(hint)
        measured = [m for m in metadata if isinstance(m, Measured)]
        own = measured[0].constraints if measured else tuple(
            m for m in metadata if isinstance(m, (at.BaseMetadata, at.GroupedMetadata)))
        rules = tuple(m for m in metadata if isinstance(m, (Matches, Rule)))
        choices = _choices(hint)
        kinds = () if choices else _kinds(hint)
        if own or rules or choices or kinds:
            found[name] = Constraint(name, _flat(own), measured[0].unit if measured else None, choices, rules, kinds)
    return found


def measured_of(cls: type, name: str) -> Measured | None:
    """The unit marker of field ``name`` of ``cls`` (a ``Duration`` or ``Size``), or None."""
    hint = _hints(cls).get(name)
    return next((m for m in _metadata(hint) if isinstance(m, Measured)), None) if hint is not None else None


def field_problems(props: Any, prefix: str = "", *, exclude: tuple[str, ...] = ()) -> list[str]:
    """``field = value -- allowed: ...`` for each field of the dataclass instance ``props`` (and of the
    dataclasses it holds) that breaks its ``Annotated`` constraints; unresolved tokens are skipped.
    ``exclude``: dotted paths of fields whose own rule reports their ranges (``"guardrails.traffic.percent"``)."""
    problems: list[str] = []
    kind: type = type(props)
    rules = constraints_of(kind)
    for item in dataclasses.fields(props):
        if prefix + item.name in exclude:
            continue
        value = getattr(props, item.name)
        rule = rules.get(item.name)
        if rule is not None:
            problems += [prefix + problem for problem in rule.problems(value)]
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            problems += field_problems(value, f"{prefix}{item.name}.", exclude=exclude)
    return problems


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """The fields' annotations, resolved one by one: a field typed by an interface imported only for type
    checkers (an ``IHyperPodCluster``, so that props load without the constructs) has no constraints and is
    left out; a constraint (``Annotated``) that cannot be resolved is an error."""
    module = vars(sys.modules[cls.__module__])
    hints: dict[str, Any] = {}
    for owner in reversed(cls.__mro__):
        for name, annotation in getattr(owner, "__annotations__", {}).items():
            try:
                hints[name] = _hint(name, annotation, module)
            except NameError:
                if "Annotated" in str(annotation):
                    raise
                hints.pop(name, None)
    return hints


def _hint(name: str, annotation: Any, module: dict[str, Any]) -> Any:
    """One field's annotation, resolved. A module that loads without aws-cdk (an instance group's props) types a
    ``Size`` as ``cdk.Size`` for type checkers only: it resolves with aws-cdk, which the value itself has loaded."""
    def resolve(namespace: dict[str, Any]) -> Any:
        return typing.get_type_hints(type("_Field", (), {"__annotations__": {name: annotation}}), globalns=namespace,
                                     include_extras=True)[name]
    try:
        return resolve(module)
    except NameError as error:
        if error.name != "cdk" or "cdk" in module:
            raise
        import aws_cdk

        return resolve({**module, "cdk": aws_cdk})


def _metadata(hint: Any) -> tuple[Any, ...]:
    """The ``Annotated`` metadata of ``hint``, also inside ``X | None``."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        return tuple(m for arg in typing.get_args(hint) if arg is not type(None) for m in _metadata(arg))
    if typing.get_origin(hint) is typing.Annotated:
        return tuple(hint.__metadata__)
    return ()


def _kinds(hint: Any) -> tuple[type, ...]:
    """The types a value of ``hint`` may have, where every one is checkable at run time (a number, string, bool,
    ``Size``, ``Duration`` or props dataclass, also inside ``Annotated`` and ``X | None``); else ``()``."""
    if typing.get_origin(hint) is typing.Annotated:
        return _kinds(typing.get_args(hint)[0])
    if typing.get_origin(hint) in (Union, types.UnionType):
        parts = [_kinds(arg) for arg in typing.get_args(hint) if arg is not type(None)]
        return tuple(k for part in parts for k in part) if all(parts) else ()
    if hint in (int, float, str, bool) or (isinstance(hint, type) and dataclasses.is_dataclass(hint)):
        return (hint,)
    if isinstance(hint, type) and hint.__module__.startswith("aws_cdk") and hint.__name__ in ("Size", "Duration"):
        return (hint,)
    return ()


def _is_kind(value: Any, kinds: tuple[type, ...]) -> bool:
    """Whether ``value`` has one of ``kinds``: a bool is no number, an int is a float; a number token (a float)
    passes where an int belongs (its value is known at deploy)."""
    if isinstance(value, bool):
        return bool in kinds
    if isinstance(value, float) and int in kinds and unresolved(value):
        return True
    return isinstance(value, kinds) or (float in kinds and isinstance(value, int))


_KIND_HINTS = {
    "Size": "a cdk.Size, e.g. cdk.Size.gibibytes(16) or hyperwarm.caches.gigabytes(16) (GB, 10^9 bytes)",
    "Duration": "a cdk.Duration, e.g. cdk.Duration.seconds(300) or cdk.Duration.minutes(5)",
    "int": "an int, e.g. 2 (not a str, float or bool)", "float": "a number, e.g. 0.5 (not a str or bool)",
    "str": "a str", "bool": "True or False",
}


def _kind_words(kinds: tuple[type, ...]) -> str:
    """What a value of the wrong type should have been, in words: ``not a Size: give a cdk.Size, e.g. ...``."""
    wanted = " or ".join(_KIND_HINTS.get(k.__name__, f"a {k.__name__}") for k in kinds)
    return f"{WRONG_TYPE} {wanted}"


def _choices(hint: Any) -> tuple[Any, ...]:
    """The values of a ``Literal`` field (also inside ``Annotated`` and ``X | None``)."""
    if typing.get_origin(hint) is typing.Annotated:
        return _choices(typing.get_args(hint)[0])
    if typing.get_origin(hint) is Literal:
        return typing.get_args(hint)
    if typing.get_origin(hint) in (Union, types.UnionType):
        return tuple(c for arg in typing.get_args(hint) for c in _choices(arg))
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
    """``Ge`` and ``Le`` as one ``low..high``, ``Gt`` and ``Le`` as ``above low, up to high``; the rest as they are."""
    ge = next((c.ge for c in constraints if isinstance(c, at.Ge)), None)
    gt = next((c.gt for c in constraints if isinstance(c, at.Gt)), None)
    le = next((c.le for c in constraints if isinstance(c, at.Le)), None)
    pair: tuple[type, ...] = ()
    if le is not None and ge is not None:
        pair = (at.Ge, at.Le)
        yield f"{ge}..{le}"
    elif le is not None and gt is not None:
        pair = (at.Gt, at.Le)
        yield f"above {gt}, up to {le}"
    for c in constraints:
        if not isinstance(c, pair):
            yield c


def _words(c: Any) -> str:
    if isinstance(c, str):
        return c
    words = {at.Ge: lambda: f">= {c.ge}", at.Gt: lambda: f"> {c.gt}", at.Le: lambda: f"<= {c.le}",
             at.Lt: lambda: f"< {c.lt}", at.MultipleOf: lambda: f"a multiple of {c.multiple_of}",
             at.MinLen: lambda: f"at least {c.min_length} item(s)", at.MaxLen: lambda: f"at most {c.max_length} item(s)"}
    return words[type(c)]()
