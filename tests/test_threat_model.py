"""docs/threat-model.md backs each row with a test or a rehearsal rule: every one it names exists (a renamed or
deleted test would leave a row that no longer shows anything)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "threat-model.md"


def _tests_named() -> list[tuple[str, str]]:
    """(file, test) for every ``tests/<file>.py::name`` in the document, and every ``::name`` or ``<file>.py::name``
    after it in the same row (the file it continues)."""
    named, current = [], ""
    for row in DOC.read_text().splitlines():
        for path, name in re.findall(r"`((?:tests/)?[\w/]+\.py)?::(\w+)`", row):
            if path:
                current = path if path.startswith("tests/") else next(
                    str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob(path))
            named.append((current, name))
    return named


def _rules() -> set[str]:
    rules = set()
    for module in (ROOT / "rehearsal" / "rules").glob("*.py"):
        rules |= set(re.findall(r"[\"']([a-z]+\.[a-z-]+)[\"']", module.read_text()))
    return rules


def test_every_test_the_threat_model_names_exists() -> None:
    named = _tests_named()
    assert len(named) > 30
    missing = []
    for file, name in named:
        tree = ast.parse((ROOT / file).read_text())
        if name not in {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}:
            missing.append(f"{file}::{name}")
    assert missing == []


def test_every_rule_the_threat_model_names_exists() -> None:
    named = set(re.findall(r"rule `([a-z]+\.[a-z-]+)`", DOC.read_text()))
    assert named and named <= _rules(), named - _rules()
