"""``make bench`` compares hyperwarm's synth time with a plain-L1 app of the same templates: the comparison holds only
while the baseline synthesizes exactly those templates. (It once left out every output, condition, parameter,
description and resource attribute, so the baseline did less work than the app it was measured against.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stacks.bench import baseline_app


def test_the_baseline_synthesizes_the_templates_it_is_measured_against(synthesized, tmp_path: Path) -> None:
    assembly = baseline_app(synthesized.outdir, str(tmp_path)).synth()
    names = synthesized.stack_names()
    assert sorted(s.stack_name for s in assembly.stacks) == sorted(names)
    for name in names:
        assert assembly.get_stack_by_name(name).template == synthesized.template(name), name


def test_the_baseline_refuses_a_template_section_it_would_leave_out(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    reference.mkdir()
    (reference / "s.template.json").write_text(json.dumps({"Resources": {}, "Mappings": {"M": {"k": {"v": "1"}}}}))
    with pytest.raises(ValueError, match=r"s.template.json: the baseline does not reproduce the sections \['Mappings'\]"):
        baseline_app(reference, str(tmp_path / "out"))
