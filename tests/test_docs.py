"""The documentation: the API reference builds from the docstrings and fails on a warning or a broken
cross-reference (``make docs``, run by CI), and the README's front page gives the commands CI runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def build(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    """``docs/api.py`` (what ``make docs`` runs) on a one-module package written from ``source``."""
    (tmp_path / "sample.py").write_text(source)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run([sys.executable, str(REPO / "docs" / "api.py"), str(tmp_path / "out"), "sample"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


GOOD = '''"""A sample module."""


class Props:
    """What :class:`Construct` takes."""

    size: int = 1
    """Its size; see :meth:`Construct.grow`."""


class Construct:
    """Built from :class:`Props` (:attr:`Props.size`); :func:`helper` checks them."""

    def __init__(self) -> None:
        self.grown: bool = False
        """Whether :meth:`grow` ran."""

    def grow(self) -> None:
        """Sets :attr:`grown` (:mod:`sample`, :class:`pathlib.Path`)."""


def helper() -> None:
    """Used by :class:`sample.Construct`."""
'''


def test_the_api_reference_builds_when_every_reference_resolves(tmp_path) -> None:
    result = build(tmp_path, GOOD)
    assert result.returncode == 0, result.stderr
    assert "Sets" in (tmp_path / "out" / "sample.html").read_text()


def test_a_broken_cross_reference_fails_the_build_naming_it(tmp_path) -> None:
    result = build(tmp_path, GOOD.replace(":meth:`Construct.grow`", ":meth:`Construct.shrink`"))
    assert result.returncode == 1
    assert "sample.Props.size: :meth:`Construct.shrink` names nothing importable" in result.stderr


def test_a_pdoc_warning_fails_the_build(tmp_path) -> None:
    # pdoc cannot resolve the annotation: it warns and renders the string
    result = build(tmp_path, GOOD + '\n\ndef typed(x: "Missing") -> None:\n    """Takes a missing type."""\n')
    assert result.returncode == 1
    assert "warning: UserWarning: Error parsing type annotation Missing for sample.typed" in result.stderr



def test_ci_builds_the_docs_and_runs_the_front_pages_commands() -> None:
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    front = (REPO / "README.md").read_text()
    commands = front.split("## Two commands", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    setup = [line.split("#")[0].strip() for line in commands.splitlines() if line.startswith("make ")]
    assert setup == ["make synth", "make test"]
    assert [line for line in ci if line.startswith("make ")][:3] == [*setup, "make docs"]
    assert "make docs" in front


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_relative_link_of_the_front_page_and_the_guides_resolves() -> None:
    broken = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "constructs/hyperwarm/README.md"]:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            headings = {slug(h) for h in re.findall(r"^#+ (.*)$", file.read_text(), re.M)} if file.is_file() else set()
            if not file.exists() or (anchor and anchor not in headings):
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert broken == []


_OWN_CODE = ("constructs/hyperwarm", "stacks", "lambdas", "manifests", "rehearsal")


def _stray_docstrings(source: str) -> list[int]:
    """Lines of string statements that document nothing: neither the first statement of a module, class or function
    nor right after the assignment they describe (where pdoc and editors read an attribute's docstring)."""
    import ast

    stray = []
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for i, stmt in enumerate(body):
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                first = i == 0 and isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                if not first and not (i > 0 and isinstance(body[i - 1], (ast.Assign, ast.AnnAssign))):
                    stray.append(stmt.lineno)
    return stray


def test_every_docstring_sits_under_what_it_documents() -> None:
    """A docstring left behind when its constant moved (or put under the wrong one) documents nothing, or the wrong
    thing, in the API reference."""
    found = [f"{path.relative_to(REPO)}:{line}" for root in _OWN_CODE for path in sorted((REPO / root).rglob("*.py"))
             if "/k8s/" not in str(path) for line in _stray_docstrings(path.read_text())]
    assert not found, found
    assert _stray_docstrings('A = 1\n"""A."""\n"""stray"""\n') == [3]


class _Runtime:
    """A SageMaker runtime client as the guide calls it: the requests it was given."""

    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []

    def invoke_endpoint(self, **request: object) -> None:
        self.calls.append(request)


def test_the_library_guides_python_runs_in_order_and_synthesizes(monkeypatch) -> None:
    """Every Python block of docs/library-guide.md, run in order in one namespace as a reader would paste them,
    then the app synthesized: a snippet whose props fail, whose names are not exported or that the code outgrew
    fails here (a review found two that failed as written). Names the prose leaves to the reader (their function,
    their bucket, a runtime client, a request body) are given as stand-ins."""
    import aws_cdk as cdk
    from aws_cdk import aws_iam as iam, aws_s3 as s3

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    text = (REPO / "docs" / "library-guide.md").read_text()
    blocks = [(text[:m.start()].count("\n") + 1, m.group(1)) for m in re.finditer(r"```python\n(.*?)```", text, re.S)]
    assert len(blocks) >= 5
    runtime = _Runtime()
    readers: dict[str, object] = {
        "api_function": lambda ns: iam.Role(ns["stack"], "ApiFunction",
                                            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com")),
        "bucket": lambda ns: s3.Bucket.from_bucket_name(ns["stack"], "ReadersBucket", "my-models"),
        "runtime": lambda ns: runtime,
        "body": lambda ns: {"inputs": "Hello"},
    }
    ns: dict[str, object] = {}
    for line, code in blocks:
        program = compile(code, f"docs/library-guide.md:{line}", "exec")
        for name in set(program.co_names) & set(readers) - set(ns):
            ns[name] = readers[name](ns)  # type: ignore[operator]
        exec(program, ns)  # noqa: S102 - the guide's own code, which is the point
    assert isinstance(ns["app"], cdk.App)
    ns["app"].synth()
    assert runtime.calls and runtime.calls[0]["EndpointName"] == "hyperwarm-prod-chat"


def test_the_operating_guide_names_every_endpoints_field_of_cdk_json() -> None:
    """The reference of cdk.json's `endpoints` (a review found none: the guide pointed at the library guide, which has
    no cdk.json form): every field of each model it is parsed into, and of the library props its objects become."""
    import dataclasses

    from hyperwarm.endpoints.props import ServerlessSpec, VariantAutoscaling
    from hyperwarm.endpoints.routing import Routing
    from stacks.config.endpoints import DataCaptureConfig, EndpointConfig, GuardrailsConfig, ImageConfig, VariantConfig
    from stacks.config.serving import ServingConfig

    guide = (REPO / "docs" / "operating-guide.md").read_text()
    table = guide.split("**`endpoints[]`**")[1].split("**One schema with the library.**")[0]
    fields = {f"`{name}`" for model in (EndpointConfig, GuardrailsConfig, DataCaptureConfig, ImageConfig, ServingConfig)
              for name in model.model_fields}
    fields |= {f"`.{name}`" for name in VariantConfig.model_fields}
    fields |= {f"`{f.name}`" for props in (Routing, VariantAutoscaling, ServerlessSpec) for f in dataclasses.fields(props)}
    assert sorted(f for f in fields if f not in table) == []
