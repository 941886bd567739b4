"""pocketbert's ONNX export against Hugging Face Optimum's, on the same student, measured in one run.

    python scripts/peer_optimum.py runs/sst2-default --data-dir ../shared/data --out results/peers

Optimum pins transformers 4.57, so it lives in a virtual environment of its own (built on first use, torch
pinned to pocketbert's). There `optimum-cli export onnx` exports the run's student and `optimum-cli onnxruntime
quantize` makes its int8 model with the configuration for this CPU (avx512_vnni where the CPU has it, else avx2).
Then, in pocketbert's environment and one ONNX Runtime, all four models are timed in rotating blocks (batch 1,
sequence 128, 1 and 2 threads, so that a drift of the machine's speed moves them alike) and scored on the whole
eval set one sentence at a time, each tokenized by the student's tokenizer as an app would. Writes optimum.json (the
numbers) and optimum.md (the table in results/README.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import click
import numpy as np

OPTIMUM_PACKAGES = ["torch==2.13.0", "optimum-onnx[onnxruntime]==0.1.0"]
DEFAULT_VENV = Path.home() / ".cache" / "pocketbert" / "peers" / "optimum"
SEQUENCE = 128
THREADS = (1, 2)
SEED = 13
ROUNDS, BLOCK, BLOCK_WARMUP = 8, 25, 5  # per model and thread count: 200 timed runs


def ensure_venv(venv: Path) -> Path:
    """The virtual environment's optimum-cli, installing it on first use."""
    cli = venv / "bin" / "optimum-cli"
    if cli.is_file():
        return cli
    click.echo(f"building Optimum's virtual environment in {venv} (once) ...", err=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, OPTIMUM_PACKAGES[0]], check=True)  # first and pinned: pip then takes the CPU build
    subprocess.run([*pip, *OPTIMUM_PACKAGES[1:]], check=True)
    return cli


def optimum_models(cli: Path, student: Path, work: Path) -> dict:
    """Optimum's fp32 export and its int8 quantization of it, with the commands and their wall times."""
    from pocketbert.mobile_bench.timing.host import host_info

    arch = "avx512_vnni" if "avx512_vnni" in host_info()["isa_flags"] else "avx2"
    commands = {
        "export": [str(cli), "export", "onnx", "--model", str(student), "--task", "text-classification",
                   str(work / "fp32")],
        "quantize": [str(cli), "onnxruntime", "quantize", "--onnx_model", str(work / "fp32"), f"--{arch}",
                     "-o", str(work / "int8")],
    }
    seconds = {}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    for name, command in commands.items():
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            sys.exit(f"optimum-cli {name} failed: {done.stderr.strip().splitlines()[-1]}")
        seconds[name] = round(time.perf_counter() - started, 1)
    int8 = next((work / "int8").glob("*quantized*.onnx"))
    return {"fp32": work / "fp32" / "model.onnx", "int8": int8, "quantization": arch,
            "commands": {k: " ".join(Path(c).name if i == 0 else c.replace(str(work), "WORK")
                                     for i, c in enumerate(v)) for k, v in commands.items()},
            "seconds": seconds}


def session(path: Path, threads: int):
    from pocketbert.core.students.inference import ort_session

    return ort_session(path, threads=threads)


def feeds_for(sess, inputs: dict) -> dict:
    names = [i.name for i in sess.get_inputs()]
    return {name: inputs[name] if name in inputs else np.zeros_like(inputs["input_ids"]) for name in names}


def accuracy(path: Path, tokenizer, examples: list, max_length: int) -> dict:
    """Accuracy on the eval set, one example at a time at its own length (as an app runs it)."""
    sess = session(path, threads=2)
    predicted = []
    for ex in examples:
        enc = tokenizer(ex.text, truncation=True, max_length=max_length, return_tensors="np")
        inputs = {k: v.astype(np.int64) for k, v in enc.items()}
        predicted.append(int(np.argmax(sess.run(None, feeds_for(sess, inputs))[0][0])))
    gold = np.array([ex.label for ex in examples])
    return {"accuracy": float(np.mean(np.array(predicted) == gold)), "predictions": predicted}


def latencies(models: dict[str, Path], threads: int, vocab_size: int) -> dict:
    """Each model in short blocks, the blocks in rotation (A B C D A B ...): a drift of the machine's speed moves
    them alike. Blocks rather than single runs: an idle session's thread pool keeps spinning for a while after a
    run, and on 2 cores that would slow whichever model runs next."""
    import time

    from pocketbert.mobile_bench.timing.latency import synthetic_inputs
    from pocketbert.mobile_bench.timing.stats import summarize

    inputs = synthetic_inputs(["input_ids", "attention_mask", "token_type_ids"], 1, SEQUENCE, vocab_size, SEED)
    inputs["token_type_ids"] = np.zeros_like(inputs["input_ids"])  # one sentence: segment 0 throughout
    runs = []
    for path in models.values():
        sess = session(path, threads)
        feed = feeds_for(sess, inputs)
        runs.append(lambda sess=sess, feed=feed: sess.run(None, feed))
    samples: list[list[float]] = [[] for _ in runs]
    for _ in range(ROUNDS):
        for run, taken in zip(runs, samples):
            for _ in range(BLOCK_WARMUP):
                run()
            for _ in range(BLOCK):
                started = time.perf_counter()
                run()
                taken.append((time.perf_counter() - started) * 1000.0)
    return {name: summarize(taken, f"{ROUNDS} rounds of {BLOCK}").to_dict() for name, taken in zip(models, samples)}


def table(result: dict) -> str:
    rows = result["models"]
    head = ("| model | size (MB) | SST-2 dev accuracy | agreement with the student | "
            + " | ".join(f"{t} thread{'s' if t > 1 else ''} (ms)" for t in THREADS) + " |")
    lines = [head, "|" + "---|" * (4 + len(THREADS))]
    for name, row in rows.items():
        times = " | ".join(f"{row['latency'][str(t)]['median_ms']:.2f}" for t in THREADS)
        lines.append(f"| {name} | {row['size_mb']:.1f} | {row['accuracy']:.4f} | "
                     f"{100 * row['agreement_with_student']:.2f} % | {times} |")
    return "\n".join(lines) + "\n"


@click.command()
@click.argument("run", type=click.Path(path_type=Path, exists=True))
@click.option("--data-dir", type=click.Path(path_type=Path), default=None)
@click.option("--out", type=click.Path(path_type=Path), default=Path("results/peers"))
@click.option("--venv", type=click.Path(path_type=Path), default=DEFAULT_VENV)
def main(run: Path, data_dir: Path | None, out: Path, venv: Path) -> None:
    import tempfile

    import onnxruntime

    from pocketbert.core.tasks.task_data import load_task_data
    from pocketbert.core.students.inference import batched_logits, torch_forward
    from pocketbert.core.run.manifest import read_manifest
    from pocketbert.core.run.stage_records import ExportRecord
    from pocketbert.core.students.stage_folder import load_stage_model
    from pocketbert.mobile_bench.timing.host import host_info

    export = run / "export"
    model, tokenizer, task, info = load_stage_model(run / "student")
    manifest = read_manifest(export, ExportRecord)
    max_length = manifest.config.max_length
    data = load_task_data(manifest.config.dataset or "sst2", task.name, data_dir, None,
                          task.label_names, SEED)
    examples = data.eval
    with tempfile.TemporaryDirectory() as tmp:
        peer = optimum_models(ensure_venv(venv), run / "student", Path(tmp))
        models = {
            "pocketbert fp32 (model.onnx)": export / "model.onnx",
            "Optimum fp32 (optimum-cli export onnx)": peer["fp32"],
            "pocketbert int8 (model.int8.onnx)": export / "model.int8.onnx",
            f"Optimum int8 (optimum-cli onnxruntime quantize --{peer['quantization']})": peer["int8"],
        }
        features = task.features(tokenizer, examples, max_length)
        student = [int(np.argmax(r)) for r in batched_logits(task, features, tokenizer.pad_token_id, 64,
                                                             torch_forward(model, task))]
        rows = {}
        for name, path in models.items():
            scored = accuracy(path, tokenizer, examples, max_length)
            rows[name] = {"file": path.name, "size_mb": path.stat().st_size / 2**20, "accuracy": scored["accuracy"],
                          "agreement_with_student": float(np.mean(np.array(scored["predictions"]) == student)),
                          "latency": {}}
        for threads in THREADS:
            for name, stats in latencies(models, threads, tokenizer.vocab_size).items():
                rows[name]["latency"][str(threads)] = stats
    result = {
        "run": str(run), "eval_examples": len(examples), "sequence_length": SEQUENCE, "batch": 1,
        "student_accuracy": float(np.mean(np.array(student) == np.array([ex.label for ex in examples]))),
        "onnxruntime": onnxruntime.__version__, "host": host_info(),
        "optimum": {k: v for k, v in peer.items() if k not in ("fp32", "int8")}, "models": rows,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "optimum.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "optimum.md").write_text(table(result))
    click.echo(table(result) + f"-> wrote {out / 'optimum.json'} and {out / 'optimum.md'}")


if __name__ == "__main__":
    main()
