"""The cache metrics exporter: how warm each cached model's pods are, published to CloudWatch every minute."""
