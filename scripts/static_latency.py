"""The static rung's latency against another export's (the default student's), timed in turn in one process.

    python scripts/static_latency.py runs/sst2-static/export ../main/runs/sst2-default/export \
        > results/static/latency_<n>.json

For each format (ONNX fp32, ONNX dynamic int8, the int8 .ort), both models run in turn (A B A B ..., bench's
interleaved protocol, so a drift of the machine's speed shifts both alike) on the same synthetic input: batch 1,
sequence 128, full attention, ONNX Runtime on the CPU with one intra-op thread. Two ways, because a model this
small is slowed by what ran before it: call by call (each static call follows a call of the other model, which
has evicted its table rows and code from the caches: a cold call, as an app's first inference after other work)
and in blocks of BLOCK calls (each call after a call of itself, as `pocketbert bench` times a model alone). Medians
per call with 95 % intervals; the ratio is the other model's median over the static one's.
"""

from __future__ import annotations

import json
import sys
from datetime import date
from pathlib import Path

from pocketbert.core.students.inference import ort_session
from pocketbert.core.run.manifest import git_commit, package_versions, path_size, read_manifest
from pocketbert.core.run.stage_records import ExportRecord
from pocketbert.mobile_bench.timing.host import host_info
from pocketbert.mobile_bench.timing.latency import synthetic_inputs
from pocketbert.mobile_bench.timing.stats import measure_interleaved

SEQUENCE, BATCH, THREADS = 128, 1, 1
VARIANTS = ("onnx", "onnx-int8", "ort")  # export variant names, as the export manifest's table has them
WARMUP, MIN_REPEATS, MAX_REPEATS, TIME_CAP_S = 20, 50, 3000, 20.0
BLOCK = 20  # calls of one model timed together in the "blocks" mode
MODES = {"call by call": 1, f"blocks of {BLOCK} calls": BLOCK}


def per_call(stats: dict, calls: int) -> dict:
    """A block's timing statistics divided by the calls in it (the repeat count and stop reason kept)."""
    return {k: v / calls if k.endswith("_ms") else v for k, v in stats.items()}


def variant_file(export_dir: Path, name: str) -> Path:
    return export_dir / read_manifest(export_dir, ExportRecord).config.variants[name].file


def main(static_dir: str, other_dir: str) -> dict:
    static_dir, other_dir = Path(static_dir).resolve(), Path(other_dir).resolve()
    vocab = len((static_dir / "vocab.txt").read_text(encoding="utf-8").splitlines())
    rows = []
    for name in VARIANTS:
        files = [variant_file(static_dir, name), variant_file(other_dir, name)]
        sessions = [ort_session(path, threads=THREADS) for path in files]
        feeds = [synthetic_inputs([i.name for i in s.get_inputs()], BATCH, SEQUENCE, vocab) for s in sessions]
        for mode, calls in MODES.items():
            def timed(session, feed):
                def run():
                    for _ in range(calls):
                        session.run(None, feed)
                return run

            stats = measure_interleaved([timed(s, f) for s, f in zip(sessions, feeds)],
                                        max(1, WARMUP // calls), MIN_REPEATS, MAX_REPEATS, TIME_CAP_S)
            static, other = (per_call(s.to_dict(), calls) for s in stats)
            rows.append({"variant": name, "mode": mode,
                         "static": {"file": str(files[0]), "bytes": path_size(files[0]), **static},
                         "other": {"file": str(files[1]), "bytes": path_size(files[1]), **other},
                         "other_over_static": other["median_ms"] / static["median_ms"]})
    return {"date": date.today().isoformat(), "git_commit": git_commit(), "command": " ".join(sys.argv),
            "protocol": {"runtime": "onnxruntime", "threads": THREADS, "sequence_length": SEQUENCE, "batch": BATCH,
                         "interleaved": True, "modes": MODES, "warmup": WARMUP, "min_repeats": MIN_REPEATS,
                         "max_repeats": MAX_REPEATS, "time_cap_s_per_model": TIME_CAP_S},
            "host": host_info(), "versions": package_versions(), "rows": rows}


if __name__ == "__main__":
    usage = "usage: python scripts/static_latency.py STATIC_EXPORT_DIR OTHER_EXPORT_DIR > results/static/latency_<n>.json"
    if len(sys.argv) != 3:
        sys.exit(usage)
    missing = [arg for arg in sys.argv[1:] if not (Path(arg) / "vocab.txt").is_file()]
    if missing:
        sys.exit(f"error: {missing[0]} is not an export folder (no vocab.txt); {usage}")
    print(json.dumps(main(*sys.argv[1:3]), indent=2))
