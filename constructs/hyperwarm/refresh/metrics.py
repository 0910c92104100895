"""The metrics of :class:`~hyperwarm.refresh.hook.CacheRefreshHook` that users alarm on, and the hook's own alarms
on them: :class:`RefreshMetrics`, the hook's base (as aws-cdk-lib's ``QueueBase`` holds a queue's metrics)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import (
    aws_cloudwatch as cloudwatch,
    aws_lambda as lambda_,
    aws_sqs as sqs,
    aws_stepfunctions as sfn,
)
from constructs import Construct
from typing_extensions import Unpack

from hyperwarm._internal.durations import FIVE_MINUTES
from hyperwarm.functions.cache_refresh import contract
from hyperwarm.metric_options import MetricOptions, over_defaults
from hyperwarm.refresh.targets import HyperPodRefreshTarget

__all__ = ["RefreshMetrics"]


class RefreshMetrics(Construct):
    """The refresh's metrics (``metric_*``) and the alarms on them; :class:`~hyperwarm.refresh.hook.CacheRefreshHook`
    builds the parts they read."""

    dead_letter_queue: sqs.Queue
    function: lambda_.Function
    state_handler: lambda_.Function
    reconciler: lambda_.Function
    rollout_function: lambda_.Function | None
    rollout_workflow: sfn.StateMachine | None
    _warm_targets: list[contract.HyperPodTarget]

    def metric_refresh_failed(self, **options: Unpack[MetricOptions]) -> cloudwatch.Metric:
        """Refreshes that failed or were rolled back (the previous version still serves), including
        targets a deploy guard saw moved back. Default: Sum over 5 minutes."""
        return cloudwatch.Metric(namespace=contract.METRICS_NAMESPACE, metric_name="RefreshFailed",
                                 dimensions_map={"service": contract.SERVICE},
                                 **over_defaults(options, statistic="Sum", period=FIVE_MINUTES))

    def metric_dead_letters(self, **options: Unpack[MetricOptions]) -> cloudwatch.Metric:
        """Letters waiting in the dead-letter queue (``hyperwarm refresh replay``). Default: Maximum over 5 minutes."""
        return self.dead_letter_queue.metric_approximate_number_of_messages_visible(
            **over_defaults(options, period=FIVE_MINUTES, statistic="Maximum"))

    def metric_dead_letters_suppressed(self, **options: Unpack[MetricOptions]) -> cloudwatch.Metric:
        """Letters not sent because their prefix's hourly quota (``max_dead_letters_per_hour``) was spent: the
        failures are recorded, their letters are in the function's log (``dead letter suppressed``); by prefix
        with ``dimensions_map={"service": ..., "prefix": ...}``. Default: Sum over 5 minutes."""
        return cloudwatch.Metric(namespace=contract.METRICS_NAMESPACE, metric_name=contract.LETTERS_SUPPRESSED_METRIC,
                                 dimensions_map={"service": contract.SERVICE},
                                 **over_defaults(options, statistic="Sum", period=FIVE_MINUTES))

    def metric_errors(self, **options: Unpack[MetricOptions]) -> cloudwatch.MathExpression:
        """Invocations of any of the three functions that raised (for the reconciler: a run that could not
        reconcile every target). Default: Sum over 5 minutes."""
        return self._sum([fn.metric_errors() for fn in (self.function, self.state_handler, self.reconciler)],
                         options)

    def metric_undelivered_failures(self, **options: Unpack[MetricOptions]) -> cloudwatch.MathExpression:
        """Failed invocations that could not be sent to the dead-letter queue (lost). Default: Sum over 5 minutes."""
        return self._sum([fn.metric("DestinationDeliveryFailures", statistic="Sum")
                          for fn in (self.function, self.state_handler)], options)

    def metric_reconciled(self, **options: Unpack[MetricOptions]) -> cloudwatch.Metric:
        """What the reconciliation repaired: rollouts, unrecorded updates and waiting versions whose end
        was never announced (above zero means events are being lost). Default: Sum over 1 hour."""
        return cloudwatch.Metric(namespace=contract.METRICS_NAMESPACE, metric_name=contract.RECONCILED_METRIC,
                                 dimensions_map={"service": contract.SERVICE},
                                 **over_defaults(options, statistic="Sum", period=cdk.Duration.hours(1)))

    def metric_rollout_executions_failed(self, **options: Unpack[MetricOptions]) -> cloudwatch.Metric:
        """Warm rollouts that ended failed or abandoned (``AWS/States`` ``ExecutionsFailed`` of the rollout
        workflow; the step already dead-lettered what it could). An execution stopped by the workflow's backstop
        timeout counts in ``rollout_workflow.metric_timed_out()`` instead. Default: Sum over 5 minutes.
        Raises ``ValueError`` without a warm rollout (no node-cached HyperPod target)."""
        return self._workflow().metric_failed(**over_defaults(options, statistic="Sum", period=FIVE_MINUTES))

    def metric_rollout_executions_ended_badly(self, **options: Unpack[MetricOptions]) -> cloudwatch.MathExpression:
        """Warm rollout executions that failed, timed out (the workflow's backstop) or were aborted (stopped by
        ``hyperwarm refresh abort``). Default: Sum over 5 minutes. Raises ``ValueError`` without a warm rollout."""
        workflow = self._workflow()
        return self._sum([workflow.metric_failed(), workflow.metric_timed_out(), workflow.metric_aborted()], options)

    def metric_cold_pods(self, **options: Unpack[MetricOptions]) -> cloudwatch.MathExpression:
        """Pods of a refresh's new version found on a node without its ready label, over every warm target
        (``RefreshColdPods``, published once per rollout). Default: Sum over 5 minutes."""
        metrics: list[cloudwatch.IMetric] = [cloudwatch.Metric(
            namespace=contract.METRICS_NAMESPACE, metric_name="RefreshColdPods",
            dimensions_map={"service": contract.SERVICE, "target": t.id}, statistic="Sum") for t in self._warm_targets]
        return self._sum(metrics, options)

    def metric_time_to_warm(self, target: HyperPodRefreshTarget, **options: Unpack[MetricOptions]) -> cloudwatch.Metric:
        """Seconds from a warm rollout's staging start until the new version was ready on every node of
        ``target`` (``TimeToWarm``, published once per rollout). Default: Maximum over 5 minutes."""
        return cloudwatch.Metric(namespace=contract.METRICS_NAMESPACE, metric_name="TimeToWarm",
                                 dimensions_map={"service": contract.SERVICE, "target": target.to_contract().id},
                                 **over_defaults(options, statistic="Maximum", period=FIVE_MINUTES))

    def _workflow(self) -> sfn.StateMachine:
        if self.rollout_workflow is None:
            raise ValueError(f"{self.node.path}: no warm rollout workflow; it exists when a HyperPod target "
                             "is node-cached (node_cache)")
        return self.rollout_workflow

    @staticmethod
    def _sum(metrics: list[cloudwatch.IMetric], options: MetricOptions) -> cloudwatch.MathExpression:
        """A sum of ``metrics`` (of their default statistic; a math expression takes period, label and color alone)."""
        # One function alone may fail while the others have no data point: missing counts as 0, else
        # the sum is missing too and the alarm never sees the failure.
        names = [chr(ord("a") + i) for i in range(len(metrics))]
        return cloudwatch.MathExpression(expression=" + ".join(f"FILL({n}, 0)" for n in names),
                                         using_metrics=dict(zip(names, metrics, strict=True)),
                                         period=options.get("period", FIVE_MINUTES),
                                         label=options.get("label"), color=options.get("color"))

    def _alarms(self) -> dict[str, cloudwatch.Alarm]:
        def alarm(name: str, metric: cloudwatch.IMetric, description: str) -> cloudwatch.Alarm:
            return cloudwatch.Alarm(self, name, metric=metric, threshold=1, evaluation_periods=1,
                                    comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                                    treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                                    alarm_description=description)
        warm = {} if self.rollout_workflow is None or self.rollout_function is None else {
            "rollout_executions": alarm(
                "RolloutExecutionsAlarm", self.metric_rollout_executions_ended_badly(),
                "a warm rollout's execution failed, timed out or was aborted; the record and the letters say what "
                "serves (the rollout itself points back and drops the staged copy)"),
            "rollout_step_errors": alarm(
                "RolloutStepErrorsAlarm", self.rollout_function.metric_errors(statistic="Sum"),
                "the warm rollout's step function raised (the state table or a crash): the workflow retries it a poll "
                "apart, then abandons the rollout"),
            "cold_pods": alarm(
                "RefreshColdPodsAlarm", self.metric_cold_pods(),
                "a warm version change placed a pod on a node without its version's ready label: check the "
                "deployment's node affinity and the node-cache filler on that node"),
        }
        return {
            **warm,
            "dead_letters": alarm("DeadLettersAlarm", self.metric_dead_letters(),
                                  "refresh events wait in the dead-letter queue: see `hyperwarm refresh replay`"),
            "errors": alarm("ErrorsAlarm", self.metric_errors(), "the cache refresh functions failed"),
            "undelivered": alarm("UndeliveredFailuresAlarm", self.metric_undelivered_failures(),
                                 "a failed refresh invocation could not be sent to the dead-letter queue: it is "
                                 "lost; check the queue's policy and the functions' role"),
            "refresh_failed": alarm("RefreshFailedAlarm", self.metric_refresh_failed(),
                                    "a refresh failed or was rolled back; the previous version still serves"),
            "dead_letters_suppressed": alarm(
                "DeadLettersSuppressedAlarm", self.metric_dead_letters_suppressed(),
                "a model prefix failed more often in an hour than max_dead_letters_per_hour: the letters beyond it "
                "are in the refresh function's log (dead letter suppressed), not in the queue; look at what is "
                "uploaded under the prefix (DeadLettersSuppressed by prefix)"),
        }
