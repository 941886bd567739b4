"""results/README.md's table of export variants, from the manifests the export stage wrote.

    python scripts/export_table.py runs/sst2-xdomain [runs/sst2-xdomain-pruned ...]

One row per artifact: size, share of the fp32 ONNX file, the task metric on its own runtime, agreement
with the PyTorch student, time per sequence on that runtime here.
"""

from __future__ import annotations

import sys
from pathlib import Path


def rows(run: Path) -> list[str]:
    from pocketbert.core.run.manifest import read_manifest
    from pocketbert.core.run.stage_records import ExportRecord, StudentRecord

    export = read_manifest(run / "export", ExportRecord)
    sizes, parity = export.metrics.sizes_bytes, export.metrics.parity
    fp32 = sizes["model.onnx"]
    primary = read_manifest(run / "student", StudentRecord).metrics.primary_metric
    out = []
    for name, p in parity.items():
        seconds = p.seconds_per_sequence
        out.append(
            f"| {run.name} | `{name}` | {p.runtime} | {sizes[name] / 1e6:.1f} MB | {100 * sizes[name] / fp32:.1f} % "
            f"| {p.metrics[primary]:.4f} (student {p.student_metrics[primary]:.4f}, {p.n_examples} ex.) "
            f"| {100 * p.agreement:.2f} % | {'' if seconds is None else f'{1000 * seconds:.1f} ms'} |")
    return out


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python scripts/export_table.py RUN_DIR [RUN_DIR ...]")
    missing = [arg for arg in sys.argv[1:] if not (Path(arg) / "export" / "manifest.json").is_file()
               or not (Path(arg) / "student" / "manifest.json").is_file()]
    if missing:  # an option or a path that is no exported run: one line, before any row
        sys.exit(f"error: {missing[0]} is not an exported run (no export/ and student/ manifests); "
                 "usage: python scripts/export_table.py RUN_DIR [RUN_DIR ...]")
    print("| run | artifact | runtime | size | of fp32 | metric on its runtime | agreement | per sequence |")
    print("|---|---|---|---:|---:|---|---:|---:|")
    for arg in sys.argv[1:]:
        print("\n".join(rows(Path(arg))))
