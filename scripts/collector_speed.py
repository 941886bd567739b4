"""What the collector thresholds of a pocketbert process (pocketbert/core/process/collector.py) save: CPU seconds of
a process that imports what a command imports and reads a training split, at Python's default thresholds and at
pocketbert's, the two sides taking turns, measured in one run of this script.

    python scripts/collector_speed.py --data-dir ../shared/data --repeats 5

Printed: each side's CPU seconds (user + system, of each process: the median and every one) and their ratio.
Compare runs of it only on one host in one sitting, with nothing else heavy running.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
from pathlib import Path

from pocketbert.core.process.collector import THRESHOLDS

PYTHON_DEFAULT = (700, 10, 10)
# What a `train distill` process loads (torch, transformers' BERT classes, onnxruntime for its gates), then the
# Python work of reading the SST-2 training split, as that process does.
WORK = """
import gc, sys
gc.set_threshold(*{thresholds})
import torch
from transformers import BertForQuestionAnswering, BertForSequenceClassification
import onnxruntime
if sys.argv[1]:
    from pathlib import Path
    from pocketbert.core.tasks.data import read_sentiment_file
    read_sentiment_file(Path(sys.argv[1]) / "sst2" / "train.tsv")
"""


def cpu_seconds(thresholds: tuple[int, int, int], data_dir: str) -> float:
    """The CPU seconds of one process doing WORK at `thresholds`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", WORK.format(thresholds=thresholds), data_dir], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, help="with sst2/train.tsv: the process also reads it")
    parser.add_argument("--repeats", type=int, default=5, help="processes a side (default 5)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be 1 or more")
    if args.data_dir is not None and not (args.data_dir / "sst2" / "train.tsv").is_file():
        parser.error(f"{args.data_dir} holds no sst2/train.tsv: pass the data folder (../shared/data)")
    data_dir = str(args.data_dir or "")
    sides = {"python default": PYTHON_DEFAULT, "pocketbert": THRESHOLDS}
    seconds: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.repeats):
        for name, thresholds in sides.items():
            seconds[name].append(cpu_seconds(thresholds, data_dir))
    for name, thresholds in sides.items():
        runs = ", ".join(f"{s:.2f}" for s in seconds[name])
        print(f"{name:>15} {thresholds}: median {statistics.median(seconds[name]):.2f} s of CPU ({runs})")
    ratio = statistics.median(seconds["pocketbert"]) / statistics.median(seconds["python default"])
    print(f"pocketbert / python default: {ratio:.2f}")


if __name__ == "__main__":
    main()
