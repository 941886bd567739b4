"""What the bench tests share beyond the session-wide fixtures of tests/conftest.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

RECORDED_MAX_LENGTH = 128  # the recorded export's max_length (results/static/export.manifest.json)


@pytest.fixture(scope="session")
def export_tokenizer_files(tmp_path_factory, wordpiece_tokenizer) -> Path:
    """A folder with the tokenizer.tables and tokenizer_golden.json an export of the packaged teacher's tokenizer
    writes at the recorded export's length (app_files.write_app_files: tokenizer.json cut at max_length, the golden
    texts' ids from the tokenizer, the tables from tokenizer.json), for runs made from the recorded manifest."""
    from pocketbert.core.run_files import TOKENIZER_GOLDEN, TOKENIZER_JSON, TOKENIZER_TABLES
    from pocketbert.export.app import tokenizer_files, tokenizer_tables

    folder = tmp_path_factory.mktemp("export-tokenizer")
    wordpiece_tokenizer.save_pretrained(folder / "saved")
    tokenizer_json = folder / "saved" / TOKENIZER_JSON
    tokenizer_files.make_tokenizer_json_truncate_at(tokenizer_json, RECORDED_MAX_LENGTH)
    golden = tokenizer_files.golden(wordpiece_tokenizer, RECORDED_MAX_LENGTH)
    (folder / TOKENIZER_GOLDEN).write_text(json.dumps(golden, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    tokenizer_tables.write_tables(tokenizer_json, folder / TOKENIZER_TABLES, RECORDED_MAX_LENGTH)
    return folder
