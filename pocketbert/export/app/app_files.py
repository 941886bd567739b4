"""What an app needs beside the model to tokenize its input and decode its output."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from pocketbert.core.errors import ExportError
from pocketbert.export.app import tokenizer_files, tokenizer_tables
from pocketbert.core.run.run_files import (
    LABELS,
    MODEL_CONFIG,
    TOKENIZER_CONFIG,
    TOKENIZER_FILES,
    TOKENIZER_GOLDEN,
    TOKENIZER_JSON,
    TOKENIZER_TABLES,
    VOCAB,
)


def write_app_files(model, tokenizer, task, out_dir: Path, max_length: int) -> list[Path]:
    """tokenizer.json, tokenizer_config.json, vocab.txt, tokenizer.tables, config.json, labels.json and the tokenizer
    golden file into out_dir; tokenizer.json truncates at the export's max_length and is checked against the golden
    file."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or type(backend.model).__name__ != "WordPiece":
        raise ExportError("the student's tokenizer is not a fast WordPiece (BERT) tokenizer; "
                          "export supports BERT-family vocabularies")
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer.save_pretrained(tmp)
        # transformers 5 no longer writes vocab.txt; apps that tokenize natively still want it.
        vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
        (Path(tmp) / VOCAB).write_text("".join(token + "\n" for token, _ in vocab), encoding="utf-8")
        for name in TOKENIZER_FILES:
            source = Path(tmp) / name
            if not source.is_file():
                raise ExportError(f"the student's tokenizer did not produce {name}; re-save it with transformers")
            shutil.copyfile(source, out_dir / name)
            written.append(out_dir / name)
    tokenizer_files.make_tokenizer_json_truncate_at(out_dir / TOKENIZER_JSON, max_length)
    tokenizer_files.clean_tokenizer_config(out_dir / TOKENIZER_CONFIG, out_dir / TOKENIZER_JSON, max_length)
    expected = tokenizer_files.golden(tokenizer, max_length, with_pairs=len(task.text_in_inputs) == 2,
                                      hard=tokenizer_files.hard_texts(out_dir / TOKENIZER_JSON))
    tokenizer_files.check_tokenizer_json(out_dir / TOKENIZER_JSON, expected)
    (out_dir / TOKENIZER_GOLDEN).write_text(json.dumps(expected, ensure_ascii=False, indent=2) + "\n",
                                            encoding="utf-8")
    written.append(tokenizer_tables.write_tables(out_dir / TOKENIZER_JSON, out_dir / TOKENIZER_TABLES, max_length))
    model.config.to_json_file(out_dir / MODEL_CONFIG)
    (out_dir / LABELS).write_text(json.dumps(task.label_names, indent=2) + "\n")
    return written + [out_dir / TOKENIZER_GOLDEN, out_dir / MODEL_CONFIG, out_dir / LABELS]
