"""The one version order of cache refresh; a version it cannot order is rejected, never guessed.

A version is the folder name in ``<prefix>/<version>/manifest.json``. Two families, each totally
ordered; versions of different families are not comparable:

- **numeric / semantic**: an optional ``v``, dot-separated integers compared as numbers
  (``v9 < v10``, ``1.9.0 < 1.10.0``, ``2026.11.1``; missing parts are zeros: ``1.2 == 1.2.0``),
  then an optional pre-release tag ``dev < alpha (a) < beta (b) < rc (c)`` with an optional number,
  joined by ``-``, ``.`` or nothing. A pre-release sorts before its release:
  ``1.10.0-rc.1 < 1.10.0rc2 < 1.10.0``, ``v9b < v9 < v10``. A plain number (``20261101``) is numeric.
- **time**: a date ``YYYY-MM-DD`` or a timestamp ``YYYY-MM-DD[T_-]HH[-.]MM[-.]SS[Z]`` /
  ``YYYYMMDDTHHMMSS[Z]`` (UTC); compared as instants, a date being its midnight.

Anything else (``latest``, ``v2-hotfix``, semver tags outside the list such as ``1.0.0-foo``, a real
date that does not exist) is unorderable. So are two distinct spellings of one rank (``v2`` and
``2.0``, ``2026-11-01`` and ``2026-11-01T00-00-00Z``): they name different folders, and nothing says
which one is newer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

_NUMERIC = re.compile(r"^[vV]?(\d{1,18}(?:\.\d{1,18})*)(?:[-.]?(dev|alpha|a|beta|b|rc|c)(?:[-.]?(\d{1,18}))?)?\Z")
_TAGS = {"dev": 0, "alpha": 1, "a": 1, "beta": 2, "b": 2, "rc": 3, "c": 3}
_RELEASE = 4  # ranks above every pre-release tag
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:[T_-](\d{2})[-.]?(\d{2})[-.]?(\d{2})Z?)?\Z")
_COMPACT = re.compile(r"^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z?\Z")
RULE = ("numeric or semantic (v10, 1.10.0, 1.10.0-rc.1) or a date/timestamp (2026-11-01, "
        "2026-11-01T12-00-00Z); see lambdas/cache_refresh/versions.py")


class UnorderableVersion(ValueError):
    """The version is outside the documented order, or not comparable with the other one."""


@dataclass(frozen=True)
class Version:
    text: str
    family: str  # "numeric" | "time"
    key: tuple[Any, ...]

    def compare(self, other: Version) -> int:
        """-1, 0 (the same text) or 1; raises :class:`UnorderableVersion` across families and for two
        spellings of one rank."""
        if self.family != other.family:
            raise UnorderableVersion(f"{self.text!r} ({self.family}) cannot be ordered against "
                                     f"{other.text!r} ({other.family})")
        if self.key == other.key and self.text != other.text:
            raise UnorderableVersion(f"{self.text!r} and {other.text!r} spell one rank in different folders: "
                                     "neither is newer")
        return (self.key > other.key) - (self.key < other.key)


def parse(text: str) -> Version:
    """The version's place in the order; :class:`UnorderableVersion` naming the rule otherwise."""
    if not isinstance(text, str):
        raise UnorderableVersion(f"{text!r} is not a version string")
    return _parse(text)


@lru_cache(maxsize=4096)
def _parse(text: str) -> Version:
    match = _NUMERIC.match(text)
    if match:
        release, tag, number = match.groups()
        parts = [int(p) for p in release.split(".")]
        while len(parts) > 1 and parts[-1] == 0:
            parts.pop()
        pre = (_TAGS[tag], int(number or 0)) if tag else (_RELEASE, 0)
        return Version(text, "numeric", (tuple(parts), pre))
    match = _DATE.match(text) or _COMPACT.match(text)
    if match:
        fields = [int(g) for g in match.groups() if g is not None]
        try:
            instant = datetime(*fields)  # type: ignore[arg-type]  # the patterns give 3 to 6 fields: y m d [H M S]
        except ValueError as exc:
            raise UnorderableVersion(f"{text!r} is not a real date or time: {exc}") from None
        return Version(text, "time", (instant.isoformat(),))
    raise UnorderableVersion(f"{text!r} is not an orderable version: {RULE}")


def compare(a: str, b: str) -> int:
    """-1, 0 or 1 for ``a`` against ``b``; raises :class:`UnorderableVersion`."""
    return parse(a).compare(parse(b))


def newer(a: str, than: str | None) -> bool:
    """True when ``a`` is strictly after ``than`` (anything is newer than nothing)."""
    return than is None or compare(a, than) > 0
