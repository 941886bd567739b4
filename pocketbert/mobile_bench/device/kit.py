"""`pocketbert bench kit`: a Swift package that measures the export's Apple programs on a Mac or an iPhone.

It loads each Core ML program (each function of a multifunction package on its own) and lists each Core AI
program of the export, prints where Core ML plans each operation (MLComputePlan), times load, the first
prediction and warm predictions with the bench's own warm-up and stopping rules (stats.py, whose interval ranks
it carries in kit_config.json), runs the golden texts through the iOS folder's own Swift tokenizer on the
device, and writes one JSON (KIT_MEASUREMENT) that `pocketbert bench import` reads. pocketbert type-checks the
Core ML Swift against stubs and never runs it; its Core ML-free parts (the config and plan, the tokenizer check)
are built and run on Linux by the tests, and the JSON schema is checked through `bench import`.
"""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path

from pocketbert.core.config.recipe import BenchSection
from pocketbert.core.tasks.registry import make_task
from pocketbert.core.students.stage_folder import read_labels
from pocketbert.core.errors import RunDirError
from pocketbert.core.run.manifest import read_manifest, verify_artifacts
from pocketbert.core.run.stage_records import ExportRecord
from pocketbert.export.app.swift_package import SWIFT_PACKAGE, package_files
from pocketbert.export.programs.multifunction import function_length, function_name
from pocketbert.mobile_bench.device.phone_import import IDLE_MIN_S, SUSTAINED_MIN_CALLS
from pocketbert.core.run.user_paths import output_folder, written_output
from pocketbert.mobile_bench.timing.stats import TARGET_RELATIVE_HALF_WIDTH, median_rank_interval
from pocketbert.core.run.atomic_folder import require_stage
from pocketbert.core.run.run_files import (
    COREAI_ASSET_SUFFIX,
    COREML_PACKAGE_SUFFIX,
    APP_README,
    DEVICE_KIT_DIR,
    EXPORT_DIR,
    KIT_MEASUREMENT,
    PLACEMENT,
    SWIFT_TOKENIZER_PACKAGE,
    TOKENIZER_GOLDEN,
    TOKENIZER_TABLES,
)

KIT_RUNTIMES = {COREML_PACKAGE_SUFFIX: "coreml", COREAI_ASSET_SUFFIX: "coreai"}
COMPUTE_UNITS = ("ALL", "CPU_AND_NE", "CPU_AND_GPU", "CPU_ONLY")  # ALL first: what an app gets by default
# Where each template goes in the package (SwiftPM's layout: Sources/<target>/, Tests/<target>/).
KIT_FILES = {
    "Package.swift.txt": "Package.swift",
    "KitCore.swift.txt": "Sources/PocketbertKitCore/KitCore.swift",
    "KitConfig.swift.txt": "Sources/PocketbertKitCore/KitConfig.swift",
    "TokenizerCheck.swift.txt": "Sources/PocketbertKitCore/TokenizerCheck.swift",
    "main.swift.txt": "Sources/pocketbert-kit/main.swift",
    "KitTests.swift.txt": "Tests/PocketbertKitTests/KitTests.swift",
}
CONFIG_PATH = "Sources/PocketbertKitCore/kit_config.json"
MODELS_PATH = "Tests/PocketbertKitTests/Models"
TOKENIZER_PATH = "Sources/PocketbertKitCore/Tokenizer"  # the iOS folder's tokenizer.tables and golden file
TOKENIZER_FILES = (TOKENIZER_TABLES, TOKENIZER_GOLDEN)
IDLE_S = IDLE_MIN_S + 1.0  # the pause before the "first call after idle": past the Neural Engine's 5 s re-wake
SUSTAINED_WINDOW = 200     # the last calls of the sustained run that are kept as its samples



def apple_programs(manifest: ExportRecord) -> list[dict]:
    """The export's Core ML and Core AI programs, from its manifest's variants table (bench reads files only)."""
    programs = []
    for name, entry in sorted(manifest.config.variants.items()):
        suffix = Path(entry.file).suffix
        if suffix in KIT_RUNTIMES:
            recorded = (manifest.artifacts or {}).get(entry.file)
            programs.append({"variant": name, "program": entry.file, "runtime": KIT_RUNTIMES[suffix],
                             "precision": entry.precision, "sha256": recorded.sha256 if recorded else None})
    return programs


def program_functions(export_dir: Path) -> dict[str, list[str]]:
    """Each Apple program's function names, as the export's placement check read them from the saved program
    (placement.json); empty where the export wrote no placement record."""
    path = Path(export_dir) / PLACEMENT
    if not path.is_file():
        return {}
    try:
        placed = json.loads(path.read_text(encoding="utf-8"))
        return {str(p["program"]): [str(f["function"]) for f in p["functions"]] for p in placed}
    except (ValueError, TypeError, KeyError) as exc:
        raise RunDirError(f"{path} is not the export's placement record ({exc}): re-run `pocketbert export "
                          "--overwrite`") from None


def coreml_functions(program: str, names: list[str]) -> list[dict] | None:
    """A multifunction package's functions (one fixed length each, MLModelConfiguration.functionName picks one),
    each with its length; None for a program whose one function is main."""
    if not names or names == ["main"]:
        return None
    lengths = {name: function_length(name) for name in names}
    unnamed = [name for name, length in lengths.items() if length is None]
    if unnamed:
        raise RunDirError(f"{program} has a function '{unnamed[0]}' that names no length (pocketbert names the "
                          f"function of length 128 {function_name(128)}): re-run `pocketbert export --overwrite`")
    return [{"function": name, "sequence_length": lengths[name]} for name in sorted(names, key=lengths.get)]


def kit_config(programs: list[dict], inputs: list[str], sequence_length: int, bench: BenchSection,
               entry_points: list[int], functions: dict[str, list[str]], tokenizer: dict) -> dict:
    """What the Swift reads: the programs (a multifunction package with its functions, a Core AI program with its
    entry points), their inputs and shape, the bench's timing rules and the tokenizer files' digests."""
    max_repeats = bench.max_repeats
    return {"warmup": bench.warmup, "min_repeats": bench.min_repeats, "max_repeats": max_repeats,
            "time_cap_s": bench.time_cap_s, "target_relative_half_width": TARGET_RELATIVE_HALF_WIDTH,
            "median_interval_ranks": [list(median_rank_interval(n)) for n in range(1, max_repeats + 1)],
            "idle_s": IDLE_S, "sustained_calls": SUSTAINED_MIN_CALLS, "sustained_window": SUSTAINED_WINDOW,
            "tokenizer": tokenizer,
            "programs": [{**{k: p[k] for k in ("program", "sha256", "runtime", "precision")}, "inputs": inputs, "batch": 1,
                          "sequence_length": sequence_length, "compute_units": list(COMPUTE_UNITS),
                          "functions": [{"function": function_name(n), "sequence_length": int(n)} for n in entry_points]
                          if p["runtime"] == "coreai" else coreml_functions(p["program"], functions.get(p["program"]))}
                         for p in programs]}


def _listed(program: dict) -> str:
    functions = program.get("functions")
    named = f"; functions {', '.join(f['function'] for f in functions)}" if functions else ""
    return f"- `{program['program']}` ({program['runtime']}, {program['precision']}{named})"


def _readme(programs: list[dict], run_dir: Path) -> str:
    listed = "\n".join(_listed(p) for p in programs)
    return f"""# pocketbert device kit

Measures the Apple programs of `{run_dir}/export` on a Mac or an iPhone: where Core ML plans each operation
(`MLComputePlan`), load time, the first prediction, warm predictions with `pocketbert bench`'s own rules
(warm-up, then repeats until the median's 95 % interval is within 2 % of it, or the repeat or time cap), the
first call after a {IDLE_S:g} s idle pause, and the last {SUSTAINED_WINDOW} of {SUSTAINED_MIN_CALLS:,} sustained
calls. A multifunction package (one fixed-length function per length) is measured function by function, each
row named `<package>#<function>` (`MLModelConfiguration.functionName`: macOS 15 / iOS 18; on older systems its
functions are skipped). A launch killed during a measurement (a failed Neural Engine compile kills the process at
its first prediction) is recorded as killed by the next launch, which skips that program and setting.

Before timing anything it runs every text of `{TOKENIZER_GOLDEN}` through `{SWIFT_TOKENIZER_PACKAGE}` (the Swift
tokenizer the export's iOS folder ships, copied here with the export's `{TOKENIZER_TABLES}`) and records how many
give the expected ids, and the first that do not.

It writes `{KIT_MEASUREMENT}`, which `pocketbert bench import` reads into the run's report, beside the placement
check's prediction.

**pocketbert has not built this package with Apple's SDK, nor run it**: its machines have none. Its tests
type-check the Swift (`swift build` on Linux, against stubs of the Core ML calls it makes, each citing Apple's
documentation); every Apple API it calls is named, with where it is documented, at the top of
`Sources/PocketbertKitCore/KitCore.swift`. The files that need no Core ML (`KitConfig.swift`, the plan of
measurements, and `TokenizerCheck.swift`) are built and run on Linux by pocketbert's tests, on a real export's
config and golden file. pocketbert's tests check the JSON the kit writes (its schema) through `bench import`.

Programs:
{listed}

## On a Mac (macOS 14.4 or later, Xcode 15.3 or later)

    swift run -c release pocketbert-kit {run_dir}/export "MacBook Pro M3" {KIT_MEASUREMENT}
    pocketbert bench import {KIT_MEASUREMENT} --run {run_dir} --device <device key>

## On an iPhone (iOS 17.4 or later)

Copy the programs above into `{MODELS_PATH}/`, open `Package.swift` in Xcode, pick the phone as the
destination and run the `PocketbertKitTests` test. The test prints where it wrote `{KIT_MEASUREMENT}`; copy it
off the phone and import it as above with the phone's key (e.g. `iphone-15-pro`).

## Core AI programs

Core AI (iOS 27 / macOS 27) publishes no per-operation plan like `MLComputePlan` (none in its documentation,
November 2026). The nearest signal is the number of Neural Engine regions in an ahead-of-time compiled bundle:
`xcrun coreai-build compile <program>.aimodel --platform iOS --preferred-compute neural-engine`, then
`find <program>.aimodelc -name '*ANE_region_*.mlir.bc' | wc -l` (0 means the whole graph fell back to the GPU;
john-rocky/coreai-model-zoo, knowledge/ane-region-count-and-fp32-ops.md). `coreAIRegionCount` in the kit counts
them; the kit times Core ML programs only.
"""


MADE_BY = "bench kit"  # the marker that lets a later --overwrite replace the kit, and nothing else


def write_kit(run_dir: Path, out: Path | None = None, overwrite: bool = False) -> Path:
    # where it goes is checked before anything is read: a refused --out is said first, and alone
    final = output_folder(Path(out) if out is not None else Path(run_dir) / DEVICE_KIT_DIR, MADE_BY, overwrite,
                          inputs=[Path(run_dir) / EXPORT_DIR], own_files=True)
    export_dir = require_stage(run_dir, EXPORT_DIR, "pocketbert export")
    manifest = read_manifest(export_dir, ExportRecord)
    programs = apple_programs(manifest)
    if not programs:
        raise RunDirError(f"{export_dir} holds no Core ML or Core AI program: export one "
                          "(pocketbert export --overwrite on a run whose recipe makes them)")
    # the files the iOS folder ships its tokenizer with, checked against the export's record before they are copied
    tokenizer_files = verify_artifacts(export_dir, manifest, list(TOKENIZER_FILES), RunDirError,
                                       f"re-run `pocketbert export --run {run_dir} --overwrite`")
    recorded = manifest.artifacts or {}
    tokenizer = {"tables_sha256": recorded[TOKENIZER_TABLES].sha256, "golden_sha256": recorded[TOKENIZER_GOLDEN].sha256}
    task = make_task(manifest.config.task, read_labels(export_dir))
    # the bench section's defaults: the kit is made from the export alone, whatever recipe trained the student
    config = kit_config(programs, list(task.input_names), manifest.config.max_length,
                        BenchSection(), list(manifest.metrics.coreai_entry_points or []),
                        program_functions(export_dir), tokenizer)
    templates = resources.files("pocketbert.mobile_bench.device").joinpath("kit_templates")
    with written_output(final, MADE_BY, run=Path(run_dir).resolve()) as tmp:
        for template, target in KIT_FILES.items():
            path = tmp / target
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(templates.joinpath(template).read_text().replace("{measurement_file}", KIT_MEASUREMENT))
        (tmp / CONFIG_PATH).write_text(json.dumps(config, indent=2) + "\n")
        (tmp / TOKENIZER_PATH).mkdir()
        for path in tokenizer_files:
            shutil.copyfile(path, tmp / TOKENIZER_PATH / path.name)
        for source in package_files():  # the iOS folder's Swift tokenizer, as it ships it
            target = tmp / SWIFT_TOKENIZER_PACKAGE / source.relative_to(SWIFT_PACKAGE)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        (tmp / MODELS_PATH).mkdir(parents=True)
        (tmp / MODELS_PATH / ".keep").write_text("")  # SwiftPM's .copy("Models") needs the folder
        (tmp / APP_README).write_text(_readme(config["programs"], Path(run_dir)))
    return final
