"""The BiLSTM student of Tang et al. 2019: word embeddings, one bidirectional LSTM layer, a ReLU layer, logits.

It reads the teacher's WordPiece ids, so the app ships the same tokenizer files, and its embedding table can
start as the teacher's. Each direction is its own LSTM and the backward one reads every sequence reversed
within its own length: right padding then changes no output, in training, in ONNX Runtime or in Core ML.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from pocketbert.core.students.own_student import Output, load_own_student, save_own_student
from pocketbert.core.errors import ConfigError, ModelError
from pocketbert.core.run.run_files import BILSTM_CONFIG

CONFIG_FILE = BILSTM_CONFIG
EMBEDDING_INITS = ("teacher", "random")


@dataclass
class BiLSTMConfig:
    vocab_size: int
    num_labels: int
    embedding_dim: int = 300
    hidden_size: int = 150   # per direction; the paper uses 150 (sentence tasks) and 300
    relu_size: int = 400
    dropout: float = 0.1
    pad_token_id: int = 0
    freeze_embeddings: bool = False

    def to_json_file(self, path: Path) -> None:
        """The config an app reads beside the tokenizer files, named like a transformers config.json."""
        body = {"model_type": "pocketbert-bilstm", "architectures": ["BiLSTMClassifier"], **asdict(self)}
        Path(path).write_text(json.dumps(body, indent=2) + "\n")


class BiLSTMClassifier(nn.Module):

    def __init__(self, config: BiLSTMConfig):
        super().__init__()
        self.config = config
        self.embeddings = nn.Embedding(config.vocab_size, config.embedding_dim, padding_idx=config.pad_token_id)
        self.embeddings.weight.requires_grad_(not config.freeze_embeddings)
        self.forward_lstm = nn.LSTM(config.embedding_dim, config.hidden_size, batch_first=True)
        self.backward_lstm = nn.LSTM(config.embedding_dim, config.hidden_size, batch_first=True)
        self.dropout = nn.Dropout(config.dropout)
        self.relu_layer = nn.Linear(2 * config.hidden_size, config.relu_size)
        self.classifier = nn.Linear(config.relu_size, config.num_labels)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **_unused) -> Output:
        hidden = torch.relu(self.relu_layer(self.dropout(self.sentence_vector(input_ids, attention_mask))))
        return Output(self.classifier(self.dropout(hidden)))

    def sentence_vector(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The final states of both directions, concatenated: [batch, 2 * hidden_size]."""
        x = self.dropout(self.embeddings(input_ids))
        lengths = attention_mask.long().sum(dim=1).clamp(min=1)
        steps = torch.arange(input_ids.shape[1], device=input_ids.device)
        # Position t of the reversed sequence reads position len-1-t; padding stays where it is. Both reads
        # are products with 0/1 selection matrices: they export as MatMul, with no index arithmetic for a
        # converter to get wrong.
        reversed_index = lengths[:, None] - 1 - steps[None, :]
        reversed_index = torch.where(reversed_index >= 0, reversed_index, steps[None, :])
        reverse = (reversed_index[:, :, None] == steps[None, None, :]).to(x.dtype)
        forward_states, _ = self.forward_lstm(x)
        backward_states, _ = self.backward_lstm(torch.bmm(reverse, x))
        # The final state of each direction is its output at the last real token.
        last = ((lengths - 1)[:, None] == steps[None, :]).to(x.dtype)[:, None, :]
        final = torch.cat([torch.bmm(last, forward_states), torch.bmm(last, backward_states)], dim=2)
        return final[:, 0, :]

    # transformers' names for the word-embedding table: code that swaps it (a fitted export vocabulary) treats
    # every student alike
    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings

    def set_input_embeddings(self, table: nn.Embedding) -> None:
        self.embeddings = table

    def parameter_count(self, include_embeddings: bool = False) -> int:
        return sum(p.numel() for name, p in self.named_parameters()
                   if include_embeddings or not name.startswith("embeddings."))


def build_bilstm(settings, teacher, tokenizer, num_labels: int) -> BiLSTMClassifier:
    """A BiLSTM student from the BiLSTM recipe's settings (its `bilstm:` section, validated); embeddings from the
    teacher's word embeddings or random."""
    init = settings.embeddings
    if init not in EMBEDDING_INITS:
        raise ConfigError(f"bilstm.embeddings must be one of {', '.join(EMBEDDING_INITS)} (got '{init}')")
    teacher_embeddings = teacher.get_input_embeddings().weight.detach()
    vocab_size = len(tokenizer)
    if teacher_embeddings.shape[0] < vocab_size:
        raise ModelError(f"the teacher's embedding table has {teacher_embeddings.shape[0]} rows but its tokenizer "
                         f"{vocab_size} tokens: re-save the teacher with its own tokenizer")
    embedding_dim = teacher_embeddings.shape[1] if init == "teacher" else int(settings.embedding_dim)
    config = BiLSTMConfig(
        vocab_size=vocab_size, num_labels=num_labels, embedding_dim=embedding_dim,
        hidden_size=int(settings.hidden_size), relu_size=int(settings.relu_size),
        dropout=float(settings.dropout), pad_token_id=int(tokenizer.pad_token_id or 0),
        freeze_embeddings=bool(settings.freeze_embeddings),
    )
    if config.hidden_size <= 0 or config.relu_size <= 0:
        raise ConfigError("bilstm.hidden_size and bilstm.relu_size must be positive")
    model = BiLSTMClassifier(config)
    if init == "teacher":
        with torch.no_grad():
            model.embeddings.weight.copy_(teacher_embeddings[:vocab_size].float())
    return model


def save_bilstm(model: BiLSTMClassifier, folder: Path) -> None:
    save_own_student(model, folder, CONFIG_FILE)


def load_bilstm(folder: Path) -> BiLSTMClassifier:
    return load_own_student(folder, BiLSTMClassifier, BiLSTMConfig, CONFIG_FILE, "BiLSTM", "tang")
