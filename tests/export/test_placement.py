"""The placement check on real saved programs: a program that breaks no rule passes, a program changed to break one
rule gets another verdict, and the same program checked without that rule passes again (so each rule is what
flips it); the plain fixed-shape student and its flexible and enumerated forms get verdicts that differ for named
reasons."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from pocketbert.core.tasks.registry import SentimentTask
from pocketbert.export.programs import coreml
from pocketbert.export.evaluators import placement, placement_rules, program_view

ct = pytest.importorskip("coremltools")
from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import types  # noqa: E402

pytestmark = pytest.mark.slow  # every test converts a program with coremltools

SEQUENCE, HIDDEN = 16, 8
SMALL_TABLE, LARGE_TABLE = 100, placement_rules.MAX_EXTENT + 1
WIDE = placement_rules.MAX_EXTENT + 2 * SEQUENCE * HIDDEN  # a flattened tensor longer than the Neural Engine takes
VOCABULARY = 30522  # the uncased WordPiece vocabulary: the real students' embedding table
MAX_LENGTH = 32
# The fused attention scales the queries, the eager trace the scores: FLOPs apart by sequence x heads x
# (sequence - head size) per layer, under 0.5 % of the tiny student's
ATTENTION_FLOPS_REL = 0.005


def _weight(rows: int, columns: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(rows, columns)).astype(np.float16)


def _linear(x, seed: int = 0):
    return mb.linear(x=x, weight=_weight(HIDDEN, HIDDEN, seed), bias=np.zeros(HIDDEN, np.float16))


def _program(middle):
    """An fp16 program: a linear layer, `middle` (x -> y, the part a test changes), then two more layers."""
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, SEQUENCE, HIDDEN), dtype=types.fp16)],
                opset_version=ct.target.iOS16)
    def prog(x):
        y = middle(mb.relu(x=_linear(x, 1)))
        return mb.softmax(x=_linear(mb.layer_norm(x=y, axes=[-1], epsilon=np.float16(1e-3)), 2), axis=-1)
    return prog


def _clean(y):
    return mb.relu(x=_linear(y, 3))


def _fp32_cast(y):
    wide = mb.cast(x=y, dtype="fp32")
    return mb.cast(x=mb.relu(x=wide), dtype="fp16")


def _rank_5(y):
    five = mb.reshape(x=y, shape=[1, 2, SEQUENCE // 2, 2, HIDDEN // 2])
    return mb.reshape(x=mb.relu(x=five), shape=[1, SEQUENCE, HIDDEN])


def _gather(rows: int):
    def middle(y):  # indices computed on the way, so the lookup sits between Neural Engine work
        index = mb.reduce_argmax(x=y, axis=-1, keep_dims=False)
        return mb.add(x=y, y=mb.gather(x=_weight(rows, HIDDEN), indices=index, axis=0))
    return middle


def _beyond_extent(y):
    flat = mb.tile(x=mb.reshape(x=y, shape=[1, SEQUENCE * HIDDEN]), reps=[1, WIDE // (SEQUENCE * HIDDEN)])
    back = mb.slice_by_size(x=mb.relu(x=flat), begin=[0, 0], size=[1, SEQUENCE * HIDDEN])
    return mb.reshape(x=back, shape=[1, SEQUENCE, HIDDEN])


def _gather_along_axis(y):
    order = np.tile(np.arange(HIDDEN)[::-1], (1, SEQUENCE, 1)).astype(np.int32)
    return mb.gather_along_axis(x=y, indices=order, axis=-1)


def _head_split(y):
    """The (batch, sequence, channels) attention layout: split heads, transpose, multiply."""
    heads = mb.transpose(x=mb.reshape(x=y, shape=[1, SEQUENCE, 2, HIDDEN // 2]), perm=[0, 2, 1, 3])
    scores = mb.matmul(x=heads, y=heads, transpose_y=True)
    mixed = mb.matmul(x=mb.softmax(x=scores, axis=-1), y=heads)
    return mb.reshape(x=mb.transpose(x=mixed, perm=[0, 2, 1, 3]), shape=[1, SEQUENCE, HIDDEN])


# rule -> the program's middle that breaks it, and the verdict it must get
BROKEN = {
    "fp32-in-fp16": (_fp32_cast, placement.SPLIT),
    "rank-above-4": (_rank_5, placement.SPLIT),
    "gather-large-table": (_gather(LARGE_TABLE), placement.SPLIT),
    "extent-beyond-limit": (_beyond_extent, placement.SPLIT),
    "no-neural-engine-op": (_gather_along_axis, placement.SPLIT),
}


def saved(prog, path):
    """The program saved as built: no conversion pass (the fp16 pass would rewrite an inserted fp32 cast)."""
    model = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS16,
                       pass_pipeline=ct.PassPipeline.EMPTY)
    model.save(str(path))
    return path


def without(rule_id: str) -> list:
    return [r for r in placement_rules.RULES if r.id != rule_id]


def test_a_program_that_breaks_no_rule_runs_whole_on_the_neural_engine(tmp_path):
    result = placement.check(saved(_program(_clean), tmp_path / "clean.mlpackage"))
    assert result.passes and result.verdict == placement.NEURAL_ENGINE_VERDICT
    assert result.fired == []
    (function,) = result.functions
    assert function.ops_on_neural_engine == function.ops and function.share_flops == 1.0
    assert json.loads(json.dumps(result.to_dict()))["functions"][0]["operations"]  # JSON as it is written


@pytest.mark.parametrize("rule", sorted(BROKEN))
def test_breaking_one_rule_flips_the_verdict_and_that_rule_is_why(tmp_path, rule):
    middle, verdict = BROKEN[rule]
    path = saved(_program(middle), tmp_path / f"{rule}.mlpackage")
    result = placement.check(path)
    assert result.verdict == verdict and not result.passes
    assert rule in result.fired
    (function,) = result.functions
    assert function.handoffs >= 1 and function.share_ops < 1.0
    moved = [op for op in function.operations if rule in op.rules]
    assert moved and all(op.unit == placement_rules.RULES_BY_ID[rule].fallback for op in moved)
    # the same program with that one rule switched off: nothing else stands in its way
    assert placement.check(path, without(rule)).passes


def test_a_small_table_lookup_stays_on_the_neural_engine(tmp_path):
    result = placement.check(saved(_program(_gather(SMALL_TABLE)), tmp_path / "small.mlpackage"))
    assert result.passes and "gather-large-table" not in result.fired


def test_transposes_around_matrix_products_are_a_cost_not_a_failure(tmp_path):
    path = saved(_program(_head_split), tmp_path / "heads.mlpackage")
    result = placement.check(path)
    assert result.passes
    fired = {r.id: r for r in result.functions[0].fired}
    assert fired["transpose-near-matmul"].effect == placement_rules.COST
    assert fired["transpose-near-matmul"].ops == 4  # reshape + transpose on each side of the two products
    assert "transpose-near-matmul" not in placement.check(saved(_program(_clean), tmp_path / "c.mlpackage")).fired


def test_matrix_products_carry_the_flops(tmp_path):
    function = placement.check(saved(_program(_clean), tmp_path / "clean.mlpackage")).functions[0]
    linear = [op for op in function.operations if op.op_type == "linear"]
    assert len(linear) == 3 and all(op.flops == 2 * SEQUENCE * HIDDEN * HIDDEN for op in linear)


# ---------------------------------------------------------------- the student's own Core ML programs

@pytest.fixture(scope="module")
def student_programs(tmp_path_factory):
    """A tiny student with the real vocabulary, converted as the export converts it: fixed, flexible, enumerated."""
    config = BertConfig(vocab_size=VOCABULARY, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=2)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model, task = BertForSequenceClassification(config).eval(), SentimentTask(["negative", "positive"])
    folder = tmp_path_factory.mktemp("placement")
    forms = {"fixed": {"fixed": True}, "flexible": {},
             "enumerated": {"lengths": (16, MAX_LENGTH), "target": coreml.ENUMERATED_IOS}}
    paths = {}
    for form, options in forms.items():
        paths[form] = folder / f"{form}.mlpackage"
        coreml.convert_to_coreml(model, task, MAX_LENGTH, task.label_names, "test", **options).save(str(paths[form]))
    return paths


def test_fixed_flexible_and_enumerated_students_differ_for_named_reasons(student_programs):
    fixed, flexible, enumerated = (placement.check(student_programs[f]) for f in ("fixed", "flexible", "enumerated"))
    # fixed: one Neural Engine region; only the word-embedding lookup (30,522 rows) before it, as in Apple's own
    # ANE DistilBERT
    assert fixed.verdict == placement.NEURAL_ENGINE_VERDICT and fixed.passes
    assert fixed.summary()["rules_fired"]["gather-large-table"] == 1
    assert fixed.summary()["neural_engine_flop_share"] == 1.0
    # flexible: the Neural Engine runs only the default shape
    assert flexible.verdict == placement.OFF and "flexible-shape" in flexible.fired
    assert flexible.summary()["neural_engine_op_share"] == 0.0
    # enumerated: may fail at prediction (coremltools#2730), and its layer norms leave the Neural Engine
    assert enumerated.verdict == placement.MAY_FAIL
    assert {"enumerated-shape", "layer-norm-enumerated"} <= set(enumerated.fired)
    assert enumerated.functions[0].handoffs == 5  # 2 layers x 2 layer norms + the embeddings' layer norm
    # the plain layout's head split is flagged in all three
    assert all("transpose-near-matmul" in p.fired for p in (fixed, flexible, enumerated))


def test_bench_reads_each_verdict_as_the_unit_its_phone_rows_assume(student_programs):
    """The manifest's summary is bench's record (bench/placement_verdict.py): the Neural Engine row applies
    to the program that passes, the others fall back to where their work is predicted."""
    from pocketbert.mobile_bench.estimates.placement_verdict import NEURAL_ENGINE, PlacementVerdict

    read = {form: PlacementVerdict.from_dict(form, placement.check(path).summary())
            for form, path in student_programs.items()}
    assert all(v is not None for v in read.values())
    assert read["fixed"].predicted_unit == NEURAL_ENGINE and "gather-large-table" in read["fixed"].rules_fired
    assert read["flexible"].predicted_unit != NEURAL_ENGINE and "flexible-shape" in read["flexible"].rules_fired
    assert read["enumerated"].predicted_unit != NEURAL_ENGINE


def test_core_ai_student_keeps_fp32_layer_norms_inside_its_fp16_program(tmp_path, monkeypatch):
    pytest.importorskip("coreai_torch")
    from pocketbert.export.programs import coreai

    config = BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=2)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model, task = BertForSequenceClassification(config).eval(), SentimentTask(["negative", "positive"])
    coreai.save(coreai.convert_to_coreai(model, task, (16, 32)), tmp_path / "s.aimodel", "test")
    result = placement.check(tmp_path / "s.aimodel")
    assert result.format == "Core AI" and [f.function for f in result.functions] == ["main_len16", "main_len32"]
    # coreai-torch's layer_norm composite computes in fp32: each one is a round trip off the Neural Engine
    assert result.verdict == placement.SPLIT and "fp32-in-fp16" in result.fired
    assert all(f.handoffs == 5 for f in result.functions)
    # Core AI submits each Neural Engine region: 6 regions and 5 boundaries, priced per region and boundary
    assert all((f.regions, f.boundaries) == (6, 5) for f in result.functions)
    low, high = result.added_cost_ms()
    assert low == pytest.approx(5 * placement.REGION_MS + 5 * placement.BOUNDARY_MS[0])
    assert high == pytest.approx(5 * placement.REGION_MS + 5 * placement.BOUNDARY_MS[1])
    assert all(op.unit == placement_rules.CPU_OR_GPU for f in result.functions for op in f.operations
               if op.name.split("/")[0] != op.name and "fp32-in-fp16" in op.rules)
    assert placement.check(tmp_path / "s.aimodel", without("fp32-in-fp16")).passes
    # attention is coreai-torch's fused composite, read as one operation on the Neural Engine with the FLOPs its
    # decomposition spends: the eager trace of the same student (matmul -> softmax -> matmul) costs as much
    for function in result.functions:
        attention = [op for op in function.operations if op.op_type in program_view.ATTENTION]
        assert len(attention) == config.num_hidden_layers and not any(
            op.op_type == "softmax" for op in function.operations)
        assert all(op.unit == placement_rules.NEURAL_ENGINE and op.flops > 0 for op in attention)
    monkeypatch.setattr(coreai, "FUSED_ATTENTION", "eager")
    coreai.save(coreai.convert_to_coreai(model, task, (16, 32)), tmp_path / "eager.aimodel", "test")
    eager = placement.check(tmp_path / "eager.aimodel")
    for fused, spelled in zip(result.functions, eager.functions):
        assert fused.flops == pytest.approx(spelled.flops, rel=ATTENTION_FLOPS_REL)
