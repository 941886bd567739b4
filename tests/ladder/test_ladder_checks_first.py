"""A ladder checks every rung before the first trains: a later rung that cannot be built, or whose export settings
name no program, ends the command in one line before any rung's student exists."""

from __future__ import annotations

import pytest
import yaml
from helpers import error_line, run_cli, run_with_teacher

from pocketbert.core.run import run_files

pytestmark = pytest.mark.slow
FIRST_RUNG = {"name": "default", "label": "the run's own student", "preset": "tiny", "in_run": True}
# The tiny teacher (tests/conftest.py): 2 layers, hidden 32 in 2 heads 16 wide, FFN 64.
LATER_RUNGS = {
    "a width no whole number of heads": ({"student.hidden_size": 24}, {}, "not a whole number of the teacher's"),
    "deeper than the teacher": ({"student.layers": 3}, {}, "more than the teacher's 2"),
    "a teacher layer it lacks": ({"student.layer_map": [0, 5]}, {}, "out of range for a 2-layer teacher"),
    "a Core ML program that does not exist": ({}, {"coreml_variants": ["fp16", "5bit"]}, "'5bit'"),
    "a Core AI program that does not exist": ({}, {"coreai_variants": ["fp8"]}, "'fp8'"),
}


@pytest.mark.parametrize("case", sorted(LATER_RUNGS))
def test_a_later_rung_that_cannot_be_made_is_refused_before_the_first_trains(case, teacher_run, tmp_path, capsys,
                                                                             shared_data):
    settings, export, said = LATER_RUNGS[case]
    run = run_with_teacher(teacher_run, tmp_path / "run")
    spec = tmp_path / "ladder.yaml"
    later = {"name": "later", "label": "later", "preset": "tiny", "set": {"distill.recipe": "layerwise", **settings},
             **({"export": export} if export else {})}
    spec.write_text(yaml.safe_dump({"description": "a later rung that cannot be made", "rungs": [FIRST_RUNG, later]}))
    result = run_cli(capsys, "ladder", "--run", run, "--ladder", spec, "--device", "cpu", "--data-dir", shared_data)
    assert result.exit_code == 2, result.err
    line = error_line(result)
    assert line.startswith("error:") and said in line, line
    assert not (run / run_files.STUDENT_DIR).exists(), "the first rung trained before the later one was checked"
    assert "Traceback" not in result.err
