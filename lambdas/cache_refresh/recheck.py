"""A version the state table records as serving, passed through the gate again before anything outside the refresh
function acts on it: synth following what the refresh made serve (``stacks/served.py``) and ``hyperwarm refresh
reset``. More principals can write the table than can publish (docs/threat-model.md): a version only the table
vouches for must choose nothing.

The rules are the deployed function's own, read from its configuration (the same environment it reads at cold
start), so the check holds what the function would hold: the version's name, its manifest, the publisher's
signature where the prefix requires one, and its files.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from . import config, gate
from .errors import PermanentError
from .events import ManifestCreated


def deployed_settings(lambda_client: Any, function_name: str) -> config.Settings | None:
    """The refresh function's configuration as deployed; None when it is not deployed (nothing was refreshed)."""
    try:
        answer = lambda_client.get_function_configuration(FunctionName=function_name)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            return None
        raise
    return config.load((answer.get("Environment") or {}).get("Variables") or {})


def served_problem(settings: config.Settings, target_id: str, version: str, bucket: str, s3: Any,
                   kms: Any) -> str | None:
    """Why the gate would not admit ``version`` as what ``target_id`` serves (a ``reason: message``), or None.
    Raises TransientError when S3 or KMS cannot answer now."""
    target = next((t for ts in settings.targets.values() for t in ts if t.id == target_id), None)
    if target is None:
        return f"unknown-target: {target_id} is not a target of the deployed refresh function"
    prefix = settings.prefix_of(target)
    refusal = gate.name_problem(settings, bucket, prefix, version, new=False)
    if refusal is not None:
        return f"{refusal.reason}: {refusal.message}"
    created = ManifestCreated(bucket=bucket, key=f"{prefix}/{version}/manifest.json", sequencer="", version_id=None,
                              prefix=prefix, version=version, time="")
    try:
        gate.content(s3, kms, settings, created)
    except PermanentError as exc:
        return f"{exc.reason}: {exc.message}"
    return None
