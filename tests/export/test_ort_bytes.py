"""The .ort file and its operator list come out byte for byte the same on every conversion of one model, whatever
the caller's environment: ONNX Runtime orders an .ort's kernel type strings by an address-seeded hash, and the
operator list names the files it was read from."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from pocketbert.core.tasks.registry import SentimentTask
from pocketbert.export.programs import onnx_export

pytestmark = pytest.mark.slow  # two ORT conversions

BIG_VARIABLE = "x" * 5000  # an environment of another size moves the converter's allocations when it inherits it


@pytest.mark.skipif(not onnx_export.ort_order_is_fixed(), reason="the address layout is fixed on Linux only")
def test_two_conversions_give_the_same_bytes(tmp_path, monkeypatch):
    config = BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    source = onnx_export.export_onnx(BertForSequenceClassification(config).eval(), SentimentTask(["a", "b"]),
                                     tmp_path / "model.onnx")
    onnx_export.quantize_int8(source, tmp_path / "model.int8.onnx")
    first = onnx_export.convert_to_ort(tmp_path / "model.int8.onnx", tmp_path / "a.ort", tmp_path / "a.config")
    monkeypatch.setenv("POCKETBERT_TEST_PADDING", BIG_VARIABLE)
    again = onnx_export.convert_to_ort(tmp_path / "model.int8.onnx", tmp_path / "b.ort", tmp_path / "b.config")
    assert first[0].read_bytes() == again[0].read_bytes()
    config_text = first[1].read_text()
    assert "tmp" not in config_text and "# - a.ort" in config_text
    assert config_text.replace("a.ort", "b.ort") == again[1].read_text()
