"""A warm rollout's timeouts as props declare them (one definition: the hook's targets and cdk.json's refresh
entries). Light on purpose: parsing the app's configuration imports it without the cluster constructs."""

from __future__ import annotations

from typing import Annotated

import aws_cdk as cdk
from annotated_types import Interval

from hyperwarm._internal.constraints import seconds
from hyperwarm.functions.cache_refresh import contract

RolloutTimeout = Annotated[cdk.Duration, seconds(Interval(ge=contract.TIMEOUT_SECONDS_RANGE[0],
                                                          le=contract.TIMEOUT_SECONDS_RANGE[1]))]
"""A warm rollout's staging or switch timeout: 300..86400 s (``contract.TIMEOUT_SECONDS_RANGE``)."""
