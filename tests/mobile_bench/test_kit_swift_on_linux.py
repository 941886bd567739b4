"""The bench kit's Swift that needs no Core ML, built and run on Linux with the tests' own main (kit_driver.swift):
KitConfig.swift decodes the kit_config.json `bench kit` wrote for a real export and plans its measurements (a
multifunction package function by function); TokenizerCheck.swift runs the export's golden texts through the iOS
folder's own tokenizer package, and what it finds goes through `bench import` into the report. Built once per
hash of everything compiled, under pytest's cache folder (a second session with the same sources reuses it).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from pocketbert.core.run.cache_dir import building
from pocketbert.core.run.run_files import (BENCH_DIR, BENCH_REPORT, BENCH_RESULTS, EXPORT_DIR, PLACEMENT,
                                      SWIFT_TOKENIZER_PACKAGE, TOKENIZER_GOLDEN, TOKENIZER_TABLES)
from pocketbert.export.app.app_programs import swift_executable
from pocketbert.mobile_bench.device.kit import CONFIG_PATH, KIT_FILES, write_kit

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(swift_executable() is None, reason="swift not found (/opt/swift/usr/bin)")]

DRIVER = Path(__file__).parent / "kit_driver.swift"
KIT_SOURCES = ("KitConfig.swift.txt", "TokenizerCheck.swift.txt")  # the kit's files that import no Core ML
BUILD_TIMEOUT_S = 900  # a first build on 2 busy cores
RUN_TIMEOUT_S = 120
PACKAGE = """// swift-tools-version:5.9
import PackageDescription

let package = Package(
    name: "KitDriver",
    dependencies: [.package(path: "PocketBertTokenizer")],
    targets: [.executableTarget(name: "kit-driver",
                                dependencies: [.product(name: "PocketBertTokenizer", package: "PocketBertTokenizer")])]
)
"""


def _texts(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(folder.rglob("*.swift"))}


@pytest.fixture(scope="module")
def kit(quick_exported_run, tmp_path_factory) -> Path:
    """The kit `bench kit` writes for the session's quick export."""
    return write_kit(quick_exported_run, tmp_path_factory.mktemp("kit") / "kit")


@pytest.fixture(scope="module")
def kit_driver(kit, request, tmp_path_factory) -> Path:
    """kit_driver.swift with the kit's Core ML-free sources and its copy of the tokenizer package, built once."""
    sources = {"main.swift": DRIVER.read_text(encoding="utf-8"),
               **{Path(KIT_FILES[t]).name: (kit / KIT_FILES[t]).read_text(encoding="utf-8") for t in KIT_SOURCES}}
    tokenizer = _texts(kit / SWIFT_TOKENIZER_PACKAGE)
    swift = swift_executable()
    version = subprocess.run([swift, "--version"], capture_output=True, text=True).stdout
    key = hashlib.sha256(json.dumps([version, sources, tokenizer, PACKAGE], sort_keys=True).encode()).hexdigest()[:20]
    cache = getattr(request.config, "cache", None)
    root = Path(cache.mkdir("kit-swift-driver")) if cache is not None else tmp_path_factory.mktemp("kit-swift-driver")
    folder = root / key
    with building(folder):  # another session sharing the cache waits, then finds it built
        if not (folder / "built").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            shutil.copytree(kit / SWIFT_TOKENIZER_PACKAGE, folder / SWIFT_TOKENIZER_PACKAGE)
            (folder / "Package.swift").write_text(PACKAGE)
            (folder / "Sources" / "kit-driver").mkdir(parents=True)
            for name, text in sources.items():
                (folder / "Sources" / "kit-driver" / name).write_text(text, encoding="utf-8")
            done = subprocess.run([swift, "build", "--package-path", str(folder), "--product", "kit-driver",
                                   "-j", "2"], capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
            assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
            (folder / "built").write_text("")
    return folder / ".build" / "debug" / "kit-driver"


def _run(driver: Path, *args) -> object:
    done = subprocess.run([str(driver), *map(str, args)], capture_output=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return json.loads(done.stdout)


def test_the_kits_tokenizer_check_agrees_with_the_export_on_every_golden_text(kit_driver, kit, quick_exported_run):
    golden = json.loads((quick_exported_run / EXPORT_DIR / TOKENIZER_GOLDEN).read_text(encoding="utf-8"))
    # the kit carries the export's files, and the check reads the kit's copies as the device does
    check = _run(kit_driver, "tokenizer", kit / "Sources/PocketbertKitCore/Tokenizer" / TOKENIZER_TABLES,
                 kit / "Sources/PocketbertKitCore/Tokenizer" / TOKENIZER_GOLDEN)
    assert len(golden["texts"]) >= 11  # the export's golden texts: accents, CJK, emoji, control characters ...
    assert check == {"texts_checked": len(golden["texts"]), "texts_differing": 0, "first_differences": []}


def test_a_golden_text_with_a_wrong_id_is_one_differing_text_in_the_report(kit_driver, quick_exported_run, tmp_path):
    from tests.mobile_bench.test_calibration_and_kit import FIXTURE, _run_with_export
    from tests.mobile_bench.test_report import synthetic_results

    from pocketbert.mobile_bench.estimates import derive
    from pocketbert.mobile_bench.steps.run import import_phone_measurement

    export = quick_exported_run / EXPORT_DIR
    golden = json.loads((export / TOKENIZER_GOLDEN).read_text(encoding="utf-8"))
    accents = next(row for row in golden["texts"] if row["probe"] == "accents")
    right = list(accents["ids"])
    accents["ids"][1] += 1  # one id the export's tokenizer did not give
    edited = tmp_path / TOKENIZER_GOLDEN
    edited.write_text(json.dumps(golden, ensure_ascii=False), encoding="utf-8")
    check = _run(kit_driver, "tokenizer", export / TOKENIZER_TABLES, edited)
    assert check["texts_checked"] == len(golden["texts"]) and check["texts_differing"] == 1
    assert check["first_differences"] == [{"probe": "accents", "text": accents["text"],
                                           "expected_ids": accents["ids"], "got_ids": right}]

    # what the kit writes of it (with the digests its config carries) reaches the report through bench import
    measured = json.loads(FIXTURE.read_text())
    measured["tokenizer_check"] = {**measured["tokenizer_check"], **check}
    file = tmp_path / "measured.json"
    file.write_text(json.dumps(measured, ensure_ascii=False))
    run = _run_with_export(tmp_path)
    (run / BENCH_DIR).mkdir()
    (run / BENCH_DIR / BENCH_RESULTS).write_text(json.dumps(derive.derive(synthetic_results())))
    import_phone_measurement(run, file, "iphone-15-pro", "student", "fp16", 1, None)
    report = (run / BENCH_DIR / BENCH_REPORT).read_text()
    agree = len(golden["texts"]) - 1
    assert f"tokenizer on device (iPhone 15 Pro): {agree} of {len(golden['texts'])} golden texts agree, 1 differing: " \
           f"{json.dumps(accents['text'], ensure_ascii=False)} (accents)" in report


def test_the_kit_plans_each_function_of_the_exports_multifunction_package(kit_driver, exported_run, tmp_path):
    """The full tiny export holds the Neural Engine layout's multifunction package and a Core AI program: the
    Swift decodes the config the kit carries for it and plans each function of the package on its own."""
    folder = write_kit(exported_run, tmp_path / "kit")
    config = json.loads((folder / CONFIG_PATH).read_text())
    plan = _run(kit_driver, "plan", folder / CONFIG_PATH)
    placed = {p["program"]: [f["function"] for f in p["functions"]]
              for p in json.loads((exported_run / EXPORT_DIR / PLACEMENT).read_text())}
    multifunction = {name: functions for name, functions in placed.items()
                     if name.endswith(".mlpackage") and functions != ["main"]}
    assert multifunction, "the tiny export made no multifunction package"
    expected = []
    for program in (p for p in config["programs"] if p["runtime"] == "coreml"):
        functions = multifunction.get(program["program"])
        if functions is None:
            assert placed.get(program["program"], ["main"]) == ["main"]
            expected.append([program["program"], None, program["sequence_length"]])
        else:
            lengths = sorted(int(f.removeprefix("main_len")) for f in functions)
            expected += [[f"{program['program']}#main_len{n}", f"main_len{n}", n] for n in lengths]
    assert [[p["name"], p["function"], p["sequence_length"]] for p in plan] == expected
    assert {p["sha256"] for p in plan if p["function"]} == {p["sha256"] for p in config["programs"]
                                                            if p["program"] in multifunction}
