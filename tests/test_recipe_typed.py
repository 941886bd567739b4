"""The recipe reaches every stage typed: no module outside core/config/recipe.py reads a recipe section as a dict, and
an export setting is one field of ExportSection plus one line of the export command's EXPORT_FLAGS, from which its
option (type, bounds, help) is made and through which its value reaches the typed section."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest
from helpers import run_cli
from pydantic import Field

import pocketbert
from pocketbert.core.config import recipe as recipe_module
from pocketbert.core.errors import ConfigError
from pocketbert.core.config.recipe import ExportSection, Section

PACKAGE = Path(pocketbert.__file__).resolve().parent
SCRIPTS = PACKAGE.parent / "scripts"
# Where a recipe is data by design: core/config/recipe.py reads and writes it.
EXEMPT = (PACKAGE / "core" / "config" / "recipe.py",)
# A recipe section read as a dict: a subscript or .get on a variable named recipe or *_cfg / cfg, on a recorded
# recipe (`["recipe"]["task"]`, `.get("recipe", {}).get(...)`), or section_dict's plain data.
DICT_READS = re.compile(r"""(\brecipe\b|\w*_cfg\b|\bcfg\b|\[["']recipe["']\]|\.get\(["']recipe["'][^)]*\))\s*(\[|\.get\()"""
                        r"""|\bsection_dict\(""")
# What the pattern must catch: the reads this test was written against, one of each form.
CAUGHT = ('export_cfg["jobs"]', 'int(eval_cfg.get("n_best", 20))', 'seed = int(recipe["seed"])',
          'task = teacher["config"]["recipe"]["task"]', '(recipe.get("bench") or {})',
          'student["config"].get("recipe", {}).get("prune")', 'bench = section_dict("bench", {}, "--set")',
          'cfg["batch_size"]')
PASSED = ('recipe.export.jobs', 'recipe_dict(recipe)', 'metrics["eval"][primary]', 'recipes[name]',
          'complete_recipe(teacher["config"]["recipe"]).task')


def python_files() -> list[Path]:
    return [p for p in sorted([*PACKAGE.rglob("*.py"), *SCRIPTS.rglob("*.py")])
            if not any(p == e or e in p.parents for e in EXEMPT)]


def test_the_pattern_catches_each_form_of_dict_read_and_passes_typed_reads():
    assert [line for line in CAUGHT if not DICT_READS.search(line)] == []
    assert [line for line in PASSED if DICT_READS.search(line)] == []


def test_no_module_outside_the_recipe_reads_a_recipe_section_as_a_dict():
    found = [f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
             for path in python_files() for number, line in enumerate(path.read_text().splitlines(), 1)
             if DICT_READS.search(line)]
    assert found == []


# ---------------------------------------------------------------- an export setting: one field, one flag line

TOY_DEFAULT, TOY_GIVEN, TOY_MOST = 1, 7, 9
FLAGS_ANCHOR = '    "jobs": "export.jobs",\n'
TOY_FLAG_LINE = '    "toy_level": "export.toy_level",\n'


class ToyExportKeys(Section):
    """A key added to the shared export section, as a training recipe adds its own (core/config/recipe.py's
    use_sections)."""

    toy_level: int = Field(TOY_DEFAULT, gt=0, le=TOY_MOST, description="A toy export setting: its level.")


@pytest.fixture
def toy_export_cli(monkeypatch):
    """The export command as export/cli.py defines it with one line added to EXPORT_FLAGS, served as
    `pocketbert export`, with the recipe's export section holding the toy key."""
    import pocketbert.export.cli as export_cli
    import pocketbert.train.registry  # noqa: F401 - it hands its sections to the recipe once, on import

    monkeypatch.setattr(recipe_module, "_sections_of_recipes", recipe_module._sections_of_recipes)
    recipe_module.use_sections(lambda: [("export", ToyExportKeys)])
    source = Path(export_cli.__file__).read_text()
    assert source.count(FLAGS_ANCHOR) == 1
    module = types.ModuleType(export_cli.__name__)
    module.__file__ = export_cli.__file__
    exec(compile(source.replace(FLAGS_ANCHOR, FLAGS_ANCHOR + TOY_FLAG_LINE), export_cli.__file__, "exec"),
         module.__dict__)
    monkeypatch.setitem(sys.modules, export_cli.__name__, module)
    return module


def test_an_export_setting_added_as_a_field_and_a_flag_line_is_an_option_whose_value_reaches_the_section(
        capsys, toy_export_cli):
    result = run_cli(capsys, "export", "--help")
    assert result.exit_code == 0, result.err
    assert "--toy-level" in result.out and "A toy export setting" in result.out

    recorded = {"task": "sentiment", "dataset": "sst2"}  # a manifest's recipe record, defaults filled on reading
    command = toy_export_cli.export

    def section(args: list[str]) -> ExportSection:
        named = {"export." + key.removeprefix("--").replace("-", "_") for key in args
                 if key in ("--toy-level", "--parity-examples")}
        named |= {item.split("=")[0] for item in args if item.startswith("export.")}
        recipe, given = toy_export_cli.command_line_recipe(command.make_context("export", list(args)), lambda: recorded)
        assert given == named  # the keys the command line set, as the request carries them
        return recipe.export

    given = section(["--toy-level", str(TOY_GIVEN), "--parity-examples", "5"])
    assert isinstance(given, ExportSection)
    assert (given.toy_level, given.parity_examples) == (TOY_GIVEN, 5)
    assert section(["--set", f"export.toy_level={TOY_GIVEN - 1}"]).toy_level == TOY_GIVEN - 1
    assert section([]).toy_level == TOY_DEFAULT
    with pytest.raises(ConfigError, match=f"--toy-level must be a whole number >= 1 and <= {TOY_MOST}"):
        section(["--toy-level", str(TOY_MOST + 1)])
    with pytest.raises(ConfigError, match="both set toy_level"):
        section(["--toy-level", "2", "--set", "export.toy_level=3"])


def test_a_bad_export_value_from_the_command_line_is_one_line_naming_the_key():
    from pocketbert.export import cli as export_cli

    with pytest.raises(ConfigError) as caught:
        export_cli.command_line_recipe(export_cli.export.make_context(
            "export", ["--set", "export.int8_size_budget=7"]), lambda: {"task": "sentiment", "dataset": "sst2"})
    assert str(caught.value).startswith("--set: export.int8_size_budget: 7:") and "\n" not in str(caught.value)


def test_the_export_command_sets_the_vocabulary_sections_keys_beside_the_export_sections():
    from pocketbert.export import cli as export_cli

    recorded = {"task": "sentiment", "dataset": "sst2"}
    recipe, given = export_cli.command_line_recipe(export_cli.export.make_context(
        "export", ["--vocabulary", "fitted", "--vocabulary-max-rows", "5000", "--set", "vocabulary.min_count=3"]),
        lambda: recorded)
    assert given == {"export.vocabulary", "vocabulary.max_rows", "vocabulary.min_count"}
    assert (recipe.export.vocabulary, recipe.vocabulary.max_rows, recipe.vocabulary.min_count) == ("fitted", 5000, 3)


def test_a_recorded_recipe_is_completed_without_the_keys_this_version_does_not_have():
    from pocketbert.core.config.recipe import VocabularySection, complete_recipe, validate_recipe

    recorded = {"task": "sentiment", "dataset": "sst2", "export": {"vocabulary": "fitted", "vocabulary_min_count": 5}}
    recipe = complete_recipe(recorded)
    assert recipe.export.vocabulary == "fitted" and recipe.vocabulary == VocabularySection()
    with pytest.raises(ConfigError, match="unknown key export.vocabulary_min_count"):
        validate_recipe(recorded)
