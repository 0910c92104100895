"""How a value crosses an API boundary of the in-memory fakes (model_world.py, operator_model.py), and the
counter their numbering uses.

A request reaches AWS or the API server as JSON, and every answer is a new object the caller owns.
:func:`sent` gives what that JSON round trip gives: it rejects what json rejects and turns tuples into lists.
:func:`fresh` copies a value that already went through it (or is built of dicts, lists and JSON
scalars only) at a fraction of JSON's cost: marshal's format 2 records no references, so the copy
shares no dict or list with the original, nor two places of the copy one object.
"""

from __future__ import annotations

import json
import marshal
from typing import Any


def sent(value: Any) -> Any:
    """``value`` as the other side of the wire reads it: ``json.loads(json.dumps(value))``. A value made of dicts
    with string keys, lists, strings, numbers, booleans and None only comes back as a copy (the round trip's
    result, without the text); anything else (a tuple, a key json turns into a string, a subclass, a cycle,
    what json rejects) takes the round trip itself."""
    try:
        return _plain(value)
    except (_NotPlain, RecursionError):
        return json.loads(json.dumps(value))


def fresh(value: Any) -> Any:
    """An independent copy of a JSON-shaped ``value`` (what :func:`sent` returned, or the fake built)."""
    return thaw(freeze(value))


def freeze(value: Any) -> bytes:
    """A JSON-shaped ``value`` kept to be read many times (:func:`thaw` gives each read its copy)."""
    return marshal.dumps(value, 2)


def thaw(kept: bytes) -> Any:
    """A fresh copy of what :func:`freeze` kept."""
    return marshal.loads(kept)


class _NotPlain(Exception):
    """The value holds something JSON's round trip would change or reject."""


def _plain(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        copy = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            copy[key] = _plain(item)
        return copy
    if kind is list:
        return [_plain(item) for item in value]
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    raise _NotPlain


class Count:
    """1, 2, 3, ... as ``itertools.count(1)`` gives them, in an object that pickles on every Python the project
    supports (itertools objects warn when pickled from 3.12 on, and cannot be from 3.14): the fault sweep and
    the warm rollout tests start cases from pickled copies of a run."""

    def __init__(self) -> None:
        self.last = 0

    def __iter__(self) -> Count:
        return self

    def __next__(self) -> int:
        self.last += 1
        return self.last
