"""BERT-base, the reference the student is compared with, exported the same way as the student.

Latency does not depend on weight values, so without hub access BERT-base is built from its config
(12 layers, hidden 768, 12 heads, FFN 3072, the uncased vocabulary) with seeded random weights.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from pocketbert.cache_dir import cache_root
from pocketbert.export.onnx_export import FP32_NODE_PATTERNS, ONNX_OPSET, export_onnx, quantize_int8
from pocketbert.rundir import ONNX_FP32, ONNX_INT8, atomic_folder

BERT_BASE_CONFIG = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                        intermediate_size=3072, max_position_embeddings=512, type_vocab_size=2)


def build_bert_base(task, source: str | None = None):
    """BERT-base with the task's head: real weights when `source` names a checkpoint, else from its config."""
    from transformers import BertConfig

    from pocketbert.train.models import load_for_task

    if source:
        return load_for_task(source, task), f"{source} (pretrained weights)"
    torch.manual_seed(0)
    config = BertConfig(**BERT_BASE_CONFIG, **task.model_kwargs())
    config._attn_implementation = "eager"
    return task.auto_model_class().from_config(config).eval(), "bert-base architecture from its config (random weights)"


def reference_onnx(task, source: str | None = None) -> tuple[dict[str, Path], str]:
    """fp32 and int8 ONNX files of BERT-base, cached by what determines them."""
    import onnxruntime
    import transformers

    key = json.dumps([task.name, len(task.label_names), source, ONNX_OPSET, torch.__version__,
                      transformers.__version__, onnxruntime.__version__, BERT_BASE_CONFIG,
                      [p.pattern for p in FP32_NODE_PATTERNS]], sort_keys=True)
    folder = cache_root() / "reference" / hashlib.sha256(key.encode()).hexdigest()[:16]
    files = {"fp32": folder / ONNX_FP32, "int8": folder / ONNX_INT8}
    describe_file = folder / "describe.txt"
    if all(p.is_file() for p in files.values()) and describe_file.is_file():
        return files, describe_file.read_text()
    with atomic_folder(folder) as tmp:
        model, describe = build_bert_base(task, source)
        export_onnx(model, task, tmp / ONNX_FP32)
        quantize_int8(tmp / ONNX_FP32, tmp / ONNX_INT8)
        (tmp / "describe.txt").write_text(describe)
    return files, describe
