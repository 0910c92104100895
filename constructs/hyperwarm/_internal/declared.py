"""The cached models each cluster's ``CachedModels`` declared in this process, so that a construct that names a
model (a refresh target, the dashboard) can refuse a name that points at nothing. Imports no constructs.

A cluster none of whose models this app declares (an imported cluster, models deployed by another app) has no
entry: names on it cannot be checked and pass."""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

_DECLARED: weakref.WeakKeyDictionary[Any, dict[str, dict[str, str]]] = weakref.WeakKeyDictionary()
"""cluster -> namespace -> model name -> its weights cache (``node``, ``operator``, ``off``)."""


def declare(cluster: Any, namespace: str, models: Mapping[str, str]) -> None:
    """Record the models (name -> weights cache) a ``CachedModels`` declares on ``cluster`` in ``namespace``."""
    _DECLARED.setdefault(cluster, {}).setdefault(namespace, {}).update(models)


def declared(cluster: Any) -> dict[str, dict[str, str]] | None:
    """namespace -> model -> weights cache declared on ``cluster``, or None when this app declares none on it."""
    return _DECLARED.get(cluster)


def unknown_model(field: str, name: str, cluster: Any, namespace: str) -> str | None:
    """``field = name -- ...`` when ``cluster`` has models declared here and ``name`` is not one of ``namespace``."""
    known = declared(cluster)
    if known is None or name in known.get(namespace, {}):
        return None
    where = ", ".join(f"{m} ({ns})" for ns, models in sorted(known.items()) for m in sorted(models)) or "none"
    return (f"{field} = {name!r} -- no CachedModels on this cluster declares it in namespace {namespace!r}; "
            f"declared: {where}. Use a declared model's name (and its namespace), or declare the model first")
