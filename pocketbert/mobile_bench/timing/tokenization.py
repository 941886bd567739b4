"""Tokenization as an app does it: tokenizer.json from the export, one real example at a time, padded to the
benchmark's sequence length, so "tokenization included" times what a phone would actually run."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pocketbert.core.errors import PocketbertError
from pocketbert.core.run.run_files import TOKENIZER_JSON
from pocketbert.core.run.stage_records import StudentRecord


def eval_texts(student_manifest: StudentRecord, task, limit: int) -> list:
    """Real evaluation inputs of the run (texts, or (question, context) pairs); empty when the file is gone."""
    from pocketbert.core.tasks.task_data import read_task_file

    source = student_manifest.input_path("data_eval")
    if not source or not Path(source).is_file():
        return []
    try:
        examples, _ = read_task_file(Path(source), task.name, task.label_names or None)
    except PocketbertError:
        return []
    return task.eval_inputs(examples[:limit])


def tokenizer_runner(export_dir: Path, seq_len: int):
    """A callable from one input (text or pair) to the model's input arrays, batch 1."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(export_dir) / TOKENIZER_JSON))
    tokenizer.enable_truncation(seq_len)
    tokenizer.enable_padding(length=seq_len)

    def tokenize(example) -> dict:
        encoding = tokenizer.encode(*example) if isinstance(example, tuple) else tokenizer.encode(example)
        return {"input_ids": np.asarray([encoding.ids], dtype=np.int64),
                "attention_mask": np.asarray([encoding.attention_mask], dtype=np.int64),
                "token_type_ids": np.asarray([encoding.type_ids], dtype=np.int64)}

    return tokenize
