"""hyperwarm's folder in the user's cache: what a synth keeps for the next one (``$XDG_CACHE_HOME/hyperwarm``,
by default ``~/.cache/hyperwarm``). Everything kept there is a pure function of what names it, so a stale or
missing entry costs time, never a different template; a read-only home costs only the time."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/hyperwarm``, or ``~/.cache/hyperwarm`` (read each call: tests and tools point it
    elsewhere); it may not exist yet."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hyperwarm"
