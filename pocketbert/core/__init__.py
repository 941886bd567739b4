"""The shared core every stage builds on, importing no stage, in five wings. Each wing may import core's ground and
the wings below it in this list, never one above:

    students/  architectures, checkpoints, stage folders, inference on every runtime
    config/    the typed recipe and the command line's options
    run/       the run folder: file names, atomic folders, manifests, user paths, the run lock, storage faults
    tasks/     the Task protocol and its tasks, datasets and readers, QA, losses
    process/   the launch variables, the parent watch, exit codes, quiet converters, test faults

Core's ground, beside the wings: errors (one exception family) and files (JSON and text read from disk, checked);
every wing imports them, they import no wing.

Import direction: core <- train; core <- export <- bench; core <- inspect; core <- ladder; the core imports
nothing outside pocketbert/core/, and the package has no import cycle (tests/test_import_direction.py).
"""
