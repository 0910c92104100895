"""The props' constraint vocabulary, public: what an app reads to derive its own configuration from the library's
props, so each field's type, range and default is defined once, in the props (this repository's ``cdk.json`` models,
``stacks/config/library.py``, are built from them).

A props field is ``Annotated[<type>, <constraint>...]``: :class:`Matches` (a pattern and its words),
``annotated_types`` bounds, :class:`Rule` (a check of its own); :func:`constraints_of` gives a props class's fields
and their constraints, :func:`measured_of` a ``Size``/``Duration`` field's unit; a props object whose fields break
them raises :class:`PropsError` naming each. Sizes are GB (10^9 bytes): :func:`gigabytes`, :func:`in_gigabytes`.
"""

from hyperwarm._internal.constraints import (
    Matches as Matches,
    PropsError as PropsError,
    Rule as Rule,
    constraints_of as constraints_of,
    gigabytes as gigabytes,
    in_gigabytes as in_gigabytes,
    measured_of as measured_of,
)
from hyperwarm._internal.validation import repeated as repeated

__all__ = ["Matches", "PropsError", "Rule", "constraints_of", "gigabytes", "in_gigabytes", "measured_of", "repeated"]
