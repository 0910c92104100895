"""What the two one-minute metric functions (the cache metrics exporter and the endpoint metrics bridge) share:
the run's reading deadline, PutMetricData in batches, and a TTFT histogram as a CloudWatch distribution, so
HyperPod models and SageMaker variants publish TTFT with the same code. Pure standard library."""
