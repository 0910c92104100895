"""The one way the app turns the library's props into cdk.json parsing: the props are the one definition of each
field, default and range (their ``Annotated`` metadata, :mod:`hyperwarm._internal.constraints`).

:func:`config_model` derives a strict model from a props dataclass (a cached model, its options and autoscaling, an
endpoint variant's routing, autoscaling and serverless spec); its ``props`` is the library's object, built by the
props' own constructor, whose :class:`~hyperwarm._internal.constraints.PropsError` problems are placed back at the
cdk.json field each is about; :func:`parsed_into_props` keeps that object as a field's value. A hand-written section
model (app-level settings, or a flattened form such as the guardrails) types a single field with the props' own
annotation or :func:`library_field`, as :func:`config_model` does for each field.

Why derived models rather than pydantic over the dataclasses alone: a props constructor that checks itself would
surface as one error for the whole object instead of ``environments.<env>.<path>: value -- rule`` for each problem;
strictness (unknown keys, no coercion) is the app's configuration policy, not the library's; and a cdk.json key is not
always the field's name. A ``Duration`` or ``Size`` field's unit marker
(:class:`~hyperwarm._internal.constraints.Measured`) states its unit and the suffix of its key, in one place: the
caches' times are ``<name>_s`` and sizes ``<name>_gb``, an endpoint's ``wait`` and ``memory_size`` (MiB) have none.
Its own pydantic schema parses the number, so cdk.json and the library accept and reject the same values.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, get_args, get_origin

import annotated_types
from pydantic import (
    AfterValidator,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationError,
    create_model,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from hyperwarm.constraints import (
    Matches,
    PropsError,
    Rule,
    constraints_of,
    measured_of,
)

from .strict import StrictModel, by_rule, described, field_default

Convert = Callable[[Any], Any]


def _split(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    if get_origin(hint) is typing.Annotated:
        return get_args(hint)[0], tuple(hint.__metadata__)
    return hint, ()


def _optional(hint: Any) -> tuple[Any, bool]:
    args = get_args(hint)
    if get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        return inner, True
    return hint, False


def _constraint(rule: Any) -> Any:
    if isinstance(rule, Matches):
        return Field(pattern=described(rule.pattern, rule.words))
    if isinstance(rule, Rule):
        return AfterValidator(by_rule(rule.problem))
    return rule  # annotated_types bounds: pydantic checks them itself


def config_type(hint: Any) -> Any:
    """A library type alias (``Annotated`` with its :class:`Rule` and :class:`Matches`) as a hand-written cdk.json
    model must declare it, so pydantic applies the library's own rules."""
    base, metadata = _split(hint)
    return typing.Annotated[(base, *(_constraint(m) for m in metadata))] if metadata else hint


def _same(value: Any) -> Any:
    return value


class LibraryModel(StrictModel):
    """A cdk.json model derived from a library props class; ``props`` is the library's object."""

    _props: Any = PrivateAttr(default=None)
    __props_class__: typing.ClassVar[type]
    __converters__: typing.ClassVar[dict[str, tuple[str, Convert]]]

    @model_validator(mode="after")
    def _build(self) -> LibraryModel:
        kwargs = {name: convert(getattr(self, key)) for name, (key, convert) in self.__converters__.items()}
        try:
            self._props = self.__props_class__(**kwargs)
        except PropsError as error:
            raise ValidationError.from_exception_data(type(self).__name__, [
                self._located(problem) for problem in error.problems]) from None
        return self

    def _located(self, problem: str) -> InitErrorDetails:
        """The library's ``field = value -- rule`` at the cdk.json field it is about, with the cdk.json value."""
        match = _PROBLEM.match(problem)
        if match is None:
            return _error((), self.model_dump(), problem)
        name, *rest = match["field"].split(".")
        loc = (self.__converters__.get(name, (name, None))[0], *rest)
        value: Any = self
        for part in loc:
            value = getattr(value, part, None)
        return _error(loc, value.model_dump() if isinstance(value, StrictModel) else value, match["rule"])

    @property
    def props(self) -> Any:
        """The library's props of this entry."""
        return self._props


_PROBLEM = re.compile(r"^(?P<field>[a-z_][a-z0-9_.]*) = .*? -- (?P<rule>.*)$", re.DOTALL)


def _error(loc: tuple[str, ...], value: Any, message: str) -> InitErrorDetails:
    # A template: braces in the message are literal.
    template = message.replace("{", "{{").replace("}", "}}")
    return InitErrorDetails(type=PydanticCustomError("value_error", template), loc=loc, input=value)


def _nested(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, tuple):
        return tuple(_nested(v) for v in value)
    return value.props if isinstance(value, LibraryModel) else value


def config_model(cls: type, *, overrides: dict[str, tuple[Any, Any, Convert]] | None = None) -> type[LibraryModel]:
    """The strict cdk.json model of the props dataclass ``cls``.

    ``overrides``: field -> (annotation, default, cdk.json value -> props value), for a field whose cdk.json form is
    the app's own (a trigger chosen by key, the serving block). Nested props dataclasses are derived too.
    """
    hints = typing.get_type_hints(cls, include_extras=True)
    fields: dict[str, Any] = {}
    converters: dict[str, tuple[str, Convert]] = {}
    for item in dataclasses.fields(cls):
        name, default = item.name, field_default(item)
        if overrides and name in overrides:
            annotation, default, convert = overrides[name]
            fields[name] = (annotation, default)
            converters[name] = (name, convert)
            continue
        measured = measured_of(cls, name)
        if measured is not None:  # a number in the marker's unit, parsed by its own schema into a Duration or Size
            key = name + measured.key_suffix
            if default not in (..., None):  # a Duration or Size: not a JSON value of the schema's default
                default = Field(default_factory=lambda given=default: given)
            fields[key] = (hints[name], default)
            converters[name] = (key, _same)
            continue
        base, metadata = _split(hints[name])
        inner, optional = _optional(base)
        annotation = _derived(inner)
        if optional:
            annotation = annotation | None
        constraints = [_constraint(m) for m in metadata]
        if constraints:
            annotation = typing.Annotated[annotation, *constraints]
        if dataclasses.is_dataclass(default):  # a nested props default: the derived model's own defaults
            default = Field(default_factory=_derived(type(default)))
        fields[name] = (annotation, default)
        converters[name] = (name, _nested)
    model = create_model(cls.__name__, __base__=LibraryModel, __doc__=cls.__doc__, **fields)
    model.__props_class__ = cls
    model.__converters__ = converters
    return model


_DERIVED: dict[type, type[LibraryModel]] = {}


def _derived(hint: Any) -> Any:
    """``hint`` with each props dataclass replaced by its derived cdk.json model (tuples of them too)."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if hint not in _DERIVED:
            _DERIVED[hint] = config_model(hint)
        return _DERIVED[hint]
    if get_origin(hint) is tuple:
        item, *_ = get_args(hint)
        return tuple[_derived(item), ...]  # type: ignore[misc]
    if get_origin(hint) is Literal:
        return hint
    if get_origin(hint) in (typing.Union, types.UnionType) and all(dataclasses.is_dataclass(a) for a in get_args(hint)):
        return _tagged_union(get_args(hint))
    return hint


def union_tag(arm: type) -> str:
    """The step pydantic puts into an error's location for the arm of a union it checked: never a cdk.json key
    (:func:`config_location` drops it)."""
    return f"<{arm.__name__}>"


def config_location(loc: typing.Iterable[Any]) -> list[Any]:
    """An error's location as cdk.json spells it: without the union arm pydantic chose."""
    return [p for p in loc if not (isinstance(p, str) and p.startswith("<") and p.endswith(">"))]


def _tagged_union(arms: tuple[type, ...]) -> Any:
    """A union of props dataclasses in cdk.json: each arm told apart by a required field no other arm has (the
    S3 source by ``bucket``, FSx by ``file_system_id``, ...), so an entry is checked against its own arm alone and a
    mistake is reported for that arm's fields, not for every arm's."""
    required = {arm: [f.name for f in dataclasses.fields(arm)
                      if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
                for arm in arms}
    tags = {}
    for arm in arms:
        others = {name for other in arms if other is not arm for name in required[other]}
        tags[arm] = next(name for name in required[arm] if name not in others)
    words = ", ".join(f"{tag} ({arm.__name__})" for arm, tag in tags.items())

    def tag_of(value: Any) -> str | None:
        keys = value if isinstance(value, dict) else getattr(type(value), "model_fields", {})  # cdk.json, or a model
        found = [arm for arm, tag in tags.items() if tag in keys]
        return union_tag(found[0]) if len(found) == 1 else None

    return typing.Annotated[typing.Union[tuple(  # noqa: UP007 (built from a tuple)
        typing.Annotated[_derived(arm), Tag(union_tag(arm))] for arm in arms)],
        Discriminator(tag_of, custom_error_type="source_kind",
                      custom_error_message=f"give exactly one of the keys {words}")]


def register(cls: type, model: type[LibraryModel]) -> type[LibraryModel]:
    """Use ``model`` wherever ``cls`` is nested in another derived model."""
    _DERIVED[cls] = model
    return model


_BOUNDS = {annotated_types.Ge: "ge", annotated_types.Gt: "gt", annotated_types.Le: "le", annotated_types.Lt: "lt",
           annotated_types.MinLen: "min_length", annotated_types.MaxLen: "max_length"}


def parsed_into_props(cls: type) -> Any:
    """The cdk.json type of a field that holds props ``cls``: its derived model, whose value the field keeps as the
    library's object (``routing: parsed_into_props(Routing) | None``)."""
    return typing.Annotated[_derived(cls), AfterValidator(lambda model: model.props)]


def library_field(cls: type, name: str, **extra: Any) -> Any:
    """A pydantic field with the default and constraints of field ``name`` of ``cls`` (for a hand-written model)."""
    (item,) = [f for f in dataclasses.fields(cls) if f.name == name]
    kwargs: dict[str, Any] = dict(extra)
    constraint = constraints_of(cls).get(name)
    for bound in constraint.constraints if constraint else ():
        kwargs[_BOUNDS[type(bound)]] = getattr(bound, _BOUNDS[type(bound)])
    for rule in constraint.rules if constraint else ():
        if isinstance(rule, Matches):
            kwargs["pattern"] = described(rule.pattern, rule.words)
    default = field_default(item)
    return Field(default=default, **kwargs) if default is not ... else Field(**kwargs)
