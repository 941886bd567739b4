"""The tokenizer files an app loads: truncation at the export's length with [SEP] kept, clean settings, and a
golden file that catches a tokenizer.json meaning something else."""

from __future__ import annotations

import json

import pytest

from pocketbert.core.errors import ExportError
from pocketbert.export.app import tokenizer_files

TRAINING_LENGTH, EXPORT_LENGTH = 16, 32


@pytest.fixture()
def saved(tmp_path, wordpiece_tokenizer):
    """The files save_pretrained writes for a tokenizer that was last called with the training truncation."""
    wordpiece_tokenizer("warm up", truncation=True, max_length=TRAINING_LENGTH)
    wordpiece_tokenizer.backend_tokenizer.enable_truncation(TRAINING_LENGTH)
    wordpiece_tokenizer.save_pretrained(tmp_path)
    wordpiece_tokenizer.backend_tokenizer.no_truncation()
    return tmp_path


def test_the_training_truncation_in_tokenizer_json_is_caught(saved, wordpiece_tokenizer):
    expected = tokenizer_files.golden(wordpiece_tokenizer, EXPORT_LENGTH)
    with pytest.raises(ExportError, match="other ids than the student.s tokenizer for: .*longer than max_length") as e:
        tokenizer_files.check_tokenizer_json(saved / "tokenizer.json", expected)
    assert "\n" not in str(e.value)


def test_fixed_files_give_the_golden_ids_and_keep_sep(saved, wordpiece_tokenizer):
    tokenizer_files.make_tokenizer_json_truncate_at(saved / "tokenizer.json", EXPORT_LENGTH)
    tokenizer_files.clean_tokenizer_config(saved / "tokenizer_config.json", saved / "tokenizer.json", EXPORT_LENGTH)
    expected = tokenizer_files.golden(wordpiece_tokenizer, EXPORT_LENGTH)
    tokenizer_files.check_tokenizer_json(saved / "tokenizer.json", expected)  # no error
    rows = {row["probe"]: row["ids"] for row in expected["texts"]}
    sep, cls = wordpiece_tokenizer.sep_token_id, wordpiece_tokenizer.cls_token_id
    assert len(rows["longer than max_length"]) == EXPORT_LENGTH and rows["longer than max_length"][-1] == sep
    assert rows["empty"] == [cls, sep] and rows["only spaces"] == [cls, sep]
    assert rows["long word"][1] == wordpiece_tokenizer.unk_token_id  # a word over 100 characters
    accents = wordpiece_tokenizer.convert_ids_to_tokens(rows["accents"])
    assert "cafe" in accents and "naive" in accents  # accents stripped, not [UNK]
    assert wordpiece_tokenizer.convert_ids_to_tokens(rows["zero-width space"])[1:3] == ["wonderful", "acting"]
    config = json.loads((saved / "tokenizer_config.json").read_text())
    assert not set(tokenizer_files.TRANSIENT_CONFIG_KEYS) & set(config)
    assert config["handle_chinese_chars"] is True and config["do_lower_case"] is True
    assert config["model_max_length"] == EXPORT_LENGTH
