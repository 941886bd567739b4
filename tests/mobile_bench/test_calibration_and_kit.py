"""Calibration factors from the published table, the device kit's folder, the kit's JSON through `bench import`
into the report, and the report's separate floor / calibrated columns and placement status."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from pocketbert.core.errors import ConfigError, RunDirError
from pocketbert.mobile_bench.estimates import calibration, derive, profiles
from pocketbert.export.app.swift_package import SWIFT_PACKAGE, package_files
from pocketbert.mobile_bench.device.kit import CONFIG_PATH, KIT_FILES, MODELS_PATH, TOKENIZER_PATH, write_kit
from pocketbert.core.run.run_files import APP_README as README
from pocketbert.mobile_bench.estimates.model_shape import EncoderShape, GatedEncoderShape
from pocketbert.mobile_bench.reports.report import build_document, render_markdown
from pocketbert.mobile_bench.device.phone_import import KIT_SCHEMA, import_phone_rows
from pocketbert.mobile_bench.steps.run import import_phone_measurement
from pocketbert.mobile_bench.timing.stats import median_rank_interval
from pocketbert.core.run.run_files import (BENCH_DIR, BENCH_IMPORTS_DIR, BENCH_REPORT, BENCH_RESULTS, EXPORT_DIR, LABELS, MANIFEST, PLACEMENT,
                                      SWIFT_TOKENIZER_PACKAGE, TOKENIZER_GOLDEN, TOKENIZER_TABLES)
from tests.mobile_bench.test_report import synthetic_results

REPO = Path(__file__).resolve().parents[2]
RECORDED_BENCH = REPO / "results" / "static" / "bench.results.json"  # graph costs counted by a real bench run
RECORDED_EXPORT_MANIFEST = REPO / "results" / "static" / "export.manifest.json"  # a real export's manifest
FIXTURE = Path(__file__).parent / "fixtures" / "kit_measurement.json"
SHAPE_VS_GRAPH_TOLERANCE = 0.02  # the shape's count leaves out element-wise ops, the pooler and the classifier
BERT_BASE = EncoderShape(layers=12, hidden=768, heads=12, ffn=3072, vocab=30522)
GRANITE_97M_PARAMETERS = 97_441_152  # the checkpoint's count (coreai-model-zoo's Granite authoring graph checks it)
MIN_CALIBRATED_POINTS = 5  # at least five published points carry a floor and a factor
# The recorded export made no multifunction package: the run adds one to its manifest as an export with the ane
# variant records it (its file and digest), with the functions its placement check lists.
ANE_PACKAGE = "PocketBertSentiment.ane.mlpackage"
ANE_SHA256 = "a3f1c9e7b5d2f8a4c6e0b9d7f3a1c5e8b2d4f6a0c8e2b4d6f8a0c2e4b6d8f0a1"
ANE_FUNCTIONS = ("main_len128", "main_len16", "main_len32", "main_len48")  # as placement.json lists them


def table():
    return calibration.calibration_table(profiles.load_profiles()["devices"])


def test_shape_floor_counts_what_the_graph_counts():
    counted = json.loads(RECORDED_BENCH.read_text())["graph_costs"]["headline"]["bert-base"]
    shape = BERT_BASE.cost(128)
    assert shape["flops"] == pytest.approx(counted["flops"], rel=SHAPE_VS_GRAPH_TOLERANCE)
    assert shape["weight_bytes"]["fp32"] == pytest.approx(counted["weight_bytes"]["fp32"], rel=SHAPE_VS_GRAPH_TOLERANCE)


def test_calibration_factors_from_the_published_table():
    t = table()
    points = {p["id"]: p for p in t["points"]}
    assert len(points) >= 5 and all(p["source"].startswith("https://") for p in points.values())
    # Apple's DistilBERT on the iPhone 13 Neural Engine: memory-bound, 66 M fp16 weights over 34.1 GB/s
    distil = points["apple-distilbert-ane-iphone13"]
    weights = EncoderShape(6, 768, 12, 3072, 30522).cost(128)
    expected = (weights["weight_bytes"]["fp32"] / 2 + weights["io_bytes"]) / 34.1e9 * 1e3
    assert distil["bound"] == "memory" and distil["floor_ms"] == pytest.approx(expected)
    assert distil["factor"] == pytest.approx(3.47 / expected)
    # MobileBERT on a Pixel 4, 4 big cores: compute-bound, ~5.3 GFLOPs at 161.6 GFLOP/s
    mobile = points["mobilebert-pixel4-tflite"]
    assert mobile["bound"] == "compute" and 5.0 < mobile["gflops"] < 5.6
    assert mobile["factor"] == pytest.approx(62 / mobile["floor_ms"]) and 1.0 < mobile["factor"] < 3.0
    # a point without a device profile has no floor, and says why
    assert points["qualcomm-distilbert-galaxy-s24-npu"]["floor_ms"] is None
    assert points["qualcomm-distilbert-galaxy-s24-npu"]["no_floor_because"]
    calibrated = [p for p in points.values() if p["floor_ms"] is not None]
    assert len(calibrated) >= MIN_CALIBRATED_POINTS
    assert all(math.isfinite(p["floor_ms"]) and p["floor_ms"] > 0 and math.isfinite(p["factor"])
               and p["factor"] == pytest.approx(p["measured_ms"] / p["floor_ms"]) for p in calibrated)
    factors = {(f["family"], f["compute_unit"], f["precision"]): f for f in t["factors"]}
    # iPhone, iPad and Mac Neural Engines pool; the sustained point is held apart (it sets the sustained factor)
    apple_ane = factors[("apple", "neural_engine", "fp16")]
    fitted = [points[i]["factor"] for i in apple_ane["ids"]]
    assert "granite97m-coreai-ane-mac-sustained" not in apple_ane["ids"] and distil["factor"] in fitted
    assert apple_ane["factor"] == pytest.approx(math.prod(fitted) ** (1 / len(fitted)))
    assert factors[("android-arm", "cpu", "fp32")]["ids"] == ["mobilebert-pixel4-tflite"]


def test_gated_shape_counts_granite_97m_exactly():
    granite = GatedEncoderShape(layers=12, hidden=384, heads=12, ffn=1536, vocab=180000)
    assert granite.embedding_parameters() + granite.layers * granite.layer_parameters() == GRANITE_97M_PARAMETERS
    # the gated FFN reads 3 hidden × ffn weights per token where BERT's reads 2
    assert granite.layer_macs_per_token() - EncoderShape(12, 384, 12, 1536, 180000).layer_macs_per_token() \
        == 384 * 1536


def test_a_calibrated_estimate_is_the_floor_times_the_pooled_factor():
    factors = [{"family": "f", "compute_unit": "cpu", "precision": "fp32", "factor": 2.0, "low": 1.5, "high": 3.0,
                "points": 2, "ids": ["a", "b"]}]
    got = calibration.calibrate(10.0, "f", "cpu", "fp32", factors)
    assert (got["calibrated_ms"], got["calibrated_low_ms"], got["calibrated_high_ms"]) == (20.0, 15.0, 30.0)
    assert calibration.calibrate(10.0, "f", "gpu", "fp32", factors)["calibrated_ms"] is None


@pytest.mark.slow
def test_bench_calibration_command_prints_and_records(tmp_path):
    from click.testing import CliRunner

    from pocketbert.cli import cli

    result = CliRunner().invoke(cli, ["bench", "calibration", "--out", str(tmp_path / "cal")])
    assert result.exit_code == 0, result.output
    assert "apple-distilbert-ane-iphone13" in result.output and "android-arm / cpu / fp32" in result.output
    record = json.loads((tmp_path / "cal" / "calibration.json").read_text())
    assert record["command"].startswith("pocketbert") and record["created"] and record["factors"]
    again = CliRunner().invoke(cli, ["bench", "calibration", "--out", str(tmp_path / "cal")])
    assert again.exit_code == 0, again.output  # its own earlier output is replaced


def test_bench_calibration_never_replaces_a_folder_it_did_not_write(tmp_path, capsys):
    from helpers import error_line, run_cli

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("the user's")
    result = run_cli(capsys, "bench", "calibration", "--out", theirs)
    assert result.exit_code == 2 and error_line(result).startswith("error:"), result.err
    assert [p.name for p in theirs.iterdir()] == ["notes.txt"]


def _run_with_export(tmp_path: Path, tokenizer: Path | None = None) -> Path:
    """A run whose export is the recorded one's manifest (and a multifunction package's entry); with `tokenizer`, a
    folder holding tokenizer.tables and tokenizer_golden.json, those files too, recorded in its manifest (what
    `bench kit` copies)."""
    from pocketbert.core.run.manifest import sha256_of

    export = tmp_path / "run" / EXPORT_DIR
    export.mkdir(parents=True)
    manifest = json.loads(RECORDED_EXPORT_MANIFEST.read_text())
    manifest["config"]["variants"]["ane"] = {"file": ANE_PACKAGE, "runtime": "coreml", "precision": "fp16"}
    manifest["artifacts"][ANE_PACKAGE] = {"sha256": ANE_SHA256}
    (export / PLACEMENT).write_text(json.dumps([{"program": ANE_PACKAGE,
                                                 "functions": [{"function": f} for f in ANE_FUNCTIONS]}]))
    for name in (TOKENIZER_TABLES, TOKENIZER_GOLDEN) if tokenizer is not None else ():
        shutil.copy(tokenizer / name, export / name)
        manifest["artifacts"][name] = {"sha256": sha256_of(export / name)}
    (export / MANIFEST).write_text(json.dumps(manifest))
    (export / LABELS).write_text(json.dumps(["negative", "positive"]))
    return tmp_path / "run"


def test_kit_folder(tmp_path, export_tokenizer_files):
    run = _run_with_export(tmp_path, export_tokenizer_files)
    folder = write_kit(run)
    for target in KIT_FILES.values():
        assert (folder / target).is_file()
    assert (folder / MODELS_PATH).is_dir() and "not built this package with Apple's SDK" in (folder / README).read_text()
    config = json.loads((folder / CONFIG_PATH).read_text())
    programs = {p["program"]: p for p in config["programs"]}
    assert programs["PocketBertSentiment.mlpackage"]["runtime"] == "coreml"
    assert programs["PocketBertSentiment.aimodel"]["runtime"] == "coreai"
    assert config["median_interval_ranks"][19] == list(median_rank_interval(20))
    core = (folder / KIT_FILES["KitCore.swift.txt"]).read_text()
    assert "MLComputePlan.load(contentsOf:configuration:)" in core.split("import CoreML")[0]  # named in the header
    # the iOS folder's tokenizer package and the export's files it is checked on, as the export wrote them
    shipped = {p.relative_to(SWIFT_PACKAGE) for p in package_files()}
    assert {p.relative_to(folder / SWIFT_TOKENIZER_PACKAGE) for p in (folder / SWIFT_TOKENIZER_PACKAGE).rglob("*")
            if p.is_file()} == shipped
    for name in (TOKENIZER_TABLES, TOKENIZER_GOLDEN):
        assert (folder / TOKENIZER_PATH / name).read_bytes() == (export_tokenizer_files / name).read_bytes()
    recorded = json.loads((run / EXPORT_DIR / MANIFEST).read_text())["artifacts"]
    assert config["tokenizer"] == {"tables_sha256": recorded[TOKENIZER_TABLES]["sha256"],
                                   "golden_sha256": recorded[TOKENIZER_GOLDEN]["sha256"]}
    package = (folder / "Package.swift").read_text()
    assert '.package(path: "PocketBertTokenizer")' in package and '.copy("Tokenizer")' in package
    with pytest.raises(RunDirError, match="already exists"):
        write_kit(run)


def test_the_kit_measures_a_multifunction_package_function_by_function(tmp_path, export_tokenizer_files):
    config = json.loads((write_kit(_run_with_export(tmp_path, export_tokenizer_files)) / CONFIG_PATH).read_text())
    programs = {p["program"]: p for p in config["programs"]}
    # each function at its own length, shortest first, as the placement check read them from the package
    assert programs[ANE_PACKAGE]["functions"] == [{"function": f"main_len{n}", "sequence_length": n}
                                                  for n in (16, 32, 48, 128)]
    assert programs["PocketBertSentiment.mlpackage"]["functions"] is None  # one function, main
    # the Core AI program's entry points, named as the Swift decodes them
    assert programs["PocketBertSentiment.aimodel"]["functions"][0] == {"function": "main_len16", "sequence_length": 16}


def test_a_kit_needs_the_tokenizer_files_the_export_recorded(tmp_path, export_tokenizer_files):
    run = _run_with_export(tmp_path, export_tokenizer_files)
    golden = run / EXPORT_DIR / TOKENIZER_GOLDEN
    golden.write_text(golden.read_text() + "\n")  # edited after the export recorded it
    with pytest.raises(RunDirError, match=f"{TOKENIZER_GOLDEN} changed after"):
        write_kit(run)
    assert not (run / "device_kit").exists()


@pytest.mark.slow
def test_kit_json_round_trips_through_bench_import_into_the_report(tmp_path):
    run = _run_with_export(tmp_path)
    (run / BENCH_DIR).mkdir()
    results = derive.derive(synthetic_results())
    (run / BENCH_DIR / BENCH_RESULTS).write_text(json.dumps(results))
    saved, refreshed = import_phone_measurement(run, FIXTURE, "iphone-15-pro", "student", "fp16", 1, None)
    assert refreshed is not None and len(list(saved.glob("*.json"))) == 4
    after = json.loads((run / BENCH_DIR / BENCH_RESULTS).read_text())
    imported = [m for m in after["measurements"] if m["device"] == "iphone-15-pro"]
    ane = next(m for m in imported if m["compute_units"] == "ALL")
    assert ane["median_ms"] == pytest.approx(2.105) and ane["cold_start"]["first_inference_ms"] == 9.8
    assert ane["measured_placement"]["operation_counts"] == {"neural_engine": 2, "gpu": 0, "cpu": 1, "unknown": 0}
    # a multifunction package's functions: a row each, at its own length, named after the package
    functions = {m["function"]: m for m in imported if m["function"]}
    assert sorted(functions) == ["main_len128", "main_len16"]
    assert functions["main_len16"]["program"] == f"{ANE_PACKAGE}#main_len16"
    assert functions["main_len16"]["sequence_length"] == 16 and functions["main_len16"]["median_ms"] == pytest.approx(0.61)
    assert functions["main_len128"]["measured_placement"]["operation_counts"]["neural_engine"] == 3
    # the device's tokenizer check reaches every row of the file
    assert all(m["tokenizer_check"]["texts_checked"] == 14 for m in imported)
    md = (run / BENCH_DIR / BENCH_REPORT).read_text()
    assert "neural engine 2 / cpu 1" in md and "unchecked (no verdict)" in md
    assert "Measured: iPhone 15 Pro" in md
    assert f"| iPhone 15 Pro | {ANE_PACKAGE}#main_len16 | CPU_AND_NE | 180.0 | 4.10 | 0.61 |" in md
    assert f"{ANE_PACKAGE}#main_len128" in md
    assert md.count("tokenizer on device (iPhone 15 Pro): 14 of 14 golden texts agree") == 1


def test_a_kit_file_needs_no_sequence_length_where_the_run_has_no_bench(tmp_path):
    """The kit's JSON carries each program's shape: no --sequence-length is asked of it, even before any bench."""
    run = _run_with_export(tmp_path)
    saved, refreshed = import_phone_measurement(run, FIXTURE, "iphone-15-pro", "student", "fp16", 1, None)
    assert refreshed is None and len(list(saved.glob("*.json"))) == 4


def test_a_file_without_its_shape_needs_a_sequence_length_where_the_run_has_no_bench(tmp_path):
    run = _run_with_export(tmp_path)
    xcode = tmp_path / "xcode.json"
    xcode.write_text(json.dumps({"median_ms": 3.1}))
    with pytest.raises(ConfigError, match="give --sequence-length"):
        import_phone_measurement(run, xcode, "iphone-15-pro", "student", "fp16", 1, None)
    assert not (run / BENCH_IMPORTS_DIR).exists()


def test_kit_json_with_a_wrong_placement_unit_is_refused(tmp_path):
    data = json.loads(FIXTURE.read_text())
    data["programs"][0]["placement"]["operations"][0]["preferred"] = "tpu"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    run = _run_with_export(tmp_path)
    with pytest.raises(ConfigError, match="preferred"):
        import_phone_measurement(run, bad, "iphone-15-pro", "student", "fp16", 1, 128)


def _ane_row(results, device="iphone-13"):
    return next(c for c in results["estimated_comparisons"] if c["device"] == device
                and c["compute_unit"] == "neural_engine" and c["baseline"] == "bert-base")


def test_report_columns_keep_floor_and_calibrated_apart_and_check_placement():
    results = derive.derive(synthetic_results())
    row = _ane_row(results)
    assert row["placement"] == "unchecked" and row["student_calibrated_ms"] == pytest.approx(
        row["student_floor_ms"] * next(f["factor"] for f in results["calibration"]["factors"]
                                       if f["compute_unit"] == "neural_engine"))
    md = render_markdown(build_document(results, {}))
    assert "| student floor ms | student calibrated ms | calibrated range ms | baseline floor ms |" in md
    assert "Neural Engine rows are unchecked" in md.split("##")[0]  # said in the headline, before any table

    results = synthetic_results()
    results["placement"] = {"student_program": "S.mlpackage", "verdicts": {"S.mlpackage": {
        "program": "S.mlpackage", "predicted_unit": "gpu", "neural_engine_op_share": 0.1,
        "neural_engine_flop_share": 0.05, "rules_fired": ["fp32 op in an fp16 program"]}}}
    derive.derive(results)
    row = _ane_row(results)
    gpu_floor = next(e["floor_ms"] for e in results["estimates"]["devices"] if e["device"] == "iphone-13"
                     and e["compute_unit"] == "gpu" and e["precision"] == "fp16" and e["model"] == "student")
    assert row["student_unit"] == "gpu" and row["student_floor_ms"] == pytest.approx(gpu_floor)
    assert "falls back to the GPU (fp32 op in an fp16 program)" in row["placement"]
    # no GPU profile for the iPhone 15 Pro: the student's Neural Engine figure is withheld, not assumed
    assert _ane_row(results, "iphone-15-pro")["student_floor_ms"] is None


def _kit_file(tmp_path, name, edit) -> Path:
    data = json.loads(FIXTURE.read_text())
    edit(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_the_kit_names_each_program_by_the_sha256_its_export_recorded(tmp_path, export_tokenizer_files):
    run = _run_with_export(tmp_path, export_tokenizer_files)
    config = json.loads((write_kit(run) / CONFIG_PATH).read_text())
    recorded = json.loads((run / EXPORT_DIR / MANIFEST).read_text())["artifacts"]
    assert all(p["sha256"] == recorded[p["program"]]["sha256"] for p in config["programs"])
    core = (write_kit(run, tmp_path / "kit2") / KIT_FILES["KitCore.swift.txt"]).read_text()
    assert '"sha256": program.sha256' in core  # echoed into the JSON it writes, a package's for each function
    assert f'"pocketbert_kit": {KIT_SCHEMA}' in core and '"tokenizer_check": tokenizer' in core


def _onnx_under_a_core_ml_name(data: dict) -> None:
    onnx_sha = json.loads(RECORDED_EXPORT_MANIFEST.read_text())["artifacts"]["model.onnx"]["sha256"]
    data["programs"][0].update(program="model.onnx", sha256=onnx_sha)


@pytest.mark.parametrize("edit, device, words", [
    (lambda d: d["programs"][2].update(program="PocketBertSentiment.ane.mlpackage#main_len99", function="main_len99",
                                       sequence_length=99), "iphone-15-pro", "has no function 'main_len99'"),
    (lambda d: d["programs"][2].update(sequence_length=64), "iphone-15-pro", "takes sequence 16, not 64"),
    (lambda d: d["programs"][0].update(precision="int8"), "iphone-15-pro", "is a coreml fp16 program, not coreml int8"),
    (lambda d: d["programs"][0].update(runtime="coreai"), "iphone-15-pro", "is a coreml fp16 program, not coreai"),
    (_onnx_under_a_core_ml_name, "iphone-15-pro", "model.onnx is not one of the export's Core ML or Core AI"),
    (lambda d: d["programs"][0]["warm_samples_ms"].__setitem__(0, 1e308), "iphone-15-pro", "ten minutes"),
    (lambda d: None, "pixel-8", "on an Apple device, and --device pixel-8 is Google Pixel 8"),
])
def test_each_claim_of_a_measurement_is_checked_against_the_export_and_the_device(tmp_path, edit, device, words):
    run = _run_with_export(tmp_path)
    claimed = _kit_file(tmp_path, "claimed.json", edit)
    with pytest.raises(ConfigError, match=words):
        import_phone_measurement(run, claimed, device, "student", "fp16", 1, 128)
    assert not (run / BENCH_IMPORTS_DIR).exists()


def test_a_measurement_of_another_export_is_refused(tmp_path):
    run = _run_with_export(tmp_path)
    other = _kit_file(tmp_path, "other.json", lambda d: [p.update(sha256="0" * 64) for p in d["programs"]])
    with pytest.raises(ConfigError, match="does not hold: import it into the run whose export it measured"):
        import_phone_measurement(run, other, "iphone-15-pro", "student", "fp16", 1, 128)
    renamed = _kit_file(tmp_path, "renamed.json", lambda d: [p.update(program="PocketBertSentiment.6bit.mlpackage")
                                                             for p in d["programs"] if "function" not in p])
    with pytest.raises(ConfigError, match="does not hold"):  # the hash of one program under another's name
        import_phone_measurement(run, renamed, "iphone-15-pro", "student", "fp16", 1, 128)
    # a function of the package under another package's name
    moved = _kit_file(tmp_path, "moved.json", lambda d: d["programs"][2].update(
        program="PocketBertSentiment.6bit.mlpackage#main_len16"))
    with pytest.raises(ConfigError, match="PocketBertSentiment.6bit.mlpackage#main_len16 with sha256 a3f1c9e7b5d2…, "
                                          "which .* does not hold"):
        import_phone_measurement(run, moved, "iphone-15-pro", "student", "fp16", 1, 128)
    unnamed = _kit_file(tmp_path, "unnamed.json", lambda d: [p.pop("sha256") for p in d["programs"]])
    with pytest.raises(ConfigError, match="no sha256 of the program measured"):
        import_phone_measurement(run, unnamed, "iphone-15-pro", "student", "fp16", 1, 128)
    assert not (run / BENCH_IMPORTS_DIR).exists()


def test_two_measurements_of_one_setting_are_never_one_row(tmp_path):
    run = _run_with_export(tmp_path)
    twice = _kit_file(tmp_path, "twice.json", lambda d: d["programs"][1].update(compute_units="ALL"))
    with pytest.raises(ConfigError, match="measures one setting twice"):
        import_phone_measurement(run, twice, "iphone-15-pro", "student", "fp16", 1, 128)
    saved, _ = import_phone_measurement(run, FIXTURE, "iphone-15-pro", "student", "fp16", 1, 128)
    before = {p.name: p.read_bytes() for p in saved.glob("*.json")}
    import_phone_measurement(run, FIXTURE, "iphone-15-pro", "student", "fp16", 1, 128)  # the same one again
    slower = _kit_file(tmp_path, "slower.json", lambda d: d["programs"][0].update(
        warm_samples_ms=[s * 2 for s in d["programs"][0]["warm_samples_ms"]]))
    with pytest.raises(ConfigError, match="already holds a measurement of this setting"):
        import_phone_measurement(run, slower, "iphone-15-pro", "student", "fp16", 1, 128)
    assert {p.name: p.read_bytes() for p in saved.glob("*.json")} == before


def test_a_huge_measurement_file_is_refused_before_it_is_read(tmp_path):
    from pocketbert.mobile_bench.device.phone_import import MAX_MEASUREMENT_BYTES

    run = _run_with_export(tmp_path)
    huge = tmp_path / "huge.json"
    with huge.open("wb") as f:
        f.truncate(MAX_MEASUREMENT_BYTES + 1)  # sparse: no bytes written, and not JSON either
    with pytest.raises(ConfigError, match=f"is {MAX_MEASUREMENT_BYTES + 1} bytes; a measurement is at most"):
        import_phone_measurement(run, huge, "iphone-15-pro", "student", "fp16", 1, 128)


@pytest.mark.parametrize("change, words", [
    (lambda d: d.pop("tokenizer_check"), "no tokenizer_check; the kit runs the golden texts"),
    (lambda d: d["tokenizer_check"].update(texts_differing=15), r"texts_differing \(15\) is more than texts_checked"),
    (lambda d: d["tokenizer_check"].update(texts_differing=1), "first_differences must list the first of the 1"),
    (lambda d: d["tokenizer_check"].update(texts_differing=1, first_differences=[
        {"probe": "ascii", "text": "a", "expected_ids": [101, 1037, 102], "got_ids": [101, 1037, 102]}]),
     "gives the expected ids: it is not a difference"),
    (lambda d: d["tokenizer_check"].update(texts_differing=1, first_differences=[
        {"probe": "ascii", "text": "a", "expected_ids": [101, "1037", 102], "got_ids": [101, 102]}]),
     "expected_ids must be a list of token ids"),
    (lambda d: d["tokenizer_check"].update(golden_sha256="0" * 64),
     "checked the tokenizer on a tokenizer_golden.json with sha256 000000000000…, not the one"),
    (lambda d: d["programs"][2].update(function="main_len32"), "named <package>#<function> with that function"),
    (lambda d: d["programs"][0].update(function="main_len32"), "but the program is not named <package>#<function>"),
])
def test_a_kit_json_with_a_malformed_tokenizer_check_or_function_is_refused(tmp_path, change, words):
    run = _run_with_export(tmp_path)
    bad = _kit_file(tmp_path, "bad.json", change)
    with pytest.raises(ConfigError, match=words) as refused:
        import_phone_measurement(run, bad, "iphone-15-pro", "student", "fp16", 1, 128)
    assert "\n" not in str(refused.value) and not (run / "bench_imports").exists()


def test_a_golden_text_the_device_tokenized_otherwise_is_named_in_the_report(tmp_path):
    difference = {"probe": "accents", "text": "Café naïve résumé, señor Müller",
                  "expected_ids": [101, 7668, 15743, 13746, 1010, 8254, 2953, 26774, 102],
                  "got_ids": [101, 100, 15743, 13746, 1010, 8254, 2953, 26774, 102]}
    file = _kit_file(tmp_path, "differs.json", lambda d: d["tokenizer_check"].update(
        texts_differing=1, first_differences=[difference]))
    results = derive.derive(synthetic_results())
    results["measurements"] += import_phone_rows(file, "iphone-15-pro", "student", "fp16", 1, 128)
    md = render_markdown(build_document(results, {}))
    (line,) = [line for line in md.splitlines() if "tokenizer on device" in line]
    assert line.startswith("- tokenizer on device (iPhone 15 Pro): 13 of 14 golden texts agree, 1 differing: ")
    assert '"Café naïve résumé, señor Müller" (accents) expected [101, 7668, 15743' in line
    assert "got [101, 100, 15743, 13746, 1010, 8254, 2953, 26774, 102] (9 ids)" in line


def test_a_function_and_a_program_of_one_precision_and_length_are_two_settings(tmp_path):
    run = _run_with_export(tmp_path)
    # the package's function of length 128 at the plain fp16 program's setting (ALL, fp16, batch 1, length 128)
    beside = _kit_file(tmp_path, "beside.json", lambda d: d["programs"][3].update(compute_units="ALL"))
    saved, _ = import_phone_measurement(run, beside, "iphone-15-pro", "student", "fp16", 1, 128)
    rows = [json.loads(p.read_text()) for p in saved.glob("*-all-fp16-b1-s128.json")]
    assert sorted(r["program"] for r in rows) == ["PocketBertSentiment.ane.mlpackage#main_len128",
                                                  "PocketBertSentiment.mlpackage"]


def test_a_package_function_that_names_no_length_is_refused(tmp_path, export_tokenizer_files):
    run = _run_with_export(tmp_path, export_tokenizer_files)
    (run / EXPORT_DIR / PLACEMENT).write_text(json.dumps([{"program": ANE_PACKAGE, "functions": [
        {"function": "main_len16"}, {"function": "encoder"}]}]))
    with pytest.raises(RunDirError, match=f"{ANE_PACKAGE} has a function 'encoder' that names no length"):
        write_kit(run)
