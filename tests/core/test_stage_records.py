"""Each stage's manifest.json is one typed record (core/run/stage_records.py): written through its stage's class, read
back through the same class, and read nowhere else by string keys."""

from __future__ import annotations

import ast
import json
import time
from pathlib import Path

import pytest

import pocketbert
from pocketbert.core.errors import RunDirError
from pocketbert.core.run.manifest import read_manifest, write_manifest
from pocketbert.core.run.stage_records import (ExportRecord, FittedStudentRecord, StageRecord, StudentRecord,
                                               StudentsCompared, TeacherRecord, VocabularyRecord, VocabularyRecovery,
                                               record_class)

PACKAGE_ROOT = Path(pocketbert.__file__).resolve().parent
REPO_ROOT = PACKAGE_ROOT.parent
# Where a manifest's keys are spelled: the records, and the writer and reader that go through them.
RECORD_MODULES = {PACKAGE_ROOT / "core" / "run" / "stage_records.py", PACKAGE_ROOT / "core" / "run" / "manifest.py"}
# The top-level keys and sections only a stage manifest has (results.json and parity.json name none of them).
MANIFEST_KEYS = {"config", "metrics", "artifacts", "app_files"}
# How a manifest file is named where it is opened.
MANIFEST_NAMES = {"MANIFEST", "manifest.json"}
PARSERS = {"loads", "load", "read_json_object", "read_text"}


def _key(node: ast.AST) -> object:
    """The constant key a subscript or a dict method call reads, else None."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return node.slice.value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop", "setdefault") and node.args and isinstance(node.args[0], ast.Constant)):
        return node.args[0].value
    return None


def _names_a_manifest(node: ast.AST) -> bool:
    return any((isinstance(n, ast.Name) and n.id in MANIFEST_NAMES)
               or (isinstance(n, ast.Constant) and n.value in MANIFEST_NAMES) for n in ast.walk(node))


def manifest_reads(source: str, where: str) -> list[str]:
    """Each place in `source` that reads a manifest around its record: a string key only a manifest has, or a
    manifest file parsed by hand."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if _key(node) in MANIFEST_KEYS:
            found.append(f"{where}:{node.lineno} {ast.unparse(node)[:80]}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))
              and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) in PARSERS
              and _names_a_manifest(node)):
            found.append(f"{where}:{node.lineno} {ast.unparse(node)[:80]}")
    return found


def test_no_module_reads_a_manifest_by_string_keys():
    sources = [p for folder in (PACKAGE_ROOT, REPO_ROOT / "scripts") for p in sorted(folder.rglob("*.py"))
               if p not in RECORD_MODULES]
    found = [hit for path in sources
             for hit in manifest_reads(path.read_text(encoding="utf-8"), str(path.relative_to(REPO_ROOT)))]
    assert found == []


def test_the_check_sees_string_keys_and_hand_parsed_manifests_and_passes_records():
    source = ('task = manifest["config"]["task"]\n'
              'parity = export.get("metrics")\n'
              'doc = json.loads((folder / MANIFEST).read_text())\n'
              'other = read_json_object(path / "manifest.json")\n'
              'task = read_manifest(folder, ExportRecord).config.task\n'
              'rows = json.loads((folder / PARITY).read_text())\n'
              'n = row["inputs"]\n')
    assert sorted(hit.split()[0] for hit in manifest_reads(source, "x.py")) == ["x.py:1", "x.py:2", "x.py:3",
                                                                                "x.py:3", "x.py:4"]


def _stage_folder(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"\0" * 8)
    return folder


EXPORT_CONFIG = {"task": "sentiment", "max_length": 128,
                 "variants": {"onnx-int8": {"file": "model.int8.onnx", "runtime": "onnxruntime", "precision": "int8"}}}
EXPORT_METRICS = {"parity": {"model.int8.onnx": {"artifact": "model.int8.onnx", "n_examples": 4, "agreement": 1.0,
                                                 "passed": True, "metrics": {"accuracy": 0.75}}},
                  "sizes_bytes": {"model.int8.onnx": 8}, "timings": {"gates_s": 1.5}}


def test_a_manifest_reads_back_as_its_stages_record_with_every_field_it_was_written_with(tmp_path):
    folder = _stage_folder(tmp_path, "export")
    write_manifest(folder, stage="export", config=EXPORT_CONFIG, inputs={}, metrics=EXPORT_METRICS,
                   started=time.time(), extra={"app_files": ["labels.json"]})
    record = read_manifest(folder, ExportRecord)
    assert type(record) is ExportRecord
    assert record.config.max_length == 128 and record.variant_file("onnx-int8") == "model.int8.onnx"
    assert record.metrics.parity["model.int8.onnx"].passed and record.app_files == ["labels.json"]
    assert record.metrics.timings == {"gates_s": 1.5}
    assert record.artifacts["weights.bin"].bytes == 8
    # what the file holds is what the stage gave, read back whole: nothing dropped, no default added
    written = json.loads((folder / "manifest.json").read_text())
    assert written == json.loads(record.model_dump_json(exclude_unset=True))
    assert "coreai_variants" not in written["config"] and record.config.coreai_variants == []


def test_a_fitted_vocabularys_record_is_written_from_its_typed_parts_and_read_back_as_them(tmp_path):
    """train vocabulary builds its record from typed parts (the counted rows, the recovery, each comparison with
    the full student); the manifest holds what was given, and reads back as the same parts."""
    folder = _stage_folder(tmp_path, "student_fitted")
    compared = StudentsCompared(examples=8, agreement=0.875, fitted_student={"exact_match": 0.5, "f1": 0.625},
                                full_student={"exact_match": 0.5, "f1": 0.75})
    record = VocabularyRecord.model_validate({"rows_before": 30522, "rows_after": 900, "eval_unknown_rate": 0.01,
                                              "counted_on": {"train": {"texts": 32}}})
    record.recovery = VocabularyRecovery.model_validate({"texts": 4, "learning_rate": 0.001})
    record.recovery.steps, record.recovery.loss_before, record.recovery.loss_after = 5, 1.25, 0.5
    record.against_full_student, record.against_full_student_across_domains = compared, {"imdb": compared}
    write_manifest(folder, stage="student_fitted", config={"recipe": {}}, inputs={},
                   metrics={"eval": {"f1": 0.6}, "vocabulary": record}, started=time.time())
    written = json.loads((folder / "manifest.json").read_text())["metrics"]["vocabulary"]
    assert written["recovery"] == {"steps": 5, "loss_before": 1.25, "loss_after": 0.5, "texts": 4,
                                   "learning_rate": 0.001}  # no "train": the loop's statistics were not given
    assert "full_vocabulary_sizes_bytes" not in written and written["counted_on"] == {"train": {"texts": 32}}
    read = read_manifest(folder, FittedStudentRecord).metrics.vocabulary
    assert read.against_full_student == compared and read.against_full_student_across_domains == {"imdb": compared}
    assert read.recovery.steps == 5 and read.eval_unknown_rate == 0.01
    assert compared.metrics_line() == "exact_match 0.5000 (full 0.5000), f1 0.6250 (full 0.7500)"


def test_a_comparison_without_its_agreement_is_refused():
    with pytest.raises(ValueError, match="agreement"):
        StudentsCompared.model_validate({"examples": 8, "fitted_student": {}, "full_student": {}})


def test_each_stage_has_its_class_and_an_unknown_stage_reads_as_a_plain_record():
    assert [record_class(s) for s in ("teacher", "student", "student_fitted", "export", "student_mlm")] == [
        TeacherRecord, StudentRecord, FittedStudentRecord, ExportRecord, StageRecord]


def test_a_manifest_its_readers_could_not_read_is_never_written(tmp_path):
    folder = _stage_folder(tmp_path, "export")
    with pytest.raises(ValueError, match="max_length"):
        write_manifest(folder, stage="export", config={"task": "sentiment"}, inputs={}, metrics=EXPORT_METRICS,
                       started=time.time())
    assert not (folder / "manifest.json").exists()


@pytest.mark.parametrize("damage, said", [
    (lambda doc: doc["config"].pop("task"), "no 'config.task' entry"),
    (lambda doc: doc["config"].update(max_length="long"), "'config.max_length' in the manifest is not"),
    (lambda doc: doc["metrics"]["parity"]["model.int8.onnx"].pop("passed"), "no 'metrics.parity.model.int8.onnx"),
    (lambda doc: doc.update(stage="student"), "no 'config.recipe' entry"),
    (lambda doc: doc.update(stage="student", config={"recipe": {}}, metrics={"eval": {}}), "no 'config.dataset' entry"),
])
def test_an_edited_manifest_is_refused_in_one_line_naming_what_is_wrong(tmp_path, damage, said):
    folder = _stage_folder(tmp_path, "export")
    write_manifest(folder, stage="export", config=EXPORT_CONFIG, inputs={}, metrics=EXPORT_METRICS,
                   started=time.time())
    doc = json.loads((folder / "manifest.json").read_text())
    damage(doc)
    (folder / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(RunDirError, match="re-run the stage that wrote export/") as refused:
        read_manifest(folder, ExportRecord)
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_another_stages_manifest_in_a_folder_is_refused(tmp_path):
    folder = _stage_folder(tmp_path, "student")
    write_manifest(folder, stage="teacher", config={"recipe": {}}, inputs={}, metrics={"eval": {"accuracy": 0.5}},
                   started=time.time())
    assert type(read_manifest(folder)) is TeacherRecord
    with pytest.raises(RunDirError, match="is a 'teacher' stage's manifest, not the one"):
        read_manifest(folder, StudentRecord)
