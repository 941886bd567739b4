"""The rungs the ladder trains inherit the run's transfer data (its recorded recipe's `transfer:` section), and the
table says what each kept of the teacher in domain and across domains, and what it trained on.

The run is real and tiny: a teacher trained with one set of transfer keys, then its student distilled with another
(so which manifest the keys came from shows), both through the CLI, on a small file of review sentences given by a
relative path, as a user in their project folder would."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml
from helpers import error_line, run_cli, run_cli_steps

from pocketbert.core.errors import ConfigError, RunDirError
from pocketbert.core.run.manifest import read_manifest
from pocketbert.core.config.recipe import parse_set_options
from pocketbert.ladder.flow import plan, prepare_folder, spec_digest
from pocketbert.ladder.run_transfer import RunTransfer, read_run_transfer
from pocketbert.ladder.spec import check_ladder, read_ladder
from pocketbert.ladder.table import rows_learned, trained_on

TRANSFER_FILE = "app-reviews.txt"   # relative, as the run records it
TEACHER_CAP, STUDENT_CAP = 8, 6     # transfer.max_examples of the teacher's recipe and of the student's
LADDER_SHARE, RUNG_CAP = 0.2, 4     # a ladder key and a rung key that win over what the run gives
REVIEWS = [f"the {adjective} {thing} was {verdict}, {coda}" for adjective, thing, verdict, coda in zip(
    ("new", "cheap", "small", "old", "blue", "heavy", "quiet", "bright", "plain", "large", "soft", "simple"),
    ("kettle", "phone", "lamp", "chair", "bag", "pan", "fan", "screen", "desk", "bottle", "pillow", "clock"),
    ("great", "awful", "fine", "broken", "perfect", "useless", "lovely", "noisy", "solid", "flimsy", "cozy", "slow"),
    ("i would buy it again", "it went back the next day", "worth the money", "the seller never replied",
     "exactly as described", "do not waste your time", "my kids love it", "it stopped after a week",
     "sturdy and well made", "it bent on the first use", "great for the price", "it lost time every night"))]
TRAINS = pytest.mark.slow  # the tests of the module's run: a tiny teacher and student trained through the CLI
LADDER = {
    "description": "inherits the run's transfer data",
    "rungs": [
        {"name": "default", "label": "the run's own student", "preset": "tiny", "in_run": True},
        {"name": "narrow", "label": "1 x 16", "preset": "tiny",
         "set": {"distill.recipe": "layerwise", "student.layers": 1, "student.hidden_size": 16,
                 "student.intermediate_size": 32, "transfer.max_examples": RUNG_CAP}},
        {"name": "static", "label": "static table", "preset": "tiny",
         "set": {"distill.recipe": "static", "static.pca_dims": 16}},
    ],
    "train": {"max_train_examples": 32, "set": {"transfer.share": LADDER_SHARE}},
}


@pytest.fixture(scope="module")
def project(tmp_path_factory, tiny_base, shared_data):
    """A project folder holding the transfer file and a run whose teacher's and student's recipes name it (by its
    relative path), with other caps; the ladder's spec beside them."""
    folder = tmp_path_factory.mktemp("project")
    (folder / TRANSFER_FILE).write_text("\n".join(REVIEWS) + "\n")
    (folder / "ladder.yaml").write_text(yaml.safe_dump(LADDER))
    run = folder / "run"
    teacher = ["train", "teacher", "--run", run, "--model", tiny_base, "--preset", "tiny", "--device", "cpu",
               "--data-dir", shared_data, "--set", f"transfer.data=[{TRANSFER_FILE}]",
               "--set", f"transfer.max_examples={TEACHER_CAP}"]
    distill = ["train", "distill", "--run", run, "--preset", "tiny", "--device", "cpu", "--data-dir", shared_data,
               "--set", f"transfer.data=[{TRANSFER_FILE}]", "--set", f"transfer.max_examples={STUDENT_CAP}"]
    here = Path.cwd()
    os.chdir(folder)  # where the user ran them: the recipes record the path as given
    try:
        run_cli_steps(teacher)
        teacher_only = tmp_path_factory.mktemp("teacher-only") / "run"
        shutil.copytree(run / "teacher", teacher_only / "teacher")
        run_cli_steps(distill)
    finally:
        os.chdir(here)
    return {"folder": folder, "run": run, "teacher_only": teacher_only, "spec": folder / "ladder.yaml"}


@pytest.fixture
def in_project(project, monkeypatch):
    monkeypatch.chdir(project["folder"])
    return project


def distill_sets(steps) -> dict[str, list[tuple[str, object]]]:
    """Each rung's distillation --set keys in the order given, values parsed back as the stage parses them."""
    out = {}
    for step in steps:
        if step.stage == "distill":
            items = [step.args[i + 1] for i, arg in enumerate(step.args) if arg == "--set"]
            parse_set_options(tuple(items))  # each key once, each value valid YAML: what `train distill` takes
            out[step.rung] = [(key, yaml.safe_load(value)) for key, value in (i.split("=", 1) for i in items)]
    return out


@TRAINS
def test_the_keys_come_from_the_students_recipe_else_the_teachers(project):
    from_student = read_run_transfer(project["run"])
    assert from_student.keys["transfer.data"] == [TRANSFER_FILE]  # as recorded: no working folder in a manifest
    assert from_student.keys["transfer.max_examples"] == STUDENT_CAP
    assert from_student.source == str(project["run"] / "student" / "manifest.json") and from_student.student_made
    from_teacher = read_run_transfer(project["teacher_only"])
    assert from_teacher.keys["transfer.max_examples"] == TEACHER_CAP and not from_teacher.student_made
    assert read_run_transfer(project["run"], enabled=False).keys == {}


@TRAINS
def test_each_trained_rung_distils_with_the_runs_transfer_keys_first_and_its_own_win(in_project):
    ladder = read_ladder(str(in_project["spec"]))
    transfer = read_run_transfer(in_project["run"])
    steps = plan(ladder, in_project["run"], in_project["folder"] / "ladder", "sentiment", None, "cpu", False,
                 transfer).steps
    sets = distill_sets(steps)
    # the run's own student, kept: the ladder's keys (which every rung gets), not the run's transfer data again
    assert dict(sets["default"]) == {"transfer.share": LADDER_SHARE, "distill.max_train_examples": 32}
    for rung, cap in (("static", STUDENT_CAP), ("narrow", RUNG_CAP)):
        given = dict(sets[rung])
        assert given["transfer.data"] == [TRANSFER_FILE] and given["transfer.max_examples"] == cap
        assert given["transfer.share"] == LADDER_SHARE  # the ladder's key over the run's null
        keys = [key for key, _ in sets[rung]]
        assert keys.index("transfer.data") < keys.index("distill.max_train_examples")  # the ladder's come after
    recipes = check_ladder(ladder, "sentiment", transfer=transfer)  # validated with the inherited keys
    assert recipes["static"].transfer.data == [TRANSFER_FILE] and recipes["default"].transfer.data == []
    assert recipes["narrow"].transfer.max_examples == RUNG_CAP

    ladder.train.run_transfer = False
    off = read_run_transfer(in_project["run"], ladder.train.run_transfer)
    sets = distill_sets(plan(ladder, in_project["run"], in_project["folder"] / "ladder", "sentiment", None, "cpu",
                             False, off).steps)
    assert dict(sets["static"]).get("transfer.data") is None
    assert dict(sets["narrow"])["transfer.max_examples"] == RUNG_CAP  # a rung's own transfer keys still reach it


def test_the_runs_own_student_inherits_only_when_the_ladder_trains_it():
    keys = {"transfer.data": ["imdb"]}
    assert RunTransfer(keys, student_made=True).for_rung(in_run=True) == {}
    # the ladder makes the run's student: it records the teacher's transfer data, so the ladder continued reads the same
    assert RunTransfer(keys, student_made=False).for_rung(in_run=True) == keys
    assert RunTransfer(keys, student_made=True).for_rung(in_run=False) == keys


@TRAINS
def test_transfer_data_not_found_from_here_is_refused_before_any_rung_trains(project, capsys):
    # from the repository, not the project folder: the recorded relative path names nothing here
    result = run_cli(capsys, "ladder", "--run", project["run"], "--ladder", project["spec"], "--device", "cpu",
                     "--out", project["folder"] / "elsewhere-ladder")
    line = error_line(result)
    assert result.exit_code == 2 and f"transfer data '{TRANSFER_FILE}'" in line and "run the ladder from" in line
    assert not (project["folder"] / "elsewhere-ladder").exists()
    with pytest.raises(ConfigError):
        check_ladder(read_ladder(str(project["spec"])), "sentiment", transfer=read_run_transfer(project["run"]))


@TRAINS
def test_a_ladder_folder_whose_rungs_inherited_other_transfer_data_is_refused(in_project, capsys):
    ladder = read_ladder(str(in_project["spec"]))
    other = RunTransfer({"transfer.data": ["imdb"], "transfer.max_examples": 20000})
    now = read_run_transfer(in_project["run"])
    assert len({spec_digest(ladder), spec_digest(ladder, other), spec_digest(ladder, now)}) == 3
    out = in_project["folder"] / "inherited-other"
    prepare_folder(ladder, "ladder.yaml", in_project["run"], out, other)  # the run's recipe then gave IMDb
    result = run_cli(capsys, "ladder", "--run", in_project["run"], "--ladder", in_project["spec"], "--device", "cpu",
                     "--out", out)
    line = error_line(result)
    assert result.exit_code == 2 and "inherited transfer.data=[imdb]" in line, line
    assert f"transfer.data=[{TRANSFER_FILE}]" in line and not (out / "static").exists()
    with pytest.raises(RunDirError):
        prepare_folder(ladder, "ladder.yaml", in_project["run"], out, RunTransfer())
    prepare_folder(ladder, "ladder.yaml", in_project["run"], out, other)  # the same inheritance continues


@TRAINS
def test_the_students_manifest_says_its_labelled_and_transfer_rows(project):
    learned = rows_learned(read_manifest(project["run"] / "student"))
    transfer = read_manifest(project["run"] / "student").metrics.transfer_data
    assert learned["transfer_examples"] == transfer["rows"] == STUDENT_CAP
    assert learned["labelled_examples"] + STUDENT_CAP == learned["train_examples"]
    assert trained_on(learned) == f"{learned['labelled_examples']:,} + {STUDENT_CAP} unlabelled"
