"""`pocketbert bench calibration`: the published points, their floors and factors, as text and as files."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from pocketbert.core.files import dumps_strict
from pocketbert.mobile_bench.estimates import calibration, profiles
from pocketbert.core.run.run_files import CALIBRATION_RESULTS, CALIBRATION_TABLE

MADE_BY = "bench calibration"  # the output marker's name for what --out may replace


def _ms(value) -> str:
    return "–" if value is None else f"{value:.2f}"


def loo_text(point: dict) -> str:
    """A point's leave-one-out error, or why it has none."""
    if point.get("loo_error") is None:
        return f"– ({point.get('loo_none_because')})"
    return f"{100 * point['loo_error']:+.0f} %"


def factor_range(f: dict) -> str:
    return "– (no point predicts another)" if f["low"] is None else f"{f['low']:.2f}–{f['high']:.2f}"


def render_calibration() -> tuple[str, dict]:
    """(markdown, table): every point with its floor, factor and leave-one-out error, then the factors pooled per
    key with their leave-one-out spread, then the Apple points beyond the target."""
    table = calibration.calibration_table(profiles.load_profiles()["devices"])
    lines = ["| point | device | unit | precision | regime | sequence | shape | published ms | floor ms | bound | "
             "factor | leave-one-out ms | leave-one-out error | source |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in table["points"]:
        factor = f"{p['factor']:.2f}" if p["factor"] is not None else f"– ({p['no_floor_because']})"
        lines.append(f"| {p['id']} | {p['device_name']} | {p['compute_unit']} | {p['precision']} | {p['regime']} | "
                     f"{p['sequence_length'] or '?'} | {p['shape']} | {_ms(p['measured_ms'])} | {_ms(p['floor_ms'])} | "
                     f"{p['bound'] or '–'} | {factor} | {_ms(p['predicted_ms'])} | {loo_text(p)} | {p['source']} |")
    lines += ["", "| family / unit / precision | factor (geometric mean) | range (leave-one-out spread) | points |",
              "|---|---|---|---|"]
    for f in table["factors"]:
        lines.append(f"| {f['family']} / {f['compute_unit']} / {f['precision']} | {f['factor']:.2f} | "
                     f"{factor_range(f)} | {f['points']} ({', '.join(f['ids'])}) |")
    target = round(100 * table["apple_target"])
    misses = table["apple_misses"]
    lines += ["", f"Apple points beyond ±{target} % leave-one-out: " + (", ".join(misses) if misses else "none")]
    return "\n".join(lines) + "\n", table


def write_calibration(folder: Path, text: str, table: dict) -> Path:
    """calibration.json and calibration.md, with the date and the command, into `folder`: a new or empty one, or
    this command's own earlier output (replaced whole); never a run, nor a folder holding files it did not write."""
    from pocketbert.core.run.user_paths import output_folder, written_output

    record = {"created": time.strftime("%Y-%m-%d"), "command": "pocketbert " + " ".join(sys.argv[1:]), **table}
    folder = output_folder(Path(folder), MADE_BY, overwrite=True, own_files=True)
    with written_output(folder, MADE_BY) as tmp:
        (tmp / CALIBRATION_RESULTS).write_text(dumps_strict(record, indent=2) + "\n")
        (tmp / CALIBRATION_TABLE).write_text(f"# Calibration of roofline floors\n\n`{record['command']}`, "
                                             f"{record['created']}\n\n{text}")
    return Path(folder)
