"""``make synth``: synthesize every environment into cdk.out/ and print what was built."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from manifests import write_manifests
from stacks.config.environment import load_context

from . import served
from .app import build_app, freeze_imports, selected_environments
from .baseline import CONTEXT_KEY, synthesize
from .caches_stack import chart_props
from .errors import exit_on_config_error
from .summary import environment_rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--outdir", default="cdk.out")
    parser.add_argument("--env", help="comma-separated environments (default: all)")
    parser.add_argument("--baseline", help="templates to compare with: cloudformation, none or a directory "
                                           "(default: the previous synth in --outdir; see stacks/baseline.py)")
    args = parser.parse_args(argv)
    freeze_imports()
    console = Console()
    if not console.is_terminal:  # CI logs: wide enough that rows do not wrap
        console = Console(width=140)
    with exit_on_config_error():
        return _synth(args, console)


def _synth(args: argparse.Namespace, console: Console) -> int:
    context = load_context("cdk.json")
    context.setdefault(served.CONTEXT_KEY, "config")  # offline and the same on every machine (docs/operating-guide.md, "served")
    if args.env:
        context["env"] = args.env
    if args.baseline:
        context[CONTEXT_KEY] = args.baseline
    start = time.perf_counter()
    with console.status("synthesizing ..."):
        app = build_app(outdir=args.outdir, context=context)
        assembly = synthesize(app)
    console.print(f"synthesized {len(assembly.stacks)} stacks into {args.outdir}/ "
                  f"in {time.perf_counter() - start:.1f} s")
    for env_name, config in selected_environments(app).items():
        written = write_manifests(env_name, chart_props(env_name, config), Path("dist/manifests"))
        if written:
            console.print(f"wrote {len(written)} manifests to dist/manifests/{env_name}/")
        table = Table(title=f"environment {env_name} ({config.region})", title_justify="left")
        for column in ("stack", "resources", "details"):
            table.add_column(column)
        for row in environment_rows(assembly, env_name, config):
            table.add_row(*row)
        console.print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
