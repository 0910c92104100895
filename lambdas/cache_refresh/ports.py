"""Everything the refresh flow reads or changes outside itself, as one object (:class:`Ports`): the AWS
implementation is built in :mod:`.handler`, in-memory fakes in the model tests."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import decide
from .config import EndpointTarget, HyperPodTarget, Settings, Target
from .errors import TransientError
from .events import ManifestCreated
from .state import StateTable
from .targets.hyperpod import Kube


@dataclass
class Ports:
    """Everything the flow reads or changes outside itself."""

    settings: Settings
    state: StateTable
    verify: Callable[[ManifestCreated], str]
    """The gate's content step (:func:`.gate.content`): the manifest's SHA-256 once signed and verified."""
    live: Callable[[Target, str], decide.Live]
    apply_hyperpod: Callable[[HyperPodTarget, ManifestCreated], list[str]]
    start_endpoint: Callable[[EndpointTarget, ManifestCreated, Callable[[dict[str, Any]], object]], dict[str, Any]]
    """(target, event, reserve): ``reserve`` records the names before anything is created."""
    delete_superseded: Callable[[str | None, list[str], str | None], list[str]]
    dead_letter: Callable[[dict[str, Any]], None]
    metric: Callable[..., None]  # (name, reason=None, target=None, value=1.0, unit="Count")
    log: Callable[..., None] = lambda text, /, **extra: None
    """(text, **fields): a log line; positional-only, so any field name (``message`` too) is a field."""
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    kube: Callable[[HyperPodTarget], Kube] = lambda target: _no_kube(target)
    """The Kubernetes API of a HyperPod target's cluster (a warm rollout's reads and writes)."""
    start_workflow: Callable[[HyperPodTarget, str, str], None] | None = None
    """Start the warm-rollout execution (target, version, execution name); None: HyperPod targets repoint at once."""


def _no_kube(target: HyperPodTarget) -> Kube:
    raise TransientError("no-kubernetes-access", f"{target.id}: no Kubernetes client configured")
