"""`pocketbert bench kit`: a Swift package that measures the export's Apple programs on a Mac or an iPhone.

It loads each Core ML program (and lists each Core AI program) of the export, prints where Core ML plans each
operation (MLComputePlan), times load, the first prediction and warm predictions with the bench's own
warm-up and stopping rules (stats.py, whose interval ranks it carries in kit_config.json), and writes one
JSON (KIT_MEASUREMENT) that `pocketbert bench import` reads. pocketbert type-checks the Swift against stubs and
never runs it: the README says so, the sources name every Apple API they call, and tests check the JSON schema through `bench import`.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from pocketbert.core.recipe import BenchSection
from pocketbert.core.tasks import make_task
from pocketbert.core.stage_folder import read_labels
from pocketbert.core.errors import RunDirError
from pocketbert.core.manifest import ARTIFACTS, read_manifest
from pocketbert.mobile_bench.phone_import import IDLE_MIN_S, SUSTAINED_MIN_CALLS
from pocketbert.core.user_paths import output_folder, written_output
from pocketbert.mobile_bench.stats import TARGET_RELATIVE_HALF_WIDTH, median_rank_interval
from pocketbert.core.atomic_folder import require_stage
from pocketbert.core.run_files import (
    COREAI_ASSET_SUFFIX,
    COREML_PACKAGE_SUFFIX,
    APP_README,
    DEVICE_KIT_DIR,
    EXPORT_DIR,
    KIT_MEASUREMENT,
)

KIT_RUNTIMES = {COREML_PACKAGE_SUFFIX: "coreml", COREAI_ASSET_SUFFIX: "coreai"}
COMPUTE_UNITS = ("ALL", "CPU_AND_NE", "CPU_AND_GPU", "CPU_ONLY")  # ALL first: what an app gets by default
# Where each template goes in the package (SwiftPM's layout: Sources/<target>/, Tests/<target>/).
KIT_FILES = {
    "Package.swift.txt": "Package.swift",
    "KitCore.swift.txt": "Sources/PocketbertKitCore/KitCore.swift",
    "main.swift.txt": "Sources/pocketbert-kit/main.swift",
    "KitTests.swift.txt": "Tests/PocketbertKitTests/KitTests.swift",
}
CONFIG_PATH = "Sources/PocketbertKitCore/kit_config.json"
MODELS_PATH = "Tests/PocketbertKitTests/Models"
IDLE_S = IDLE_MIN_S + 1.0  # the pause before the "first call after idle": past the Neural Engine's 5 s re-wake
SUSTAINED_WINDOW = 200     # the last calls of the sustained run that are kept as its samples



def apple_programs(manifest: dict) -> list[dict]:
    """The export's Core ML and Core AI programs, from its manifest's variants table (bench reads files only)."""
    table = manifest["config"].get("variants") or {}
    programs = []
    for name, entry in sorted(table.items()):
        suffix = Path(str(entry.get("file", ""))).suffix if isinstance(entry, dict) else ""
        if suffix in KIT_RUNTIMES:
            recorded = (manifest.get(ARTIFACTS) or {}).get(entry["file"]) or {}
            programs.append({"variant": name, "program": entry["file"], "runtime": KIT_RUNTIMES[suffix],
                             "precision": entry["precision"], "sha256": recorded.get("sha256")})
    return programs


def kit_config(programs: list[dict], inputs: list[str], sequence_length: int, bench: BenchSection,
               entry_points: list[str]) -> dict:
    """What the Swift reads: the programs, their inputs and shape, and the bench's timing rules."""
    max_repeats = bench.max_repeats
    return {"warmup": bench.warmup, "min_repeats": bench.min_repeats, "max_repeats": max_repeats,
            "time_cap_s": bench.time_cap_s, "target_relative_half_width": TARGET_RELATIVE_HALF_WIDTH,
            "median_interval_ranks": [list(median_rank_interval(n)) for n in range(1, max_repeats + 1)],
            "idle_s": IDLE_S, "sustained_calls": SUSTAINED_MIN_CALLS, "sustained_window": SUSTAINED_WINDOW,
            "programs": [{**{k: p[k] for k in ("program", "sha256", "runtime", "precision")}, "inputs": inputs, "batch": 1,
                          "sequence_length": sequence_length, "compute_units": list(COMPUTE_UNITS),
                          "functions": entry_points if p["runtime"] == "coreai" else None} for p in programs]}


def _readme(programs: list[dict], run_dir: Path) -> str:
    listed = "\n".join(f"- `{p['program']}` ({p['runtime']}, {p['precision']})" for p in programs)
    return f"""# pocketbert device kit

Measures the Apple programs of `{run_dir}/export` on a Mac or an iPhone: where Core ML plans each operation
(`MLComputePlan`), load time, the first prediction, warm predictions with `pocketbert bench`'s own rules
(warm-up, then repeats until the median's 95 % interval is within 2 % of it, or the repeat or time cap), the
first call after a {IDLE_S:g} s idle pause, and the last {SUSTAINED_WINDOW} of {SUSTAINED_MIN_CALLS:,} sustained
calls. A launch killed during a measurement (a failed Neural Engine compile kills the process at its first
prediction) is recorded as killed by the next launch, which skips that program and setting.
It writes `{KIT_MEASUREMENT}`, which `pocketbert bench import` reads into the run's report, beside the placement
check's prediction.

**pocketbert has not built this package with Apple's SDK, nor run it**: its machines have none. Its tests
type-check the Swift (`swift build` on Linux, against stubs of the Core ML calls it makes, each citing Apple's
documentation); every Apple API it calls is named, with where it is documented, at the top of
`Sources/PocketbertKitCore/KitCore.swift`. pocketbert's tests check the JSON it writes (its schema) through
`bench import`.

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
    manifest = read_manifest(export_dir)
    programs = apple_programs(manifest)
    if not programs:
        raise RunDirError(f"{export_dir} holds no Core ML or Core AI program: export one "
                          "(pocketbert export --overwrite on a run whose recipe makes them)")
    task = make_task(manifest["config"]["task"], read_labels(export_dir))
    # the bench section's defaults: the kit is made from the export alone, whatever recipe trained the student
    config = kit_config(programs, list(task.input_names), int(manifest["config"].get("max_length") or 128),
                        BenchSection(), list(manifest["metrics"].get("coreai_entry_points") or []))
    templates = resources.files("pocketbert.mobile_bench").joinpath("kit_templates")
    with written_output(final, MADE_BY, run=Path(run_dir).resolve()) as tmp:
        for template, target in KIT_FILES.items():
            path = tmp / target
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(templates.joinpath(template).read_text().replace("{measurement_file}", KIT_MEASUREMENT))
        (tmp / CONFIG_PATH).write_text(json.dumps(config, indent=2) + "\n")
        (tmp / MODELS_PATH).mkdir(parents=True)
        (tmp / MODELS_PATH / ".keep").write_text("")  # SwiftPM's .copy("Models") needs the folder
        (tmp / APP_README).write_text(_readme(programs, Path(run_dir)))
    return final
