"""What the functions share to publish metrics. The two one-minute metric functions (the cache metrics exporter and
the endpoint metrics bridge): the run's reading deadline, PutMetricData in batches, and a TTFT histogram as a
CloudWatch distribution, so HyperPod models and SageMaker variants publish TTFT with the same code. The refresh's
deploy guard and the Hub token sync: a count in the embedded metric format (``emf``). Pure standard library."""
