"""Failure classes: they decide whether an event is retried, dead-lettered or dropped.

- :class:`Skip`: nothing to do (duplicate, older version, unknown prefix, malformed event). Logged and
  counted as ``RefreshSkipped`` with its reason; never retried, never dead-lettered.
- :class:`TransientError`: may succeed later (throttling, target busy, endpoint updating, API 5xx).
  Raised out of the handler so the asynchronous invocation is retried, then dead-lettered.
- :class:`PermanentError`: will fail the same way every time (manifest mismatch, target missing,
  forbidden). Counted as ``RefreshFailed``, sent to the dead-letter queue with the event (for
  ``hyperwarm refresh replay`` after a fix) and NOT raised: retrying it would only repeat the failure.
"""

from __future__ import annotations


class RefreshError(Exception):
    """Base: ``reason`` is a short, fixed code used as the metric's Reason dimension."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class Skip(RefreshError):
    """Nothing to do for this event; what serves stays as it is."""


class TransientError(RefreshError):
    """Retry later (raised to the Lambda runtime)."""


class PermanentError(RefreshError):
    """Will not succeed without a change: dead-lettered with replay context."""
