"""Calling a cluster's Kubernetes API as the function's IAM role: the EKS bearer token and the API endpoint.

Shared by the cache refresh function and the cache metrics exporter (both assets bundle it). The
token is the one ``aws eks get-token`` prints: ``k8s-aws-v1.`` + base64url of an STS
GetCallerIdentity URL presigned with the header ``x-k8s-aws-id: <cluster>``; an EKS access entry
maps the role to the Kubernetes group whose RBAC grants what the function may do.
"""

from __future__ import annotations

import base64
from functools import lru_cache

import boto3
from botocore.signers import RequestSigner

TOKEN_SECONDS = 60
"""How long a token is valid: each run asks for a new one."""


def eks_token(cluster: str, region: str, session: boto3.Session | None = None) -> str:
    """The bearer token ``aws eks get-token`` prints: a presigned STS GetCallerIdentity URL."""
    session = session or boto3.Session()
    sts = session.client("sts", region_name=region)
    signer = RequestSigner(sts.meta.service_model.service_id, region, "sts", "v4",
                           session.get_credentials(), session.events)
    url = signer.generate_presigned_url(
        {"method": "GET", "url": f"https://sts.{region}.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15",
         "body": {}, "headers": {"x-k8s-aws-id": cluster}, "context": {}},
        region_name=region, expires_in=TOKEN_SECONDS, operation_name="")
    return "k8s-aws-v1." + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


@lru_cache(maxsize=16)
def cluster_access(cluster: str, region: str) -> tuple[str, str]:
    """(API endpoint, CA bundle PEM) from eks:DescribeCluster, cached for the container's life.

    Errors are botocore's ``ClientError``: each caller decides what a missing cluster means to it.
    """
    info = boto3.client("eks", region_name=region).describe_cluster(name=cluster)["cluster"]
    return info["endpoint"], base64.b64decode(info["certificateAuthority"]["data"]).decode()
