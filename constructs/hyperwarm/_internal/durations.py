"""Durations the constructs use over and over (metric periods): one jsii object each, shared.

``cdk.Duration.minutes(1)`` is a round trip into jsii every time (one per metric; synth time,
docs/performance.md); a Duration is an immutable value, so one object serves every app in the process.
"""

from __future__ import annotations

import aws_cdk as cdk

ONE_MINUTE = cdk.Duration.minutes(1)
FIVE_MINUTES = cdk.Duration.minutes(5)
