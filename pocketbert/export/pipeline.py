"""`pocketbert export`: build every artifact from the student folder, prove parity, then move into place."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tqdm.auto import tqdm

from pocketbert.errors import ExportError
from pocketbert.export import bundle, coreml, int8_budget, mobile_usability, onnx_export, parity
from pocketbert.manifest import path_size, read_manifest, write_manifest
from pocketbert.rundir import (
    EXPORT_DIR,
    ONNX_FP16,
    ONNX_FP32,
    ONNX_INT8,
    ONNX_QDQ,
    ORT_MODEL,
    ORT_REQUIRED_OPERATORS,
    PARITY,
    STUDENT_DIR,
    check_writable,
    coreml_package_name,
    require_stage,
    staged_output,
)
from pocketbert.train.data import load_task_data, subsample
from pocketbert.train.models import layer_count, load_stage_model, load_tokenizer, quiet_transformers, torch_forward
from pocketbert.train.tasks import batched_logits


STATIC_CALIBRATION_ROWS = 128  # of the calibration set, for static int8's activation ranges


def calibration_set(model, task, tokenizer, data, export_cfg: dict, eval_cfg: dict, max_length: int, doc_stride,
                    seed: int) -> tuple[list, list]:
    """Training examples (never the eval set the parity gate uses) as features, with the student's logits."""
    n = int(export_cfg.get("calibration_examples", int8_budget.DEFAULT_CALIBRATION_EXAMPLES))
    features = task.features(tokenizer, subsample(data.train, n, seed), max_length, doc_stride)
    logits = batched_logits(task, features, tokenizer.pad_token_id, int(eval_cfg.get("batch_size", 64)),
                            torch_forward(model, task))
    return features, logits


def choose_int8_precision(task, features: list, reference: list, pad_id: int, batch_size: int, export_cfg: dict,
                          fp32_path: Path) -> dict:
    """The FFN projections the int8 model keeps in fp32, chosen on the calibration set within the size budget."""
    import tempfile

    candidates = onnx_export.fp32_nodes(fp32_path)
    if not candidates:
        return {"fp32_nodes": [], "candidates": [], "trials": []}

    def measure(path: Path) -> dict:
        logits = batched_logits(task, features, pad_id, batch_size,
                                onnx_export.ort_forward(onnx_export.ort_session(path), task))
        return int8_budget.closeness(logits, reference)

    with tempfile.TemporaryDirectory(prefix="pocketbert-int8-") as tmp:
        choice = int8_budget.choose_fp32_nodes(
            fp32_path, candidates, Path(tmp), measure, onnx_export.quantize_int8,
            float(export_cfg.get("int8_size_budget", int8_budget.INT8_SIZE_BUDGET)))
    return {**choice, "calibration_examples": len(features)}


def static_calibration_rows(task, features: list, pad_id: int, limit: int) -> list[dict]:
    """Rows of one sequence each, all padded to one length (the calibrator stacks them)."""
    batch = task.collate(features[:limit], pad_id)
    return [{name: batch[name][i:i + 1] for name in task.input_names} for i in range(batch["input_ids"].shape[0])]


def export_run(run_dir: Path, data_dir: Path | None = None, overwrite: bool = False, coreml_examples: int | None = None,
               parity_examples: int | None = None, coreml_variants: list[str] | None = None,
               ) -> tuple[Path, list[parity.ParityResult]]:
    started = time.time()
    check_writable(run_dir, EXPORT_DIR, overwrite)
    student_dir = require_stage(run_dir, STUDENT_DIR, "pocketbert train distill")
    model, tokenizer, task, info = load_stage_model(student_dir)
    recipe = read_manifest(student_dir)["config"]["recipe"]
    export_cfg, eval_cfg = recipe.get("export", {}), recipe.get("eval", {})
    max_length = int(export_cfg.get("max_length", info["max_length"]))
    n_parity = parity_examples if parity_examples is not None else export_cfg.get("parity_examples")
    n_coreml = coreml_examples if coreml_examples is not None else export_cfg.get("coreml_parity_examples")
    seed = int(recipe.get("seed", 13))
    data = load_task_data(recipe["dataset"], task.name, data_dir, None, task.label_names or None, seed)
    examples = subsample(data.eval, n_parity, seed)
    n_coreml = len(examples) if n_coreml is None else min(int(n_coreml), len(examples))
    variants = list(coreml_variants or export_cfg.get("coreml_variants") or ["fp16"])
    unknown = [v for v in variants if v not in coreml.COREML_VARIANTS]
    if unknown or "fp16" not in variants:
        raise ExportError(f"export.coreml_variants must include fp16 and only {', '.join(coreml.COREML_VARIANTS)} "
                          f"(got {variants})")

    with staged_output(run_dir, EXPORT_DIR, overwrite) as out:
        steps = tqdm(total=8, desc="export", unit="step")

        def advance(next_step: str) -> None:
            steps.set_postfix_str(next_step)
            steps.update()

        app_files = bundle.write_app_files(model, tokenizer, task, out)
        # Parity inputs come from the exported tokenizer files, as an app would tokenize.
        quiet_transformers()  # a BiLSTM's config.json names a model type transformers does not know, on purpose
        app_tokenizer = load_tokenizer(str(out))
        features = task.features(app_tokenizer, examples, max_length, info.get("doc_stride"))
        pad_id = app_tokenizer.pad_token_id
        batch_size = int(eval_cfg.get("batch_size", 64))
        student_logits = batched_logits(task, features, pad_id, batch_size, torch_forward(model, task), "student")
        advance("onnx")

        onnx_export.export_onnx(model, task, out / ONNX_FP32)
        advance("fp16")
        onnx_export.convert_fp16(out / ONNX_FP32, out / ONNX_FP16)
        advance("int8")
        calibration, calibration_logits = calibration_set(model, task, app_tokenizer, data, export_cfg, eval_cfg,
                                                          max_length, info.get("doc_stride"), seed)
        int8_choice = choose_int8_precision(task, calibration, calibration_logits, pad_id, batch_size, export_cfg,
                                            out / ONNX_FP32)
        onnx_export.quantize_int8(out / ONNX_FP32, out / ONNX_INT8, int8_choice["fp32_nodes"])
        advance("static int8")
        onnx_export.quantize_static_qdq(out / ONNX_FP32, out / ONNX_QDQ, static_calibration_rows(
            task, calibration, pad_id, int(export_cfg.get("static_calibration_examples", STATIC_CALIBRATION_ROWS))))
        advance("ort")
        onnx_export.convert_to_ort(out / ONNX_INT8, out / ORT_MODEL, out / ORT_REQUIRED_OPERATORS)
        # The .ort is the int8 graph; the fp32 one shows what an accelerator could take without quantized ops.
        ort_usability = {name: mobile_usability.usability(out / name) for name in (ONNX_FP32, ONNX_INT8)}
        advance("coreml")
        shape = "BiLSTM" if info.get("architecture") == "bilstm" else f"{layer_count(model.config)}-layer"
        description = f"pocketbert {task.name} student ({shape})"
        packages = {}
        programs = {}  # (minimum iOS, fixed shape, classifier outputs) -> the fp16 program converted for it
        for variant in variants:
            key = (coreml.minimum_ios(variant), variant == "fixed", variant == "classifier")
            if key not in programs:
                programs[key] = coreml.convert_to_coreml(model, task, max_length, task.label_names, description, *key)
            packages[variant] = out / coreml_package_name(task.name, variant)
            coreml.compress(programs[key], variant).save(str(packages[variant]))
        advance("parity")

        results = []
        for name, precision in ((ONNX_FP32, "fp32"), (ONNX_FP16, "fp16"), (ONNX_INT8, "int8"),
                                (ONNX_QDQ, "int8-static"), (ORT_MODEL, "int8")):
            session = onnx_export.ort_session(out / name)
            started_run = time.perf_counter()
            logits = batched_logits(task, features, pad_id, batch_size, onnx_export.ort_forward(session, task), name)
            results.append(parity.compare(task, examples, features, student_logits, logits, eval_cfg, name,
                                          "onnxruntime", precision))
            results[-1].seconds_per_sequence = (time.perf_counter() - started_run) / len(features)
        # Whole examples only (a QA example spans several windows): the first n_coreml examples' features.
        n_coreml_features = sum(1 for f in features if getattr(f, "example_index", 0) < n_coreml) \
            if task.name == "qa" else n_coreml
        for variant, package in packages.items():
            forward = coreml.coreml_forward(package, task)
            started_run = time.perf_counter()
            logits = batched_logits(task, features[:n_coreml_features], pad_id, 1, forward, package.name)
            results.append(parity.compare(task, examples, features, student_logits, logits, eval_cfg, package.name,
                                          forward.runtime, coreml.PARITY_PRECISION[variant]))
            results[-1].seconds_per_sequence = (time.perf_counter() - started_run) / max(1, n_coreml_features)
        advance("")
        steps.close()

        (out / PARITY).write_text(json.dumps([r.to_dict() for r in results], indent=2) + "\n")
        failed = [r for r in results if not r.passed]
        if failed:
            raise ExportError(failed[0].failure() + "; nothing was written (check the export path or retrain)")
        sizes = {p.name: path_size(p) for p in [out / ONNX_FP32, out / ONNX_FP16, out / ONNX_INT8, out / ONNX_QDQ,
                                                 out / ORT_MODEL, *packages.values()]}
        write_manifest(
            out, stage="export", started=started,
            config={"max_length": max_length, "task": task.name, "onnx_opset": onnx_export.ONNX_OPSET,
                    "coreml_minimum_deployment_target": {v: coreml.minimum_ios(v) for v in variants},
                    "coreml_variants": variants, "parity_examples": len(examples),
                    "coreml_parity_examples": n_coreml, "dataset": data.name},
            inputs={"student": student_dir},
            metrics={"sizes_bytes": sizes, "parity": {r.artifact: r.to_dict() for r in results},
                     "student_eval_on_parity_set": results[0].student_metrics, "int8_mixed_precision": int8_choice,
                     "ort_mobile_usability": ort_usability},
            extra={"app_files": [p.name for p in app_files]},
        )
    return Path(run_dir) / EXPORT_DIR, results
