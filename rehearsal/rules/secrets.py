"""Secrets Manager reads name their secrets, and a Hub token reaches the operator's download.

IAM accepts `secretsmanager:GetSecretValue` on `*`, and the operator accepts a `tokenSecretRef` naming a
Kubernetes Secret nobody fills: the first leaks every secret of the account to one role, the second leaves the
download's init container waiting on a missing Secret (kubelet cannot build its `HF_TOKEN`) with nothing failing at
deploy. These rules find both in the templates.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from typing import Any

from rehearsal.core import Assembly, Finding, rule, text_of
from rehearsal.rules.roles import role_statements

_READ = "secretsmanager:getsecretvalue"
SOURCE_ANNOTATION = "hyperwarm.io/hub-token-source"
"""Written out here, not imported from the construct: the rule must fail when the construct changes it."""


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _reads_secrets(statement: dict[str, Any]) -> bool:
    return any(isinstance(a, str) and fnmatch.fnmatchcase(_READ, a.lower()) for a in _listed(statement.get("Action", [])))


def _unnamed(resource: Any) -> bool:
    """A resource pattern that names no secret: `*`, or any secret of an account (`...:secret:*`)."""
    text = text_of(resource)
    return text == "*" or text.endswith(":secret:*") or text.endswith(":*")


@rule("secrets.read-scoped",
      source="https://docs.aws.amazon.com/secretsmanager/latest/userguide/auth-and-access_iam-policies.html")
def read_scoped(assembly: Assembly) -> Iterator[Finding]:
    """Every statement that allows secretsmanager:GetSecretValue names the secrets it reads (their ARNs, a
    name's random suffix matched by `-??????`), never `*` or every secret of an account: Secrets Manager's
    permission examples grant reads per secret, and a role that may read any secret reads every credential the
    account keeps."""
    for stack, logical_id, resource in assembly.resources():
        kind = resource.get("Type")
        props = resource.get("Properties", {})
        if kind == "AWS::IAM::Policy":
            documents = [props.get("PolicyDocument", {})]
        elif kind == "AWS::IAM::Role":
            documents = [p.get("PolicyDocument", {}) for p in props.get("Policies", [])]
        elif kind == "AWS::IAM::ManagedPolicy":
            documents = [props.get("PolicyDocument", {})]
        else:
            continue
        for document in documents:
            for statement in _listed(document.get("Statement", [])):
                if statement.get("Effect") != "Allow" or not _reads_secrets(statement):
                    continue
                broad = [text_of(r) for r in _listed(statement.get("Resource", [])) if _unnamed(r)]
                if broad:
                    yield Finding("secrets.read-scoped", stack, logical_id,
                                  f"allows secretsmanager:GetSecretValue on {', '.join(broad)}: name each secret's "
                                  "ARN instead")


def _granted(assembly: Assembly, secret: str) -> bool:
    """Whether some role of the assembly may GetSecretValue on `secret` (a name or a complete ARN)."""
    for stack, role_id, _ in assembly.resources("AWS::IAM::Role"):
        for statement in role_statements(assembly, stack, role_id):
            if not _reads_secrets(statement):
                continue
            for resource in _listed(statement.get("Resource", [])):
                granted = text_of(resource, placeholder="*")
                if secret.startswith("arn:") and fnmatch.fnmatchcase(secret, granted):
                    return True
                if not secret.startswith("arn:") and fnmatch.fnmatchcase(f"x:secret:{secret}-AbCdEf",
                                                                         "x:secret:" + granted.split(":secret:")[-1]):
                    return True
    return False


@rule("secrets.hub-token",
      source="https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-ts-huggingface.html")
def hub_token(assembly: Assembly) -> Iterator[Finding]:
    """An InferenceEndpointConfig whose Hugging Face source has a `tokenSecretRef` names a Secret applied in its
    namespace, and a role of the app may read the Secrets Manager secret that Secret is filled from (its
    `hyperwarm.io/hub-token-source` annotation). The operator injects the Secret's key as `HF_TOKEN` into the
    download init container only; a missing Secret or key keeps that container from starting, and an unreadable
    secret leaves the Secret empty (AWS's troubleshooting page: 401 or a failing `hf-model-downloader`)."""
    objects = list(assembly.kubernetes_objects())
    secrets = {(o.get("metadata", {}).get("namespace"), o.get("metadata", {}).get("name")): o
               for _, _, o in objects if o.get("kind") == "Secret"}
    for stack, logical_id, obj in objects:
        if obj.get("kind") != "InferenceEndpointConfig":
            continue
        ref = obj.get("spec", {}).get("modelSourceConfig", {}).get("huggingFaceModel", {}).get("tokenSecretRef")
        if not ref:
            continue
        namespace, name = obj.get("metadata", {}).get("namespace"), ref.get("name")
        secret = secrets.get((namespace, name))
        where = f"InferenceEndpointConfig {namespace}/{obj.get('metadata', {}).get('name')}"
        if secret is None:
            yield Finding("secrets.hub-token", stack, logical_id,
                          f"{where}: tokenSecretRef names Secret {name!r}, which no manifest applies in {namespace!r}")
            continue
        source = (secret.get("metadata", {}).get("annotations") or {}).get(SOURCE_ANNOTATION)
        if not source:
            yield Finding("secrets.hub-token", stack, logical_id,
                          f"{where}: Secret {name!r} says not which Secrets Manager secret fills it "
                          f"({SOURCE_ANNOTATION})")
        elif not _granted(assembly, source):
            yield Finding("secrets.hub-token", stack, logical_id,
                          f"{where}: no role may secretsmanager:GetSecretValue on {source!r}, so Secret {name!r} "
                          "stays empty")

