"""A fitted copy of the student: its word-embedding rows gathered to the kept ids, its config's vocabulary size
and token ids renumbered; every other weight and setting as it was.

Every student architecture (BERT family, BiLSTM, static embeddings) looks its word pieces up in one table that
get_input_embeddings returns, and nothing else in it depends on the vocabulary's size, so each takes a fitted
vocabulary; the static student, nearly all table, shrinks the most.
"""

from __future__ import annotations

import copy

from pocketbert.core.errors import ModelError


def fitted_student(model, kept_ids: list[int]):
    """A copy of `model` that reads token id k as the full model read kept_ids[k]."""
    import torch
    from torch import nn

    renumber = {old: new for new, old in enumerate(kept_ids)}
    fitted = copy.deepcopy(model)
    table = fitted.get_input_embeddings()
    pad = table.padding_idx
    rows = nn.Embedding(len(kept_ids), table.embedding_dim, padding_idx=None if pad is None else renumber.get(pad),
                        dtype=table.weight.dtype)
    with torch.no_grad():
        rows.weight.copy_(table.weight[torch.tensor(kept_ids, dtype=torch.long)])
    rows.weight.requires_grad_(table.weight.requires_grad)
    fitted.set_input_embeddings(rows)
    _renumber_config(fitted.config, renumber)
    fitted.eval()
    return fitted


def _renumber_config(config, renumber: dict[int, int]) -> None:
    """vocab_size, and every token id the config names (pad_token_id; the static student's ignored_token_ids)."""
    def new_id(name: str, old: int) -> int:
        if old not in renumber:
            raise ModelError(f"the fitted vocabulary dropped token {old}, which the student's config names as "
                              f"{name}; keep every special token")
        return renumber[old]

    for name, value in list(vars(config).items()):
        if name == "vocab_size":
            setattr(config, name, len(renumber))
        elif name.endswith("_token_id") and isinstance(value, int) and not isinstance(value, bool):
            setattr(config, name, new_id(name, value))
        elif name.endswith("_token_ids") and isinstance(value, list):
            setattr(config, name, [new_id(name, v) for v in value])
