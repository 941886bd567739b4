"""Every export variant, defined once: its file, runtime, precision, how it is built, how it is run, its gate.

Adding a variant is one entry here, its name in its family's record (core/config/export_families.py, which also
says how a family's programs are chosen: the ONNX family is always built whole) and, where no existing builder
fits, its build function. What a variant needs of the student (attention, a dynamic length under torch.export)
is a field, held against the architecture's capabilities. Entries are built in order, so a variant may read the
file of one listed before it (fp16, int8 and static int8 read the fp32 graph);
each record names the files it reads (`reads`), the context's program it shares with others (`shares`) and whether
it needs the checked tokenizer, which is what a parallel export (job_graph.py) schedules by.
"""

from __future__ import annotations

import functools
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable


from pocketbert.core.students.inference import batched_logits, ort_forward, ort_session, torch_forward
from pocketbert.core.errors import ExportError
from pocketbert.core.config import export_families as families
from pocketbert.core.config.recipe import EvalSection, ExportSection
from pocketbert.export.checks import app_runtimes, int8_budget, parity
from pocketbert.export.programs import ane_program, coreai, coreml, executorch_export, onnx_export, table_rows
from pocketbert.export.text_in import qa_graph, tokenizer_check
from pocketbert.export.text_in import model as text_in_model
from pocketbert.export.text_in.session import extensions_library
from pocketbert.core.run.run_files import (
    EXECUTORCH_COREML,
    EXECUTORCH_FP32,
    EXECUTORCH_INT8,
    ONNX_FP16,
    ONNX_FP32,
    ONNX_INT8,
    ONNX_QA,
    ONNX_QA_INT8,
    ONNX_QDQ,
    ONNX_TEXT,
    ONNX_TEXT_INT8,
    ORT_MODEL,
    ORT_QA_MODEL,
    ORT_QA_REQUIRED_OPERATORS,
    ORT_QDQ_MODEL,
    ORT_QDQ_REQUIRED_OPERATORS,
    ORT_REQUIRED_OPERATORS,
    ORT_TEXT_MODEL,
    ORT_TEXT_REQUIRED_OPERATORS,
    TOKENIZER_GOLDEN,
    TOKENIZER_JSON,
    coreai_asset_name,
    coreml_package_name,
)

ONNX_FAMILY, COREML_FAMILY, EXECUTORCH_FAMILY, COREAI_FAMILY = (f.name for f in (families.ONNX, families.COREML,
                                                                                 families.EXECUTORCH, families.COREAI))


@dataclass
class GateInputs:
    """What every runtime's gate compares against: the eval examples, their features, the student's logits."""

    task: Any
    examples: list
    features: list
    student_logits: list
    n_features: dict    # per parity share ("parity", "coreml"): how many features the gate runs
    pad_id: int
    batch_size: int
    eval: EvalSection   # the span search's n_best and max_answer_length (QA)


def _timed(result: parity.ParityResult, started: float, inputs: int) -> parity.ParityResult:
    result.seconds_per_sequence = (time.perf_counter() - started) / max(1, inputs)
    return result


@dataclass(frozen=True)
class Runtime:
    """How an exported file is run for the parity gate: fed token ids as the student was, its logits compared."""

    name: str
    open: Callable[[Path, Any], Callable]  # (path, task) -> numpy-in, numpy-out forward
    batch_size: int | None                 # None: the eval batch size; 1: one sequence at a time
    parity_share: str                      # which recipe count of eval examples it runs: "parity" or "coreml"
    # The input lengths a file takes, when it takes only some (enumerated shapes), and a forward that pads every
    # input to one of them: each length is checked on its own.
    lengths: Callable[[Path], tuple[int, ...]] = lambda path: ()
    open_at_length: Callable[[Path, Any, int], Callable] | None = None
    takes_text = False     # a text-in model (tokenizer in the graph): the manifest's text_in record
    gives_answers = False  # a QA model in one call: the manifest's qa_in_graph record

    def gate(self, variant: Variant, path: Path, given: GateInputs) -> parity.ParityResult:
        """The file on this runtime against the student (and each of its lengths on its own)."""
        started, task = time.perf_counter(), given.task
        forward = self.open(path, task)
        run_features = given.features[:given.n_features[self.parity_share]]
        logits = batched_logits(task, run_features, given.pad_id, self.batch_size or given.batch_size, forward,
                                path.name)
        result = parity.compare(task, given.examples, given.features, given.student_logits, logits, given.eval,
                                path.name, getattr(forward, "runtime", self.name), variant.precision, variant.gate)
        _timed(result, started, len(run_features))  # the lengths' checks aside
        lengths = self.lengths(path)
        if lengths:
            result.by_length = parity.check_lengths(
                task, run_features, given.student_logits, lengths, lambda n: self.open_at_length(path, task, n),
                given.pad_id, variant.gate, self.batch_size or given.batch_size)
            result.passed = result.passed and all(r["passed"] for r in result.by_length.values())
        return result


@dataclass(frozen=True)
class TextRuntime(Runtime):
    """A text-in model (tokenizer in the graph): open gives examples -> (its own features, logits), fed raw text
    (QA: the questions whose context fits one window, as such a model reads one)."""

    takes_text = True

    def gate(self, variant: Variant, path: Path, given: GateInputs) -> parity.ParityResult:
        started, task = time.perf_counter(), given.task
        examples, features, student_logits = task.within_one_window(given.examples, given.features,
                                                                    given.student_logits)
        run = self.open(path, task)
        own, logits = run(examples)
        result = parity.compare_text_in(task, examples, features, student_logits, own, logits, given.eval,
                                        path.name, run.runtime, variant.precision, variant.gate)
        return _timed(result, started, len(examples))


@dataclass(frozen=True)
class AnswerRuntime(Runtime):
    """A QA model in one call: open gives examples -> one answer (a dict of qa_graph.OUTPUTS) per example."""

    gives_answers = True

    def gate(self, variant: Variant, path: Path, given: GateInputs) -> parity.ParityResult:
        started, task = time.perf_counter(), given.task
        run = self.open(path, task)
        answers = run(given.examples)
        result = parity.compare_answers(task, given.examples, given.features, given.student_logits, answers,
                                        qa_graph.span_mismatches(given.examples, answers), given.eval,
                                        path.name, run.runtime, variant.precision, variant.gate)
        return _timed(result, started, len(given.examples))


def _open_onnxruntime(path: Path, task):
    return ort_forward(ort_session(path), task)


@dataclass(frozen=True)
class AppOrtRuntime(Runtime):
    """An `.ort` an app folder ships: gated on the export's ONNX Runtime, then on each version the app folders'
    code is written for (export/checks/app_runtimes.py), each held to the student by the same gate."""

    def gate(self, variant: Variant, path: Path, given: GateInputs) -> parity.ParityResult:
        result = super().gate(variant, path, given)
        result.app_runtimes = {runtime.version: self._on(runtime, variant, path, given)
                               for runtime in app_runtimes.APP_RUNTIMES}
        result.passed = result.passed and all(r.get("passed", True) for r in result.app_runtimes.values())
        return result

    def _on(self, runtime: app_runtimes.AppRuntime, variant: Variant, path: Path, given: GateInputs) -> dict:
        import onnxruntime

        record = {"platform": runtime.platform, "package": runtime.package}
        if runtime.version == onnxruntime.__version__:
            return {**record, "the_export_runtime": True, "passed": True}
        try:
            session = app_runtimes.WorkerSession(path, runtime.version)
        except app_runtimes.RuntimeUnavailable as exc:  # no registry here: said in the manifest and on the console
            print(f"warning: {path.name} not gated on ONNX Runtime {runtime.version} ({runtime.platform}): {exc}",
                  file=sys.stderr)
            return {**record, "not_run": str(exc)}
        try:
            task = given.task

            def forward(batch):
                return task.stack_outputs(session.run({n: batch[n].astype("int64") for n in session.input_names}))

            run_features = given.features[:given.n_features[self.parity_share]]
            logits = batched_logits(task, run_features, given.pad_id, self.batch_size or given.batch_size, forward,
                                    f"{path.name} on ONNX Runtime {runtime.version}")
        finally:
            session.close()
        gated = parity.compare(task, given.examples, given.features, given.student_logits, logits, given.eval,
                               path.name, f"onnxruntime {runtime.version}", variant.precision, variant.gate)
        return {**record, "max_abs_diff": gated.max_abs_diff, "agreement": gated.agreement,
                "metrics": gated.metrics, "passed": gated.passed}


ONNX_RUNTIME = Runtime("onnxruntime", _open_onnxruntime, None, "parity")
# Dynamic int8 takes one activation scale per call, over every row of it: in a padded batch each input's scale is
# widened by the others', which no app meets (the app folders run one input, one QA window, per call). So its
# programs are gated, and their fp32 nodes chosen, one input per call, as the apps run them.
ONE_INPUT_PER_CALL = 1
DYNAMIC_INT8_RUNTIME = Runtime("onnxruntime", _open_onnxruntime, ONE_INPUT_PER_CALL, "parity")
APP_DYNAMIC_INT8_RUNTIME = AppOrtRuntime("onnxruntime", _open_onnxruntime, ONE_INPUT_PER_CALL, "parity")
APP_ORT_RUNTIME = AppOrtRuntime("onnxruntime", _open_onnxruntime, None, "parity")
# Core ML on macOS; elsewhere the saved program evaluated with numpy, rows of one width together (coreml_forward
# names which in .runtime).
COREML_RUNTIME = Runtime("coreml", coreml.coreml_forward, None, "coreml",
                         lambda path: coreml.enumerated_lengths(coreml.load_mlpackage(path).user_defined_metadata),
                         lambda path, task, length: coreml.coreml_forward(path, task, pad_to=length))
# ExecuTorch's Python runtime, one sequence at a time at its own length, as an app runs it.
EXECUTORCH_RUNTIME = Runtime("executorch", executorch_export.executorch_forward, 1, "parity")
# The text-in models: fed raw text, run by onnxruntime with onnxruntime-extensions' custom ops.
TEXT_RUNTIME = TextRuntime("onnxruntime + extensions", text_in_model.text_in_forward, None, "parity")
# QA in one call: fed a question and a context, gives the answer; run by onnxruntime with the extensions' ops.
QA_RUNTIME = AnswerRuntime("onnxruntime + extensions", qa_graph.answer_forward, None, "parity")
# A Core ML-delegated program: ExecuTorch's Core ML backend runs only on Apple hardware, so the Core ML program it
# carries is taken out of the saved .pte and evaluated op by op (the ExecuTorch wrapper around it needs a device).
EXECUTORCH_COREML_RUNTIME = Runtime("executorch (Core ML delegate)", executorch_export.coreml_delegate_forward,
                                    None, "coreml")
# Core AI off Apple platforms: the saved program evaluated op by op with numpy, rows of one length together; each
# entry point (enumerated length) also checked on its own.
COREAI_RUNTIME = Runtime("coreai", coreai.coreai_forward, None, "coreml", coreai.program_lengths,
                         lambda path, task, length: coreai.coreai_forward(path, task, pad_to=length))
# Enumerated Core ML lengths: those covering these shares of the training inputs' token lengths, rounded up to a
# multiple of LENGTH_MULTIPLE, and max_length. Chosen on training text, never the eval set the gate scores.
LENGTH_COVERAGES = (0.5, 0.9, 0.99)
LENGTH_MULTIPLE = 8


@dataclass
class BuildContext:
    """What the builders share: the student, where to write, and what is worth computing once."""

    model: Any
    task: Any
    architecture: Any
    tokenizer: Any
    data: Any                # the dataset (its train split calibrates int8, never the eval split)
    out: Path
    max_length: int
    doc_stride: int | None
    batch_size: int
    seed: int
    export: ExportSection
    description: str
    eval: EvalSection = field(default_factory=EvalSection)  # the span search's n_best and max_answer_length (QA)
    notes: dict = field(default_factory=dict)    # what builders report for the manifest
    row_shares: Any = None   # how common each row of the table is in the recipe's text (counting.PieceCounts.shares)
    _programs: dict = field(default_factory=dict)

    def path(self, variant_name: str) -> Path:
        return self.out / VARIANTS[variant_name].file_name(self.task)

    @functools.cached_property
    def calibration(self) -> tuple[list, list]:
        """Training examples (never the eval set the parity gate uses) as features, with the student's logits."""
        from pocketbert.core.tasks.data import subsample

        n = self.export.calibration_examples
        features = self.task.features(self.tokenizer, subsample(self.data.train, n, self.seed), self.max_length,
                                      self.doc_stride)
        logits = batched_logits(self.task, features, self.tokenizer.pad_token_id, self.batch_size,
                                torch_forward(self.model, self.task))
        return features, logits

    @functools.cached_property
    def length_buckets(self) -> tuple[int, ...]:
        """Enumerated sequence lengths from the token lengths of the training examples (LENGTH_COVERAGES)."""
        features, _ = self.calibration
        lengths = coreml.length_buckets([len(f.input_ids) for f in features], self.max_length, LENGTH_COVERAGES,
                                        LENGTH_MULTIPLE)
        self.notes["coreml_enumerated_lengths"] = {"lengths": list(lengths), "coverages": list(LENGTH_COVERAGES),
                                                   "chosen_on": f"{len(features)} training examples"}
        return lengths

    @functools.cached_property
    def coreai_program(self):
        """The fp16 Core AI program at a dynamic length, converted once: each Core AI variant specializes a copy."""
        return coreai.convert_dynamic(self.model, self.task, self.length_buckets, self.architecture)

    @functools.cached_property
    def ane_programs(self) -> dict:
        """The student in the Neural Engine's layout as one fp16 program per length bucket, converted once and
        shared by the ane variants' compressions."""
        return ane_program.convert_lengths(self.model, self.task, self.architecture, self.length_buckets)

    @functools.cached_property
    def coreai_ane_program(self):
        """The student in the Neural Engine's layout as an fp16 Core AI program at a dynamic length, converted once:
        each coreai-ane variant specializes a copy."""
        return ane_program.convert_coreai(self.model, self.task, self.architecture, self.length_buckets)

    def coreml_program(self, target: str, fixed: bool, classifier: bool, enumerated: bool = False):
        """The fp16 program for one deployment target and input and output form, converted once and shared by
        compressions."""
        key = (target, fixed, classifier, enumerated)
        if key not in self._programs:
            self._programs[key] = coreml.convert_to_coreml(
                self.model, self.task, self.max_length, self.task.label_names, self.description, target, fixed,
                classifier, self.architecture, self.length_buckets if enumerated else None)
        return self._programs[key]


@dataclass(frozen=True)
class Variant:
    name: str
    family: str
    file_name: Callable[[Any], str]          # task -> file name in the export folder (run_files.py)
    runtime: Runtime
    precision: str                           # as parity.json records it
    build: Callable[[BuildContext, Path], None]
    gate: parity.Gate
    minimum_ios: str | None = None
    extra_files: tuple[str, ...] = ()        # written beside the model by its build
    needs: Callable[[Any], bool] = lambda task: True  # whether the task can take this variant
    needs_attention: bool = False  # a transformer's program (the ANE layout): not for the BiLSTM or static students
    # made by torch.export with the sequence length kept dynamic: not for an architecture that cannot be traced so
    needs_dynamic_length: bool = False
    multifunction: bool = False    # one fixed-length function per length, main_len<n> (export/programs/multifunction.py)
    reads: tuple[str, ...] = ()    # the variants whose files its build reads: built before it
    shares: str | None = None      # the context's program it is made from, converted once and shared by the
    # variants naming it: a parallel export builds them in one process, one after another
    checked_tokenizer: bool = False  # built from tokenizer.json once its exhaustive check passed (_checked_tokenizer)

    def applies_to(self, task, architecture) -> bool:
        return (self.needs(task) and (architecture.attends or not self.needs_attention)
                and (architecture.traces_dynamic_length or not self.needs_dynamic_length))


# ---------------------------------------------------------------- builders

def _build_onnx(ctx: BuildContext, path: Path) -> None:
    onnx_export.export_onnx(ctx.model, ctx.task, path, architecture=ctx.architecture)


def _build_fp16(ctx: BuildContext, path: Path) -> None:
    onnx_export.convert_fp16(ctx.path("onnx"), path)


def _build_int8(ctx: BuildContext, path: Path) -> None:
    """Dynamic int8, keeping in fp32 the FFN projections chosen on the calibration set within the size budget and
    the latency budget counted on the graph (nothing timed: the same student gives the same file anywhere)."""
    fp32 = ctx.path("onnx")
    features, reference = ctx.calibration
    candidates = onnx_export.fp32_nodes(fp32)
    scale = ctx.export.int8_activation_scale
    choice: dict = {"fp32_nodes": [], "candidates": [], "trials": []}
    with tempfile.TemporaryDirectory(prefix="pocketbert-int8-") as tmp:
        if candidates:
            def measure(trial: Path) -> dict:
                logits = batched_logits(ctx.task, features, ctx.tokenizer.pad_token_id, ONE_INPUT_PER_CALL,
                                        _open_onnxruntime(trial, ctx.task))
                return int8_budget.closeness(logits, reference)

            def quantize(source: Path, target: Path, kept: list[str]) -> Path:
                return onnx_export.quantize_int8(source, target, kept, activation_scale=scale)

            choice = int8_budget.choose_fp32_nodes(
                fp32, candidates, Path(tmp), measure, quantize,
                ctx.export.int8_size_budget, ctx.export.int8_latency_budget)
            choice = {**choice, "calibration_examples": len(features)}
        share = ctx.export.embedding_int4_share
        rows4 = table_rows.int4_rows(ctx.row_shares, share) if share else None
        onnx_export.quantize_int8(fp32, path, choice["fp32_nodes"], rows4, activation_scale=scale)
    ctx.notes["int8_mixed_precision"] = {**choice, "activation_scale": scale}
    table = ctx.model.get_input_embeddings()
    four = 0 if rows4 is None else len(rows4)
    ctx.notes["word_table"] = {"rows": table.num_embeddings, "int8_rows": table.num_embeddings - four,
                               "int4_rows": four,
                               "int4_group": table_rows.int4_group(table.embedding_dim) if four else None}


def _build_qdq(ctx: BuildContext, path: Path) -> None:
    """Static int8 QDQ; its calibration rows are padded to one length (the calibrator stacks them)."""
    features, _ = ctx.calibration
    limit = ctx.export.static_calibration_examples
    batch = ctx.task.collate(features[:limit], ctx.tokenizer.pad_token_id)
    rows = [{name: batch[name][i:i + 1] for name in ctx.task.input_names} for i in range(batch["input_ids"].shape[0])]
    onnx_export.quantize_static_qdq(ctx.path("onnx"), path, rows)


def _ort_builder(source: str, operators: str):
    def build(ctx: BuildContext, path: Path) -> None:
        onnx_export.convert_to_ort(ctx.path(source), path, ctx.out / operators)
    return build


def _checked_tokenizer(ctx: BuildContext) -> Path:
    """tokenizer.json, once checked: the tokenizer graph on every code point and on the golden file, so a model with
    the tokenizer inside never ships with one that means something else."""
    tokenizer_json = ctx.out / TOKENIZER_JSON
    if "text_in_exhaustive" not in ctx.notes:
        offsets = "offset_mapping" in ctx.task.text_in_extra_outputs
        result = tokenizer_check.check(tokenizer_json, ctx.task.text_in_inputs, offsets,
                                       contexts=tuple(ctx.export.tokenizer_check_contexts))
        tokenizer_check.require_equal(result)
        ctx.notes["text_in_exhaustive"] = result
    if "text_in_golden" not in ctx.notes:
        check_golden(ctx)
    return tokenizer_json


def check_golden(ctx: BuildContext) -> None:
    """The tokenizer graph on the golden file's texts (or pairs): their ids, or an ExportError."""
    golden = json.loads((ctx.out / TOKENIZER_GOLDEN).read_text(encoding="utf-8"))
    wrong = text_in_model.golden_mismatches(ctx.out / TOKENIZER_JSON, golden, ctx.task, ctx.max_length)
    if wrong:
        raise ExportError(f"the text-in models' tokenizer gives other ids than tokenizer.json for: "
                          f"{', '.join(wrong)}; export the token-id models only (leave out text-in)")
    ctx.notes["text_in_golden"] = len(golden["texts"] if len(ctx.task.text_in_inputs) == 1 else golden["pairs"])


def _text_in_builder(source: str):
    """The tokenizer graph in front of the graph of variant `source`."""
    def build(ctx: BuildContext, path: Path) -> None:
        text_in_model.build_text_in(_checked_tokenizer(ctx), ctx.path(source), path, ctx.task, ctx.max_length)
    return build


def qa_settings(ctx: BuildContext) -> qa_graph.QASettings:
    return qa_graph.QASettings(
        ctx.max_length, qa_graph.effective_stride(ctx.max_length, ctx.doc_stride),
        ctx.eval.max_answer_length, ctx.eval.n_best, ctx.export.qa_max_context_tokens)


def _qa_builder(source: str):
    """Tokenizer, windows, the graph of variant `source`, span search and answer text: QA in one call."""
    def build(ctx: BuildContext, path: Path) -> None:
        settings = qa_settings(ctx)
        qa_graph.build_qa_model(_checked_tokenizer(ctx), ctx.path(source), path, settings)
        ctx.notes["qa_in_graph"] = settings.to_dict()
    return build


def _build_qa_ort(ctx: BuildContext, path: Path) -> None:
    onnx_export.convert_to_ort(ctx.path("onnx-qa-int8"), path, ctx.out / ORT_QA_REQUIRED_OPERATORS,
                               extensions_library())


def _build_text_ort(ctx: BuildContext, path: Path) -> None:
    onnx_export.convert_to_ort(ctx.path("onnx-text-int8"), path, ctx.out / ORT_TEXT_REQUIRED_OPERATORS,
                               extensions_library())


def _pte_builder(int8: bool, coreml: bool = False):
    def build(ctx: BuildContext, path: Path) -> None:
        executorch_export.export_pte(ctx.model, ctx.task, ctx.architecture, path, ctx.max_length, int8, coreml)
    return build


# Enumerated shapes are built only when export.coreml_variants names them, and then with this warning.
ENUMERATED_WARNING = ("the enumerated Core ML program may fail at prediction on the device with an E5RT \"unknown "
                      "strides\" error (apple/coremltools#2730, open): ship the ane program (one function per length) "
                      "instead")


def _coreml_builder(compression: str | None, target: str, fixed: bool, classifier: bool, enumerated: bool):
    def build(ctx: BuildContext, path: Path) -> None:
        if enumerated:
            import warnings

            warnings.warn(ENUMERATED_WARNING, stacklevel=2)
            ctx.notes.setdefault("coreml_warnings", []).append(ENUMERATED_WARNING)
        coreml.compress(ctx.coreml_program(target, fixed, classifier, enumerated), compression).save(str(path))
    return build


def _ane_builder(compression: str | None):
    def build(ctx: BuildContext, path: Path) -> None:
        ane_program.save_ane_package(ctx.ane_programs, ctx.task, path, ctx.description, ctx.max_length, compression)
    return build


def _coreai_builder(compression: str | None, source: Callable[[BuildContext], Any]):
    """source: the context's dynamic program this variant specializes (the plain student's or the ANE layout's)."""
    def build(ctx: BuildContext, path: Path) -> None:
        program = coreai.specialize(source(ctx), ctx.task, ctx.length_buckets, compression)
        coreai.save(program, path, ctx.description)
        ctx.notes.setdefault("coreai_lengths", list(ctx.length_buckets))
    return build


def _onnx_variant(name, file_name, precision, build, gate, extra_files=(), runtime=ONNX_RUNTIME,
                  reads=()) -> Variant:
    return Variant(name, ONNX_FAMILY, lambda task: file_name, runtime, precision, build, gate,
                   extra_files=extra_files, reads=reads)


def _coreml_variant(name, precision, gate, compression=None, target=coreml.MINIMUM_IOS, fixed=False,
                    classifier=False, enumerated=False) -> Variant:
    """A Core ML variant named as export.coreml_variants names it; its package is <Class>.<name>.mlpackage."""
    return Variant(name, COREML_FAMILY, lambda task: coreml_package_name(task.coreml_class_stem, name), COREML_RUNTIME, precision,
                   _coreml_builder(compression, target, fixed, classifier, enumerated), gate, minimum_ios=target,
                   needs=(lambda task: task.has_classifier_outputs) if classifier else (lambda task: True),
                   shares=f"coreml {target} fixed={fixed} classifier={classifier} enumerated={enumerated}")


def _ane_variant(name, precision, gate, compression=None) -> Variant:
    """The student in the Neural Engine's layout (export/programs/ane_layout.py), one fixed-length function per length
    bucket in one package, <Class>.<name>.mlpackage."""
    return Variant(name, COREML_FAMILY, lambda task: coreml_package_name(task.coreml_class_stem, name), COREML_RUNTIME, precision,
                   _ane_builder(compression), gate, minimum_ios=ane_program.MINIMUM_IOS, needs_attention=True,
                   multifunction=True, shares="ane_programs")


def _coreai_variant(name, precision, gate, compression=None, ane=False) -> Variant:
    """A Core AI variant as export.coreai_variants names it (without the coreai- prefix); its asset is
    <Class>.aimodel for fp16, <Class>.<name>.aimodel for the others. ane: the student in the Neural Engine's layout
    (export/programs/ane_layout.py) rather than as it is, so a transformer's program only."""
    source = (lambda ctx: ctx.coreai_ane_program) if ane else (lambda ctx: ctx.coreai_program)
    return Variant(families.COREAI.variant(name), COREAI_FAMILY,
                   lambda task: coreai_asset_name(task.coreml_class_stem, name), COREAI_RUNTIME, precision,
                   _coreai_builder(compression, source), gate, minimum_ios=coreai.MINIMUM_OS,
                   needs_attention=ane, needs_dynamic_length=True,
                   shares="coreai_ane_program" if ane else "coreai_program")


_DEFINITIONS = [
    _onnx_variant("onnx", ONNX_FP32, "fp32", _build_onnx, parity.FP32_GATE),
    _onnx_variant("onnx-fp16", ONNX_FP16, "fp16", _build_fp16, parity.FP16_GATE, reads=("onnx",)),
    _onnx_variant("onnx-int8", ONNX_INT8, "int8", _build_int8, parity.COMPRESSED_GATE, runtime=DYNAMIC_INT8_RUNTIME,
                  reads=("onnx",)),
    _onnx_variant("onnx-qdq", ONNX_QDQ, "int8-static", _build_qdq, parity.COMPRESSED_GATE, reads=("onnx",)),
    # The .ort is the int8 graph, for ONNX Runtime Mobile; its operator list makes a reduced runtime build.
    _onnx_variant("ort", ORT_MODEL, "int8", _ort_builder("onnx-int8", ORT_REQUIRED_OPERATORS), parity.COMPRESSED_GATE,
                  (ORT_REQUIRED_OPERATORS,), APP_DYNAMIC_INT8_RUNTIME, reads=("onnx-int8",)),
    # The static QDQ graph as .ort: the int8 form accelerators' int8 kernels start from (export/checks/mobile_usability.py
    # says how much of it NNAPI and XNNPACK would take).
    _onnx_variant("ort-qdq", ORT_QDQ_MODEL, "int8-static", _ort_builder("onnx-qdq", ORT_QDQ_REQUIRED_OPERATORS),
                  parity.COMPRESSED_GATE, (ORT_QDQ_REQUIRED_OPERATORS,), APP_ORT_RUNTIME, reads=("onnx-qdq",)),
    # Text in, logits out: the tokenizer inside the graph (tokenizer.json's ids), for apps that ship no tokenizer.
    Variant("onnx-text", ONNX_FAMILY, lambda task: ONNX_TEXT, TEXT_RUNTIME, "fp32", _text_in_builder("onnx"),
            parity.TEXT_IN_GATE, reads=("onnx",), checked_tokenizer=True),
    Variant("onnx-text-int8", ONNX_FAMILY, lambda task: ONNX_TEXT_INT8, TEXT_RUNTIME, "int8",
            _text_in_builder("onnx-int8"), parity.COMPRESSED_GATE, reads=("onnx-int8",), checked_tokenizer=True),
    Variant("ort-text", ONNX_FAMILY, lambda task: ORT_TEXT_MODEL, TEXT_RUNTIME, "int8", _build_text_ort,
            parity.COMPRESSED_GATE, extra_files=(ORT_TEXT_REQUIRED_OPERATORS,), reads=("onnx-text-int8",)),
    # QA in one call: question and context in; windows, span search and the answer's text and spans inside.
    Variant("onnx-qa", ONNX_FAMILY, lambda task: ONNX_QA, QA_RUNTIME, "fp32", _qa_builder("onnx"),
            parity.QA_IN_GRAPH_GATE, needs=lambda task: task.answers_in_graph, reads=("onnx",),
            checked_tokenizer=True),
    Variant("onnx-qa-int8", ONNX_FAMILY, lambda task: ONNX_QA_INT8, QA_RUNTIME, "int8", _qa_builder("onnx-int8"),
            parity.COMPRESSED_GATE, needs=lambda task: task.answers_in_graph, reads=("onnx-int8",),
            checked_tokenizer=True),
    Variant("ort-qa", ONNX_FAMILY, lambda task: ORT_QA_MODEL, QA_RUNTIME, "int8", _build_qa_ort,
            parity.COMPRESSED_GATE, extra_files=(ORT_QA_REQUIRED_OPERATORS,), needs=lambda task: task.answers_in_graph,
            reads=("onnx-qa-int8",)),
    # ExecuTorch programs delegated to XNNPACK, sequence 2..max_length.
    Variant("pte", EXECUTORCH_FAMILY, lambda task: EXECUTORCH_FP32, EXECUTORCH_RUNTIME, "fp32", _pte_builder(False),
            parity.FP32_GATE, needs_dynamic_length=True),
    Variant("pte-int8", EXECUTORCH_FAMILY, lambda task: EXECUTORCH_INT8, EXECUTORCH_RUNTIME, "int8",
            _pte_builder(True), parity.COMPRESSED_GATE, needs_dynamic_length=True),
    # The whole graph as one fp16 Core ML program inside an ExecuTorch program, sequence 2..max_length.
    Variant("pte-coreml", EXECUTORCH_FAMILY, lambda task: EXECUTORCH_COREML, EXECUTORCH_COREML_RUNTIME, "fp16",
            _pte_builder(False, coreml=True), parity.FP16_GATE, minimum_ios=executorch_export.COREML_DELEGATE_IOS,
            needs_dynamic_length=True),
    # The fp16 program: sequence length 1..max_length.
    _coreml_variant("fp16", "fp16", parity.FP16_GATE),
    _coreml_variant("int8", "int8-weights", parity.COMPRESSED_GATE, "int8"),
    _coreml_variant("6bit", "6bit", parity.COMPRESSED_GATE, "6bit"),
    _coreml_variant("4bit", "4bit", parity.COMPRESSED_GATE, "4bit"),
    # Per-block int4 weights exist from iOS 18 / macOS 15.
    _coreml_variant("int4-block", "int4-block", parity.COMPRESSED_GATE, "int4-block", target=coreml.BLOCKWISE_IOS),
    # Exactly (1, max_length): a shape the Neural Engine runs; the app pads every input to max_length.
    _coreml_variant("fixed", "fp16", parity.FP16_GATE, fixed=True),
    # A few enumerated lengths (length_buckets), each a shape the Neural Engine runs; the app pads to the
    # smallest that fits, so short inputs pay for little padding. Two enumerated inputs need iOS 18.
    _coreml_variant("enumerated", "fp16", parity.FP16_GATE, target=coreml.ENUMERATED_IOS, enumerated=True),
    # The Neural Engine's layout (channels-first, 1x1 convolutions, attention per head), one fixed-length function
    # per length bucket: the iOS folder's default where the export made it; its weights compressed as above.
    _ane_variant("ane", "fp16", parity.FP16_GATE),
    _ane_variant("ane-int8", "int8-weights", parity.COMPRESSED_GATE, "int8"),
    _ane_variant("ane-6bit", "6bit", parity.COMPRESSED_GATE, "6bit"),
    _ane_variant("ane-4bit", "4bit", parity.COMPRESSED_GATE, "4bit"),
    # Core ML classifier outputs: the label and a probability per label (sentence classification).
    _coreml_variant("classifier", "probabilities", parity.PROBABILITY_GATE, classifier=True),
    # Core AI (iOS 27): fp16, one entry point per enumerated length, the weights stored once.
    _coreai_variant("fp16", "fp16", parity.FP16_GATE),
    # Its weights compressed by coreai-opt (export/programs/coreai.py COMPRESSIONS), gated like the compressed Core ML ones.
    _coreai_variant("int8", "int8-weights", parity.COMPRESSED_GATE, "int8"),
    _coreai_variant("6bit", "6bit", parity.COMPRESSED_GATE, "6bit"),
    _coreai_variant("4bit", "4bit", parity.COMPRESSED_GATE, "4bit"),
    # The Neural Engine's layout as a Core AI program: the same entry points per length, on request only; its
    # weights palettized as the 6-bit program's.
    _coreai_variant("ane", "fp16", parity.FP16_GATE, ane=True),
    _coreai_variant("ane-6bit", "6bit", parity.COMPRESSED_GATE, "6bit", ane=True),
]
VARIANTS: dict[str, Variant] = {v.name: v for v in _DEFINITIONS}
# A family's record (core/config/export_families.py) names its programs, and there is one entry above for each
# name: tests/export/test_variant_applicability.py holds the two to each other.


def variant_of(family: families.ExportFamily, name: str) -> Variant:
    return VARIANTS[family.variant(name)]


def applies(family: families.ExportFamily, task, architecture) -> Callable[[str], bool]:
    """Whether a program of the family, by its name there, suits this student (the choice rule's question)."""
    return lambda name: variant_of(family, name).applies_to(task, architecture)


def selected(coreml_names: list[str], task, architecture, coreai_names: list[str] = (),
             executorch_names: list[str] = families.EXECUTORCH.names) -> list[Variant]:
    """The ONNX family and the chosen Core ML, Core AI and ExecuTorch variants that apply to this task and
    architecture, in build order."""
    chosen = ({families.COREML.variant(n) for n in coreml_names} | {families.COREAI.variant(n) for n in coreai_names}
              | {families.EXECUTORCH.variant(n) for n in executorch_names})
    return [v for v in _DEFINITIONS if (v.family == ONNX_FAMILY or v.name in chosen)
            and v.applies_to(task, architecture)]
