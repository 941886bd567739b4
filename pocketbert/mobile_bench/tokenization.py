"""Tokenization as an app does it: tokenizer.json from the export, one real example at a time, padded to the
benchmark's sequence length, so "tokenization included" times what a phone would actually run."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pocketbert.errors import PocketbertError


def eval_texts(student_manifest: dict, task, limit: int) -> list:
    """Real evaluation inputs of the run (texts, or (question, context) pairs); empty when the file is gone."""
    from pocketbert.train.data import read_sentiment_file, read_squad_file

    source = student_manifest.get("inputs", {}).get("data_eval", {}).get("path")
    if not source or not Path(source).is_file():
        return []
    try:
        if task.name == "qa":
            return [(ex.question, ex.context) for ex in read_squad_file(Path(source))[:limit]]
        examples, _ = read_sentiment_file(Path(source), task.label_names)
        return [ex.text for ex in examples[:limit]]
    except PocketbertError:
        return []


def tokenizer_runner(export_dir: Path, seq_len: int):
    """A callable from one input (text or pair) to the model's input arrays, batch 1."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(export_dir) / "tokenizer.json"))
    tokenizer.enable_truncation(seq_len)
    tokenizer.enable_padding(length=seq_len)

    def tokenize(example) -> dict:
        encoding = tokenizer.encode(*example) if isinstance(example, tuple) else tokenizer.encode(example)
        return {"input_ids": np.asarray([encoding.ids], dtype=np.int64),
                "attention_mask": np.asarray([encoding.attention_mask], dtype=np.int64),
                "token_type_ids": np.asarray([encoding.type_ids], dtype=np.int64)}

    return tokenize
