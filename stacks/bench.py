"""``make bench``: synth time of hyperwarm's app against a plain-L1 baseline with the same resources.

Each repetition runs in a fresh process (a new jsii runtime, as ``cdk synth`` has) and times app construction plus
synthesis, after imports. The baseline (:func:`baseline_app`) synthesizes the same templates from bare
``CfnResource``, ``CfnParameter``, ``CfnCondition`` and ``CfnOutput`` objects (no L2 logic, no validation beyond
CloudFormation's shape) and stages the same asset files, so the ratio is what hyperwarm's constructs, config
validation and cdk-nag add. Each repetition runs the three kinds one after the other, so a change in the machine's
load falls on all of them; besides the wall clock, each run reports its CPU time (its Python process and jsii's
Node, user + system), the steadier figure on a shared machine, and a second table says where it goes: construction
and synthesis, Python's CPU and Node's, and the jsii requests (each a round trip).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    import aws_cdk as cdk

_CPU = """
import os
def cpu():
    # user + system seconds of this process and of its descendants still running (jsii's Node), from /proc
    ticks, parent, used = os.sysconf("SC_CLK_TCK"), {}, {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(pid)], used[int(pid)] = int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks
    mine, total = {os.getpid()}, sum(os.times()[:2])
    while grown := {p for p, q in parent.items() if q in mine} - mine:
        mine |= grown
        total += sum(used[p] for p in grown)
    return total
def python_cpu():
    return sum(os.times()[:2])
# Every jsii request is a round trip to Node: counted, as where the time goes is mostly there.
from jsii._kernel.providers import process as _process
sent, _send = [0], _process._NodeProcess.send
def _counting(self, request, response_type):
    sent[0] += 1
    return _send(self, request, response_type)
_process._NodeProcess.send = _counting
def report(start, start_cpu, start_python, built):
    # total wall, total CPU, construction wall, Python CPU, jsii requests
    print(time.perf_counter() - start, cpu() - start_cpu, built - start, python_cpu() - start_python, sent[0])
"""

_OURS = _CPU + """
import json, sys, time
from pathlib import Path
import aws_cdk
from stacks.app import build_app, freeze_imports
freeze_imports()  # as app.py does after its imports
context = json.loads(Path("cdk.json").read_text())["context"]
if sys.argv[2]:
    context["env"] = sys.argv[2]
start, start_cpu, start_python, sent[0] = time.perf_counter(), cpu(), python_cpu(), 0
app = build_app(outdir=sys.argv[1], context=context, nag=sys.argv[3] == "nag")
built = time.perf_counter()
app.synth()
report(start, start_cpu, start_python, built)
"""

_EXAMPLE = _CPU + """
import os, runpy, sys, time
os.environ["CDK_OUTDIR"] = sys.argv[1]  # before aws_cdk starts Node: the example's cdk.App() writes there
import aws_cdk
import hyperwarm
for name in hyperwarm.__all__:  # the library's modules load before the clock starts, as the app's do
    getattr(hyperwarm, name)
built, _synth = [0.0], aws_cdk.App.synth
def synth(self, *args, **kwargs):
    built[0] = time.perf_counter()
    return _synth(self, *args, **kwargs)
aws_cdk.App.synth = synth
start, start_cpu, start_python, sent[0] = time.perf_counter(), cpu(), python_cpu(), 0
runpy.run_path(sys.argv[2], run_name="__main__")
report(start, start_cpu, start_python, built[0])
"""
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "my_platform_app.py"
"""The consumer app of the library guide, built from the public API only."""

_BASELINE = _CPU + """
import sys, time
from pathlib import Path
import aws_cdk as cdk
from stacks.bench import baseline_app, reference_stacks
stacks = reference_stacks(Path(sys.argv[2]), [e for e in sys.argv[3].split(",") if e])  # read before the clock
start, start_cpu, start_python, sent[0] = time.perf_counter(), cpu(), python_cpu(), 0
app = baseline_app(stacks, sys.argv[1])
built = time.perf_counter()
app.synth()
report(start, start_cpu, start_python, built)
"""

_RESOURCE_ATTRIBUTES = {"Condition", "CreationPolicy", "DeletionPolicy", "DependsOn", "Metadata", "UpdatePolicy",
                        "UpdateReplacePolicy"}
_KNOWN = {"template": {"AWSTemplateFormatVersion", "Conditions", "Description", "Metadata", "Outputs", "Parameters",
                       "Resources", "Rules"},
          "resource": {"Type", "Properties"} | _RESOURCE_ATTRIBUTES,
          "output": {"Value", "Description", "Export", "Condition"},
          "asset manifest": {"version", "files"}}
"""What the baseline reproduces; anything else in a reference is refused by name rather than left out."""
_SYNTHESIZER_OWN = {"Parameters": {"BootstrapVersion"}, "Rules": {"CheckBootstrapVersion"}}
"""What the default stack synthesizer adds to every template: the baseline gets it the same way."""


class ReferenceStack(NamedTuple):
    """One stack of a reference ``cdk.out``: its name, template and the files it stages."""

    name: str
    template: dict[str, Any]
    assets: list[Path]


def reference_stacks(reference: Path, envs: Sequence[str] = ()) -> list[ReferenceStack]:
    """The stacks in ``reference`` (a ``cdk.out``), only those of ``envs`` (default: all), each checked to hold
    nothing :func:`baseline_app` would leave out."""
    stacks = []
    for path in sorted(reference.glob("*.template.json")):
        name = path.name.removesuffix(".template.json")
        if envs and not any(name.startswith(f"hyperwarm-{env}-") for env in envs):
            continue
        template, manifest = json.loads(path.read_text()), json.loads((reference / f"{name}.assets.json").read_text())
        _refuse_unknown(path.name, "template", template)
        _refuse_unknown(f"{name}.assets.json", "asset manifest", {k: v for k, v in manifest.items() if v})
        for logical_id, resource in template["Resources"].items():
            _refuse_unknown(f"{path.name} {logical_id}", "resource", resource)
        for logical_id, output in template.get("Outputs", {}).items():
            _refuse_unknown(f"{path.name} {logical_id}", "output", output)
        if rules := set(template.get("Rules", {})) - _SYNTHESIZER_OWN["Rules"]:
            raise ValueError(f"{path.name}: the baseline does not reproduce the rules {sorted(rules)}")
        files = [f["source"]["path"] for f in manifest["files"].values() if f["source"]["path"] != path.name]
        if nested := [f for f in files if f.endswith(".template.json")]:
            raise ValueError(f"{path.name}: the baseline does not reproduce the nested stacks {nested}")
        stacks.append(ReferenceStack(name, template, [reference / f for f in files]))
    return stacks


def _refuse_unknown(where: str, kind: str, found: dict[str, Any]) -> None:
    if unknown := set(found) - _KNOWN[kind]:
        raise ValueError(f"{where}: the baseline does not reproduce the {kind} keys {sorted(unknown)}")


def baseline_app(stacks: Sequence[ReferenceStack], outdir: str) -> cdk.App:
    """The plain-L1 app of ``stacks`` (:func:`reference_stacks`): every resource a bare ``CfnResource`` with its
    attributes, every parameter, condition and output, each template's description and metadata, and the same asset
    files staged (Lambda code, layers, scripts), so that it synthesizes the same templates
    (``tests/test_bench_baseline.py``) without any of hyperwarm's constructs."""
    import aws_cdk as cdk  # here: the bench's own process never starts a jsii runtime

    app = cdk.App(outdir=outdir)
    for name, template, assets in stacks:
        stack = cdk.Stack(app, name, description=template.get("Description"))
        if "Metadata" in template:
            stack.template_options.metadata = template["Metadata"]
        for logical_id, parameter in template.get("Parameters", {}).items():
            if logical_id not in _SYNTHESIZER_OWN["Parameters"]:
                cdk.CfnParameter(stack, logical_id, **{_snake(k): v for k, v in parameter.items()})
        conditions = {logical_id: cdk.CfnCondition(stack, logical_id, expression=cdk.Token.as_any(expression))
                      for logical_id, expression in template.get("Conditions", {}).items()}
        for logical_id, resource in template["Resources"].items():
            cfn = cdk.CfnResource(stack, logical_id, type=resource["Type"], properties=resource.get("Properties"))
            cfn.override_logical_id(logical_id)
            for attribute in sorted(_RESOURCE_ATTRIBUTES & set(resource)):
                cfn.add_override(attribute, resource[attribute])
        for logical_id, output in template.get("Outputs", {}).items():
            export = output.get("Export", {}).get("Name")
            cdk.CfnOutput(stack, logical_id, value=cdk.Token.as_string(output["Value"]),
                          description=output.get("Description"), condition=conditions.get(output.get("Condition", "")),
                          export_name=None if export is None else cdk.Token.as_string(export))
        for index, path in enumerate(assets):
            cdk.aws_s3_assets.Asset(stack, f"Asset{index}", path=str(path))
    return app


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


class Run(NamedTuple):
    """One fresh process's figures."""

    wall: float
    cpu: float
    """Its Python process and jsii's Node, user + system."""
    construction: float
    """Wall clock of building the app, before ``app.synth()``."""
    python: float
    """CPU of the Python process alone: the rest of ``cpu`` is Node's."""
    requests: int
    """jsii requests (each a round trip to Node)."""


def _time(code: str, *args: str, outdir: str | None = None) -> Run:
    """One run of ``code`` in a fresh process, writing into ``outdir`` (default: a new temporary folder)."""
    with tempfile.TemporaryDirectory() as scratch:
        result = subprocess.run([sys.executable, "-c", code, outdir or scratch, *args], capture_output=True,
                                text=True, check=True)
    wall, cpu, construction, python, requests = result.stdout.strip().splitlines()[-1].split()
    return Run(float(wall), float(cpu), float(construction), float(python), int(float(requests)))


def _median(runs: list[Run]) -> Run:
    return Run(*(statistics.median(getattr(r, field) for r in runs) for field in Run._fields))


def _ratio(ours: Run, base: Run) -> str:
    return f"{ours.wall / base.wall:.2f}x ({ours.cpu / base.cpu:.2f}x)"


def _breakdown(scope: str, medians: dict[str, Run]) -> Table:
    """Where one scope's time goes, per kind: the figures that say which side (Python, Node) to cut."""
    table = Table(title=f"{scope}: where the time goes (medians)", title_justify="left")
    for column in ("kind", "construction (s)", "synthesis (s)", "Python CPU (s)", "Node CPU (s)", "jsii requests"):
        table.add_column(column, justify="right")
    for kind, run in medians.items():
        table.add_row(kind, f"{run.construction:.2f}", f"{run.wall - run.construction:.2f}", f"{run.python:.2f}",
                      f"{run.cpu - run.python:.2f}", f"{run.requests:,}")
    return table


Kind = tuple[str, str, tuple[str, ...]]
"""A column: its name, its program, the program's arguments after the output directory."""


def _scopes(reference: str, example_reference: str) -> list[tuple[str, list[Kind]]]:
    """What is timed: prod and all environments of this repository's app (with and without cdk-nag), and the
    example consumer app, each next to the plain-L1 baseline of its own templates."""
    def app(envs: str) -> list[Kind]:
        return [("hyperwarm", _OURS, (envs, "")), ("hyperwarm + cdk-nag", _OURS, (envs, "nag")),
                ("plain L1 baseline", _BASELINE, (reference, envs))]

    example: list[Kind] = [("hyperwarm", _EXAMPLE, (str(EXAMPLE),)),
                           ("plain L1 baseline", _BASELINE, (example_reference, ""))]
    return [("one environment (prod)", app("prod")), ("all environments", app("")),
            ("the example consumer app", example)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="repetitions per measurement (median is reported)")
    args = parser.parse_args(argv)
    console = Console()
    if not console.is_terminal:
        console = Console(width=140)
    table = Table(title=f"synth time, median of {args.repeat} fresh processes: wall clock (CPU)", title_justify="left")
    for column in ("scope", "hyperwarm (s)", "hyperwarm + cdk-nag (s)", "plain L1 baseline (s)", "ratio", "ratio + nag"):
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory() as reference, tempfile.TemporaryDirectory() as example_reference:
        scopes = _scopes(reference, example_reference)
        runs, done, breakdowns = 2 + sum(len(kinds) for _, kinds in scopes) * args.repeat, 0, []

        def timed(label: str, code: str, *code_args: str, outdir: str | None = None) -> Run:
            nonlocal done
            done += 1
            run = _time(code, *code_args, outdir=outdir)
            console.print(f"[{done}/{runs}] {label}: {run.wall:.2f} s ({run.cpu:.2f} s CPU)")  # a line per run, in CI
            return run

        timed("reference templates for the baseline", _OURS, "", "", outdir=reference)
        timed("reference templates of the example", _EXAMPLE, str(EXAMPLE), outdir=example_reference)
        for scope, kinds in scopes:
            runs_of: dict[str, list[Run]] = {kind: [] for kind, _, _ in kinds}
            for i in range(args.repeat):  # the kinds interleaved: the load of the moment falls on each
                for kind, code, code_args in kinds:
                    runs_of[kind].append(timed(f"{scope}, {kind}, run {i + 1} of {args.repeat}", code, *code_args))
            medians = {kind: _median(r) for kind, r in runs_of.items()}
            ours, base, nag_s = medians["hyperwarm"], medians["plain L1 baseline"], medians.get("hyperwarm + cdk-nag")
            table.add_row(scope, *(f"{r.wall:.2f} ({r.cpu:.2f})" if r else "-" for r in (ours, nag_s, base)),
                          _ratio(ours, base), _ratio(nag_s, base) if nag_s else "-")
            breakdowns.append(_breakdown(scope, medians))
    console.print(table)
    for breakdown in breakdowns:
        console.print(breakdown)
    console.print("target: hyperwarm within 1.5x of the baseline for one environment (docs/performance.md)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
