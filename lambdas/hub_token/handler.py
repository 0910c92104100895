"""Copy each Hub token from its Secrets Manager secret into the Kubernetes Secret the operator reads.

The inference operator takes a gated repository's token only from a Kubernetes Secret (``tokenSecretRef``,
injected as ``HF_TOKEN`` into the download init container). hyperwarm renders that Secret empty (no data) with the
models; this function fills its ``token`` key and keeps it equal to the secret's current value. It runs at every
deploy (a CloudFormation custom resource right after the models' manifest: until it has run, a new gated model's
pods wait, see ``hyperwarm.caches.hub``) and on a schedule (rotation).

``HYPERWARM_HUB_TOKENS`` maps each Kubernetes Secret name to its Secrets Manager secret id (name or ARN). A
secret's string is the token itself, or a JSON object with a ``token`` key. The token is never logged, returned or
put into an error: what is logged is the Kubernetes Secret's name, the secret's version id and whether it changed.
RBAC lets this function only ``get`` and ``patch`` the named Secrets in one namespace: it can neither create nor
list nor read any other Secret.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import boto3
import urllib3

from ..cfn_response import respond
from ..eks_auth import cluster_access, eks_token

TOKEN_KEY = "token"
"""The key of the Kubernetes Secret the operator's ``tokenSecretRef`` names."""


class SyncError(RuntimeError):
    """A token could not be copied; the message names the Secret and never holds the token."""


class MissingSecret(SyncError):
    """The Kubernetes Secret does not exist (HTTP 404): an Update skips it (see :func:`lambda_handler`)."""


def token_of(secret_string: str, secret_id: str) -> str:
    """The token in a secret's string: the string itself, or the ``token`` key of a JSON object."""
    text = secret_string.strip()
    if text.startswith("{"):
        try:
            value = json.loads(text).get(TOKEN_KEY)
        except (json.JSONDecodeError, AttributeError):
            value = None
        if not isinstance(value, str) or not value.strip():
            raise SyncError(f"secret {secret_id}: a JSON secret needs a string key {TOKEN_KEY!r} holding the token")
        text = value.strip()
    if not text:
        raise SyncError(f"secret {secret_id}: empty; put the Hub token (hf_...) in it")
    return text


class SecretWriter:
    """GET and merge-PATCH of named Secrets in one namespace, with the function role's EKS token."""

    def __init__(self, endpoint: str, ca_pem: str, token: str, namespace: str, timeout: float = 10.0) -> None:
        self._base = f"{endpoint.rstrip('/')}/api/v1/namespaces/{namespace}/secrets/"
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self._http = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_cert_data=ca_pem,
                                         retries=urllib3.Retry(total=2, status=0),
                                         timeout=urllib3.Timeout(total=timeout))

    @staticmethod
    def _failure(verb: str, name: str, resp: Any) -> SyncError:
        try:  # a Status object's message names the object, never a Secret's data
            message = json.loads(resp.data).get("message", "")
        except (json.JSONDecodeError, AttributeError):
            message = ""
        if resp.status == 404:
            return MissingSecret(f"{verb} Secret {name}: HTTP 404 {message[:200]} (the models' manifest renders "
                                 "it: deploy the caches first)")
        return SyncError(f"{verb} Secret {name}: HTTP {resp.status} {message[:200]}")

    def current(self, name: str) -> str | None:
        """The Secret's token (None when it has none yet)."""
        resp = self._http.request("GET", self._base + name, headers=self._headers)
        if resp.status != 200:
            raise self._failure("GET", name, resp)
        data = json.loads(resp.data).get("data") or {}
        return base64.b64decode(data[TOKEN_KEY]).decode() if TOKEN_KEY in data else None

    def write(self, name: str, token: str) -> None:
        body = json.dumps({"data": {TOKEN_KEY: base64.b64encode(token.encode()).decode()}}).encode()
        resp = self._http.request("PATCH", self._base + name, body=body,
                                  headers={**self._headers, "Content-Type": "application/merge-patch+json"})
        if resp.status != 200:
            raise self._failure("PATCH", name, resp)


def sync(tokens: dict[str, str], writer: SecretWriter, secrets: Any, *,
         missing_ok: bool = False) -> list[dict[str, Any]]:
    """Copy every token; one line per Secret (name, secret version, changed), every failure raised together.
    ``missing_ok``: a Kubernetes Secret that does not exist is logged as ``missing`` and skipped, not a failure
    (its token is not read)."""
    results, missing, failures = [], [], []
    for name, secret_id in sorted(tokens.items()):
        try:
            current = writer.current(name)  # first: a missing Secret needs no token
            answer = secrets.get_secret_value(SecretId=secret_id)
            if "SecretString" not in answer:
                raise SyncError(f"secret {secret_id}: binary; store the Hub token as a string")
            token = token_of(answer["SecretString"], secret_id)
            changed = current != token
            if changed:
                writer.write(name, token)
            results.append({"secret": name, "source": secret_id, "version": answer.get("VersionId"),
                            "changed": changed})
        except MissingSecret as error:
            if not missing_ok:
                failures.append(str(error))
            else:
                missing.append(name)
        except SyncError as error:
            failures.append(str(error))
        except Exception as error:  # noqa: BLE001 - botocore's and urllib3's messages hold no secret value
            failures.append(f"Secret {name} from {secret_id}: {type(error).__name__}: {error}")
    print(json.dumps({"synced": results, "missing": missing, "failures": failures}))
    if failures:
        raise SyncError("; ".join(failures))
    return results + [{"secret": name, "missing": True} for name in missing]


def run(*, missing_ok: bool = False) -> list[dict[str, Any]]:
    cluster = os.environ["HYPERWARM_CLUSTER_NAME"]
    region = os.environ["AWS_REGION"] if "AWS_REGION" in os.environ else os.environ["AWS_DEFAULT_REGION"]
    endpoint, ca_pem = cluster_access(cluster, region)
    writer = SecretWriter(endpoint, ca_pem, eks_token(cluster, region), os.environ["HYPERWARM_NAMESPACE"])
    tokens = json.loads(os.environ["HYPERWARM_HUB_TOKENS"])
    return sync(tokens, writer, boto3.client("secretsmanager", region_name=region), missing_ok=missing_ok)


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any] | None:
    """A CloudFormation request, or a scheduled run (raises on any failure, so the function's Errors metric
    counts it).

    Create copies every token and fails the deploy if one cannot be copied (a Secret missing included). Update
    does the same, except that a Kubernetes Secret that does not exist is logged and skipped: CloudFormation also
    sends an Update while it rolls a failed deploy back, with the previous token list, possibly before the
    rollback has applied those Secrets again, and a custom resource that fails then leaves the stack
    UPDATE_ROLLBACK_FAILED; the scheduled run fills such a Secret once it exists. Delete does nothing: the
    Secrets go with the models' manifest."""
    if "RequestType" not in event:
        return {"synced": run()}
    status, reason = "SUCCESS", "Secrets go with the models' manifest"
    if event["RequestType"] in ("Create", "Update"):
        try:
            results = run(missing_ok=event["RequestType"] == "Update")
            skipped = [r["secret"] for r in results if r.get("missing")]
            reason = f"copied {len(results) - len(skipped)} Hub token(s) into their Kubernetes Secrets"
            if skipped:
                reason += (f"; skipped {', '.join(skipped)}: no such Secret (a rollback may not have restored it "
                           "yet; the scheduled copy fills it once it exists)")
        except Exception as error:  # noqa: BLE001 (any failure must still answer CloudFormation)
            status, reason = "FAILED", f"could not copy the Hub tokens: {error}"
    respond(event, status, reason, "hub-token-sync")
    return None
