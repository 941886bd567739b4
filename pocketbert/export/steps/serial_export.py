"""The export's build, place and gate steps one after another in this process (export.jobs 1): the same files and
the same records as export/steps/parallel_export.py's workers give."""

from __future__ import annotations

import time
from pathlib import Path

from pocketbert.core.config.recipe import ExportSection
from pocketbert.core.run.run_files import TOKENIZER_GOLDEN, TOKENIZER_JSON, TOKENIZER_TABLES
from pocketbert.export.checks import mobile_usability
from pocketbert.export.app import app_programs
from pocketbert.export.steps.built import Built
from pocketbert.export.evaluators import placement


class SerialExport:
    def __init__(self, out: Path, plan: list, export: ExportSection, usability_checked: tuple[str, ...]):
        """Starts where the parallel export starts its workers, once the tokenizer files are written: the Swift
        and Kotlin tokenizers the app folders ship, built where their toolchain is, checked on every code point."""
        self.out, self.plan, self.usability_checked = out, plan, usability_checked
        self.app_tokenizers = app_programs.app_tokenizer_checks(out / TOKENIZER_JSON, out / TOKENIZER_TABLES,
                                                                out / TOKENIZER_GOLDEN,
                                                                tuple(export.tokenizer_check_contexts))

    def finish(self, context, given, steps) -> Built:
        """Every program built, placed where Apple hardware would run it, checked for the mobile runtimes, and
        gated against the student; `steps` counts the builds and the gates as one."""
        timings: dict = {"build_s": {}, "gate_s": {}}
        task = context.task
        for variant in self.plan:  # build
            steps.set_postfix_str(variant.name)
            phase = time.perf_counter()
            variant.build(context, self.out / variant.file_name(task))
            timings["build_s"][variant.name] = round(time.perf_counter() - phase, 2)
            steps.update()
        phase = time.perf_counter()  # place: where each Apple program would run, read from the saved programs
        placements = placement.check_all([self.out / v.file_name(task) for v in self.plan])
        timings["placement_s"] = round(time.perf_counter() - phase, 2)
        phase = time.perf_counter()
        ort_usability = {context.path(name).name: mobile_usability.usability(context.path(name), context.max_length)
                         for name in self.usability_checked}
        timings["ort_usability_s"] = round(time.perf_counter() - phase, 2)
        steps.set_postfix_str("parity")
        results = []
        for variant in self.plan:  # gate
            phase = time.perf_counter()
            results.append(variant.runtime.gate(variant, self.out / variant.file_name(task), given))
            timings["gate_s"][variant.name] = round(time.perf_counter() - phase, 2)
        steps.update()
        return Built(results=results, placements=placements, ort_usability=ort_usability,
                     app_tokenizers=self.app_tokenizers, notes=context.notes, timings=timings)
