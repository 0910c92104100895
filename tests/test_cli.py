"""The ``hyperwarm`` command dispatches to its command groups."""

from __future__ import annotations

import pytest

from hyperwarm import cli


def test_help_lists_every_command_group(capsys) -> None:
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    for command in cli.COMMANDS:
        assert command in out


def test_unknown_command_is_an_argparse_error() -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["frobnicate"])
    assert info.value.code == 2


def test_routing_group_registers_its_subcommands(capsys) -> None:
    with pytest.raises(SystemExit):
        cli.main(["routing", "--help"])
    out = capsys.readouterr().out
    assert "simulate" in out and "tune" in out


def test_operating_commands_exit_1_for_what_the_user_must_change_and_2_for_what_aws_answered(capsys) -> None:
    from botocore.exceptions import ClientError, NoCredentialsError

    from hyperwarm._internal.aws_cli import run_aws

    def raising(exc: Exception):
        def action():
            raise exc
        return action

    assert run_aws("hyperwarm x", lambda: 7) == (7, 0)
    assert run_aws("hyperwarm x", raising(ValueError("no rollout in flight"))) == (None, 1)
    assert capsys.readouterr().err == "hyperwarm x: no rollout in flight\n"
    denied = ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "GetItem")
    assert run_aws("hyperwarm x", raising(denied)) == (None, 2)
    assert "AccessDenied" in capsys.readouterr().err
    assert run_aws("hyperwarm x", raising(NoCredentialsError())) == (None, 2)
    assert "no AWS credentials found" in capsys.readouterr().err
    assert run_aws("hyperwarm x", raising(RuntimeError("reconciliation failed")), failed=(RuntimeError,)) == (None, 2)
