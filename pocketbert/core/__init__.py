"""The shared core every stage builds on, importing no stage.

The run folder: run_files (every file name), atomic_folder (folders that appear whole), manifest, user_paths,
run_lock (one writer per folder), storage (what a failed write means), cache_dir; errors and exit_codes;
cli_options (the options every command shares). Then, from the bottom up: files (JSON and text read from disk, checked), quiet (silence for converters), data (file
formats and the named datasets), tasks (the Task protocol and the registered tasks: sentiment, qa; features,
batching, outputs, losses, metrics, file readers), task_data (a task's train and eval examples), models (loading a
checkpoint), architectures (BERT-family, BiLSTM: load, save, export wrapper, what each supports), stage_folder
(saving and reloading teacher/ and student/), inference (batched logits; the runtimes' loaders) and recipe (the
typed, validated recipe).

Import direction: core <- train; core <- export <- bench; core <- inspect; core <- ladder; the core imports
nothing outside pocketbert/core/, and the package has no import cycle (tests/test_import_direction.py).
"""
