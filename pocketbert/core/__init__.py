"""The shared core every stage builds on, importing no stage.

From the bottom up: files (JSON and text read from disk, checked), quiet (silence for converters), data (file
formats and the named datasets), tasks (the Task protocol and the registered tasks: sentiment, qa; features,
batching, outputs, losses, metrics, file readers), task_data (a task's train and eval examples), models (loading a
checkpoint), architectures (BERT-family, BiLSTM: load, save, export wrapper, what each supports), stage_folder
(saving and reloading teacher/ and student/), inference (batched logits; the runtimes' loaders) and recipe (the
typed, validated recipe).

Import direction: core <- train; core <- export <- mobile_bench; the core imports no top-level module but
errors, rundir, cache_dir and storage, and no cycle among its modules (tests/test_import_direction.py).
"""
