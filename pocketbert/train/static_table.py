"""The static student's embedding table, distilled from the teacher's encoder with no data: Model2Vec's method.

Model2Vec (Tulkens and van Dongen, 2024; `model2vec` on PyPI) is not used itself: its distillation extra requires
transformers < 5.4 (pocketbert pins 5.23) and the skeletoken package, and it builds a new tokenizer, whereas this
student must read the teacher's own ids. What it does is short and is done here, on the teacher's vocabulary:

1. every vocabulary id v goes through the teacher's encoder alone, as `[CLS] v [SEP]`, and its row is the mean of
   the three output vectors (Model2Vec's default `mean` pooling) — the encoder's view of the token out of context;
2. PCA to `static.pca_dims` dimensions, fitted on the rows of the word pieces (special and `[unused…]` tokens
   left out, as Model2Vec removes them), then applied to every row; components signed so that each one's largest
   score is positive (Model2Vec's convention, so the table does not depend on the eigensolver's signs);
3. SIF weighting (Arora et al., 2017) with word frequencies estimated by Zipf's law from the vocabulary's order:
   the k-th word piece has probability proportional to 1 / (k + 1) and its row is scaled by a / (a + p),
   a = `static.sif_coefficient` (Model2Vec's 1e-4). WordPiece vocabularies list whole words roughly by frequency,
   so frequent words ("the", "of") are damped, as a weighted mean of word vectors needs.

Rows of the ignored tokens (special and unused) are zero: the student leaves special tokens out of its mean, and
the tokenizer never emits an unused one. One row per id, so the table takes the app's ids as they are.
"""

from __future__ import annotations

import inspect
import re

import numpy as np
import torch

from pocketbert.core.errors import ConfigError

UNUSED_TOKEN = re.compile(r"\[unused\d+\]")  # WordPiece's reserved slots: no text tokenizes to them
TABLE_BATCH = 512  # vocabulary ids through the encoder at a time (three tokens each)


def ignored_ids(tokenizer) -> list[int]:
    """The ids whose rows stay zero and that no sentence vector counts: special tokens and reserved slots."""
    vocab = tokenizer.get_vocab()
    special = set(tokenizer.all_special_ids)
    return sorted(special | {i for token, i in vocab.items() if UNUSED_TOKEN.fullmatch(token)})


@torch.no_grad()
def encoder_rows(encoder, tokenizer, vocab_size: int, device, batch_size: int = TABLE_BATCH,
                 progress: str | None = "static table") -> np.ndarray:
    """[vocab_size, hidden]: each id's mean output of `encoder` (a transformers base model) on `[CLS] id [SEP]`."""
    from tqdm.auto import tqdm

    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    if cls_id is None or sep_id is None:
        raise ConfigError("the static recipe feeds each token as [CLS] token [SEP]: the teacher's tokenizer has no "
                          "[CLS] or [SEP] token; use a BERT-family teacher")
    encoder.to(device).eval()
    # DistilBERT's encoder takes no token types; BERT's and RoBERTa's get segment 0, as for any single sentence
    segments = "token_type_ids" in inspect.signature(encoder.forward).parameters
    rows = []
    for start in tqdm(range(0, vocab_size, batch_size), desc=progress, disable=progress is None, unit="batch",
                      leave=False):
        ids = torch.arange(start, min(start + batch_size, vocab_size), device=device)
        batch = torch.stack([torch.full_like(ids, cls_id), ids, torch.full_like(ids, sep_id)], dim=1)
        extra = {"token_type_ids": torch.zeros_like(batch)} if segments else {}
        out = encoder(input_ids=batch, attention_mask=torch.ones_like(batch), **extra)
        rows.append(out.last_hidden_state.float().mean(dim=1).cpu())
    return torch.cat(rows).numpy().astype(np.float64)


def pca(rows: np.ndarray, fit_on: np.ndarray, dims: int) -> tuple[np.ndarray, float]:
    """(every row projected on the top `dims` principal components of rows[fit_on], the variance they explain)."""
    fitted = rows[fit_on]
    mean = fitted.mean(axis=0)
    centred = fitted - mean
    eigenvalues, eigenvectors = np.linalg.eigh(centred.T @ centred / max(1, len(fitted) - 1))
    order = np.argsort(eigenvalues)[::-1][:dims]
    components = eigenvectors[:, order]
    scores = centred @ components
    signs = np.sign(scores[np.argmax(np.abs(scores), axis=0), np.arange(components.shape[1])])
    components = components * np.where(signs == 0, 1.0, signs)
    explained = float(np.clip(eigenvalues[order], 0, None).sum() / max(np.clip(eigenvalues, 0, None).sum(), 1e-12))
    return (rows - mean) @ components, explained


def zipf_sif_weights(n: int, coefficient: float) -> np.ndarray:
    """a / (a + p_k) for the k-th of n tokens (k = 1..n), p_k Zipf's estimate 1 / (k + 1), normalised."""
    inverse_rank = 1.0 / np.arange(2, n + 2)
    probability = inverse_rank / inverse_rank.sum()
    return coefficient / (coefficient + probability)


def distill_table(encoder, tokenizer, dims: int, sif_coefficient: float | None, device,
                  progress: str | None = "static table") -> tuple[torch.Tensor, dict]:
    """(the [vocabulary, dims] table, a report of how it was made) from the teacher's encoder."""
    hidden = int(encoder.config.hidden_size)
    if not 0 < dims <= hidden:
        raise ConfigError(f"static.pca_dims must be between 1 and the teacher's hidden size {hidden} (got {dims})")
    rows = encoder_rows(encoder, tokenizer, len(tokenizer), device, progress=progress)
    return table_from_rows(rows, ignored_ids(tokenizer), dims, sif_coefficient)


def table_from_rows(rows: np.ndarray, ignored: list[int], dims: int,
                    sif_coefficient: float | None) -> tuple[torch.Tensor, dict]:
    """The table from the encoder's rows: PCA fitted on the word pieces, SIF weighting, ignored rows zero."""
    kept = np.ones(len(rows), dtype=bool)
    kept[[i for i in ignored if i < len(rows)]] = False
    table, explained = pca(rows, kept, dims)
    if sif_coefficient is not None:
        table[kept] *= zipf_sif_weights(int(kept.sum()), sif_coefficient)[:, None]
    table[~kept] = 0.0
    report = {"rows": len(rows), "dims": dims, "teacher_hidden_size": rows.shape[1],
              "pca_explained_variance": explained, "sif_coefficient": sif_coefficient, "ignored_ids": len(ignored),
              "pooling": "mean of [CLS] token [SEP]"}
    return torch.from_numpy(table.astype(np.float32)), report
