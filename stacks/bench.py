"""``make bench``: synth time of hyperwarm's app against a plain-L1 baseline with the same resources.

Each repetition runs in a fresh process (a new jsii runtime, as ``cdk synth`` has) and times
app construction plus synthesis, after imports. The baseline declares every resource of the
same templates as a bare ``CfnResource`` (no L2 logic, no validation beyond CloudFormation's
shape) and stages the same asset files, so the ratio is what hyperwarm's constructs, config
validation and cdk-nag add.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile

from rich.console import Console
from rich.table import Table

_OURS = """
import json, sys, time
from pathlib import Path
import aws_cdk
from stacks.app import build_app
context = json.loads(Path("cdk.json").read_text())["context"]
if sys.argv[2]:
    context["env"] = sys.argv[2]
start = time.perf_counter()
build_app(outdir=sys.argv[1], context=context, nag=sys.argv[3] == "nag").synth()
print(time.perf_counter() - start)
"""

_BASELINE = """
import json, sys, time
from pathlib import Path
import aws_cdk as cdk
reference = Path(sys.argv[2])
templates = [json.loads(p.read_text()) | {"_name": p.name.removesuffix(".template.json")}
             for p in sorted(reference.glob("*.template.json"))]
# The files each stack deploys (Lambda code, layers, scripts), from its asset manifest.
assets = {t["_name"]: [reference / f["source"]["path"]
                       for f in json.loads((reference / f"{t['_name']}.assets.json").read_text())["files"].values()
                       if f["source"]["path"] != f"{t['_name']}.template.json"] for t in templates}
wanted = [e for e in sys.argv[3].split(",") if e]
start = time.perf_counter()
app = cdk.App(outdir=sys.argv[1])
for template in templates:
    if wanted and not any(template["_name"].startswith(f"hyperwarm-{e}-") for e in wanted):
        continue
    stack = cdk.Stack(app, template["_name"])
    for logical_id, resource in template["Resources"].items():
        cfn = cdk.CfnResource(stack, logical_id, type=resource["Type"], properties=resource.get("Properties"))
        cfn.override_logical_id(logical_id)
    for index, path in enumerate(assets[template["_name"]]):
        cdk.aws_s3_assets.Asset(stack, f"Asset{index}", path=str(path))
app.synth()
print(time.perf_counter() - start)
"""


def _time(code: str, *args: str) -> float:
    with tempfile.TemporaryDirectory() as outdir:
        result = subprocess.run([sys.executable, "-c", code, outdir, *args], capture_output=True, text=True,
                                check=True)
    return float(result.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="repetitions per measurement (median is reported)")
    args = parser.parse_args(argv)
    console = Console()
    if not console.is_terminal:
        console = Console(width=120)
    table = Table(title=f"synth time, median of {args.repeat} fresh processes", title_justify="left")
    for column in ("scope", "hyperwarm (s)", "hyperwarm + cdk-nag (s)", "plain L1 baseline (s)", "ratio", "ratio + nag"):
        table.add_column(column, justify="right")
    kinds = (("hyperwarm", _OURS, ""), ("hyperwarm + cdk-nag", _OURS, "nag"), ("plain L1 baseline", _BASELINE, None))
    scopes = (("one environment (prod)", "prod"), ("all environments", ""))
    runs, done = 1 + len(scopes) * len(kinds) * args.repeat, 0

    def timed(label: str, code: str, *code_args: str) -> float:
        nonlocal done
        done += 1
        seconds = _time(code, *code_args)
        console.print(f"[{done}/{runs}] {label}: {seconds:.2f} s")  # a line per run: long, and in CI logs too
        return seconds

    with tempfile.TemporaryDirectory() as reference:
        timed("reference templates for the baseline", _OURS.replace("sys.argv[1]", repr(reference)), "", "", "")
        for scope, envs in scopes:
            medians = []
            for kind, code, nag in kinds:
                code_args = (envs, nag) if nag is not None else (reference, envs)
                medians.append(statistics.median(
                    timed(f"{scope}, {kind}, run {i + 1} of {args.repeat}", code, *code_args)
                    for i in range(args.repeat)))
            ours, nag_s, base = medians
            table.add_row(scope, f"{ours:.2f}", f"{nag_s:.2f}", f"{base:.2f}", f"{ours / base:.2f}x",
                          f"{nag_s / base:.2f}x")
    console.print(table)
    console.print("target: hyperwarm within 1.3x of the baseline")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
