"""The refresh Lambda's configuration, read once per container from environment variables.

The names, the targets' shape and their checks are the wire contract, :mod:`.contract`; this module
reads them into :class:`Settings`.

The variables and their meaning: README.md, "Environment".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from . import contract
from .contract import Admission, BlueGreen, ConfigError, EndpointTarget, HyperPodTarget, NodeCache, Target

__all__ = ["Admission", "BlueGreen", "ConfigError", "EndpointTarget", "HyperPodTarget", "NodeCache", "Settings", "Target", "load"]


@dataclass(frozen=True)
class Settings:
    targets: Mapping[str, tuple[Target, ...]]
    state_table: str
    allowed_buckets: frozenset[str]
    dlq_url: str | None = None
    dry_run: bool = False
    lock_seconds: int = contract.DEFAULT_LOCK_SECONDS
    letters_per_hour: int = contract.DEFAULT_LETTERS_PER_HOUR
    """Most dead letters sent per model prefix and clock hour (:mod:`.quota`)."""
    admissions: Mapping[str, Admission] = field(default_factory=dict)

    def admission(self, prefix: str) -> Admission:
        """What a version of ``prefix`` must be to move anything (:mod:`.gate`)."""
        return self.admissions.get(prefix) or Admission()

    def fill_verified(self, prefix: str) -> bool:
        """Every target of ``prefix`` loads its files from hyperwarm's node cache, whose filler checks each file's
        SHA-256 before it labels a node ready: S3 need not hold a checksum to compare."""
        targets = self.targets_for(prefix)
        return bool(targets) and all(isinstance(t, HyperPodTarget) and t.node_cache is not None for t in targets)

    def prefix_of(self, target: Target) -> str:
        """The prefix ``target`` serves."""
        return next(p for p, ts in self.targets.items() if target in ts)

    def targets_for(self, prefix: str) -> tuple[Target, ...]:
        return self.targets.get(prefix, ())

    def endpoint_target(self, endpoint: str) -> EndpointTarget | None:
        return next((t for ts in self.targets.values() for t in ts
                     if isinstance(t, EndpointTarget) and t.endpoint == endpoint), None)


def _require(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise ConfigError(f"{name} is not set")
    return value


def load(env: Mapping[str, str] | None = None) -> Settings:
    """Parse and validate the environment (:mod:`.contract`); raise :class:`ConfigError` naming the variable."""
    env = os.environ if env is None else env
    targets = contract.parse_targets(_require(env, contract.REFRESH_TARGETS))
    buckets = frozenset(b.strip() for b in _require(env, contract.ALLOWED_BUCKETS).split(",") if b.strip())
    dry_run = env.get(contract.DRY_RUN, "false").strip().lower()
    if dry_run not in ("true", "false"):
        raise ConfigError(f"{contract.DRY_RUN}: {dry_run!r} is not true or false")
    return Settings(targets=targets, state_table=_require(env, contract.STATE_TABLE), allowed_buckets=buckets,
                    dlq_url=env.get(contract.DLQ_URL) or None, dry_run=dry_run == "true",
                    lock_seconds=int(env.get(contract.LOCK_SECONDS, str(contract.DEFAULT_LOCK_SECONDS))),
                    letters_per_hour=_letters_per_hour(env),
                    admissions=contract.parse_admissions(env.get(contract.ADMISSION, "")))


def _letters_per_hour(env: Mapping[str, str]) -> int:
    text = env.get(contract.LETTERS_PER_HOUR, str(contract.DEFAULT_LETTERS_PER_HOUR)).strip()
    low, high = contract.LETTERS_PER_HOUR_RANGE
    if not (text.isdigit() and low <= int(text) <= high):
        raise ConfigError(f"{contract.LETTERS_PER_HOUR} = {text!r} -- allowed: a whole number, {low}..{high}")
    return int(text)
