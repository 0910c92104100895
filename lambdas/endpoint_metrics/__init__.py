"""The endpoint metrics bridge: SageMaker variants' time to first token, from PromQL, as CloudWatch metrics every minute."""
