"""Where a BERT-layout encoder keeps what a narrow student is cut along and what layer-wise losses read: its
layers, each layer's query/key/value projections, its FFN, its pooler. BERT, MiniLM, RoBERTa, ELECTRA and
ERNIE share this layout (transformers' BertLayer); DistilBERT and ALBERT name theirs otherwise and are refused."""

from __future__ import annotations

from pocketbert.core.errors import ModelError


def encoder_layers(model) -> list:
    """The encoder's layers in order, or ModelError for a model of another layout."""
    encoder = getattr(getattr(model, "base_model", None), "encoder", None)
    layers = getattr(encoder, "layer", None)
    if layers is None or not all(_attention(layer) is not None for layer in layers):
        model_type = getattr(getattr(model, "config", None), "model_type", type(model).__name__)
        raise ModelError(f"a {model_type} model does not have BERT's layer layout (encoder.layer[i].attention.self."
                         "query ...), so no narrow student can be cut from it: use a BERT, MiniLM or RoBERTa "
                         "teacher, or --recipe distilbert")
    return list(layers)


def _attention(layer):
    return getattr(getattr(layer, "attention", None), "self", None)


def query_key_value(layer, hidden):
    """The layer's query, key and value projections of `hidden` (the layer's input), each [batch, tokens, width]:
    what its attention computed, without asking the attention kernel (SDPA returns no probabilities)."""
    attention = _attention(layer)
    return attention.query(hidden), attention.key(hidden), attention.value(hidden)


def attention_projections(layer) -> tuple:
    attention = _attention(layer)
    return attention.query, attention.key, attention.value


def attention_output(layer):
    """The projection that reads the heads' concatenated outputs."""
    return layer.attention.output.dense


def ffn_up(layer):
    """The FFN's first projection (its output, after the activation, is the neurons a cut keeps or drops)."""
    return layer.intermediate


def pooler(model):
    """The [CLS] pooler a classifier reads, or None (a span head reads token states)."""
    return getattr(model.base_model, "pooler", None)
