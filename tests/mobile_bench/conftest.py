"""What the bench tests share beyond the session-wide fixtures of tests/conftest.py."""

from __future__ import annotations

import hashlib
import json
from importlib.metadata import version
from pathlib import Path

import pytest

RECORDED_MAX_LENGTH = 128  # the recorded export's max_length (results/static/export.manifest.json)


@pytest.fixture(scope="session")
def export_tokenizer_files(request, tmp_path_factory) -> Path:
    """A folder with the tokenizer.tables and tokenizer_golden.json an export of the packaged teacher's tokenizer
    writes at the recorded export's length (app_files.write_app_files: tokenizer.json cut at max_length, the golden
    texts' ids from the tokenizer, the tables from tokenizer.json), for runs made from the recorded manifest. Kept in
    pytest's cache under a hash of the tokenizer and the code that writes them: probing every code point for the
    tables is most of a fresh session's cost."""
    from pocketbert.core.run.cache_dir import building
    from pocketbert.core.students.models import PACKAGED_TEACHER, resolve_model_source
    from pocketbert.core.run.run_files import TOKENIZER_GOLDEN, TOKENIZER_JSON, TOKENIZER_TABLES
    from pocketbert.export.checks import tokenizer_probes
    from pocketbert.export.app import tokenizer_files, tokenizer_tables

    teacher = Path(resolve_model_source(PACKAGED_TEACHER))
    inputs = [teacher / name for name in sorted(p.name for p in teacher.iterdir() if "token" in p.name or p.suffix == ".txt")]
    key = hashlib.sha256(b"\0".join([*(p.read_bytes() for p in inputs),
                                     *(Path(m.__file__).read_bytes() for m in (tokenizer_files, tokenizer_tables,
                                                                               tokenizer_probes)),
                                     version("tokenizers").encode(), version("transformers").encode(),
                                     str(RECORDED_MAX_LENGTH).encode()])).hexdigest()[:20]
    cache = getattr(request.config, "cache", None)
    root = Path(cache.mkdir("export-tokenizer-files")) if cache is not None else tmp_path_factory.mktemp("tokenizer")
    folder = root / key
    with building(folder):
        if not (folder / "built").is_file():
            tokenizer = request.getfixturevalue("wordpiece_tokenizer")
            tokenizer.save_pretrained(folder / "saved")
            tokenizer_json = folder / "saved" / TOKENIZER_JSON
            tokenizer_files.make_tokenizer_json_truncate_at(tokenizer_json, RECORDED_MAX_LENGTH)
            golden = tokenizer_files.golden(tokenizer, RECORDED_MAX_LENGTH)
            (folder / TOKENIZER_GOLDEN).write_text(json.dumps(golden, ensure_ascii=False, indent=2) + "\n",
                                                   encoding="utf-8")
            tokenizer_tables.write_tables(tokenizer_json, folder / TOKENIZER_TABLES, RECORDED_MAX_LENGTH)
            (folder / "built").write_text("")
    return folder
