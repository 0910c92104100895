"""The refresh functions' reserved concurrency as props declare it (one definition: the hook's props and cdk.json's
``refresh`` section). Light on purpose, like :mod:`.timeouts`: parsing the app's configuration imports it."""

from __future__ import annotations

from typing import Annotated

from annotated_types import Interval

ReservedConcurrency = Annotated[int, Interval(ge=1, le=900)]
"""Concurrent executions reserved for, and the most allowed to, each refresh function: 1..900. 0 would throttle
every invocation; Lambda keeps 100 of an account's concurrency unreserved, 1,000 by default, so more than 900 can
never deploy (https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html)."""
