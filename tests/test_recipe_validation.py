"""Recipes are checked before any work: a wrong key, type or range ends in one line, exit 2, nothing written.
Presets ship inside the package."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from pocketbert.core.config.recipe import CONFIG_DIR, load_recipe
from pocketbert.core.config.recipe import recipe_dict, validate_recipe

USAGE_ERROR = 2
DEFAULT_SEED = 13
DEFAULT_EVAL_BATCH = 64


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pocketbert.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def _flatten(node: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in node.items():
        if isinstance(value, dict) and key != "cross_domain":
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


@pytest.mark.parametrize("preset", sorted(p.name for p in CONFIG_DIR.glob("*.yaml")))
def test_every_preset_validates_and_keeps_its_values(preset):
    raw = yaml.safe_load((CONFIG_DIR / preset).read_text())
    complete = _flatten(recipe_dict(validate_recipe(raw, preset)))
    for key, value in _flatten(raw).items():
        if key != "bench.repeats":
            assert complete[key] == value, key


def test_defaults_live_in_the_schema():
    recipe = recipe_dict(validate_recipe({"task": "sentiment", "dataset": "sst2"}))
    assert recipe["seed"] == DEFAULT_SEED
    assert recipe["eval"]["batch_size"] == DEFAULT_EVAL_BATCH
    assert load_recipe("sentiment", "default")["distill"]["hard_loss"] == "ce"  # filled for every preset


@pytest.mark.slow
@pytest.mark.parametrize("setting, names", [
    ("teacher.epochs=abc", ["teacher.epochs", "integer"]),
    ("teacher.learning_rate=-1", ["teacher.learning_rate", "greater than 0"]),
    ("teacher.nosuchkey=1", ["unknown key teacher.nosuchkey", "learning_rate"]),
    ("distill.temprature=4", ["unknown key distill.temprature", "did you mean distill.temperature"]),
    ("distill.alpha=2", ["distill.alpha", "less than or equal to 1"]),
    ("export.coreml_variants=[fp16,5bit]", ["export.coreml_variants", "'5bit'"]),
    ("export.coreai_variants=[fp8]", ["export.coreai_variants", "'fp8'"]),
])
def test_bad_set_values_end_in_one_line_and_write_nothing(tmp_path, setting, names):
    result = run_cli("train", "teacher", "--run", str(tmp_path / "run"), "--preset", "tiny", "--set", setting,
                     cwd=tmp_path)
    assert result.returncode == USAGE_ERROR, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for name in names:
        assert name in lines[0]
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_bad_recipe_file_is_refused_before_any_work(tmp_path):
    recipe = yaml.safe_load((CONFIG_DIR / "sentiment-tiny.yaml").read_text())
    recipe["distill"]["alpha"] = 2
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(recipe))
    result = run_cli("train", "distill", "--run", str(tmp_path / "run"), "--config", str(bad), cwd=tmp_path)
    assert result.returncode == USAGE_ERROR
    assert len(result.stderr.strip().splitlines()) == 1 and "distill.alpha" in result.stderr
    recipe["distill"]["alpha"] = 0.5
    recipe["evaluation"] = {"batch_size": 8}
    bad.write_text(yaml.safe_dump(recipe))
    result = run_cli("train", "distill", "--run", str(tmp_path / "run"), "--config", str(bad), cwd=tmp_path)
    assert result.returncode == USAGE_ERROR and "unknown key evaluation" in result.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_wheel_carries_the_presets(tmp_path):
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "dist"), str(root)], check=True, capture_output=True, timeout=300)
    wheel = next((tmp_path / "dist").glob("pocketbert-*.whl"))
    assert "pocketbert/configs/sentiment-default.yaml" in zipfile.ZipFile(wheel).namelist()
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    probe = ("import pocketbert.core.config.recipe as c; r = c.load_recipe('sentiment', 'default'); "
             "print(c.CONFIG_DIR); assert r['dataset'] == 'sst2'")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env={"PYTHONPATH": str(site)},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith(str(site))


def test_set_null_sets_the_key_and_an_unset_option_keeps_the_preset():
    from pocketbert.train.cli import DISTILL_FLAGS, _recipe
    from pocketbert.train.options import overrides

    preset = load_recipe("sentiment", "narrow-192")["distill"]["max_train_examples"]
    assert preset is not None
    given = overrides({"max_train_examples": None}, DISTILL_FLAGS)
    unset = _recipe("sentiment", "narrow-192", None, given, ())
    assert unset.distill.max_train_examples == preset
    every = _recipe("sentiment", "narrow-192", None, given, ("distill.max_train_examples=null",))
    assert every.distill.max_train_examples is None
