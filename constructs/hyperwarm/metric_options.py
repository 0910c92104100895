"""The options every ``metric_*`` method of hyperwarm takes: aws-cdk-lib's ``cloudwatch.MetricOptions``, typed.

aws-cdk-lib's own ``metric_*`` methods take these as keyword arguments (``bucket.metric_...(statistic="p90")``);
hyperwarm's do too, and type checkers see each one (``**options: Unpack[MetricOptions]``): a misspelt option or a
wrong type is an error before synth, not a jsii traceback at it.
"""

from __future__ import annotations

from typing import TypedDict

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from typing_extensions import Unpack


class MetricOptions(TypedDict, total=False):
    """``cloudwatch.MetricOptions``' fields but ``dimensions_map`` (the method's metric has its own); each overrides
    the method's default."""

    account: str
    color: str
    id: str
    label: str
    period: cdk.Duration
    region: str
    stack_account: str
    stack_region: str
    statistic: str
    unit: cloudwatch.Unit
    visible: bool


def over_defaults(options: MetricOptions, **defaults: Unpack[MetricOptions]) -> MetricOptions:
    """A method's ``defaults`` with the caller's ``options`` over them."""
    merged: MetricOptions = {**defaults, **options}
    return merged
