"""No stage trusts the folder it reads: each stage records the sha256 of every file it wrote, and the
next one checks them before any work; a folder whose config.json and weights disagree, or whose files name the
classes differently, is refused in one line rather than loaded as another model. A folder written before stages
recorded their files is read with one line saying so, and still gets the config, weights and labels checks."""

from __future__ import annotations

import json
import shutil

import pytest
from helpers import error_line, run_cli

pytestmark = pytest.mark.slow  # every test takes the tiny teacher (conftest's SLOW_FIXTURES)

USAGE_ERROR = 2
MANIFEST = "manifest.json"


def refused(result, *words) -> str:
    """One `error:` line naming each of `words`, exit 2, no traceback."""
    line = error_line(result)
    assert result.exit_code == USAGE_ERROR, result.err
    assert line.startswith("error: ") and "Traceback" not in result.err, result.err
    assert all(w in line for w in words), line
    return line


def copy_teacher(teacher_run, tmp_path, as_student: bool = False):
    run = tmp_path / "run"
    shutil.copytree(teacher_run / "teacher", run / "teacher")
    if as_student:  # a teacher folder is a complete stage model: export reads it as it reads a student, once its
        shutil.copytree(run / "teacher", run / "student")  # manifest names the stage the folder holds
        manifest = json.loads((run / "student" / "manifest.json").read_text())
        (run / "student" / "manifest.json").write_text(json.dumps({**manifest, "stage": "student"}))
    return run


def change_a_weight(folder) -> None:
    """A valid safetensors file that loads without a word, but holds another model than the one trained."""
    from safetensors.torch import load_file, save_file

    weights = load_file(folder / "model.safetensors")
    name = next(k for k in sorted(weights) if k.endswith("classifier.bias"))
    weights[name] = weights[name] + 1.0
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})


def forget_hashes(folder) -> None:
    """The folder as an older pocketbert wrote it: a manifest without the hashes of its files."""
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest.pop("artifacts")
    (folder / MANIFEST).write_text(json.dumps(manifest))


def edit_config(folder, **changes) -> None:
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def distill(capsys, run):
    return run_cli(capsys, "train", "distill", "--run", run, "--preset", "tiny", "--device", "cpu")


# ---------------------------------------------------------------- each stage records what it wrote

def test_the_teacher_records_the_hash_of_every_file_it_wrote(teacher_run):
    from pocketbert.core.run.manifest import sha256_of

    teacher = teacher_run / "teacher"
    recorded = json.loads((teacher / MANIFEST).read_text())["artifacts"]
    assert set(recorded) == {p.name for p in teacher.iterdir() if p.name != MANIFEST}
    assert all(recorded[name]["sha256"] == sha256_of(teacher / name) for name in recorded)


# ---------------------------------------------------------------- the next stage checks them before any work

@pytest.mark.parametrize("edit", ["weights", "labels", "tokenizer"])
def test_distill_refuses_a_teacher_changed_after_it_was_written(capsys, tmp_path, teacher_run, edit):
    run = copy_teacher(teacher_run, tmp_path)
    teacher = run / "teacher"
    if edit == "weights":
        change_a_weight(teacher)
        name = "model.safetensors"
    elif edit == "labels":
        name = "labels.json"
        (teacher / name).write_text(json.dumps(["positive", "negative"]))
    else:
        name = "tokenizer_config.json"
        settings = json.loads((teacher / name).read_text())
        (teacher / name).write_text(json.dumps({**settings, "do_lower_case": not settings.get("do_lower_case")}))
    line = refused(distill(capsys, run), f"teacher/{name}", "changed after the teacher", "pocketbert train teacher",
                   "--overwrite")
    assert "sha256" in line
    assert not (run / "student").exists()


def test_distill_refuses_a_teacher_missing_a_file_it_wrote(capsys, tmp_path, teacher_run):
    run = copy_teacher(teacher_run, tmp_path)
    (run / "teacher" / "tokenizer.json").unlink()
    refused(distill(capsys, run), "tokenizer.json", "missing", "pocketbert train teacher")
    assert not (run / "student").exists()


def test_export_refuses_a_student_changed_after_it_was_written(capsys, tmp_path, teacher_run, shared_data):
    run = copy_teacher(teacher_run, tmp_path, as_student=True)
    change_a_weight(run / "student")
    refused(run_cli(capsys, "export", "--run", run, "--data-dir", shared_data), "student/model.safetensors",
            "changed after")
    assert not (run / "export").exists()


def test_a_config_edited_to_fewer_layers_is_refused_by_its_hash(capsys, tmp_path, teacher_run, shared_data):
    """student/config.json edited to one layer while the weights hold two: loaded leniently, the export would drop a
    layer without a word and report every exported model as passing the parity check."""
    run = copy_teacher(teacher_run, tmp_path, as_student=True)
    edit_config(run / "student", num_hidden_layers=1)
    refused(run_cli(capsys, "export", "--run", run, "--data-dir", shared_data), "student/config.json",
            "changed after")
    assert not (run / "export").exists()


# ---------------------------------------------------------------- config and weights must agree

CONFIG_EDITS = {  # test id: (config.json changes, words the error line holds)
    "fewer layers": ({"num_hidden_layers": 1}, ["no place for", "layer.1."]),
    "more layers": ({"num_hidden_layers": 3}, ["missing", "layer.2."]),
    "narrower FFN": ({"intermediate_size": 48}, ["another shape", "intermediate"]),
}


@pytest.mark.parametrize("case", sorted(CONFIG_EDITS))
def test_a_stage_folder_whose_config_and_weights_disagree_is_never_loaded_leniently(capsys, tmp_path, teacher_run,
                                                                                    case):
    """Without hashes to catch the edit (a folder of an older version), loading itself refuses the mismatch."""
    changes, words = CONFIG_EDITS[case]
    run = copy_teacher(teacher_run, tmp_path)
    forget_hashes(run / "teacher")
    edit_config(run / "teacher", **changes)
    refused(distill(capsys, run), "config.json and its weights disagree", *words)
    assert not (run / "student").exists()


# ---------------------------------------------------------------- labels are read from one place

def test_labels_json_that_disagrees_with_config_json_is_an_error(capsys, tmp_path, teacher_run):
    run = copy_teacher(teacher_run, tmp_path)
    forget_hashes(run / "teacher")
    (run / "teacher" / "labels.json").write_text(json.dumps(["positive", "negative"]))
    refused(distill(capsys, run), "labels.json", "agree")
    assert not (run / "student").exists()


def test_config_id2label_that_disagrees_with_the_task_file_is_an_error(capsys, tmp_path, teacher_run):
    run = copy_teacher(teacher_run, tmp_path)
    forget_hashes(run / "teacher")
    edit_config(run / "teacher", id2label={"0": "positive", "1": "negative"}, label2id={"positive": 0, "negative": 1})
    refused(distill(capsys, run), "id2label", "agree")
    assert not (run / "student").exists()


# ---------------------------------------------------------------- folders of older versions

def test_a_folder_without_hashes_is_read_with_one_line_saying_so(capsys, tmp_path, teacher_run, shared_data):
    """An older version's student (no hashes) still exports far enough to fail on something else: a note names the
    folder, and nothing is refused for the hashes alone."""
    run = copy_teacher(teacher_run, tmp_path, as_student=True)
    forget_hashes(run / "student")
    result = run_cli(capsys, "export", "--run", run, "--data-dir", shared_data, "--coreml-variants", "int3")
    assert "records no file hashes" in result.err and "student/manifest.json" in result.err
    refused(result, "coreml_variants")
