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
