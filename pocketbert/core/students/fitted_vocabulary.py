"""What a run's fitted student (<run>/student_fitted/, `pocketbert train vocabulary`) was fitted with, read the same
way by the training step that writes it, the export that ships it and the command that runs the one before the
other: the student it was fitted from, and the recipe's vocabulary section it was fitted with."""

from __future__ import annotations

from pathlib import Path

from pocketbert.core.run.run_files import FITTED_STUDENT_DIR, MANIFEST, STUDENT_DIR, stage_path

# The recipe section whose keys shape a fitted student (core/config/recipe.py VocabularySection declares them).
SECTION = "vocabulary"
FITTING_KEYS = ("min_count", "max_rows", "recovery_steps", "recovery_learning_rate")
SETTINGS = "vocabulary_settings"         # the fitted manifest's config key: FITTING_KEYS' values it was fitted with
FITTED_FROM = "fitted_from_student"      # its config key: the sha256 of the student's manifest.json it was fitted from
FIT_COMMAND = "pocketbert train vocabulary"


def fitting_settings(vocabulary) -> dict:
    """FITTING_KEYS' values in a typed vocabulary section."""
    return {key: getattr(vocabulary, key) for key in FITTING_KEYS}


def fit_options(asked: dict) -> str:
    """FITTING_KEYS given, as the fit's command line spells them (--vocabulary-min-count 3), each after a space."""
    return "".join(f" --{SECTION}-{key.replace('_', '-')} {value}" for key, value in asked.items())


def student_identity(run_dir: Path) -> str:
    """The run's student, by its manifest's sha256: the manifest records every file's hash, so a student trained
    again (or replaced) has another."""
    from pocketbert.core.run.manifest import sha256_of

    return sha256_of(stage_path(run_dir, STUDENT_DIR) / MANIFEST)


def why_refit(run_dir: Path, asked: dict) -> str | None:
    """None when the run holds a fitted student fitted from its student with every setting `asked` names (vocabulary
    section keys given on the command line; a key not given takes what the fit used); else why not, in words."""
    return missing_or_stale(run_dir) or other_settings(run_dir, asked)


def missing_or_stale(run_dir: Path) -> str | None:
    """Why the run holds no fitted student of its current student, in words; None when it holds one."""
    from pocketbert.core.run.atomic_folder import recover_stage
    from pocketbert.core.run.manifest import read_manifest
    from pocketbert.core.run.stage_records import FittedStudentRecord

    recover_stage(run_dir, FITTED_STUDENT_DIR)
    folder = stage_path(run_dir, FITTED_STUDENT_DIR)
    if not (folder / MANIFEST).is_file():
        return "the run holds no fitted student"
    if read_manifest(folder, FittedStudentRecord).config.fitted_from_student != student_identity(run_dir):
        return "the run's student changed since its vocabulary was fitted"
    return None


def other_settings(run_dir: Path, asked: dict) -> str | None:
    """Why the run's fitted student (of its current student) is not what `asked` names (FITTING_KEYS given on the
    command line, with their validated values), in words; None when it is, or when the run holds none. Replacing it
    is a choice its own command's --overwrite makes, never an export's."""
    from pocketbert.core.run.manifest import read_manifest
    from pocketbert.core.run.stage_records import FittedStudentRecord

    folder = stage_path(run_dir, FITTED_STUDENT_DIR)
    if not (folder / MANIFEST).is_file():
        return None
    recorded = read_manifest(folder, FittedStudentRecord).config.vocabulary_settings
    for key in FITTING_KEYS:
        if key in asked and key not in recorded:
            return f"its record names no {SECTION}.{key}, and {asked[key]} is asked"
        if key in asked and asked[key] != recorded[key]:
            return f"its vocabulary was fitted with {SECTION}.{key} {recorded[key]}, not {asked[key]}"
    return None
