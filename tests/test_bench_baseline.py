"""``make bench`` compares hyperwarm's synth time with a plain-L1 app of the same templates: the comparison holds only
while the baseline synthesizes exactly those templates. (It once left out every output, condition, parameter,
description and resource attribute, so the baseline did less work than the app it was measured against.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from stacks.bench import baseline_app, reference_stacks


def test_the_baseline_synthesizes_the_templates_it_is_measured_against(synthesized, tmp_path: Path) -> None:
    assembly = baseline_app(reference_stacks(synthesized.outdir), str(tmp_path)).synth()
    names = synthesized.stack_names()
    assert sorted(s.stack_name for s in assembly.stacks) == sorted(names)
    for name in names:
        assert assembly.get_stack_by_name(name).template == synthesized.template(name), name


@pytest.mark.parametrize("template, manifest, refused", [
    ({"Resources": {}, "Mappings": {"M": {"k": {"v": "1"}}}}, {}, "template keys ['Mappings']"),
    ({"Resources": {"R": {"Type": "AWS::SNS::Topic", "Version": "1"}}}, {}, "s.template.json R: the baseline does not "
     "reproduce the resource keys ['Version']"),
    ({"Resources": {}, "Outputs": {"O": {"Value": "v", "Unknown": 1}}}, {}, "output keys ['Unknown']"),
    ({"Resources": {}, "Rules": {"Mine": {}}}, {}, "the rules ['Mine']"),
    ({"Resources": {}}, {"dockerImages": {"i": {}}}, "asset manifest keys ['dockerImages']"),
    ({"Resources": {}}, {"files": {"n": {"source": {"path": "n.nested.template.json"}}}}, "the nested stacks"),
])
def test_the_baseline_refuses_what_it_would_leave_out(tmp_path: Path, template, manifest, refused) -> None:
    (tmp_path / "s.template.json").write_text(json.dumps(template))
    (tmp_path / "s.assets.json").write_text(json.dumps({"version": "1", "files": {}, **manifest}))
    with pytest.raises(ValueError, match=re.escape(refused)):
        reference_stacks(tmp_path)


def test_an_output_keeps_its_condition_and_a_computed_export_name(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    reference.mkdir()
    template = {"Conditions": {"InUsEast1": {"Fn::Equals": [{"Ref": "AWS::Region"}, "us-east-1"]}},
                "Resources": {"T": {"Type": "AWS::SNS::Topic"}},
                "Outputs": {"O": {"Value": {"Ref": "T"}, "Condition": "InUsEast1",
                                  "Export": {"Name": {"Fn::Sub": "${AWS::StackName}-topic"}}}}}
    (reference / "s.template.json").write_text(json.dumps(template))
    (reference / "s.assets.json").write_text(json.dumps({"version": "1", "files": {}}))
    synthesized = baseline_app(reference_stacks(reference), str(tmp_path / "out")).synth().get_stack_by_name("s")
    assert {k: synthesized.template[k] for k in ("Conditions", "Resources", "Outputs")} == template
