"""Rules shared by the constructs and the apps that configure them; imports no constructs.

The HyperPod cluster's own rules are in :mod:`hyperwarm.cluster.rules`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def repeated(names: Iterable[str]) -> list[str]:
    """Names that occur more than once, sorted: for "must be unique" rules."""
    names = list(names)
    return sorted({n for n in names if names.count(n) > 1})


def raise_problems(where: str, props: str, problems: Sequence[str]) -> None:
    """Every problem in one error: ``<construct path>: invalid <props>:`` then ``field = value -- rule`` lines."""
    if problems:
        raise ValueError(f"{where}: invalid {props}:\n  " + "\n  ".join(problems))
