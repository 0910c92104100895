"""``make protect ENV=prod`` (``python -m stacks.protect prod``): the stack policy on a production
environment's deployed cluster and endpoints stacks; ``make deploy`` runs it after ``cdk deploy``.

A stack policy guards every later update of its stack, whoever runs it. Neither aws-cdk-lib (no stack
property) nor the CDK CLI (no ``cdk deploy`` option) sets one, so this sets ``stack_policy.json`` with
SetStackPolicy. It allows every update except ``Update:Replace`` of the HyperPod cluster, the EKS
cluster and the endpoints, and ``Update:Delete`` of the clusters (what a changed logical id does):
such an update fails and rolls back, the resources untouched (CloudFormation "Prevent updates to stack
resources": https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/protect-stack-resources.html).
It also checks termination protection, which ``cdk deploy`` sets from the stacks (``production``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from stacks.config import ConfigError, EnvironmentConfig, load_context, parse_environments

POLICY_FILE = Path(__file__).with_name("stack_policy.json")


def protected_stacks(env_name: str, config: EnvironmentConfig) -> list[str]:
    """The environment's stacks holding what the policy protects."""
    from stacks.app import stack_name

    parts = (["cluster"] if config.instance_groups else []) + (["endpoints"] if config.endpoints else [])
    return [stack_name(env_name, part) for part in parts]


def protect(env_name: str, config: EnvironmentConfig, client: Any) -> list[str]:
    """Set the policy on each deployed protected stack with ``client`` (boto3 CloudFormation); one line
    per stack. Raises ConfigError when a deployed stack lacks termination protection."""
    from botocore.exceptions import ClientError

    done, problems = [], []
    for name in protected_stacks(env_name, config):
        try:
            (stack,) = client.describe_stacks(StackName=name)["Stacks"]
        except ClientError as error:
            if "does not exist" not in str(error):
                raise
            done.append(f"{name}: not deployed, nothing to protect")
            continue
        client.set_stack_policy(StackName=name, StackPolicyBody=POLICY_FILE.read_text())
        done.append(f"{name}: stack policy set ({POLICY_FILE.name})")
        if not stack.get("EnableTerminationProtection"):
            problems.append(f"{name}: termination protection is off -- deploy it with this project's cdk.json "
                            f"(environments.{env_name}.production: true sets it)")
    if problems:
        raise ConfigError("\n".join([*done, *problems]))
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stacks.protect", description=__doc__.split("\n\n")[0])
    parser.add_argument("env", help="the environment (cdk.json context.environments)")
    args = parser.parse_args(argv)
    environments = parse_environments(load_context("cdk.json").get("environments"))
    if args.env not in environments:
        raise ConfigError(f"{args.env}: unknown environment; configured: {', '.join(sorted(environments))}")
    config = environments[args.env]
    if not config.production:
        print(f"{args.env}: not a production environment (production: false), no stack policy")
        return 0
    import boto3

    for line in protect(args.env, config, boto3.client("cloudformation", region_name=config.region)):
        print(line)
    return 0


if __name__ == "__main__":
    from stacks.errors import exit_on_config_error

    with exit_on_config_error():
        raise SystemExit(main())
