"""The shared core every stage builds on, importing no stage.

data (dataset readers), tasks (sentiment, qa: features, batching, outputs, losses, metrics), architectures
(BERT-family, BiLSTM: load, save, export wrapper, what each supports), models (checkpoints and stage folders),
inference (batched logits through PyTorch and ONNX Runtime) and recipe (the typed, validated recipe).

Import direction: core <- train; core <- export <- mobile_bench (tests/test_import_direction.py).
"""
