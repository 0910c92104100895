"""cdk.json models derived from the library's props: the library is the one definition of each field, default and range.

:func:`config_model` turns a props dataclass of :mod:`hyperwarm.caches.props` into a strict pydantic model of its
cdk.json form; ``to_props()`` then builds the library's props, whose constructor runs the rules across fields, so
cdk.json and the library accept and reject the same values. The cdk.json form spells a ``Duration`` field ``<name>_s``
(whole seconds) and a ``Size`` field ``<name>_gb`` (GB): the units the configuration has always used.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, get_args, get_origin

import annotated_types
from hyperwarm.caches.schema import (
    Gigabytes,
    Matches,
    PropsError,
    Rule,
    Seconds,
    field_hint,
)
from pydantic import (
    AfterValidator,
    Field,
    PrivateAttr,
    ValidationError,
    create_model,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from .strict import StrictModel, by_rule, described

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


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return ...


def _unit(cls_name: str, name: str, metadata: tuple[Any, ...], base: Any) -> tuple[str, Any, Convert, Convert]:
    """(cdk.json key, annotation, cdk.json value -> props value, default -> cdk.json value) of a Duration or Size."""
    import aws_cdk as cdk
    from hyperwarm.caches.schema import gigabytes, in_gigabytes

    if base is cdk.Duration:
        (seconds,) = [m for m in metadata if isinstance(m, Seconds)]
        return (f"{name}_s", typing.Annotated[int, annotated_types.Interval(ge=seconds.ge, le=seconds.le)],
                cdk.Duration.seconds, lambda d: d.to_seconds())
    if base is cdk.Size:
        (gb,) = [m for m in metadata if isinstance(m, Gigabytes)]
        return (f"{name}_gb", typing.Annotated[float, annotated_types.Interval(gt=gb.gt, le=gb.le)],
                gigabytes, in_gigabytes)
    raise TypeError(f"{cls_name}.{name}: no cdk.json form for {base!r}")


def _unless_none(convert: Convert) -> Convert:
    return lambda value: None if value is None else convert(value)


def _is_unit(base: Any) -> bool:
    return getattr(base, "__module__", "").startswith("aws_cdk") and base.__name__ in ("Duration", "Size")


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
        name, default = item.name, _default(item)
        if overrides and name in overrides:
            annotation, default, convert = overrides[name]
            fields[name] = (annotation, default)
            converters[name] = (name, convert)
            continue
        base, metadata = _split(hints[name])
        inner, optional = _optional(base)
        if _is_unit(inner):
            key, annotation, convert, to_json = _unit(cls.__name__, name, metadata, inner)
            fields[key] = (annotation | None if optional else annotation,
                           to_json(default) if default not in (..., None) else default)
            converters[name] = (key, _unless_none(convert))
            continue
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
    return hint


def register(cls: type, model: type[LibraryModel]) -> type[LibraryModel]:
    """Use ``model`` wherever ``cls`` is nested in another derived model."""
    _DERIVED[cls] = model
    return model


def library_field(cls: type, name: str, **extra: Any) -> Any:
    """A pydantic field with the default and constraints of field ``name`` of ``cls`` (for a hand-written model)."""
    (item,) = [f for f in dataclasses.fields(cls) if f.name == name]
    _, metadata = _split(field_hint(cls, name))
    kwargs: dict[str, Any] = dict(extra)
    for rule in metadata:
        if isinstance(rule, Matches):
            kwargs["pattern"] = described(rule.pattern, rule.words)
        elif isinstance(rule, annotated_types.Interval):
            kwargs.update({k: v for k, v in (("ge", rule.ge), ("gt", rule.gt), ("le", rule.le), ("lt", rule.lt))
                           if v is not None})
    default = _default(item)
    return Field(default=default, **kwargs) if default is not ... else Field(**kwargs)
