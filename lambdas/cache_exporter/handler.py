"""The exporter's I/O: list the operator's objects, pods and nodes, publish each model's figures.

Runs every minute (EventBridge). Reads through the Kubernetes API with the EKS token of the
function's role, which an access entry maps to a group that may only get/list/watch the operator's
cache objects, pods and nodes. Writes only ``PutMetricData`` to :data:`placement.NAMESPACE`.
"""

from __future__ import annotations

import datetime
import os
from typing import Any, Sequence

import boto3

from .kube import KubeReader, cluster_access, eks_token
from .placement import NAMESPACE, ModelFigures, model_figures

GROUP = "/apis/inference.sagemaker.aws.amazon.com/v1"
WINDOW = datetime.timedelta(minutes=1)  # the schedule's rate: each cache fill is reported once
_BATCH = 1000  # PutMetricData's most MetricData entries per call


def collect(kube: KubeReader, namespaces: Sequence[str], now: datetime.datetime) -> list[ModelFigures]:
    """Every ``InferenceEndpointConfig`` in ``namespaces``, with its caches, pods and the nodes."""
    nodes = kube.items("/api/v1/nodes")
    figures = []
    for ns in namespaces:
        weights = kube.items(f"{GROUP}/namespaces/{ns}/modelweightscacheconfigs")
        images = kube.items(f"{GROUP}/namespaces/{ns}/modelimagecaches")
        pods = kube.items(f"/api/v1/namespaces/{ns}/pods")
        for deployment in kube.items(f"{GROUP}/namespaces/{ns}/inferenceendpointconfigs"):
            figures.append(model_figures(deployment, weights, images, pods, nodes, now, WINDOW))
    return figures


def metric_data(cluster: str, figures: Sequence[ModelFigures], now: datetime.datetime) -> list[dict[str, Any]]:
    return [{"MetricName": name, "Value": value, "Unit": unit, "Timestamp": now,
             "Dimensions": [{"Name": "ClusterName", "Value": cluster}, {"Name": "Model", "Value": f.model}]}
            for f in figures for name, value, unit in f.metrics()]


def publish(cloudwatch: Any, data: list[dict[str, Any]]) -> None:
    for start in range(0, len(data), _BATCH):
        cloudwatch.put_metric_data(Namespace=NAMESPACE, MetricData=data[start:start + _BATCH])


def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    cluster, region = os.environ["HYPERWARM_CLUSTER_NAME"], os.environ["AWS_REGION"]
    namespaces = [n for n in os.environ["HYPERWARM_NAMESPACES"].split(",") if n]
    endpoint, ca_pem = cluster_access(cluster, region)
    now = datetime.datetime.now(datetime.timezone.utc)
    figures = collect(KubeReader(endpoint, ca_pem, eks_token(cluster, region)), namespaces, now)
    data = metric_data(cluster, figures, now)
    publish(boto3.client("cloudwatch", region_name=region), data)
    return {"models": [f.model for f in figures], "metrics": len(data)}
