"""Per-minute figures from cumulative counters: the previous run's scrapes, kept in memory.

The function runs with a reserved concurrency of 1, so one warm execution environment sees each
run and keeps the previous scrape of every pod (by uid) at module level. A pod seen for the first
time counts in full if it started after the previous run (every request it served is new); otherwise,
and always on a cold start (no previous run), it is only recorded and publishes no delta this minute.
A pod that is still running but could not be scraped keeps its old scrape: the next delta spans two
minutes and loses nothing. Pods no longer running are forgotten.
"""

from __future__ import annotations

import datetime
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from .vllm import EngineSample


@dataclass(frozen=True)
class Scrape:
    """A pod's metrics this run."""

    started: datetime.datetime | None
    """The pod's ``status.startTime``."""
    sample: EngineSample


@dataclass
class Snapshots:
    """The previous run: when it was, and the last scrape of each pod still running."""

    last_run: datetime.datetime | None = None
    samples: dict[str, EngineSample] = field(default_factory=dict)

    def advance(self, scrapes: Mapping[str, Scrape], running: Collection[str],
                now: datetime.datetime) -> dict[str, EngineSample]:
        """Each scraped pod's new counts since the previous run (pods without a baseline are left out);
        then this run becomes the previous one. ``running``: uids of every pod still running (scraped or not)."""
        deltas: dict[str, EngineSample] = {}
        for uid, scrape in scrapes.items():
            previous = self.samples.get(uid)
            if previous is not None:
                deltas[uid] = scrape.sample.since(previous)
            elif self.last_run is not None and scrape.started is not None and scrape.started > self.last_run:
                deltas[uid] = scrape.sample
        kept = {uid: s for uid, s in self.samples.items() if uid in running}
        self.samples = {**kept, **{uid: s.sample for uid, s in scrapes.items()}}
        self.last_run = now
        return deltas
