"""The ``hyperwarm`` command: planning and operations tools next to the constructs.

Each command group lives in its own module and registers itself with ``add_parser(subparsers)``;
groups are imported only when the command line names them, so ``hyperwarm --help`` stays fast
and a group's heavier dependencies (numpy, matplotlib) load only when used.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

# command -> (module providing add_parser, one-line help)
COMMANDS = {
    "plan": ("planner.cache_plan", "plan model caches: NVMe fit and cold vs warm scale-out time"),
    "routing": ("planner.routing_cli", "simulate endpoint routing strategies and tune prefix-aware settings"),
    "refresh": ("hyperwarm.refresh_cli", "operate cache refreshes (replay dead-lettered events)"),
}


def build_parser(selected: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hyperwarm", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        if name == selected:
            importlib.import_module(module).add_parser(subparsers)
        else:
            subparsers.add_parser(name, help=help_text)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    selected = next((a for a in args_in if not a.startswith("-")), None)
    if selected in COMMANDS:
        try:
            importlib.import_module(COMMANDS[selected][0])
        except ModuleNotFoundError as exc:
            print(f"hyperwarm {selected}: not available in this installation ({exc.name} is missing)", file=sys.stderr)
            return 2
    parser = build_parser(selected if selected in COMMANDS else None)
    args = parser.parse_args(args_in)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0 if args.command is None else 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
