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

A new gated model's first pods may start before the first copy, and fail to create the download container for the
missing key (kubelet's ``CreateContainerConfigError``). kubelet tries again at its next syncs, but pods have been
reported stuck after their Secret appeared (kubernetes/kubernetes#80466). So each scheduled run also lists the
namespace's pods and deletes each one still waiting that way on a Secret that held the key before the run, at least
:data:`~.contract.STUCK_AFTER_SECONDS` after its creation, as AWS's troubleshooting page has the pod restarted once
the Secret holds the token; its Deployment starts a new pod, which reads the key. The count is published
(:data:`~.contract.RESTARTED_METRIC`) and alarmed when it does not stop (``hyperwarm.caches.hub``); so are the
pods it leaves waiting that way for another cause, or with kubelet's message worded otherwise
(:data:`~.contract.LEFT_METRIC`): the function does not restart them, a person must look. RBAC adds
``list`` and ``delete`` of pods in that one namespace: no pod is created, read through or changed otherwise.
"""

from __future__ import annotations

import base64
import json
import os
import re
from datetime import datetime
from typing import Any, NamedTuple

import boto3
import urllib3

from ..cfn_response import respond
from ..eks_auth import cluster_access, eks_token
from ..metric_publishing.emf import emf_line
from .contract import (
    CLUSTER_DIMENSION,
    LEFT_METRIC,
    METRICS_NAMESPACE,
    NAMESPACE_DIMENSION,
    RESTARTED_METRIC,
    STUCK_AFTER_SECONDS,
    TOKEN_KEY,
)

WAITING_FOR_CONFIG = "CreateContainerConfigError"
"""kubelet's waiting reason for a container it cannot create from its configuration (a missing Secret key)."""


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


class Namespace:
    """The calls this function makes in its one namespace, with the function role's EKS token: GET and merge-PATCH
    of named Secrets, the list of pods, and the deletion of a pod."""

    def __init__(self, endpoint: str, ca_pem: str, token: str, namespace: str, timeout: float = 10.0) -> None:
        self.name = namespace
        self._base = f"{endpoint.rstrip('/')}/api/v1/namespaces/{namespace}/"
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self._http = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_cert_data=ca_pem,
                                         retries=urllib3.Retry(total=2, status=0),
                                         timeout=urllib3.Timeout(total=timeout))

    @staticmethod
    def _failure(verb: str, name: str, resp: Any) -> SyncError:
        if resp.status == 404:
            return MissingSecret(f"{verb} Secret {name}: HTTP 404 {_message(resp)} (the models' manifest renders "
                                 "it: deploy the caches first)")
        return SyncError(f"{verb} Secret {name}: HTTP {resp.status} {_message(resp)}")

    def current(self, name: str) -> str | None:
        """The Secret's token (None when it has none yet)."""
        resp = self._http.request("GET", self._base + "secrets/" + name, headers=self._headers)
        if resp.status != 200:
            raise self._failure("GET", name, resp)
        data = json.loads(resp.data).get("data") or {}
        return base64.b64decode(data[TOKEN_KEY]).decode() if TOKEN_KEY in data else None

    def write(self, name: str, token: str) -> None:
        body = json.dumps({"data": {TOKEN_KEY: base64.b64encode(token.encode()).decode()}}).encode()
        resp = self._http.request("PATCH", self._base + "secrets/" + name, body=body,
                                  headers={**self._headers, "Content-Type": "application/merge-patch+json"})
        if resp.status != 200:
            raise self._failure("PATCH", name, resp)

    def pods(self) -> list[dict[str, Any]]:
        resp = self._http.request("GET", self._base + "pods", headers=self._headers)
        if resp.status != 200:
            raise SyncError(f"list pods: HTTP {resp.status} {_message(resp)}")
        return list(json.loads(resp.data).get("items") or [])

    def delete_pod(self, name: str, uid: str) -> bool:
        """Delete the pod ``name`` if it is still the one with ``uid`` (not a later pod of the same name); whether
        this call deleted it."""
        body = json.dumps({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}}).encode()
        resp = self._http.request("DELETE", self._base + "pods/" + name, body=body,
                                  headers={**self._headers, "Content-Type": "application/json"})
        if resp.status not in (200, 202, 404, 409):  # 404: gone already; 409: another pod has the name now
            raise SyncError(f"delete pod {name}: HTTP {resp.status} {_message(resp)}")
        return resp.status in (200, 202)


def _message(resp: Any) -> str:
    """A Status object's message (it names objects, never a Secret's data)."""
    try:
        return str(json.loads(resp.data).get("message", ""))[:200]
    except (json.JSONDecodeError, AttributeError):
        return ""


_MISSING_KEY = re.compile(r"key (\S+) in Secret (\S+)/(\S+)\Z")
"""The end of kubelet's message for a missing Secret key: "couldn't find key token in Secret ns/name" (kubernetes
pkg/kubelet/kubelet_pods.go; "Couldn't" in older releases)."""


def _missing_key(message: str, namespace: str, secrets: set[str]) -> bool:
    """Whether ``message`` says the token key of one of ``secrets`` is missing: other causes share the waiting reason
    (another key, a ConfigMap, runAsNonRoot against a root image)."""
    found = _MISSING_KEY.search(message.strip())
    return found is not None and found.group(1) == TOKEN_KEY and found.group(2) == namespace and found.group(3) in secrets


class Waiting(NamedTuple):
    """The pods, created at least :data:`STUCK_AFTER_SECONDS` before now and not being deleted, with a container
    (init or not) that takes the token key of one of the Secrets into its environment and that kubelet could not
    create from its configuration (:data:`WAITING_FOR_CONFIG`)."""

    stuck: list[dict[str, Any]]
    """kubelet's message says that key of that Secret is missing, and a ReplicaSet runs the pod (the operator's
    Deployment's, which replaces a deleted pod): once the Secret holds the key, nothing but a missed retry keeps
    such a pod waiting."""
    left: list[dict[str, Any]]
    """The others (:data:`~.contract.LEFT_METRIC`): another cause (another key or Secret, runAsNonRoot against a
    root image), a message worded otherwise, or no ReplicaSet to start the pod again."""


def waiting_pods(pods: list[dict[str, Any]], secrets: set[str], namespace: str, now: datetime) -> Waiting:
    """Which of ``pods`` wait on the token key of one of ``secrets`` (:class:`Waiting`)."""
    waiting = Waiting([], [])
    for pod in pods:
        spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, pod.get("metadata") or {}
        reads: dict[str, set[str]] = {}
        for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
            for variable in container.get("env") or []:
                ref = (variable.get("valueFrom") or {}).get("secretKeyRef") or {}
                if ref.get("name") in secrets and ref.get("key") == TOKEN_KEY:
                    reads.setdefault(container.get("name", ""), set()).add(ref["name"])
        messages = [(str(w.get("message", "")), reads[s.get("name", "")])
                    for s in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
                    if (w := (s.get("state") or {}).get("waiting") or {}).get("reason") == WAITING_FOR_CONFIG
                    and s.get("name", "") in reads]
        created = meta.get("creationTimestamp")
        if not messages or not created or meta.get("deletionTimestamp") or \
                (now - datetime.fromisoformat(created.replace("Z", "+00:00"))).total_seconds() < STUCK_AFTER_SECONDS:
            continue
        missing_key = any(_missing_key(message, namespace, read) for message, read in messages)
        replaced = any(o.get("controller") and o.get("kind") == "ReplicaSet" for o in meta.get("ownerReferences") or [])
        (waiting.stuck if missing_key and replaced else waiting.left).append(pod)
    return waiting


def restart_stuck(namespace: Namespace, secrets: set[str], cluster: str, now: datetime) -> dict[str, list[str]]:
    """Delete every pod :func:`waiting_pods` finds stuck (its Deployment starts a new one, which reads the key);
    the names of those restarted and of those left. Publishes both counts (0 included) for the alarms that watch
    them, then raises if a deletion failed."""
    waiting = waiting_pods(namespace.pods(), secrets, namespace.name, now)
    restarted, failures = [], []
    for pod in waiting.stuck:
        name = pod["metadata"]["name"]
        try:
            if namespace.delete_pod(name, pod["metadata"].get("uid", "")):
                restarted.append(name)
        except SyncError as error:
            failures.append(str(error))
        except urllib3.exceptions.HTTPError as error:  # a timeout or a dropped connection, after urllib3's retries
            failures.append(f"delete pod {name}: {type(error).__name__}: {error}")
    left = [pod["metadata"]["name"] for pod in waiting.left]
    print(emf_line(METRICS_NAMESPACE, [[CLUSTER_DIMENSION, NAMESPACE_DIMENSION]],
                   {RESTARTED_METRIC: len(restarted), LEFT_METRIC: len(left)},
                   **{CLUSTER_DIMENSION: cluster, NAMESPACE_DIMENSION: namespace.name}, restarted=restarted, left=left,
                   failures=failures))
    if failures:
        raise SyncError("; ".join(failures))
    return {"restarted": restarted, "left": left}


def sync(tokens: dict[str, str], namespace: Namespace, secrets: Any, *,
         missing_ok: bool = False) -> list[dict[str, Any]]:
    """Copy every token; one line per Secret (name, secret version, changed, whether it held a token before), every
    failure raised together.
    ``missing_ok``: a Kubernetes Secret that does not exist is logged as ``missing`` and skipped, not a failure
    (its token is not read)."""
    results, missing, failures = [], [], []
    for name, secret_id in sorted(tokens.items()):
        try:
            current = namespace.current(name)  # first: a missing Secret needs no token
            answer = secrets.get_secret_value(SecretId=secret_id)
            if "SecretString" not in answer:
                raise SyncError(f"secret {secret_id}: binary; store the Hub token as a string")
            token = token_of(answer["SecretString"], secret_id)
            changed = current != token
            if changed:
                namespace.write(name, token)
            results.append({"secret": name, "source": secret_id, "version": answer.get("VersionId"),
                            "changed": changed, "had_token": current is not None})
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


def run(*, missing_ok: bool = False, restart: bool = False) -> dict[str, Any]:
    """Copy every token (:func:`sync`); with ``restart``, then restart the pods stuck on a Secret that held its token
    before this run (a key written just now may not have reached kubelet yet: the next run looks again)."""
    cluster = os.environ["HYPERWARM_CLUSTER_NAME"]
    region = os.environ["AWS_REGION"] if "AWS_REGION" in os.environ else os.environ["AWS_DEFAULT_REGION"]
    endpoint, ca_pem = cluster_access(cluster, region)
    namespace = Namespace(endpoint, ca_pem, eks_token(cluster, region), os.environ["HYPERWARM_NAMESPACE"])
    tokens = json.loads(os.environ["HYPERWARM_HUB_TOKENS"])
    synced = sync(tokens, namespace, boto3.client("secretsmanager", region_name=region), missing_ok=missing_ok)
    filled = {r["secret"] for r in synced if r.get("had_token")}
    pods = restart_stuck(namespace, filled, cluster, datetime.now().astimezone()) if restart else {}
    return {"synced": synced, **pods}


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any] | None:
    """A CloudFormation request, or a scheduled run, which also restarts stuck pods (:func:`restart_stuck`; raises on
    any failure, so the function's Errors metric counts it).

    Create copies every token and fails the deploy if one cannot be copied (a Secret missing included). Update
    does the same, except that a Kubernetes Secret that does not exist is logged and skipped: CloudFormation also
    sends an Update while it rolls a failed deploy back, with the previous token list, possibly before the
    rollback has applied those Secrets again, and a custom resource that fails then leaves the stack
    UPDATE_ROLLBACK_FAILED; the scheduled run fills such a Secret once it exists. Delete does nothing: the
    Secrets go with the models' manifest."""
    if "RequestType" not in event:
        return run(restart=True)
    status, reason = "SUCCESS", "Secrets go with the models' manifest"
    if event["RequestType"] in ("Create", "Update"):
        try:
            results = run(missing_ok=event["RequestType"] == "Update")["synced"]
            skipped = [r["secret"] for r in results if r.get("missing")]
            reason = f"copied {len(results) - len(skipped)} Hub token(s) into their Kubernetes Secrets"
            if skipped:
                reason += (f"; skipped {', '.join(skipped)}: no such Secret (a rollback may not have restored it "
                           "yet; the scheduled copy fills it once it exists)")
        except Exception as error:  # noqa: BLE001 (any failure must still answer CloudFormation)
            status, reason = "FAILED", f"could not copy the Hub tokens: {error}"
    respond(event, status, reason, "hub-token-sync")
    return None
