"""`make gpu-check`'s script, on the CPU: its dry run measures every part, a part past its cap is recorded as
such, the kit survives its round trip, and the GPU block of results/README.md is the one its JSON renders."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = REPO_ROOT / "scripts"
sys.path.insert(0, str(SCRIPTS))

import gpu_check  # noqa: E402
import gpu_check_parts  # noqa: E402
import gpu_check_render  # noqa: E402
import gpu_kit  # noqa: E402
from pocketbert.core.tasks.data import OFFICIAL_MD5  # noqa: E402


PARTS = list(gpu_check.BUDGET_S)
TINY_CAP_S = 0.5  # far below any step: the part's first step is stopped at once


def run_check(out: Path, data_dir: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    done = subprocess.run([sys.executable, str(SCRIPTS / "gpu_check.py"), "--dry", "--data-dir", str(data_dir),
                           "--out", str(out), *extra], capture_output=True, text=True, cwd=REPO_ROOT)
    result = json.loads((out / gpu_check.JSON_NAME).read_text())
    return done, result


@pytest.fixture(scope="module")
def dry_run(shared_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-check-dry")
    done, result = run_check(out, shared_data)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out, result


def positive(value) -> bool:
    return isinstance(value, (int, float)) and value > 0


@pytest.mark.slow
def test_the_dry_run_gives_every_part_its_figures(dry_run):
    out, result = dry_run
    plan = gpu_check_parts.DRY_PLAN
    assert list(result["parts"]) == PARTS
    assert {name: r["status"] for name, r in result["parts"].items()} == dict.fromkeys(PARTS, gpu_check.DONE)
    assert result["skipped"] == []
    parts = {name: r["figures"] for name, r in result["parts"].items()}

    assert parts["setup"]["torch"] and parts["setup"]["versions"]["transformers"]
    for role in ("teacher", "student"):
        stage = parts["stages"][role]
        assert positive(stage["wall_time_s"]) and positive(stage["train"]["examples_per_second"])
        assert 0 <= stage["eval"]["accuracy"] <= 1
    assert set(parts["stages"]["student"]["cross_domain"]["imdb"]) == {"student", "teacher"}
    ship = parts["ship"]
    for role in ("teacher", "student"):  # each stage trained epochs until its validation score stopped improving
        epochs = ship[role]["epochs"]
        assert 1 <= epochs["best_epoch"] <= epochs["epochs_trained"] <= 3
        assert len(epochs["validation"]) == epochs["epochs_trained"]
    assert ship["export"]["ran"] and positive(ship["seconds"])
    assert set(ship["met"]) == {"teacher_accuracy", "student_share", "seconds"}

    rows = parts["large_batch"]["rows"]
    assert set(rows) == {str(parts["stages"]["student"]["train"]["global_batch_size"]), str(plan.large_batch)}
    assert all(0 <= row["sst2_accuracy"] <= 1 and 0 <= row["imdb_accuracy"] <= 1 for row in rows.values())
    assert isinstance(parts["large_batch"]["within_target"], bool)
    seeds = 1 + len(plan.extra_seeds)
    assert parts["large_batch"]["seeds"] == seeds and all(row["seeds"] == seeds for row in rows.values())
    assert all(len(runs) == seeds for runs in parts["large_batch"]["runs"].values())

    for batch in plan.lever_batch_sizes:
        step = parts["profile"][f"batch_{batch}"]
        assert step["batch_size"] == batch and positive(step["step_ms"]) and step["top_operators"]

    resume = parts["resume"]
    assert resume["resumed_at_step"] == plan.resume_kill_step
    assert resume["verdict"] == "bitwise equal"  # on the CPU resuming is bitwise (tests/test_resume.py)
    assert resume["run_to_run"]["bitwise_equal"]  # and so is running again: the control holds nothing back
    eager = parts["resume_eager"]
    assert eager["verdict"] == "bitwise equal" and eager["run_to_run"]["bitwise_equal"]
    assert eager["cuda_graphs"]["used"] is False

    for role in ("teacher", "student"):
        assert set(parts["qa"][role]["eval"]) >= {"exact_match", "f1"}
        assert positive(parts["qa"][role]["wall_time_s"])
    # scored on the official dev file, named by its published md5, and every QA program built passed its gate
    assert parts["qa"]["eval_set"]["official"] and parts["qa"]["eval_set"]["md5"] == OFFICIAL_MD5["squad/dev-v1.1.json"]
    assert parts["qa"]["export"]["ran"] and parts["qa"]["export"]["gates"]
    assert all(parts["qa"]["export"]["gates"].values())

    timings = parts["bench_train"]["timings"]
    assert set(timings) == {"reference", "pocketbert_cold_cache", "pocketbert_warm_cache"}
    assert all(positive(t["examples_per_second"]) and t["spread"] >= 0 for t in timings.values())

    levers = parts["levers"]
    assert levers["pending"] == []
    cpu_levers = ["+ SDPA attention", "+ fused AdamW", "+ widths rounded to multiples of 8"]
    for model in ("student", "teacher"):
        assert set(levers["rows"][model]) == {str(b) for b in plan.lever_batch_sizes}
        for by_label in levers["rows"][model].values():
            assert set(by_label) == {"all off", *cpu_levers, "all on"}
            assert all(positive(row["examples_per_second"]) and row["spread"] >= 0 for row in by_label.values())
    assert "torch.compile" in levers["left_out"] and "student: CUDA graphs" in levers["left_out"]

    compiled = parts["compile"]
    for model in ("student", "teacher"):
        for by_label in compiled["rows"][model].values():  # torch.compile itself is left out of the dry plan
            assert set(by_label) == {"all off", "all on"}

    assert (out / gpu_check.TABLE_NAME).read_text() == gpu_check_render.render_table(result)


@pytest.mark.slow
def test_a_part_past_its_cap_is_recorded_as_skipped_with_why(shared_data, tmp_path):
    done, result = run_check(tmp_path, shared_data, "--parts", "stages", "--cap", f"stages={TINY_CAP_S}")
    assert done.returncode == 0, done.stderr[-3000:]
    stages = result["parts"]["stages"]
    assert stages["status"] == gpu_check.SKIPPED
    assert stages["reason"] == f"its cap of {TINY_CAP_S:g} s was reached during step 'teacher'"
    assert stages["steps"][0]["exit"] == "stopped at the cap"
    for name in PARTS[2:]:
        assert result["parts"][name] == {"status": gpu_check.SKIPPED, "reason": "not asked for (--parts)"}
    assert len(result["skipped"]) == len(PARTS) - 1  # all but the set-up


@pytest.mark.slow  # the dry run is its fixture
def test_update_replaces_only_the_parts_it_runs(dry_run, shared_data, tmp_path):
    first_out, first = dry_run
    (tmp_path / gpu_check.JSON_NAME).write_text((first_out / gpu_check.JSON_NAME).read_text())
    done, merged = run_check(tmp_path, shared_data, "--update", "--parts", "stages", "--cap", f"stages={TINY_CAP_S}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert [call["parts"] for call in merged["calls"]] == [PARTS, ["setup", "stages"]]
    assert merged["parts"]["stages"]["status"] == gpu_check.SKIPPED and merged["parts"]["stages"]["call"] == 1
    for name in PARTS[2:]:  # kept from the first call, figures and all
        kept = dict(merged["parts"][name])
        assert kept.pop("call") == 0 and kept == first["parts"][name]
    assert merged["skipped"] == [f"stages: {gpu_check.SKIPPED}, {merged['parts']['stages']['reason']}"]
    assert "call 1, " in done.stdout and "call 2, " in done.stdout


@pytest.mark.slow
def test_the_kit_gives_back_the_weights_in_fp16_and_the_data_unchanged(tiny_base, shared_data, tmp_path):
    from safetensors.numpy import load_file

    data = tmp_path / "data"
    for name in gpu_kit.DATA_FILES:  # the first rows of each real file
        source, target = shared_data / name, data / name
        target.parent.mkdir(parents=True, exist_ok=True)
        raw = gzip.decompress(source.read_bytes()) if name.endswith(".gz") else source.read_bytes()
        head = raw[:4096]
        target.write_bytes(gzip.compress(head) if name.endswith(".gz") else head)
    manifest = gpu_kit.build(tmp_path / "kit", tiny_base, data, wheels=[])
    assert json.loads((tmp_path / "kit" / gpu_kit.MANIFEST).read_text()) == manifest
    unpacked = gpu_kit.unpack(tmp_path / "kit", tmp_path / "there")

    original = load_file(str(tiny_base / "model.safetensors"))
    rebuilt = load_file(str(unpacked["model"] / "model.safetensors"))
    assert rebuilt.keys() == original.keys()
    for name, tensor in original.items():
        assert rebuilt[name].dtype == tensor.dtype and rebuilt[name].shape == tensor.shape
        assert (rebuilt[name] == tensor.astype("float16").astype("float32")).all(), name
    for name in gpu_kit.DATA_FILES:
        read = (lambda p: gzip.decompress(p.read_bytes())) if name.endswith(".gz") else (lambda p: p.read_bytes())
        assert read(unpacked["data"] / name) == read(data / name), name
    assert (unpacked["model"] / "tokenizer.json").read_bytes() == (tiny_base / "tokenizer.json").read_bytes()
    assert unpacked["site"] is None


def test_the_readme_gpu_block_is_the_one_the_json_renders():
    path = gpu_check_render.DEFAULT_JSON
    result = json.loads(path.read_text()) if path.is_file() else None
    assert gpu_check_render.readme_block(result) in gpu_check_render.DEFAULT_README.read_text(), \
        "results/README.md's gpu-check block is stale: run python scripts/gpu_check_render.py"


def test_docs_give_each_part_the_cap_the_script_has():
    rows = {line.split("|")[1].strip(): line.rstrip(" |").rsplit("|", 1)[-1].strip()
            for line in (REPO_ROOT / "docs" / "gpu.md").read_text().splitlines() if line.startswith("| ")}
    assert {name: rows.get(name) for name in PARTS} == {name: f"{cap:g}" for name, cap in gpu_check.BUDGET_S.items()}


def test_the_dry_run_shares_the_exports_own_cache_folders_and_no_other():
    """Every cache folder an export module names (a module-level `...CACHE_FOLDER`, and the app runtimes'), so that
    a folder the export adds is shared too."""
    import ast

    from pocketbert.export.checks import app_runtimes

    named = {app_runtimes.FOLDER}
    for path in (REPO_ROOT / "pocketbert" / "export").rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                named |= {node.value.value for t in node.targets
                          if isinstance(t, ast.Name) and t.id.endswith("CACHE_FOLDER")}
    assert len(named) >= 7  # the seven of today: the scan reads them
    assert set(gpu_check.EXPORT_CACHE_FOLDERS) == named


# A step that reports what it was given, then exits as its argument says: with a code, by a SIGKILL it sends itself,
# or after a sleep no test waits for; a thread it leaves running prints after a pause, as a writer finishing would.
FORKED_STEP = """import os, signal, sys, threading, time
print(os.environ["STEP_SEEN"], os.getcwd(), sys.argv[1:])
threading.Thread(target=lambda: (time.sleep(0.3), print("thread done"))).start()
if sys.argv[1] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
if sys.argv[1] == "sleep":
    time.sleep(60)
sys.exit(int(sys.argv[1]))
"""
# Forks from a process of its own: a test process holds threads (pytest-xdist's) that a fork must not copy.
FORKING = """import json, os, signal, subprocess, sys, tempfile
sys.path.insert(0, sys.argv[1])
import gpu_check
answers = {}
for arg in ("3", "kill", "sleep"):
    with tempfile.TemporaryFile("w+") as out:
        step = gpu_check.Forked([sys.executable, sys.argv[2], arg], out, {"STEP_SEEN": "seen"})
        try:
            code = step.wait(timeout=20 if arg != "sleep" else 1)
        except subprocess.TimeoutExpired:
            os.killpg(step.pid, signal.SIGKILL)
            code = ["stopped", step.wait()]
        out.seek(0)
        answers[arg] = [code, out.read()]
print(json.dumps(answers))
"""


def test_a_forked_step_exits_and_reports_as_a_started_one(tmp_path):
    """The dry run's steps, forked from its process: the step's environment, folder and arguments, its exit code,
    a SIGKILL it sends itself, its output with what its last thread wrote, and a step stopped at its cap."""
    (tmp_path / "step.py").write_text(FORKED_STEP)
    done = subprocess.run([sys.executable, "-c", FORKING, str(SCRIPTS), str(tmp_path / "step.py")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    code, text = answers["3"]
    assert code == 3 and f"seen {REPO_ROOT} ['3']" in text and "thread done" in text
    assert answers["kill"][0] == gpu_check.Check.SIGKILLED and "['kill']" in answers["kill"][1]
    assert answers["sleep"][0] == ["stopped", gpu_check.Check.SIGKILLED]
