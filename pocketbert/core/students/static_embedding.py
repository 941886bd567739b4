"""The static-embedding student: one vector per vocabulary id, averaged over a sentence, and a small classifier.

It reads the teacher's WordPiece ids (the app tokenizes as before: token ids in, logits out), so the table has one
row per id of the teacher's vocabulary. Its rows start as the teacher's encoder's output for each token alone
(train/static_table.py, after Model2Vec); the classifier, and optionally the rows, then learn the teacher's soft
labels. No attention and no recurrence: a lookup, a masked mean and two small products, whatever the length.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn

from pocketbert.core.students.own_student import Output, load_own_student, save_own_student
from pocketbert.core.run.run_files import STATIC_CONFIG

MODEL_TYPE = "pocketbert-static"  # config.json's model type: no Hugging Face library knows it, on purpose
NORM_FLOOR = 1e-6  # the smallest norm a sentence vector is divided by (an all-special-token input has norm 0)


@dataclass
class StaticEmbeddingConfig:
    vocab_size: int
    num_labels: int
    embedding_dim: int = 256
    hidden_size: int = 512         # the classifier's ReLU layer; 0: a linear classifier on the sentence vector
    dropout: float = 0.1
    normalize: bool = True         # the sentence vector scaled to unit length before the classifier
    pad_token_id: int = 0
    # [CLS], [SEP], [PAD], [UNK], [MASK]: the app's ids carry [CLS] and [SEP] around every sentence, and their rows
    # would add the same vector to every mean, weighing more the shorter the sentence; they are left out of it.
    ignored_token_ids: list[int] = field(default_factory=list)
    freeze_embeddings: bool = False

    def to_json_file(self, path: Path) -> None:
        """The config an app reads beside the tokenizer files, named like a transformers config.json."""
        body = {"model_type": MODEL_TYPE, "architectures": ["StaticEmbeddingClassifier"], **asdict(self)}
        Path(path).write_text(json.dumps(body, indent=2) + "\n")


class StaticEmbeddingClassifier(nn.Module):

    def __init__(self, config: StaticEmbeddingConfig):
        super().__init__()
        self.config = config
        self.embeddings = nn.Embedding(config.vocab_size, config.embedding_dim, padding_idx=config.pad_token_id)
        self.embeddings.weight.requires_grad_(not config.freeze_embeddings)
        self.dropout = nn.Dropout(config.dropout)
        width = config.hidden_size or config.embedding_dim
        self.hidden = nn.Linear(config.embedding_dim, config.hidden_size) if config.hidden_size else None
        self.classifier = nn.Linear(width, config.num_labels)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **_unused) -> Output:
        x = self.dropout(self.sentence_vector(input_ids, attention_mask))
        if self.hidden is not None:
            x = self.dropout(torch.relu(self.hidden(x)))
        return Output(self.classifier(x))

    def sentence_vector(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The mean of the rows of the sentence's word pieces (special tokens and padding left out): [batch, dim]."""
        vectors = self.embeddings(input_ids)
        counted = attention_mask.to(vectors.dtype)
        # Comparisons with a few constants, not a lookup in a vocabulary-sized 0/1 table: no second table in the
        # graph for int8 quantization to find.
        for token_id in self.config.ignored_token_ids:
            counted = counted * (input_ids != token_id).to(vectors.dtype)
        summed = torch.bmm(counted[:, None, :], vectors)[:, 0, :]
        mean = summed / counted.sum(dim=1, keepdim=True).clamp(min=1.0)
        if self.config.normalize:
            mean = mean / torch.sqrt((mean * mean).sum(dim=1, keepdim=True)).clamp(min=NORM_FLOOR)
        return mean

    # transformers' names for the word-embedding table: code that swaps it (a fitted export vocabulary) treats
    # every student alike
    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings

    def set_input_embeddings(self, table: nn.Embedding) -> None:
        self.embeddings = table

    def parameter_count(self, include_embeddings: bool = False) -> int:
        return sum(p.numel() for name, p in self.named_parameters()
                   if include_embeddings or not name.startswith("embeddings."))


def save_static(model: StaticEmbeddingClassifier, folder: Path) -> None:
    save_own_student(model, folder, STATIC_CONFIG)


def load_static(folder: Path) -> StaticEmbeddingClassifier:
    return load_own_student(folder, StaticEmbeddingClassifier, StaticEmbeddingConfig, STATIC_CONFIG,
                            "static-embedding", "static")
