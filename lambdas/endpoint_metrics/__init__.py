"""The endpoint metrics bridge: SageMaker variants' time to first token, read with PromQL, published to
CloudWatch every minute."""
