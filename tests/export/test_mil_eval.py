"""The compiled MIL evaluator against coremltools' value inference (the evaluator it replaced) on a tiny model's
Core ML programs, and the comparison failing when one kernel's semantics are changed."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForQuestionAnswering, BertForSequenceClassification

from pocketbert.core.tasks.registry import QATask, SentimentTask
from pocketbert.core.errors import ExportError
from pocketbert.export.programs import coreml
from pocketbert.export.evaluators import mil_kernels
from pocketbert.export.evaluators.mil_eval import MILEvaluator
from pocketbert.export.evaluators.mil_kernels import NotCovered

pytestmark = pytest.mark.slow  # every test converts a program with coremltools

MAX_LENGTH = 64
LENGTHS = (16, 32, 64)
WEIGHT_SCALE = 4.0  # of a tiny model's random weights, so that every op moves the logits well past fp16 rounding
# Both evaluators follow the op definitions; they round to fp16 at different points (the compiled one at every op
# boundary, value inference inside numpy's fp16 arithmetic), so they differ by a few fp16 steps of the logits.
FP16_STEP = 2.0 ** -10
REFERENCE_STEPS = 4    # the most the two may differ, in fp16 steps of the largest logit (measured: at most 1.4)
TOGETHER_STEPS = 1     # a row in a batch against the row alone: only BLAS's blocking may move a rounding
BROKEN_STEPS = 12      # an evaluator with one kernel wrong must miss value inference by more (measured: 19 to 2,200)
ROW_LENGTHS = (40, 9, 30, 17, 33, 9)  # widths 16, 32 and 64 of the enumerated program, two rows of length 9


def tiny(cls, **extra):
    config = BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=MAX_LENGTH, **extra)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = cls(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(WEIGHT_SCALE)
    return model


def batch(seed=0):
    rng = np.random.default_rng(seed)
    width = max(ROW_LENGTHS)
    ids = rng.integers(5, 200, size=(len(ROW_LENGTHS), width))
    mask = (np.arange(width)[None] < np.array(ROW_LENGTHS)[:, None]).astype(np.int64)
    types = (np.arange(width) > 5).astype(np.int64)[None].repeat(len(ROW_LENGTHS), 0)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


FORMS = {"fp16": {}, "6bit": {"compression": "6bit"}, "fixed": {"fixed": True},
         "enumerated": {"lengths": LENGTHS, "target": coreml.ENUMERATED_IOS}, "classifier": {"classifier": True}}


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """A tiny sentiment or QA model's Core ML program, converted when a test first asks for it:
    "<task>-<form>" -> (path, task)."""
    folder = tmp_path_factory.mktemp("mil")
    models = {"sentiment": (tiny(BertForSequenceClassification, num_labels=3), SentimentTask(["a", "b", "c"])),
              "qa": (tiny(BertForQuestionAnswering), QATask())}
    made = {}

    def program(case: str):
        if case not in made:
            task_name, form = case.split("-", 1)
            model, task = models[task_name]
            options = dict(FORMS[form])
            compression = options.pop("compression", None)
            converted = coreml.convert_to_coreml(model, task, MAX_LENGTH, task.label_names, "test", **options)
            coreml.compress(converted, compression).save(str(folder / f"{case}.mlpackage"))
            made[case] = (folder / f"{case}.mlpackage", task)
        return made[case]
    return program


def evaluated(path, task, b, kernels=None, pad_to=None):
    """The compiled evaluator's logits for a batch (with `kernels` in place of its own)."""
    if kernels is None:
        return coreml.coreml_forward(path, task, pad_to=pad_to)(b)
    evaluator = MILEvaluator(path, kernels)
    return coreml.program_forward(evaluator.predict, evaluator.metadata, task, pad_to=pad_to)(b)


def steps_apart(ours: np.ndarray, reference: np.ndarray) -> float:
    """The largest difference, in fp16 steps of the largest reference logit."""
    return float(np.abs(ours - reference).max() / (FP16_STEP * np.abs(reference).max()))


CASES = ["sentiment-fp16", "sentiment-6bit", "sentiment-fixed", "sentiment-enumerated", "sentiment-classifier",
         "qa-fp16", "qa-6bit", "qa-fixed", "qa-enumerated"]


@pytest.mark.parametrize("case", CASES)
def test_compiled_evaluator_gives_value_inference_answers(programs, case):
    path, task = programs(case)
    b = batch()
    ours = evaluated(path, task, b)
    reference = coreml.coreml_forward(path, task, reference=True)(b)
    assert ours.shape == reference.shape
    assert steps_apart(ours, reference) <= REFERENCE_STEPS
    assert (ours.argmax(-1) == reference.argmax(-1)).all()
    assert coreml.mil_evaluator(path).row_by_row == set()  # a BERT program runs in kernels alone


@pytest.mark.parametrize("length", LENGTHS)
def test_every_enumerated_length_gives_value_inference_answers(programs, length):
    path, task = programs("sentiment-enumerated")
    fitting = [i for i, n in enumerate(ROW_LENGTHS) if n <= length]
    b = {k: v[fitting] for k, v in batch().items()}
    ours = evaluated(path, task, b, pad_to=length)
    reference = coreml.coreml_forward(path, task, pad_to=length, reference=True)(b)
    assert steps_apart(ours, reference) <= REFERENCE_STEPS


def test_rows_evaluated_together_equal_each_alone(programs):
    path, task = programs("qa-fp16")
    b = batch()
    together = evaluated(path, task, b)
    alone = np.concatenate([evaluated(path, task, {k: v[i:i + 1] for k, v in b.items()})
                            for i in range(len(ROW_LENGTHS))])
    assert steps_apart(together, alone) <= TOGETHER_STEPS


def test_ops_without_a_kernel_are_evaluated_by_value_inference_row_by_row(programs):
    path, task = programs("sentiment-fp16")
    b = batch()
    left_out = {"layer_norm", "softmax", "gelu", "linear"}
    evaluator = MILEvaluator(path, {k: v for k, v in mil_kernels.KERNELS.items() if k not in left_out})
    reduced = coreml.program_forward(evaluator.predict, evaluator.metadata, task)(b)
    assert evaluator.row_by_row == left_out
    assert steps_apart(reduced, evaluated(path, task, b)) <= REFERENCE_STEPS


# ---------------------------------------------------------------- a kernel with wrong semantics is caught

def _matmul_transposing_a_square_left_side(op, operands):
    right, reads = mil_kernels.KERNELS["matmul"](op, operands)

    def run(a, b):
        return right(np.swapaxes(a, -1, -2) if a.shape[-1] == a.shape[-2] else a, b)
    return run, reads


def _linear_without_the_transpose(op, operands):
    weight = operands.value(op.weight)
    bias = operands.value(op.bias)
    if weight.shape[0] != weight.shape[1]:
        return mil_kernels.KERNELS["linear"](op, operands)
    return (lambda x: x @ weight + bias), [op.x]


def _softmax_on_the_wrong_axis(op, operands):
    def run(x):
        e = np.exp(x - x.max(axis=-2, keepdims=True))
        return e / e.sum(axis=-2, keepdims=True)
    return run, [op.x]


def _layer_norm_over_the_whole_batch(op, operands):
    """Statistics over every row of the batch: rows leak into each other."""
    gamma, beta, epsilon = (operands.value(v) for v in (op.gamma, op.beta, op.epsilon))

    def run(x):
        centred = x - x.mean(axis=(0, -1), keepdims=True)
        return centred / np.sqrt(np.mean(np.square(centred), axis=(0, -1), keepdims=True) + epsilon) * gamma + beta
    return run, [op.x]


def _slice_reading_the_last_token(op, operands):
    right, reads = mil_kernels.KERNELS["slice_by_index"](op, operands)
    if operands.rank(op.x) != 3:
        return right, reads
    return (lambda x: x[:, :, -1]), reads  # the pooler reads the last position, not [CLS]


def _gather_off_by_one(op, operands):
    right, reads = mil_kernels.KERNELS["gather"](op, operands)
    return (lambda x, indices: right(x, np.minimum(indices + 1, 199))), reads


def _gelu_as_relu(op, operands):
    return (lambda x: np.maximum(x, 0)), [op.x]


BROKEN = {
    "a transposed matmul": ("matmul", _matmul_transposing_a_square_left_side),
    "a linear layer without its transpose": ("linear", _linear_without_the_transpose),
    "softmax on the wrong axis": ("softmax", _softmax_on_the_wrong_axis),
    "a batch that leaks across rows": ("layer_norm", _layer_norm_over_the_whole_batch),
    "the pooler reading the last token": ("slice_by_index", _slice_reading_the_last_token),
    "an embedding lookup off by one": ("gather", _gather_off_by_one),
    "gelu as relu": ("gelu", _gelu_as_relu),
}


@pytest.mark.parametrize("broken", list(BROKEN))
def test_an_evaluator_with_one_kernel_wrong_misses_value_inference(programs, broken):
    path, task = programs("sentiment-fp16")
    op_type, kernel = BROKEN[broken]
    b = batch()
    reference = coreml.coreml_forward(path, task, reference=True)(b)
    assert steps_apart(evaluated(path, task, b), reference) <= REFERENCE_STEPS
    assert steps_apart(evaluated(path, task, b, {**mil_kernels.KERNELS, op_type: kernel}), reference) > BROKEN_STEPS


def test_an_op_neither_a_kernel_nor_value_inference_evaluates_is_refused_in_one_line(tmp_path):
    import coremltools as ct
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.mil import types

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 3), dtype=types.int32)], opset_version=ct.target.iOS16)
    def program(x):
        return mb.one_hot(indices=x, one_hot_vector_size=4)

    ct.convert(program, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS16).save(
        str(tmp_path / "one_hot.mlpackage"))
    evaluator = MILEvaluator(tmp_path / "one_hot.mlpackage")
    with pytest.raises(ExportError, match=r"is a one_hot, which neither pocketbert's MIL evaluator nor coremltools' "
                                          r"value inference can evaluate") as refused:
        evaluator.predict({"x": np.zeros((2, 1, 3), dtype=np.int32)})
    assert "\n" not in str(refused.value)


def test_a_kernel_that_does_not_cover_an_op_form_hands_it_to_value_inference(programs):
    path, task = programs("sentiment-fp16")

    def never(op, operands):
        raise NotCovered("for this test")

    b = batch()
    evaluator = MILEvaluator(path, {**mil_kernels.KERNELS, "matmul": never, "transpose": never})
    handed_over = coreml.program_forward(evaluator.predict, evaluator.metadata, task)(b)
    assert evaluator.row_by_row == {"matmul", "transpose"}
    assert steps_apart(handed_over, evaluated(path, task, b)) <= REFERENCE_STEPS


# ---------------------------------------------------------------- every kernel, on a program made of them

N = 6  # sequence positions of the program below


def _program_of_every_kernel(path):
    """An fp32 ML Program whose outputs exercise each kernel, in forms the BERT programs do not use (other axes,
    constants and computed values on either side, epsilons, masks and strides), saved without optimization."""
    import coremltools as ct
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.mil import types

    rng = np.random.default_rng(3)
    table, weight, bias = (rng.normal(size=s).astype(np.float32) for s in ((10, 4), (3, 4), (3,)))
    right = rng.normal(size=(4, 5)).astype(np.float32)
    extra = rng.normal(size=(1, N, 2)).astype(np.float32)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, N, 4)), mb.TensorSpec(shape=(1, N), dtype=types.int32),
                             mb.TensorSpec(shape=(1, N, 1), dtype=types.int32)], opset_version=ct.target.iOS17)
    def program(x, ids, cols):
        positive = mb.abs(x=x)
        return (
            mb.softmax(x=x, axis=1),
            mb.layer_norm(x=x, axes=[1, 2], epsilon=1e-5),
            mb.transpose(x=x, perm=[2, 0, 1]),
            mb.matmul(x=x, y=x, transpose_y=True),
            mb.matmul(x=x, y=right),
            mb.matmul(x=mb.transpose(x=x, perm=[0, 2, 1]), y=mb.transpose(x=x, perm=[0, 2, 1]), transpose_x=True),
            mb.linear(x=x, weight=weight, bias=bias),
            mb.concat(values=[x, extra, x], axis=-1),
            *mb.split(x=x, split_sizes=[1, 3], axis=2),
            mb.select(cond=mb.greater(x=x, y=np.float32(0.0)), a=x, b=mb.mul(x=x, y=np.float32(0.1))),
            mb.tile(x=x, reps=[1, 2, 1]),
            mb.reduce_sum(x=x, axes=[1], keep_dims=False),
            mb.reduce_max(x=x, axes=[-1], keep_dims=True),
            mb.reduce_mean(x=x, axes=[0, 2], keep_dims=False),
            mb.gather(x=table, indices=ids, axis=0),
            mb.gather(x=x, indices=np.array([0, 2], dtype=np.int32), axis=1),
            mb.gather(x=x, indices=ids, axis=1),
            mb.gather_along_axis(x=x, indices=cols, axis=2),
            mb.squeeze(x=mb.expand_dims(x=x, axes=[0, -1]), axes=[0]),
            mb.slice_by_index(x=x, begin=[0, 1, 0], end=[1, N, 4], stride=[1, 2, 1],
                              squeeze_mask=[True, False, False]),
            mb.reshape(x=x, shape=[1, -1]),
            mb.rsqrt(x=positive, epsilon=0.5), mb.log(x=positive, epsilon=1.0), mb.inverse(x=x, epsilon=0.25),
            mb.sqrt(x=positive), mb.exp(x=x), mb.erf(x=x), mb.tanh(x=x), mb.sigmoid(x=x), mb.relu(x=x),
            mb.gelu(x=x, mode="TANH_APPROXIMATION"), mb.gelu(x=x, mode="SIGMOID_APPROXIMATION"),
            mb.real_div(x=x, y=mb.add(x=positive, y=np.float32(1.0))), mb.pow(x=positive, y=np.float32(0.5)),
            mb.maximum(x=x, y=extra[..., :1]), mb.minimum(x=x, y=np.float32(0.2)), mb.sub(x=np.float32(1.0), y=x),
            mb.cast(x=mb.mul(x=x, y=np.float32(3.0)), dtype="int32"),
            mb.cast(x=mb.mul(x=x, y=np.float32(1000.0)), dtype="fp16"),
        )

    ct.convert(program, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS17,
               pass_pipeline=ct.PassPipeline.EMPTY).save(str(path))


FP32_TOLERANCE = 1e-5  # both evaluators compute this fp32 program in float32 (numpy's orders of summation differ)


def test_every_kernel_gives_value_inference_answers_on_rows_together(tmp_path):
    from pocketbert.export.evaluators.mil_reference import ValueInferenceInterpreter

    _program_of_every_kernel(tmp_path / "kernels.mlpackage")
    rng = np.random.default_rng(4)
    rows = {"x": rng.normal(size=(3, 1, N, 4)).astype(np.float32),
            "ids": rng.integers(0, N, size=(3, 1, N)).astype(np.int32),
            "cols": rng.integers(0, 4, size=(3, 1, N, 1)).astype(np.int32)}
    evaluator = MILEvaluator(tmp_path / "kernels.mlpackage")
    ours = evaluator.predict(rows)
    assert evaluator.row_by_row == set()  # every op above ran in its kernel
    reference = ValueInferenceInterpreter(tmp_path / "kernels.mlpackage")
    for r in range(3):
        expected = reference.predict({name: values[r] for name, values in rows.items()})
        for name in evaluator.output_names:
            np.testing.assert_allclose(ours[name][r], expected[name], rtol=FP32_TOLERANCE, atol=FP32_TOLERANCE,
                                       err_msg=name)
