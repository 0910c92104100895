"""One clear message, no traceback, for configuration errors at every entry point of the app.

``make synth``, ``cdk synth`` (``app.py``) and the ``hyperwarm`` command all end through
:func:`exit_on_config_error`: a bad ``cdk.json`` prints ``error: <what, where, what is allowed>`` and
exits 1. ``HYPERWARM_DEBUG=1`` shows the traceback as well.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from stacks.config import ConfigError


@contextmanager
def exit_on_config_error() -> Iterator[None]:
    """Turn a validation error (ConfigError, or a construct's ValueError) into one message and exit 1."""
    try:
        yield
    except ValueError as exc:  # every validation in the app and the library raises a ValueError
        if os.environ.get("HYPERWARM_DEBUG") == "1":
            raise
        hint = "" if isinstance(exc, ConfigError) else "\n(set HYPERWARM_DEBUG=1 to see where it was raised)"
        print(f"error: {exc}{hint}", file=sys.stderr)
        raise SystemExit(1) from None
