"""Structured FFN pruning with torch-pruning: the config follows, so from_pretrained rebuilds the pruned model."""

from __future__ import annotations

import pytest
import torch
from transformers import (
    AutoModelForSequenceClassification,
    BertConfig,
    BertForSequenceClassification,
)

from pocketbert.core.errors import ConfigError
from pocketbert.train.prune import ffn_layers, prune_ffn


def tiny_classifier():
    config = BertConfig(vocab_size=300, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=2)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    return BertForSequenceClassification(config).eval()


def test_pruned_model_reloads_with_from_pretrained_and_answers_the_same(tmp_path):
    model = tiny_classifier()
    change = prune_ffn(model, 0.5, round_to=8)
    assert change == {"intermediate_size_before": 64, "intermediate_size_after": 32, "layers": 3}
    assert all(up.out_features == down.in_features == 32 for up, down in ffn_layers(model))
    model.save_pretrained(tmp_path)
    reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path, attn_implementation="eager").eval()
    ids = torch.randint(5, 300, (2, 9))
    with torch.no_grad():
        assert torch.allclose(model(input_ids=ids).logits, reloaded(input_ids=ids).logits, atol=1e-6)


def test_pruning_keeps_the_strongest_channels():
    model = tiny_classifier()
    up, _ = ffn_layers(model)[0]
    with torch.no_grad():
        up.weight[:8] *= 100.0  # eight channels far stronger than the rest
    strong = up.weight[:8].clone()
    prune_ffn(model, 0.5, round_to=8)
    kept = ffn_layers(model)[0][0].weight
    assert all(any(torch.equal(row, k) for k in kept) for row in strong)


@pytest.mark.parametrize("ratio", [0.0, 1.0, 1.5])
def test_ratio_out_of_range(ratio):
    with pytest.raises(ConfigError, match="between 0 and 1"):
        prune_ffn(tiny_classifier(), ratio)
