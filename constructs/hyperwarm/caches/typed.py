"""Bind an object as the CRD spells it (JSON field names and values) to the cdk8s types generated from the CRD.

Every field must exist in the generated struct and every enum value in its enum: a name or value the operator's
CRD does not know fails here, at synth, naming the field path, instead of reaching the cluster where an operator
drops unknown fields without a word. The generated classes (``hyperwarm.caches.k8s``, ``make crds``) then render
the object (cdk8s).
"""

from __future__ import annotations

import enum
import re
import typing
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, get_args, get_origin


@cache
def _json_names(struct: type) -> dict[str, str]:
    """JSON field name -> Python keyword of a generated struct (jsii's ``name_mapping``)."""
    mapping: dict[str, str] = vars(struct)["__jsii_name_mapping__"]
    return {json_name: py_name for py_name, json_name in mapping.items()}


def _field(names: Mapping[str, str], key: str) -> str | None:
    """The generated struct's JSON name for the CRD's ``key``: cdk8s import re-cases a run of capitals
    (``commitSHA`` is ``commitSha`` in the struct, and rendered as ``commitSHA`` again), so case is not compared."""
    if key in names:
        return key
    return next((name for name in names if name.lower() == key.lower()), None)


@cache
def _hints(struct: type) -> dict[str, Any]:
    return {name: typing.get_type_hints(getattr(struct, name).fget)["return"] for name in _json_names(struct).values()}


def _choices(hint: Any) -> list[Any]:
    """The alternatives of ``hint`` without None (``Optional``/``Union``)."""
    if get_origin(hint) is typing.Union:
        return [a for a in get_args(hint) if a is not type(None)]
    return [hint]


def _member_name(value: str) -> str:
    """cdk8s import names a member after its value: camelCase words split by ``_``, upper-cased, an underscore spelt
    ``_UNDERSCORE_`` (``kubernetesVolume`` -> ``KUBERNETES_VOLUME``)."""
    return "_UNDERSCORE_".join(re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", part).upper() for part in value.split("_"))


def _member_value(name: str) -> str:
    """The value a member stands for, as the CRD spells it (for the message: the first letter's case is lost)."""
    return "_".join(re.sub(r"_([a-z0-9])", lambda m: m[1].upper(), part.lower())
                    for part in name.split("_UNDERSCORE_"))


def _enum_member(cls: type[enum.Enum], value: Any, path: str) -> enum.Enum:
    name = _member_name(str(value))
    if name not in cls.__members__:
        allowed = ", ".join(_member_value(m) for m in cls.__members__)
        raise ValueError(f"{path} = {value!r} -- not in the operator's CRD; allowed: {allowed}")
    return cls[name]


def bind(hint: Any, value: Any, path: str) -> Any:
    """``value`` (JSON-shaped) as the generated type ``hint`` expects it; raises naming ``path`` if the CRD has no
    such field or value."""
    choices = _choices(hint)
    struct = next((c for c in choices if isinstance(c, type) and hasattr(c, "__jsii_name_mapping__")), None)
    if struct is not None and isinstance(value, Mapping):
        names = _json_names(struct)
        fields = {k: _field(names, k) for k in value}
        unknown = sorted(k for k, f in fields.items() if f is None)
        if unknown:
            raise ValueError(f"{path}: {', '.join(unknown)} -- not a field of the operator's CRD "
                             f"({struct.__name__}); allowed: {', '.join(sorted(names))}")
        hints = _hints(struct)
        return struct(**{names[f]: bind(hints[names[f]], value[k], f"{path}.{k}")
                         for k, f in fields.items() if f is not None})
    for choice in choices:
        if isinstance(choice, type) and issubclass(choice, enum.Enum):
            return _enum_member(choice, value, path)
        if isinstance(choice, type) and hasattr(choice, "from_string") and hasattr(choice, "from_number"):
            return choice.from_string(value) if isinstance(value, str) else choice.from_number(value)
    origin = get_origin(choices[0])
    if origin is not None and issubclass(origin, Mapping):
        _, item = get_args(choices[0])
        return {k: bind(item, v, f"{path}.{k}") for k, v in value.items()}
    if origin is not None and issubclass(origin, Sequence) and not isinstance(value, str):
        (item,) = get_args(choices[0])
        return [bind(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    return value
