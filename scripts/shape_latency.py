"""Int8 latency of transformer student shapes before any training: which shapes fit a latency budget.

    python scripts/shape_latency.py runs/sst2-default/teacher > results/ladder/shape_latency.json
    python scripts/shape_latency.py runs/sst2-default/teacher --shape 2x256x1024 --shape 3x128x512

Latency depends on the shape, not on the weights, so each shape is built from the teacher's config with random
weights, exported and quantized exactly as `pocketbert export` does (model.onnx, then dynamic per-channel int8 of
every weight product), and timed with the reference shape (the default student: half the teacher's layers at its
width) in turn, A B A B ... (bench's interleaved protocol, so a drift of the machine's speed shifts both
alike), in blocks of BLOCK calls so each call follows a call of the same model, as `pocketbert bench` times a
model alone (call by call, each model would run with the other's weights in the caches): ONNX Runtime on the CPU,
one intra-op thread, batch 1, sequence 128, full attention. It prints each shape's median per call and its
fraction of the reference's median, measured in this one run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from datetime import date
from pathlib import Path

import torch

from pocketbert.core.students.inference import ort_session
from pocketbert.core.tasks.registry import make_task
from pocketbert.export.programs.onnx_export import export_onnx, quantize_int8
from pocketbert.core.run.manifest import git_commit, package_versions
from pocketbert.mobile_bench.timing.host import host_info
from pocketbert.mobile_bench.timing.latency import synthetic_inputs
from pocketbert.mobile_bench.timing.stats import measure_interleaved

SEQUENCE, BATCH, THREADS = 128, 1, 1
WARMUP, MIN_REPEATS, MAX_REPEATS, TIME_CAP_S = 3, 20, 300, 8.0
BLOCK = 10  # calls of one model timed together
DEFAULT_SHAPES = ("4x256x1024", "3x192x768", "2x256x1024", "2x192x768", "3x128x512", "2x128x512",
                  "4x128x512", "3x192x384", "1x384x1536")


def parse_shape(text: str) -> tuple[int, int, int]:
    """'layers x hidden x ffn' (e.g. 2x256x1024)."""
    try:
        layers, hidden, ffn = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"error: shape {text!r} is not LAYERSxHIDDENxFFN, e.g. 2x256x1024") from None
    return layers, hidden, ffn


def block(session, feed):
    def run():
        for _ in range(BLOCK):
            session.run(None, feed)
    return run


def per_call(stats: dict) -> dict:
    return {k: v / BLOCK if k.endswith("_ms") else v for k, v in stats.items()}


def shape_model(teacher_config, layers: int, hidden: int, ffn: int, head_width: int):
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(**{**teacher_config.to_dict(), "num_hidden_layers": layers, "hidden_size": hidden,
                           "intermediate_size": ffn, "num_attention_heads": hidden // head_width})
    torch.manual_seed(0)
    return BertForSequenceClassification(config).eval()


def main(argv: list[str]) -> dict:
    from transformers import AutoConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("teacher", type=Path, help="the teacher's folder (its config.json)")
    parser.add_argument("--shape", action="append", help="LAYERSxHIDDENxFFN; repeatable (default: a ladder of them)")
    args = parser.parse_args(argv)
    config = AutoConfig.from_pretrained(args.teacher)
    head_width = config.hidden_size // config.num_attention_heads
    reference = (max(1, config.num_hidden_layers // 2), config.hidden_size, config.intermediate_size)
    task = make_task("sentiment", [str(i) for i in range(config.num_labels)])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        def int8_session(shape):
            fp32 = Path(tmp) / ("x".join(map(str, shape)) + ".onnx")
            export_onnx(shape_model(config, *shape, head_width), task, fp32)
            int8 = quantize_int8(fp32, fp32.with_suffix(".int8.onnx"), keep_fp32=[])
            return ort_session(int8, threads=THREADS), int8.stat().st_size

        ref_session, ref_bytes = int8_session(reference)
        feed = synthetic_inputs([i.name for i in ref_session.get_inputs()], BATCH, SEQUENCE, config.vocab_size)
        for text in args.shape or DEFAULT_SHAPES:
            shape = parse_shape(text)
            if shape[1] % head_width:
                raise SystemExit(f"error: hidden size {shape[1]} is not a multiple of the teacher's "
                                 f"{head_width}-wide heads")
            session, size = int8_session(shape)
            ref_stats, stats = (per_call(s.to_dict()) for s in measure_interleaved(
                [block(ref_session, feed), block(session, feed)], WARMUP, MIN_REPEATS, MAX_REPEATS, TIME_CAP_S))
            row = {"shape": text, "layers": shape[0], "hidden_size": shape[1], "intermediate_size": shape[2],
                   "heads": shape[1] // head_width, "int8_bytes": size, "median_ms": stats["median_ms"],
                   "reference_median_ms": ref_stats["median_ms"],
                   "fraction_of_reference": stats["median_ms"] / ref_stats["median_ms"],
                   "stats": stats, "reference_stats": ref_stats}
            rows.append(row)
            print(f"{text:>12}: {stats['median_ms']:6.3f} ms, {row['fraction_of_reference']:.3f} of "
                  f"{'x'.join(map(str, reference))} ({ref_stats['median_ms']:.3f} ms), {size / 1e6:.1f} MB",
                  file=sys.stderr)
    return {"what": "int8 ONNX latency of student shapes (random weights) against the default shape, "
                    f"ONNX Runtime CPU, {THREADS} thread, batch {BATCH}, sequence {SEQUENCE}, blocks of {BLOCK} calls",
            "command": "python scripts/shape_latency.py " + " ".join(argv),
            "date": date.today().isoformat(), "commit": git_commit(), "versions": package_versions(),
            "host": host_info(), "reference": "x".join(map(str, reference)), "rows": rows}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:]), indent=2))
