"""Checked by mypy (tests/test_static.py), never run: the library's classes are the interfaces a team's
code takes, for a type checker too (aws-cdk-lib's jsii types included)."""

from __future__ import annotations

from aws_cdk import aws_iam as iam, aws_sagemaker as sagemaker

import hyperwarm


def interfaces(cluster: hyperwarm.HyperPodEksCluster, endpoint: hyperwarm.InferenceEndpoint,
               operator: hyperwarm.InferenceOperator) -> None:
    cluster_ref: hyperwarm.IHyperPodCluster = cluster
    operator_ref: hyperwarm.IInferenceOperator = operator
    endpoint_ref: hyperwarm.IInferenceEndpoint = endpoint
    iendpoint: sagemaker.IEndpoint = endpoint
    grantable: iam.IGrantable = endpoint
    del cluster_ref, operator_ref, endpoint_ref, iendpoint, grantable
