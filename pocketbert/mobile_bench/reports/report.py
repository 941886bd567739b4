"""report.md and a self-contained report.html, rendered from results.json alone.

Both come from one document model (headings, paragraphs, tables, images), so they always say the same thing.
Measured and estimated figures sit in separate tables, each table saying which it holds.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from pocketbert.mobile_bench.estimates import derive
from pocketbert.mobile_bench.reports import plots
from pocketbert.mobile_bench.reports.calibration_report import loo_text
from pocketbert.mobile_bench.device.phone_import import package_of
from pocketbert.mobile_bench.reports.published import PublishedLine
from pocketbert.mobile_bench.timing.runners import runtime_text, setting_text
from pocketbert.core.run.run_files import BENCH_HTML, BENCH_PLOTS, BENCH_REPORT

METRIC_WORDS = {"accuracy": "accuracy", "f1": "F1", "exact_match": "exact match"}  # a metric's name in a sentence
HEADLINE_PRECISION = "fp32"  # the DistilBERT comparison: same precision, same runtime, same shape
TEXT_SHOWN = 60       # characters of a differing golden text the report quotes
TOKEN_IDS_SHOWN = 12  # ids of each side of a tokenizer difference the report prints


def headline(results: dict) -> dict | None:
    rows = [r for r in results["comparisons"] if r["precision"] == HEADLINE_PRECISION and r["baseline"] == derive.BERT_BASE
            and r["device"] == derive.HOST and r["runtime"] == "onnxruntime" and r["model_format"] == "onnx"]
    if not rows:
        return None
    row = min(rows, key=lambda r: r["threads"])
    kept = results["accuracy"]["fraction_of_teacher_kept"]
    return {**row, "percent_of_teacher_kept": None if kept is None else 100.0 * kept}


def headline_sentence(results: dict) -> str:
    h = headline(results)
    if h is None:
        return "No student/BERT-base pair was measured at the same precision."
    kept = f"{h['percent_of_teacher_kept']:.1f} %" if h["percent_of_teacher_kept"] is not None else "an unknown share"
    proto = results["protocol"]
    vocabulary = results.get("vocabulary") or {}
    fitted = (f" (its vocabulary fitted to {vocabulary['rows_after']:,} of {vocabulary['rows_before']:,} rows; "
              f"{h['size_ratio_full_vocabulary']:.1f}× with the full one)"
              if h.get("size_ratio_full_vocabulary") else "")
    return (f"The student is {h['percent_faster']:.0f} % faster and {h['size_ratio']:.1f}× smaller{fitted} than BERT-base "
            f"and keeps {kept} of its teacher's {METRIC_WORDS.get(results['accuracy']['metric'], 'accuracy')} "
            f"(measured: {h['precision']}, onnxruntime, {h['threads']} thread{'s' if h['threads'] > 1 else ''}, "
            f"batch {proto['batch_size']}, sequence {proto['sequence_length']}, {results['host']['cpu']}).")


def phone_figures_sentence(results: dict) -> str:
    """Which of the report's phone figures are measured, calibrated estimates or floors (the design's words)."""
    def names(keys) -> str:
        return ", ".join(sorted({_device_name(results, k) for k in keys})) or "none"

    measured = {m["device"] for m in results["measurements"] if m.get("device", derive.HOST) != derive.HOST}
    rows = results["estimates"]["devices"]
    calibrated = {r["device"] for r in rows if r.get("calibrated_ms") is not None}
    floors_only = {r["device"] for r in rows} - calibrated
    unchecked = any(c.get("placement") == "unchecked" for c in results.get("estimated_comparisons", []))
    return (f"Phone figures. Measured: {names(measured)}; calibrated estimates (a floor times the measured/floor "
            f"factor of published points on that device family, unit and precision): {names(calibrated)}; "
            f"floors alone (no published point on that family, unit and precision): "
            f"{names(floors_only - measured) if floors_only else 'none'}."
            + (" The Neural Engine rows are unchecked: the export recorded no placement verdict for the student's "
               "program." if unchecked else ""))


def _spread(low, high) -> str:
    return "–" if low is None else f"{_ms(low)}–{_ms(high)}"


def _ms(value) -> str:
    return "–" if value is None else f"{value:.2f}" if value < 10 else f"{value:.1f}"


def _mb(n) -> str:
    return "–" if n is None else f"{n / 1e6:.1f} MB"


def _pct(value) -> str:
    return "–" if value is None else f"{value:.0f} %"


def _device_name(results: dict, key: str) -> str:
    if key == derive.HOST:
        return f"this host ({results['host']['cpu']})"
    return results["profiles"].get(key, {}).get("name", key)


def _placement_counts(placement: dict | None) -> str:
    if not placement:
        return "not measured"
    counts = placement["operation_counts"]
    return " / ".join(f"{unit.replace('_', ' ')} {counts[unit]}" for unit in counts if counts[unit])


def _predicted(results: dict, measurement: dict, verdict: dict | None) -> str:
    """The placement check's prediction for the measured program, beside the measured plan."""
    verdicts = (results.get("placement") or {}).get("verdicts") or {}
    # a function of a multifunction package: the package's verdict (the check weighs all its functions)
    chosen = verdicts.get(package_of(measurement.get("program") or "")) or (
        verdict if measurement["model"] == derive.STUDENT else None)
    if chosen is None:
        return "unchecked (no verdict)"
    return f"{chosen['predicted_unit'].replace('_', ' ')} ({100 * chosen['neural_engine_op_share']:.0f} % of ops on the NE)"


def _cost(verdict: dict) -> str:
    cost = verdict.get("added_cost_ms")
    return "–" if not cost else "0" if cost[1] == 0 else f"{cost[0]:.2f}–{cost[1]:.2f}"


def _stage(value, detail: str = "") -> str:
    return "–" if value is None else f"{_ms(value)}{detail}"


def _ids_text(ids: list[int]) -> str:
    shown = ", ".join(map(str, ids[:TOKEN_IDS_SHOWN]))
    return f"[{shown}{', …' if len(ids) > TOKEN_IDS_SHOWN else ''}] ({len(ids)} ids)"


def tokenizer_lines(rows: list[dict]) -> list[str]:
    """A line per device (and distinct result) of the kit's tokenizer check: the golden texts that agree, or the
    first that differ, each with its expected and got ids."""
    lines = []
    for row in rows:
        check = row.get("tokenizer_check")
        if not check:
            continue
        agree = check["texts_checked"] - check["texts_differing"]
        line = (f"tokenizer on device ({row.get('device_name') or row['device']}): {agree} of "
                f"{check['texts_checked']} golden texts agree")
        if check["texts_differing"]:
            shown = "; ".join(f"{json.dumps(d['text'][:TEXT_SHOWN], ensure_ascii=False)} ({d['probe'] or 'text'}) "
                              f"expected {_ids_text(d['expected_ids'])}, got {_ids_text(d['got_ids'])}"
                              for d in check["first_differences"])
            line += f", {check['texts_differing']} differing: {shown}"
        if line not in lines:
            lines.append(line)
    return lines


def app_sections(results: dict) -> list[tuple]:
    """The Apple programs' placement, latency as an app sees it (estimated and measured), Android per SoC class."""
    doc: list[tuple] = [("h2", "Apple programs: where each is predicted to run")]
    verdicts = (results.get("placement") or {}).get("verdicts") or {}
    if verdicts:
        doc.append(("p", "The export's placement check, read from each saved program (docs/placement.md). A region "
                         "is a run of consecutive Neural Engine operations (Core AI submits each region: ~0.23 ms "
                         "each, arXiv 2606.22283); a boundary a run off the Neural Engine between two regions "
                         "(0.6–1.75 ms each, apple/coreai-torch#66). The added cost is over a single region."))
        doc.append(("table", ["program", "predicted unit", "NE share (ops)", "regions", "boundaries",
                              "predicted added ms", "axis limit", "rules fired", "risks"],
                    [[name, v["predicted_unit"].replace("_", " "), f"{100 * v['neural_engine_op_share']:.0f} %",
                      "–" if v.get("regions") is None else str(v["regions"]),
                      "–" if v.get("boundaries") is None else str(v["boundaries"]), _cost(v),
                      v.get("axis_limit") or "–", ", ".join(v["rules_fired"]) or "none",
                      "; ".join(v.get("risks") or []) or "none"] for name, v in verdicts.items()]))
    else:
        doc.append(("p", "Unchecked: the export recorded no placement verdict."))

    stages = (results.get("app_latency") or {}).get("estimated") or []
    doc.append(("h2", "Latency as an app sees it — estimated for phones"))
    doc.append(("p", "Steady: the calibrated estimate (else the floor) of a warm prediction, and never below the "
                     "Neural Engine's ~0.23 ms per-call floor (arXiv 2606.22283) on its rows. The first call after "
                     "the device idled adds the Neural Engine's re-wake; sustained use (≥1,000 calls) multiplies by "
                     "its burst-to-sustained slowdown; each only where a published source gives it, '–' elsewhere. Load and the "
                     "first prediction have no published factor: the kit measures them (below)."))
    doc.append(("table", ["device", "unit", "precision", "steady ms", "first call after idle ms",
                          "sustained ms", "sources"],
                [[_device_name(results, r["device"]), r["compute_unit"], r["precision"],
                  f"{_ms(r['steady_ms'])} ({r['steady_is']})",
                  _stage(r["after_idle_ms"], f" (> {r['idle_s']} s idle)" if r["idle_s"] else ""),
                  _stage(r["sustained_ms"], f" (after ~{r['sustained_after_calls']} calls)"
                         if r["sustained_after_calls"] else ""),
                  "; ".join(x for x in (r["after_idle_source"], r["sustained_source"]) if x) or "–"]
                 for r in stages]))

    kit = [m for m in results["measurements"] if m.get("device", derive.HOST) != derive.HOST
           and m.get("source", "").endswith("(kit)")]
    killed = results.get("killed") or []
    doc.append(("h3", "Latency as an app sees it — measured by the device kit"))
    if kit or killed:
        doc.append(("table", ["device", "program", "compute units", "load ms", "first prediction ms", "p50 ms",
                              "p90 ms", "first call after idle ms", "sustained p50 / p90 ms", "tokenizer ms",
                              "killed"],
                    [[m.get("device_name") or m["device"], m.get("program") or "–", m.get("compute_units") or "–",
                      _ms((m.get("cold_start") or {}).get("load_ms")),
                      _ms((m.get("cold_start") or {}).get("first_inference_ms")), _ms(m["median_ms"]),
                      _ms(m.get("p90_ms")),
                      _stage((m.get("after_idle") or {}).get("first_call_ms"),
                             f" ({m['after_idle']['idle_s']:g} s idle)" if m.get("after_idle") else ""),
                      "–" if not m.get("sustained") else f"{_ms(m['sustained']['p50_ms'])} / "
                      f"{_ms(m['sustained']['p90_ms'])} ({m['sustained']['calls']} calls)",
                      _ms(m.get("tokenizer_ms")), "no"] for m in kit]
                    + [[k.get("device_name") or k["device"], k.get("program") or "–", k.get("compute_units") or "–",
                        *["–"] * 7, f"killed at {k['killed']['stage'].replace('_', ' ')}"
                        + (f": {k['killed']['note']}" if k["killed"].get("note") else "")] for k in killed]))
    else:
        doc.append(("p", "None yet: `pocketbert bench kit` writes the Swift package that measures these stages."))
    checked = tokenizer_lines(kit + killed)
    if checked:
        doc.append(("p", "The kit ran the export's golden texts (tokenizer_golden.json) through the iOS folder's own "
                         "Swift tokenizer on each device before timing anything:"))
        doc.append(("list", checked))

    android = (results.get("app_latency") or {}).get("android") or []
    doc.append(("h2", "Android, per SoC class — estimated from published figures"))
    doc.append(("p", "No peak rates are published for these SoCs' NPUs, so no floor applies: the student's figure is "
                     "the published one scaled by the student's FLOPs over the published model's (DistilBERT's at its "
                     "published length), an estimate, not a measurement. FLOP scaling ignores a call's fixed costs, "
                     "so it flatters a model much smaller than the published one."))
    doc.append(("table", ["SoC class", "device", "unit", "precision", "runtime", "published ms (sequence)",
                          "student, scaled ms (sequence)", "source"],
                [[r["class_name"], r["device_name"], r["compute_unit"], r["precision"], r["runtime"],
                  f"{_ms(r['published_ms'])} ({r['published_sequence']})",
                  f"{_ms(r['student_scaled_ms'])} ({r['student_sequence']})", r["source"]] for r in android]))
    return doc


def _kept_text(results: dict) -> str:
    kept = results["accuracy"]["fraction_of_teacher_kept"]
    return f"{100 * kept:.1f} %" if kept is not None else "–"


def build_document(results: dict, images: dict) -> list[tuple]:
    """The report as blocks (heading, paragraph, table, image, list), section by section: render_markdown and
    render_html write them."""
    line = results.get("published")
    published = [("p", PublishedLine(**{k: v for k, v in line.items() if k != "kept"}).sentence())] if line else []
    doc: list[tuple] = [("h1", "pocketbert latency report"), ("strong", headline_sentence(results)), *published,
                        ("p", phone_figures_sentence(results)),
                        ("p", "\"X % faster\" is the baseline's median latency over the student's, minus one (the "
                              "DistilBERT paper's usage); \"Y× smaller\" compares file sizes at the same precision; "
                              "the accuracy kept is the student's over its teacher's on the same evaluation set. "
                              "Measured figures were timed on the named device; floors are computed from a device profile; "
                              "calibrated estimates are floors times the measured/floor factor of published "
                              "measurements. Each has its own column; none is mixed with another.")]

    for section in (_at_a_glance(results, images), _student_against_baselines(results), app_sections(results),
                    _architecture_check(results), _measured_here(results, images), _sweeps(results, images),
                    _export_variants(results, images), _roofline(results, images), _models(results)):
        doc += section
    return doc


def _at_a_glance(results: dict, images: dict) -> list[tuple]:
    """The student against BERT-base at the fewest threads, one row a runtime."""
    kept_text = _kept_text(results)
    doc: list[tuple] = []
    versus = [c for c in results["comparisons"] if c["baseline"] == derive.BERT_BASE and c["device"] == derive.HOST]
    fewest = min((c["threads"] for c in versus if c["threads"]), default=None)
    compact = [c for c in versus if c["threads"] in (fewest, None)]
    if compact:
        doc.append(("h2", "At a glance"))
        if "versus" in images:
            doc.append(("img", images["versus"], "student against BERT-base, one panel per runtime"))
        doc.append(("table", ["runtime", "precision", "setting", "student ms", "BERT-base ms", "faster", "smaller",
                              "accuracy kept"],
                    [[runtime_text(c), c["precision"], setting_text(c), _ms(c["student_ms"]), _ms(c["baseline_ms"]),
                      _pct(c["percent_faster"]), "–" if c["size_ratio"] is None else f"{c['size_ratio']:.1f}×",
                      kept_text] for c in compact]))
        doc.append(("p", "The full tables follow: every thread count, the teacher, the estimates for phones."))

    return doc


def _student_against_baselines(results: dict) -> list[tuple]:
    """Every comparison measured here, then the floors and calibrated estimates for phones."""
    kept_text = _kept_text(results)
    doc: list[tuple] = []
    doc.append(("h2", "Student against BERT-base and the teacher — measured"))
    rows = [[_device_name(results, c["device"]), c["baseline"], runtime_text(c), c["precision"],
             setting_text(c), _ms(c["student_ms"]), _ms(c["baseline_ms"]), f"{c['latency_ratio']:.3f}",
             _pct(c["percent_faster"]), "–" if c["size_ratio"] is None else f"{c['size_ratio']:.1f}×", kept_text]
            for c in results["comparisons"]]
    doc.append(("table", ["device", "against", "runtime", "precision", "setting", "student ms", "baseline ms",
                          "latency ratio", "faster", "smaller", "accuracy kept"], rows))

    doc.append(("h2", "Student against BERT-base and the teacher — estimated for phones"))
    doc.append(("p", "Floor: the fastest each phone could possibly run each model (roofline, see below). "
                     "Calibrated: the floor times the measured/floor factor of published measurements on the same "
                     "device family, compute unit and precision; its range is the leave-one-out spread (each "
                     "published point predicted from the others), '–' where no point of the key predicts another "
                     "or no published point shares the key. Each row describes the student's program it names, the "
                     "one the iOS folder ships; a Neural Engine row uses the student's floor on the unit the "
                     "placement check predicts that program on; 'unchecked' means the export recorded no "
                     "verdict. BERT-base has no exported program, so its Neural Engine figures are unchecked."))
    rows = [[_device_name(results, c["device"]), c["baseline"], c.get("student_program") or "–", c["compute_unit"],
             c["precision"], c["placement"],
             _ms(c["student_floor_ms"]), _ms(c["student_calibrated_ms"]),
             _spread(c["student_calibrated_low_ms"], c["student_calibrated_high_ms"]),
             _ms(c["baseline_floor_ms"]), _ms(c["baseline_calibrated_ms"]),
             "–" if c["latency_ratio"] is None else f"{c['latency_ratio']:.3f}", _pct(c["percent_faster"]),
             f"{c['size_ratio']:.1f}×", kept_text]
            for c in results["estimated_comparisons"]]
    doc.append(("table", ["device", "against", "program (student)", "compute unit", "precision", "placement (student)",
                          "student floor ms", "student calibrated ms", "calibrated range ms", "baseline floor ms",
                          "baseline calibrated ms", "floor ratio", "faster (floors)", "smaller", "accuracy kept"],
                rows))

    return doc


def _architecture_check(results: dict) -> list[tuple]:
    """Half the layers, half the time? The student against BERT-base beside their FLOP ratio."""
    doc: list[tuple] = []
    check = results.get("architecture_check")
    if check:
        doc.append(("h2", "Architecture check: half the layers, half the time?"))
        verdict = "within" if check["passes"] else "above"
        doc.append(("p", f"{check['student']}, against BERT-base at batch {check['batch']}, sequence "
                         f"{check['sequence_length']}, {check['runtime']}, the two timed in turn: measured latency ratio "
                         f"**{check['latency_ratio']:.3f}** beside a FLOP ratio of {check['flop_ratio']:.3f} "
                         f"({_ms(check['student_ms'])} ms against {_ms(check['bert_base_ms'])} ms), {verdict} the "
                         f"bar of {check['bar']}. The embeddings and the classifier do not shrink with depth, so the "
                         "FLOP ratio sits just above one half."))

    return doc


def _measured_here(results: dict, images: dict) -> list[tuple]:
    """This host, the protocol, every headline measurement, the runners that cannot run here, the phones' imported
    measurements, cold starts and tokenization."""
    host, proto = results["host"], results["protocol"]
    doc: list[tuple] = []
    doc.append(("h2", "Measured here"))
    doc.append(("list", [
        f"Device: {host['cpu']}, {host['cores']} cores, {host['os']}, {host['machine']} "
        f"(ISA: {', '.join(host['isa_flags']) or 'none of the listed flags'})",
        "Runtimes: " + ", ".join(f"{k} {v}" for k, v in results["versions"].items()
                                 if k in ("onnxruntime", "torch", "tokenizers", "coremltools", "executorch")),
        f"Input: batch {proto['batch_size']}, sequence {proto['sequence_length']}, {proto['inputs']}",
        f"Protocol: {proto['warmup']} warm-up runs, then repeats until the {proto['interval']} is within "
        f"{100 * proto['target_relative_half_width']:.0f} % of it (at least {proto['min_repeats']}, at most "
        f"{proto['max_repeats']} repeats or {proto['time_cap_s']} s). Thread counts above the "
        f"{host['cores']} cores share cores.",
    ]))
    rows = [[m["model"], runtime_text(m), m["precision"], setting_text(m), _ms(m["median_ms"]),
             f"{_ms(m['ci_low_ms'])}–{_ms(m['ci_high_ms'])}", _ms(m["p90_ms"]), str(m["repeats"]), m["stop_reason"]]
            for m in derive.headline_rows(results) if m.get("device", derive.HOST) == derive.HOST]
    doc.append(("table", ["model", "runtime", "precision", "setting", "median ms", "95 % interval", "p90 ms",
                          "repeats", "stopped by"], rows))
    if "runtimes" in images:
        doc.append(("img", images["runtimes"], "median latency per runtime setting"))

    unavailable = [r for r in results["runners"] if not r["available"]]
    doc.append(("h3", "Runners that cannot run here"))
    if unavailable:
        doc.append(("table", ["model", "runner", "why"], [[r["model"], r["runner"], r["reason"]] for r in unavailable]))
    else:
        doc.append(("p", "None: every runner in the plan ran on this host."))

    imported = [m for m in results["measurements"] if m.get("device", derive.HOST) != derive.HOST]
    doc.append(("h3", "Measured on phones (imported)"))
    if imported:
        verdict = derive.student_verdict(results)
        doc.append(("table", ["device", "model", "program", "compute units", "precision", "median ms", "load ms",
                              "first prediction ms", "planned on (measured, operations)", "predicted", "source"],
                    [[m.get("device_name") or m["device"], m["model"], m.get("program") or "–",
                      m.get("compute_units") or "–", m["precision"], _ms(m["median_ms"]),
                      _ms((m.get("cold_start") or {}).get("load_ms")),
                      _ms((m.get("cold_start") or {}).get("first_inference_ms")),
                      _placement_counts(m.get("measured_placement")), _predicted(results, m, verdict), m["source"]]
                     for m in imported]))
    else:
        doc.append(("p", "None yet: `pocketbert bench import` brings in an Xcode performance report or a coremltools "
                         "device benchmark."))

    doc.append(("h3", "Cold start (load, then the first inference)"))
    doc.append(("table", ["model", "runtime", "precision", "setting", "load ms", "first inference ms", "total ms",
                          "repeats (median)"],
                [[c["model"], runtime_text(c), c["precision"], setting_text(c), _ms(c["load_ms"]),
                  _ms(c["first_inference_ms"]), _ms(c["total_ms"]), str(c["repeats"])] for c in results["cold_start"]]))

    tok = [m for m in results["measurements"] if m.get("sweep") == "tokenization"]
    doc.append(("h3", "Tokenization included and excluded"))
    if tok:
        doc.append(("p", "One real evaluation example per call, tokenized with the exported tokenizer.json and padded "
                         f"to {proto['sequence_length']} tokens, 1 thread; the three rows of a precision were measured "
                         "back to back on the same texts."))
        doc.append(("table", ["what", "precision", "tokenization", "median ms", "95 % interval"],
                    [[m["model"], m["precision"], m["tokenization"], _ms(m["median_ms"]),
                      f"{_ms(m['ci_low_ms'])}–{_ms(m['ci_high_ms'])}"] for m in tok]))
    else:
        doc.append(("p", "Not measured: the run's evaluation file is not readable from here."))

    return doc


def _sweeps(results: dict, images: dict) -> list[tuple]:
    """Latency against sequence length and batch size."""
    proto = results["protocol"]
    doc: list[tuple] = []
    doc.append(("h2", "Sweeps"))
    for axis, title in (("sequence", "sequence length"), ("batch", "batch size")):
        sweep_rows = [m for m in results["measurements"] if m.get("device", derive.HOST) == derive.HOST
                      and m.get("tokenization") == "excluded" and m["runtime"] == "onnxruntime"
                      and m["model_format"] == "onnx" and m.get("threads") == proto["sweep_threads"]
                      and m["model"] in (derive.STUDENT, derive.BERT_BASE)
                      and ((axis == "sequence" and m["batch"] == proto["batch_size"] and m["sequence_length"] in proto["sequence_sweep"])
                           or (axis == "batch" and m["sequence_length"] == proto["sequence_length"]
                               and m["batch"] in proto["batch_sweep"] and m["precision"] == "fp32"))]
        sweep_rows.sort(key=lambda m: (m["model"], m["precision"], m["batch"], m["sequence_length"]))
        doc.append(("h3", f"Latency against {title} (measured, onnxruntime, {proto['sweep_threads']} thread)"))
        doc.append(("table", ["model", "precision", "batch", "sequence", "median ms", "ms per example"],
                    [[m["model"], m["precision"], str(m["batch"]), str(m["sequence_length"]), _ms(m["median_ms"]),
                      _ms(m["median_ms"] / m["batch"])] for m in sweep_rows]))
        if axis in images:
            doc.append(("img", images[axis], f"latency against {title}"))

    return doc


def _export_variants(results: dict, images: dict) -> list[tuple]:
    """Each exported model's size, accuracy on its own runtime and latency here."""
    acc = results["accuracy"]
    kept = acc["fraction_of_teacher_kept"]
    doc: list[tuple] = []
    doc.append(("h2", "Export variants: size, accuracy on their own runtime, latency"))
    doc.append(("table", ["artifact", "precision", "size", acc["metric"], "agreement with the student", "examples",
                          "evaluated on", "median ms here"],
                [[v["artifact"], v["precision"], _mb(v["size_bytes"]), "–" if v["metric"] is None else f"{v['metric']:.4f}",
                  f"{100 * v['agreement_with_student']:.2f} %", str(v["n_examples"]), v["runtime"],
                  _ms(v["latency_ms"]) if v["latency_ms"] is not None else "not measurable here"]
                 for v in results["variants"]]))
    teacher = f"teacher {acc['teacher']:.4f}" if acc["teacher"] is not None else "no teacher (an imported student)"
    doc.append(("p", f"{acc['metric']} on {acc['eval_set']}: student {acc['student']:.4f}, {teacher}"
                     + (f" ({100 * kept:.1f} % kept)." if kept is not None else ".")))
    if "variants" in images:
        doc.append(("img", images["variants"], "accuracy against latency and size"))

    return doc


def _roofline(results: dict, images: dict) -> list[tuple]:
    """Floors per phone and per model, the calibration points, this host beside its floor, the device profiles."""
    doc: list[tuple] = []
    doc.append(("h2", "Roofline estimates"))
    doc.append(("p", "floor = max(FLOPs / peak compute, bytes / memory bandwidth). FLOPs are counted on the exported "
                     "ONNX graph (a multiply-add is 2), bytes are the weights as stored plus inputs and outputs: the "
                     "least an inference must read. Estimated, not measured: real kernels run below peak."))
    doc.append(("table", ["model", "GFLOPs per inference", "of which MatMul", "weights fp32", "weights int8",
                          "activations written"],
                [[name, f"{c['flops'] / 1e9:.2f}", f"{100 * c['matmul_flops'] / c['flops']:.1f} %",
                  _mb(c["weight_bytes"].get("fp32")), _mb(c["weight_bytes"].get("int8")), _mb(c["activation_bytes"])]
                 for name, c in results["graph_costs"]["headline"].items()]))
    doc.append(("h3", "Phones: floor, calibrated estimate, and measured where a phone measurement was imported"))
    doc.append(("table", ["device", "unit", "precision", "model", "floor ms", "bound", "calibrated ms",
                          "calibrated range ms", "published points", "measured ms", "measured / floor"],
                [[_device_name(results, e["device"]), e["compute_unit"], e["precision"], e["model"], _ms(e["floor_ms"]),
                  e["bound"], _ms(e.get("calibrated_ms")),
                  _spread(e.get("calibrated_low_ms"), e.get("calibrated_high_ms")),
                  str(e.get("calibration_points") or 0), _ms(e["measured_ms"]),
                  "–" if e["measured_over_floor"] is None else f"{e['measured_over_floor']:.1f}×"]
                 for e in results["estimates"]["devices"]]))
    doc.append(("h3", "Calibration: published measurements beside pocketbert's floors"))
    doc.append(("p", "Each published latency beside the floor pocketbert computes from the model's shape alone on "
                     "that device's profile; measured / floor is the point's factor. Leave-one-out: the point "
                     "predicted from the other points of its key (without any point of its own source on its own "
                     "device); its error is predicted / published − 1. `pocketbert bench calibration` prints the "
                     "same table."))
    doc.append(("table", ["point", "device", "unit", "precision", "regime", "sequence", "published ms", "floor ms",
                          "factor", "leave-one-out ms", "leave-one-out error", "source"],
                [[p["id"], p["device_name"], p["compute_unit"], p["precision"], p.get("regime", "steady"),
                  str(p["sequence_length"] or "?"), _ms(p["measured_ms"]), _ms(p["floor_ms"]),
                  f"{p['factor']:.2f}" if p["factor"] is not None else f"– ({p['no_floor_because']})",
                  _ms(p.get("predicted_ms")), loo_text(p), p["source"]]
                 for p in results["calibration"]["points"]]))
    misses = results["calibration"].get("apple_misses") or []
    target = round(100 * results["calibration"].get("apple_target", 0.3))
    doc.append(("p", f"Apple points beyond ±{target} % leave-one-out: {', '.join(misses) if misses else 'none'}."))
    if "roofline" in images:
        doc.append(("img", images["roofline"], "roofline floors per phone"))
    doc.append(("h3", "This host: measured beside its floor (fp32)"))
    doc.append(("table", ["model", "runtime", "threads", "batch", "sequence", "floor ms", "bound", "measured ms",
                          "measured / floor"],
                [[e["model"], runtime_text(e), str(e["threads"]), str(e["batch"]),
                  str(e["sequence_length"]), _ms(e["floor_ms"]), e["bound"], _ms(e["measured_ms"]),
                  f"{e['measured_over_floor']:.1f}×"] for e in results["estimates"]["host"]]))

    doc.append(("h3", "Device profiles and their sources"))
    profile_rows = []
    for key, p in [(derive.HOST, results["host_profile"]), *results["profiles"].items()]:
        bw = p["memory_bandwidth_gbs"]
        profile_rows.append([p["name"], "memory", "–", f"{bw['value']} GB/s", bw["derivation"], "; ".join(bw["source"])])
        for unit, precisions in p["compute"].items():
            for precision, e in precisions.items():
                profile_rows.append([p["name"], unit, precision, f"{e['peak_gflops']} GFLOP/s", e["derivation"],
                                     "; ".join(e["source"])])
    doc.append(("table", ["device", "unit", "precision", "peak", "how", "source"], profile_rows))

    return doc


def _models(results: dict) -> list[tuple]:
    """The models compared, and where the report came from."""
    doc: list[tuple] = []
    doc.append(("h2", "Models"))
    doc.append(("list", [f"{name}: {m['num_hidden_layers']} layers, hidden {m['hidden_size']}, "
                         f"{m['num_attention_heads']} heads, FFN {m['intermediate_size']} — {m['description']}"
                         for name, m in results["models"].items()]))
    doc.append(("p", f"Rendered from results.json (git {results.get('git_commit') or 'unknown'}, "
                     f"written {results['created']}, bench took {results.get('wall_time_s', '?')} s)."))
    return doc


def render_markdown(doc: list[tuple]) -> str:
    out = []
    for block in doc:
        kind = block[0]
        if kind in ("h1", "h2", "h3"):
            out += ["#" * int(kind[1]) + " " + block[1], ""]
        elif kind == "strong":
            out += [f"**{block[1]}**", ""]
        elif kind == "p":
            out += [block[1], ""]
        elif kind == "list":
            out += [f"- {item}" for item in block[1]] + [""]
        elif kind == "table":
            headers, rows = block[1], block[2]
            out += ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
            out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows] + [""]
        elif kind == "img":
            out += [f"![{block[2]}]({Path(block[1]).name})", ""]
    return "\n".join(out)


def _inline(text: str) -> str:
    """Escape, then render the two inline marks the report uses: **bold** and `code`."""
    escaped = html.escape(text)
    parts = escaped.split("**")
    escaped = "".join(f"<strong>{p}</strong>" if i % 2 else p for i, p in enumerate(parts))
    parts = escaped.split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


STYLE = """body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222}table{border-collapse:collapse;margin:.6em 0 1.4em;font-size:.85em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}th{background:#f2f2f2}
img{max-width:100%;border:1px solid #eee}.headline{font-size:1.15em;background:#eef7f6;padding:.8em;
border-left:4px solid #2a9d8f}code{background:#f4f4f4;padding:0 .2em}"""


def render_html(doc: list[tuple]) -> str:
    """One file with every plot embedded as a data URI: it can be mailed or attached to a pull request."""
    body = []
    for block in doc:
        kind = block[0]
        if kind in ("h1", "h2", "h3"):
            body.append(f"<{kind}>{_inline(block[1])}</{kind}>")
        elif kind == "strong":
            body.append(f'<p class="headline">{_inline(block[1])}</p>')
        elif kind == "p":
            body.append(f"<p>{_inline(block[1])}</p>")
        elif kind == "list":
            body.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in block[1]) + "</ul>")
        elif kind == "table":
            head = "".join(f"<th>{html.escape(h)}</th>" for h in block[1])
            rows = "".join("<tr>" + "".join(f"<td>{_inline(str(c))}</td>" for c in row) + "</tr>" for row in block[2])
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif kind == "img":
            data = base64.b64encode(Path(block[1]).read_bytes()).decode()
            body.append(f'<img alt="{html.escape(block[2])}" src="data:image/png;base64,{data}">')
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>pocketbert latency report</title>"
            f"<style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def write_reports(results_path: Path, folder: Path) -> dict:
    """Plots, report.md and report.html beside results.json; returns the paths written."""
    results = json.loads(Path(results_path).read_text())
    images = plots.draw_all(results, Path(folder), BENCH_PLOTS)
    doc = build_document(results, images)
    (Path(folder) / BENCH_REPORT).write_text(render_markdown(doc))
    (Path(folder) / BENCH_HTML).write_text(render_html(doc))
    return {"markdown": Path(folder) / BENCH_REPORT, "html": Path(folder) / BENCH_HTML, **images}
