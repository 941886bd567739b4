"""Core ML ML Program export (fp16 or compressed weights, flexible or fixed length, iOS 16+) and its check off macOS.

MLModel.predict exists only on macOS. Elsewhere the saved .mlpackage is checked by rebuilding its MIL program from
the spec and evaluating it with numpy, compiled once per input shape into batched kernels (evaluators/mil_eval.py).
"""

from __future__ import annotations

import platform
from pathlib import Path

import numpy as np
import torch

from pocketbert import __version__
from pocketbert.core.errors import ExportError, require
from pocketbert.export.programs import multifunction
from pocketbert.export.evaluators.mil_eval import MILEvaluator
from pocketbert.export.evaluators.mil_reference import ValueInferenceInterpreter
from pocketbert.export.evaluators.forward import grouped_forward, kept_while_unchanged, one_row_at_a_time
from pocketbert.core.process.quiet import quiet_tools
from pocketbert.core.students.architectures import BERT_FAMILY
from pocketbert.core.students.export_wrapper import ClassifierWrapper
from pocketbert.core.students.inference import import_coremltools

MINIMUM_IOS = "iOS16"  # ct.RangeDim on several inputs needs iOS 16
BLOCKWISE_IOS = "iOS18"  # per-block int4 weights exist from iOS 18 / macOS 15
ENUMERATED_IOS = "iOS18"  # ct.EnumeratedShapes on more than one input needs iOS 18
BLOCK_SIZE = 32          # input channels sharing one int4 scale
CLASSIFIER_LABEL, CLASSIFIER_PROBABILITIES = "label", "label_probs"  # the classifier's outputs, as Core ML names them
FIXED_LENGTH_KEY = "fixed_length"  # metadata of a fixed-shape program
LENGTHS_KEY = "enumerated_lengths"  # metadata of an enumerated-shape program: "16,32,64,128"
MIL_EVALUATOR = "MIL interpreter (numpy)"  # the runtime parity.json names off macOS
MIL_VALUE_INFERENCE = "MIL value inference (coremltools)"  # the reference evaluator


# Weight compressions of an fp16 program: name -> (compressor, its op config), given coremltools.optimize.coreml.
# Activations stay fp16. int4 in blocks needs a program that targets iOS 18.
COMPRESSIONS = {
    "int8": lambda cto: (cto.linear_quantize_weights,
                         cto.OpLinearQuantizerConfig(mode="linear_symmetric", dtype="int8")),
    "6bit": lambda cto: (cto.palettize_weights, cto.OpPalettizerConfig(nbits=6, mode="kmeans")),
    "4bit": lambda cto: (cto.palettize_weights, cto.OpPalettizerConfig(nbits=4, mode="kmeans")),
    "int4-block": lambda cto: (cto.linear_quantize_weights, cto.OpLinearQuantizerConfig(
        mode="linear_symmetric", dtype="int4", granularity="per_block", block_size=BLOCK_SIZE)),
}


def compress(mlmodel, compression: str | None):
    """The fp16 program with its weights compressed (COMPRESSIONS), or as it is for None."""
    if compression is None:
        return mlmodel
    if compression not in COMPRESSIONS:
        raise ExportError(f"unknown Core ML compression '{compression}': choose from {', '.join(COMPRESSIONS)}")
    import_coremltools()
    cto = require("coremltools.optimize.coreml", "export")
    compressor, op_config = COMPRESSIONS[compression](cto)
    with _quiet():
        return compressor(mlmodel, cto.OptimizationConfig(global_config=op_config))


def _quiet():
    """coremltools prints version warnings and progress bars on import and conversion."""
    return quiet_tools()


def convert_to_coreml(model, task, max_length: int, label_names: list[str], description: str,
                      target: str = MINIMUM_IOS, fixed: bool = False, classifier: bool = False,
                      architecture=BERT_FAMILY, lengths: tuple[int, ...] | None = None):
    """An in-memory ML Program; the caller saves it and validates the saved copy.

    Sequence length 1..max_length, or with `fixed` exactly max_length (padded by the app, masked here), or with
    `lengths` one of those enumerated lengths (the app pads to the smallest that fits): the Neural Engine runs
    fixed and enumerated shapes, not a flexible range at other than its default (coremltools #2370).
    With `classifier` (sentiment), the outputs are Core ML's classifier pair: the label and its probabilities.
    """
    ct = import_coremltools()
    if classifier and not task.has_classifier_outputs:
        raise ExportError(f"Core ML classifier outputs are for sentence classification; a {task.name} model exports "
                          "its logits: leave out the classifier variant")
    wrapper = architecture.export_wrapper(model, task, additive_mask=True,
                                          fixed_length=max_length if fixed else None).eval()
    if classifier:
        wrapper = ClassifierWrapper(wrapper).eval()
    names = list(task.input_names)
    example = tuple(torch.ones(1, max_length if fixed else min(16, max_length), dtype=torch.int32) for _ in names)
    with _quiet(), torch.no_grad():
        traced = torch.jit.trace(wrapper, example)
        if lengths:
            def shape():
                return ct.EnumeratedShapes(shapes=[(1, n) for n in lengths], default=(1, max(lengths)))
        else:
            length = max_length if fixed else ct.RangeDim(lower_bound=1, upper_bound=max_length, default=max_length)

            def shape():
                return ct.Shape((1, length))
        mlmodel = ct.convert(
            traced,
            inputs=[ct.TensorType(name=n, shape=shape(), dtype=np.int32) for n in names],
            outputs=[ct.TensorType(name="probabilities")] if classifier else
            [ct.TensorType(name=n) for n in task.output_names],
            classifier_config=ct.ClassifierConfig(label_names, predicted_feature_name=CLASSIFIER_LABEL,
                                                  predicted_probabilities_output="probabilities")
            if classifier else None,
            convert_to="mlprogram",
            minimum_deployment_target=getattr(ct.target, target),
            compute_precision=ct.precision.FLOAT16,
        )
    mlmodel.author = "pocketbert"
    mlmodel.license = "See the teacher model's licence"
    mlmodel.short_description = description
    mlmodel.version = __version__
    input_help = {
        "input_ids": "WordPiece token ids from tokenizer.json, [CLS] ... [SEP], " + (
            f"padded with 0 to shape (1, {max_length})" if fixed else
            f"padded with 0 to shape (1, n), n the smallest of {', '.join(map(str, lengths))} that fits" if lengths
            else f"shape (1, length), length <= {max_length}"),
        "attention_mask": "1 for real tokens, 0 for padding, same shape as input_ids",
        "token_type_ids": "0 for question tokens, 1 for context tokens",
    }
    output_help = {
        "logits": "unnormalised class scores, in the order of labels.json",
        "start_logits": "score of each token being the answer start",
        "end_logits": "score of each token being the answer end",
        CLASSIFIER_LABEL: "the most probable label",
        CLASSIFIER_PROBABILITIES: "probability of each label",
    }
    for name in names:
        mlmodel.input_description[name] = input_help[name]
    for name in (CLASSIFIER_LABEL, CLASSIFIER_PROBABILITIES) if classifier else task.output_names:
        mlmodel.output_description[name] = output_help[name]
    mlmodel.user_defined_metadata["labels"] = ",".join(label_names)
    mlmodel.user_defined_metadata["task"] = task.name
    mlmodel.user_defined_metadata["max_length"] = str(max_length)
    if fixed:
        mlmodel.user_defined_metadata[FIXED_LENGTH_KEY] = str(max_length)
    if lengths:
        mlmodel.user_defined_metadata[LENGTHS_KEY] = ",".join(map(str, lengths))
    return mlmodel


def length_buckets(token_lengths: list[int], max_length: int, coverages: tuple[float, ...],
                   multiple: int) -> tuple[int, ...]:
    """Enumerated sequence lengths: the lengths that cover each share of the inputs, rounded up to a multiple of
    `multiple` (a whole number of vector registers), and max_length so that every input fits one."""
    if not token_lengths:
        return (int(max_length),)
    ordered = np.sort(np.minimum(np.asarray(token_lengths), max_length))
    chosen = {int(max_length)}
    for share in coverages:
        at = ordered[min(len(ordered) - 1, int(np.ceil(share * len(ordered))) - 1)]
        chosen.add(int(min(max_length, -(-int(at) // multiple) * multiple)))
    return tuple(sorted(chosen))


def smallest_fitting(lengths: tuple[int, ...], n: int) -> int:
    """The enumerated length an input of n tokens is padded to."""
    fitting = [length for length in lengths if length >= n]
    if not fitting:
        raise ExportError(f"an input of {n} tokens is longer than the longest enumerated length {max(lengths)}: "
                          "truncate it to max_length")
    return min(fitting)


def enumerated_lengths(metadata: dict) -> tuple[int, ...]:
    """The lengths a program takes, as its metadata lists them: an enumerated-shape program's, or a multifunction
    package's, one function per length (none for flexible and fixed programs)."""
    value = metadata.get(LENGTHS_KEY)
    return tuple(int(v) for v in value.split(",")) if value else multifunction.function_lengths(metadata)


def load_mlpackage(path: Path):
    ct = import_coremltools()
    with _quiet():
        return ct.models.MLModel(str(path), skip_model_load=platform.system() != "Darwin")


def _evaluator(path: Path):
    """The MIL evaluator of the program's main function, or, for a multifunction package, of the function each
    input width names."""
    metadata = dict(load_mlpackage(path).user_defined_metadata)
    if multifunction.function_lengths(metadata):
        return multifunction.MultiFunctionProgram(path, metadata)
    return MILEvaluator(path)


# The compiled evaluator of a saved program, kept (with its plans) while the same files are asked for again: the gate
# opens an enumerated program once, then once for each of its lengths.
mil_evaluator = kept_while_unchanged(_evaluator)


def coreml_forward(mlpackage: Path, task, pad_to: int | None = None, reference: bool = False):
    """A numpy-in, numpy-out forward over Core ML (macOS, one row at a time) or the compiled MIL evaluator
    (elsewhere, rows of one input width together); with `reference`, over coremltools' value inference, one row at
    a time (the slow evaluator the compiled one is tested against). pad_to: see program_forward."""
    if reference:
        interpreter = ValueInferenceInterpreter(mlpackage)
        metadata = interpreter.metadata
        predict, runtime = one_row_at_a_time(interpreter.predict), MIL_VALUE_INFERENCE
    elif platform.system() == "Darwin":
        model = load_mlpackage(mlpackage)
        metadata = model.user_defined_metadata
        predict, runtime = one_row_at_a_time(model.predict), "Core ML"
        if multifunction.function_lengths(metadata):  # the function of each input's padded length
            predict = multifunction.MultiFunctionProgram(mlpackage, dict(metadata)).predict
    else:
        evaluator = mil_evaluator(mlpackage)
        predict, metadata, runtime = evaluator.predict, evaluator.metadata, MIL_EVALUATOR
    if pad_to is not None and pad_to not in enumerated_lengths(metadata):
        raise ExportError(f"{Path(mlpackage).name} takes lengths {enumerated_lengths(metadata) or 'as they come'}, "
                          f"not {pad_to}")
    forward = program_forward(predict, metadata, task, pad_to=pad_to)
    forward.runtime = runtime
    return forward


def program_forward(predict, metadata: dict, task, output_names: list[str] | None = None,
                    pad_to: int | None = None, min_length: int = 1):
    """A numpy-in, numpy-out forward over a program's predict, which takes rows of one width (inputs by name, each
    [rows, 1, width]) and gives its outputs rows first; output_names: the outputs that make the logits, in the
    task's order (default: the task's output names).

    A flexible program runs each sequence at its own length (at least min_length); a fixed or enumerated one takes
    it padded and masked, an enumerated one to the smallest of its lengths that fits, as an app pads it, or to
    `pad_to` (one of its lengths) to check that length on shorter inputs."""
    fixed = metadata.get(FIXED_LENGTH_KEY)
    lengths = enumerated_lengths(metadata)
    names = list(output_names or task.output_names)

    def width(n: int) -> int:
        return int(fixed) if fixed else (pad_to or smallest_fitting(lengths, n)) if lengths else n

    def logits(found: dict) -> np.ndarray:
        if CLASSIFIER_PROBABILITIES in found:  # log-probabilities: the same answers as logits
            return np.log(np.maximum([[row[label] for label in task.label_names]
                                      for row in found[CLASSIFIER_PROBABILITIES]], 1e-12))
        return task.stack_outputs([found[name][:, 0] for name in names])  # without the program's own batch axis

    return grouped_forward(lambda inputs, _width: predict(inputs), width, logits, task, min_length)
