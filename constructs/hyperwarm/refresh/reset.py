"""``hyperwarm refresh reset``: record, on purpose, which version a target serves.

For a record an upload moved ahead of what really serves (a bad or hostile version an operator since pointed the
deployment back from by hand): the refresh would skip every later version as older. The reset writes the version
the target serves into its record, conditionally like every state write, and keeps who asked, when, from what and
why in the record (``resets``). It refuses while a refresh or rollout is in flight (abort that first), and it
refuses a version the deployed refresh function's gate would not admit (its name rules, manifest, signature and
files, read with the function's own configuration): a reset restores a version that passed the gate, it never
vouches for one. Nothing in the cluster or on the endpoint changes: the next version moves the target as usual,
through the gate.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from hyperwarm._internal.aws_cli import run_aws
from hyperwarm.functions.cache_refresh.versions import UnorderableVersion, parse


def reset(table: str, target: str, version: str, reason: str, function: str, *, region: str | None = None,
          clients: Any = None) -> dict[str, Any]:
    """Record ``version`` as what ``target`` serves; returns the record. ValueError for a version the refresh
    cannot order or its gate refuses, an empty reason, or a target with something in flight."""
    from hyperwarm.functions.cache_refresh import recheck
    from hyperwarm.functions.cache_refresh.state import DynamoStore, StateTable

    try:
        parse(version)
    except UnorderableVersion as exc:
        raise ValueError(f"--version {version!r}: {exc}") from None
    if not reason.strip():
        raise ValueError("--reason: say why (it is kept in the record with who asked)")

    def make(service: str) -> Any:
        if clients is not None:
            return clients(service)
        import boto3
        return boto3.resource(service, region_name=region) if service == "dynamodb" else \
            boto3.client(service, region_name=region)

    settings = recheck.deployed_settings(make("lambda"), function)
    if settings is None:
        raise ValueError(f"--function-name {function!r}: no such function here; the reset checks the version with the "
                         "deployed refresh function's gate (hyperwarm-<env>-cache-refresh)")
    state = StateTable(DynamoStore(make("dynamodb"), table))
    item = state.get(target)
    if item.get("pending") or item.get("starting"):  # the write refuses it too (and a held lock): say so first
        raise ValueError(f"{target}: a refresh or rollout is in flight; let it end (or hyperwarm refresh abort it) "
                         "first")
    problem = recheck.served_problem(settings, target, version, str(item.get("current_bucket") or ""), make("s3"),
                                     make("kms"))
    if problem is not None:
        raise ValueError(f"--version {version!r}: the refresh's gate refuses it ({problem}); reset only to the "
                         "version that really serves, which passed the gate when it was refreshed")
    who = make("sts").get_caller_identity()["Arn"]
    return state.reset(target, version=version, by=who, reason=reason)


def _run(args: argparse.Namespace) -> int:
    record, code = run_aws("hyperwarm refresh reset",
                           lambda: reset(args.table, args.target, args.version, args.reason, args.function_name,
                                         region=args.region))
    if record is not None:
        print(json.dumps(record["resets"][-1]))
    return code


def add_record_arguments(parser: argparse.ArgumentParser) -> None:
    """The target record an operating command changes: ``--target`` and ``--table``."""
    parser.add_argument("--target", required=True,
                        help="the target id, e.g. hyperpod:<cluster>/<namespace>/InferenceEndpointConfig/<model>")
    parser.add_argument("--table", required=True, help="the refresh state table, hyperwarm-<env>-cache-refresh-state")


def add_parser(commands: Any) -> None:
    rs = commands.add_parser("reset", help="record which version a target serves, on purpose (a record a bad upload "
                                           "moved ahead); who and why are kept")
    add_record_arguments(rs)
    rs.add_argument("--version", required=True, help="the version the target serves now, e.g. v7")
    rs.add_argument("--reason", required=True, help="why, kept in the record")
    rs.add_argument("--function-name", required=True,
                    help="the refresh function, hyperwarm-<env>-cache-refresh (its gate checks the version)")
    rs.add_argument("--region", default=None, help="the environment's region (default: boto3's)")
    rs.set_defaults(func=_run)
