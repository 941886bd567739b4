"""A recipe is an object registered in one place: one defined here, with a setting of its own, and registered here
alone, runs through the real `pocketbert train distill --recipe ... --set toy.x=...` end to end: its setting is
checked like any recipe key, reaches its loss, and is recorded with its name in the manifest that compare reads."""

from __future__ import annotations

import copy
import json

import pytest
from helpers import error_line, run_cli, run_with_teacher

from pocketbert.core.run.manifest import RECIPE_NAME
from pocketbert.train import registry

pytestmark = pytest.mark.slow
TOY = "toy"
TOY_X = 3  # the toy recipe's own setting, given on the command line (its default is 1)
SUM_TOLERANCE = 1e-3  # the manifest rounds running losses to 4 decimals


@pytest.fixture
def toy_recipe():
    """A distillation recipe of a dozen lines with a setting of its own (toy.x): the student is a copy of the
    teacher that learns its cached logits by mean squared error, weighed x times."""
    import torch.nn.functional as F
    from pydantic import Field

    from pocketbert.core.students import stage_folder
    from pocketbert.core.config.recipe import Section
    from pocketbert.train import teacher_cache
    from pocketbert.train.distillation import TeacherDistillation

    class ToySettings(Section):
        x: int = Field(1, gt=0)

    class ToyRecipe(TeacherDistillation):
        name = TOY
        progress = "distill (toy)"
        sections = {TOY: ToySettings}

        def build_model(self, run):
            return copy.deepcopy(self.teacher)

        def step_loss(self, run, dev):
            task, x = self.task, run.recipe.toy.x

            def step_loss(forward_model, batch):
                t_logits, _ = teacher_cache.teacher_targets(batch)
                s_logits = task.logits(forward_model(input_ids=batch["input_ids"],
                                                     attention_mask=batch["attention_mask"])).float()
                mse = F.mse_loss(s_logits, t_logits)
                return x * mse, {"mse": mse, "weighed": x * mse}

            return step_loss, self.batch_extras(dev)

        def save(self, run, model, out):
            stage_folder.save_stage_model(model, self.tokenizer, out, self.task, run.section.max_length, {})

    registry.register(TOY, ToyRecipe)
    yield ToyRecipe
    registry.unregister(TOY)


def test_a_recipe_registered_in_a_test_runs_through_the_cli(capsys, toy_recipe, teacher_run, tmp_path, shared_data):
    run = run_with_teacher(teacher_run, tmp_path / "run")
    result = run_cli(capsys, "train", "distill", "--run", run, "--preset", "tiny", "--recipe", TOY,
                     "--set", f"{TOY}.x={TOY_X}", "--max-train-examples", "16", "--device", "cpu",
                     "--data-dir", shared_data)
    assert result.exit_code == 0, result.err
    assert f"wrote {run / 'student'}" in result.out
    manifest = json.loads((run / "student" / "manifest.json").read_text())
    assert manifest["config"][RECIPE_NAME] == TOY
    recorded = manifest["config"]["recipe"]
    assert recorded["distill"]["recipe"] == TOY  # the recorded recipe names it too
    assert recorded[TOY] == {"x": TOY_X}  # its own section, beside the shared ones
    train = manifest["metrics"]["train"]
    assert abs(train["final_weighed"] - TOY_X * train["final_mse"]) < SUM_TOLERANCE  # the loss read toy.x
    assert (run / "student" / "model.safetensors").is_file()

    from pocketbert.core.students.stage_folder import load_stage_model

    student, _, task, info = load_stage_model(run / "student")
    assert info["task"] == "sentiment"


def test_a_recipes_own_setting_is_checked_before_any_work(capsys, toy_recipe, teacher_run, tmp_path):
    run = run_with_teacher(teacher_run, tmp_path / "run")
    for setting, said in ((f"{TOY}.x=0", f"{TOY}.x: 0: Input should be greater than 0"),
                          (f"{TOY}.y=1", f"unknown key {TOY}.y ({TOY} takes x)")):
        result = run_cli(capsys, "train", "distill", "--run", run, "--preset", "tiny", "--recipe", TOY,
                         "--set", setting)
        assert result.exit_code == 2
        assert said in error_line(result)
    assert not (run / "student").exists()


def test_an_unregistered_recipe_is_refused_before_any_work(capsys, teacher_run, tmp_path, shared_data):
    run = run_with_teacher(teacher_run, tmp_path / "run")
    by_option = run_cli(capsys, "train", "distill", "--run", run, "--preset", "tiny", "--recipe", TOY)
    assert by_option.exit_code != 0 and TOY in by_option.err
    by_set = run_cli(capsys, "train", "distill", "--run", run, "--preset", "tiny", "--set", f"distill.recipe={TOY}",
                     "--data-dir", shared_data)
    assert by_set.exit_code != 0
    assert f"unknown distill.recipe '{TOY}'" in error_line(by_set)
    assert not (run / "student").exists()


def test_a_recipes_section_is_unknown_once_it_is_unregistered(capsys, teacher_run, tmp_path):
    run = run_with_teacher(teacher_run, tmp_path / "run")
    result = run_cli(capsys, "train", "distill", "--run", run, "--preset", "tiny", "--set", f"{TOY}.x=1")
    assert result.exit_code == 2
    assert f"unknown key {TOY}" in error_line(result)


def test_the_registry_names_every_recipe_in_one_place():
    assert list(registry.names("distill"))[0] == registry.DEFAULT_DISTILLATION
    for name in (registry.TEACHER, registry.DISTILBERT, registry.BILSTM, registry.MASKED_LM):
        assert registry.recipe_class(name).name == name
