"""The ``hyperwarm`` command: the routing planner and cache-refresh operations.

Installed with the ``tools`` extra (``pip install 'hyperwarm[tools]'``). An app adds its own groups
(this project's app adds ``plan``, which reads its cdk.json: ``python -m stacks plan cache``) by
passing them to :func:`main`. Each command group lives in its own module and registers itself with ``add_parser(subparsers)``;
groups are imported only when the command line names them, so ``hyperwarm --help`` stays fast
and a group's heavier dependencies (numpy, matplotlib) load only when used.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Mapping, Sequence

# command -> (module providing add_parser, one-line help)
COMMANDS = {
    "routing": ("hyperwarm.planner.routing_cli", "simulate endpoint routing strategies and tune prefix-aware settings"),
    "refresh": ("hyperwarm.refresh.cli", "operate cache refreshes (replay dead-lettered events, abort a rollout, "
                                         "reset a recorded version)"),
    "publish": ("hyperwarm.refresh.publish", "upload a model version signed, manifest last"),
}


def build_parser(selected: str | None, commands: Mapping[str, tuple[str, str]] = COMMANDS,
                 prog: str = "hyperwarm") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in commands.items():
        if name == selected:
            importlib.import_module(module).add_parser(subparsers)
        else:
            subparsers.add_parser(name, help=help_text)
    return parser


def main(argv: Sequence[str] | None = None, commands: Mapping[str, tuple[str, str]] = COMMANDS,
         prog: str = "hyperwarm") -> int:
    """Run the command line; ``commands`` maps a group name to (module with ``add_parser``, help)."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    selected = next((a for a in args_in if not a.startswith("-")), None)
    if selected is not None and selected in commands:
        try:
            importlib.import_module(commands[selected][0])
        except ModuleNotFoundError as exc:
            print(f"{prog} {selected}: not available in this installation ({exc.name} is missing; "
                  f"pip install 'hyperwarm[tools]')", file=sys.stderr)
            return 2
    parser = build_parser(selected if selected in commands else None, commands, prog)
    args = parser.parse_args(args_in)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0 if args.command is None else 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
