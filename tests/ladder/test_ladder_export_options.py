"""A ladder's export settings reach each rung's `pocketbert export` as its options, the rung's own winning."""

from __future__ import annotations

import pytest

from pocketbert.core.errors import ConfigError
from pocketbert.ladder.flow import _export_options
from pocketbert.ladder.spec import ExportSetting, Ladder, rung_export


def test_the_vocabulary_settings_become_export_options_and_a_rungs_own_win():
    ladder = Ladder.model_validate({
        "rungs": [{"name": "a", "label": "a", "preset": "default", "in_run": True},
                  {"name": "b", "label": "b", "preset": "narrow-2x192",
                   "export": {"vocabulary_recovery_steps": 0, "embedding_int4_share": 0.5}}],
        "export": {"vocabulary": "fitted", "vocabulary_recovery_steps": 300, "embedding_int4_share": 0.6}})
    first, second = (_export_options(rung_export(ladder, r)) for r in ladder.rungs)
    assert first == ["--vocabulary", "fitted", "--vocabulary-recovery-steps", "300", "--embedding-int4-share", "0.6"]
    assert second == ["--vocabulary", "fitted", "--vocabulary-recovery-steps", "0", "--embedding-int4-share", "0.5"]
    assert _export_options(ExportSetting()) == []


@pytest.mark.parametrize("setting", [{"vocabulary": "trimmed"}, {"embedding_int4_share": 1.0},
                                     {"vocabulary_recovery_steps": -1}])
def test_a_bad_vocabulary_setting_is_refused_when_the_ladder_is_read(tmp_path, setting):
    import yaml

    from pocketbert.ladder.spec import read_ladder

    path = tmp_path / "ladder.yaml"
    path.write_text(yaml.safe_dump({"rungs": [{"name": "a", "label": "a", "preset": "default"},
                                              {"name": "b", "label": "b", "preset": "static"}], "export": setting}))
    with pytest.raises(ConfigError, match=f"export.{next(iter(setting))}"):
        read_ladder(str(path))
