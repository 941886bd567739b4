"""A ladder's export and vocabulary keys (the recipe's export and vocabulary sections, checked by their ExportSection
and VocabularySection) reach each rung's `pocketbert export` as --set export.KEY=VALUE and vocabulary.KEY=VALUE, the
rung's own winning."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocketbert.core.errors import ConfigError
from pocketbert.core.config.recipe import parse_set_options
from pocketbert.ladder.spec import Ladder, rung_export


def test_the_written_export_keys_become_recipe_keys_and_a_rungs_own_win():
    ladder = Ladder.model_validate({
        "rungs": [{"name": "a", "label": "a", "preset": "default", "in_run": True},
                  {"name": "b", "label": "b", "preset": "narrow-2x192",
                   "export": {"embedding_int4_share": 0.5, "coreai_variants": []},
                   "vocabulary": {"recovery_steps": 0}}],
        "export": {"vocabulary": "fitted", "embedding_int4_share": 0.6},
        "vocabulary": {"recovery_steps": 300, "max_rows": None}})
    first, second = (rung_export(ladder, r) for r in ladder.rungs)
    # what the ladder writes, null included; what it leaves out stays the recipe's
    assert first == {"export.vocabulary": "fitted", "export.embedding_int4_share": 0.6,
                     "vocabulary.recovery_steps": 300, "vocabulary.max_rows": None}
    assert second == {**first, "vocabulary.recovery_steps": 0, "export.embedding_int4_share": 0.5,
                      "export.coreai_variants": []}
    bare = Ladder.model_validate({"rungs": [{"name": "a", "label": "a", "preset": "default"},
                                            {"name": "b", "label": "b", "preset": "static"}]})
    assert rung_export(bare, bare.rungs[0]) == {}


def test_each_export_step_sets_the_rungs_keys_as_the_export_command_reads_them_back():
    from pocketbert.ladder.flow import plan
    from pocketbert.ladder.spec import read_ladder

    ladder = read_ladder("reduced")
    steps = {(s.rung, s.stage): s.args for s in plan(ladder, Path("runs/r"), Path("runs/r-ladder"), "sentiment", None,
                                                     "cpu", False).steps}
    for rung in ladder.rungs:
        if not rung.ship:
            continue
        args = steps[(rung.name, "export")]
        given = tuple(args[i + 1] for i, arg in enumerate(args) if arg == "--set")
        assert parse_set_options(given) == rung_export(ladder, rung)


@pytest.mark.parametrize("section, setting", [
    ("export", {"vocabulary": "trimmed"}), ("export", {"embedding_int4_share": 1.0}),
    ("export", {"coreml_examples": 5}), ("export", {"vocabulary_recovery_steps": 300}),
    ("vocabulary", {"recovery_steps": -1}), ("vocabulary", {"min_count": 0})])
def test_a_bad_export_or_vocabulary_key_is_refused_when_the_ladder_is_read(tmp_path, section, setting):
    import yaml

    from pocketbert.ladder.spec import read_ladder

    path = tmp_path / "ladder.yaml"
    path.write_text(yaml.safe_dump({"rungs": [{"name": "a", "label": "a", "preset": "default"},
                                              {"name": "b", "label": "b", "preset": "static"}], section: setting}))
    with pytest.raises(ConfigError, match=f"{section}.{next(iter(setting))}"):
        read_ladder(str(path))
