"""The parts of scanner acknowledgments that need no CDK: reasons, and checkov's Kubernetes annotations.

Kept apart from :mod:`hyperwarm._internal.nag` so Kubernetes object builders (and the deploy rehearsal that
reads them) load without aws-cdk-lib.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping


def check_reason(reason: str, checks: tuple[str, ...], where: str | Callable[[], str]) -> None:
    """Every acknowledgment says specifically why: at least 30 characters. ``where`` names the scope in the error
    (a callable: a construct's path costs two calls into jsii, made only for the error)."""
    if len(reason) < 30:
        place = where if isinstance(where, str) else where()
        raise ValueError(f"acknowledgment of {checks} on {place} needs a specific reason, got {reason!r}")


def checkov_annotations(skips: Mapping[str, str]) -> dict[str, str]:
    """Kubernetes annotations acknowledging checkov checks: check id -> reason (no ``=`` in it)."""
    for check, reason in skips.items():
        check_reason(reason, (check,), "a Kubernetes object")
        if "=" in reason:
            raise ValueError(f"checkov reads {check}'s annotation up to the first '=': drop it from {reason!r}")
    return {f"checkov.io/skip-{check}": f"{check}={reason}" for check, reason in skips.items()}
