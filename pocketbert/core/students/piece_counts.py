"""How often each word piece occurs in the recipe's own text, as a student's tokenizer cuts it: the dataset's
training and evaluation examples (what an app feeds the tokenizer: a sentence, or a question and its context) and
the passages of each transfer source.

Both stages count: fitting a vocabulary (train/vocabulary/) chooses its rows by these counts, on the training and
transfer text alone (train/vocabulary/counted_text.py), and the export ranks the rows of a full student's table for
4 bits by them (export.embedding_int4_share; a fitted student carries its own, counted when it was fitted).

Each distinct text of a split counts once (a SQuAD context shared by five questions is one passage), and a text is
cut whole, without the model's length limit: a piece beyond it still occurs in the app's text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pocketbert.core.config.recipe import TransferSection

TOKENIZE_CHUNK = 2000  # texts tokenized at a time
TRAINING_SPLIT, EVAL_SPLIT = "train", "eval"  # recipe_texts' names for the dataset's splits


@dataclass
class PieceCounts:
    """Occurrences of each token id (an array as long as the vocabulary) and what they were counted on."""

    counts: np.ndarray
    # each id's largest share of one split's pieces: how common it is in the source where it is most common, so
    # that a large source (20,000 reviews beside 67,349 sentences) does not crowd out a smaller one's pieces
    shares: np.ndarray
    splits: dict = field(default_factory=dict)  # split name -> {"examples", "texts", "pieces"}


def example_texts(task, examples: list) -> list[str]:
    """The strings an app hands the tokenizer for these examples (a pair gives both of its texts)."""
    return [text for item in task.eval_inputs(examples) for text in (item if isinstance(item, tuple) else (item,))]


def recipe_texts(task, data, transfer: TransferSection, data_dir: Path | None,
                 seed: int) -> dict[str, tuple[int, list[str]]]:
    """The recipe's own text by split: split name -> (examples, their texts). transfer: the recipe's typed transfer
    section."""
    from pocketbert.core.tasks.task_data import transfer_passages

    texts = {TRAINING_SPLIT: (len(data.train), example_texts(task, data.train)),
             EVAL_SPLIT: (len(data.eval), example_texts(task, data.eval))}
    for source in transfer.data:
        passages = transfer_passages(source, task.name, data_dir, seed, transfer.text_column)
        texts[f"transfer: {source}"] = (len(passages), passages)
    return texts


def count_pieces(tokenizer, texts: dict[str, tuple[int, list[str]]]) -> PieceCounts:
    """Each split's distinct texts cut into word pieces (no special tokens, no length limit), and counted."""
    from tokenizers import Tokenizer

    # A copy of the student's tokenizer that neither truncates nor pads: its saved settings may do both.
    cutter = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    cutter.no_truncation()
    cutter.no_padding()
    size = cutter.get_vocab_size(with_added_tokens=True)
    counts = np.zeros(size, dtype=np.int64)
    shares = np.zeros(size, dtype=np.float64)
    splits = {}
    for name, (examples, split_texts) in texts.items():
        distinct = list(dict.fromkeys(split_texts))
        split_counts = np.zeros(size, dtype=np.int64)
        for start in range(0, len(distinct), TOKENIZE_CHUNK):
            encoded = cutter.encode_batch(distinct[start:start + TOKENIZE_CHUNK], add_special_tokens=False)
            ids = np.fromiter((i for e in encoded for i in e.ids), dtype=np.int64)
            split_counts += np.bincount(ids, minlength=size)
        pieces = int(split_counts.sum())
        counts += split_counts
        if pieces:
            shares = np.maximum(shares, split_counts / pieces)
        splits[name] = {"examples": examples, "texts": len(distinct), "pieces": pieces}
    return PieceCounts(counts, shares, splits)

