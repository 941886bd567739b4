"""The placement rules taken from the published record, each flipping what a saved program's verdict or its
predicted cost says: Core AI regions and boundaries (counted per region and per boundary, not per operation),
4-bit palettes with an iOS 18 target, int8 weights folded to fp16 on the A13/M1, the axis limit by chip
generation, and the stated risk of a failed Neural Engine compile."""

from __future__ import annotations

import pytest

from pocketbert.export.evaluators import placement, placement_rules
from tests.export.test_placement import SMALL_TABLE, _clean, _fp32_cast, _gather, _program, saved, without

ct = pytest.importorskip("coremltools")
from coremltools.optimize.coreml import (  # noqa: E402
    OpLinearQuantizerConfig,
    OpPalettizerConfig,
    OptimizationConfig,
    linear_quantize_weights,
    palettize_weights,
)

pytestmark = pytest.mark.slow  # every test converts a program with coremltools

FITTED_ROWS = 8000  # a vocabulary fitted to the task's texts
FULL_ROWS = 30522   # the uncased WordPiece vocabulary
LARGE_ROWS = placement_rules.MAX_EXTENT_FROM_A16 + 1


def _converted(prog, path, target):
    model = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=target,
                       pass_pipeline=ct.PassPipeline.EMPTY)
    model.save(str(path))
    return ct.models.MLModel(str(path), skip_model_load=True)


def _palettized(tmp_path, target, name):
    model = _converted(_program(_clean), tmp_path / f"{name}-plain.mlpackage", target)
    config = OptimizationConfig(global_config=OpPalettizerConfig(mode="uniform", nbits=4, weight_threshold=1))
    path = tmp_path / f"{name}.mlpackage"
    palettize_weights(model, config).save(str(path))
    return path


def test_regions_and_boundaries_price_a_split_not_its_operations(tmp_path):
    whole = placement.check(saved(_program(_clean), tmp_path / "whole.mlpackage")).summary()
    assert (whole["regions"], whole["boundaries"], whole["added_cost_ms"]) == (1, 0, [0.0, 0.0])
    path = saved(_program(_fp32_cast), tmp_path / "split.mlpackage")
    split = placement.check(path)
    summary = split.summary()
    # cast -> relu -> cast leaves the Neural Engine as one run of three operations: one boundary, two regions
    assert (summary["regions"], summary["boundaries"]) == (2, 1)
    assert summary["added_cost_ms"] == pytest.approx(list(placement.BOUNDARY_MS))  # per boundary, not x3 ops
    # Core AI submits each region: the second region adds the per-call floor on top of the boundary
    split.format = "Core AI"
    low, high = split.added_cost_ms()
    assert low == pytest.approx(placement.REGION_MS + placement.BOUNDARY_MS[0])
    assert high == pytest.approx(placement.REGION_MS + placement.BOUNDARY_MS[1])
    # without the rule that moved the cast, one region and nothing added
    assert placement.check(path, without("fp32-in-fp16")).summary()["regions"] == 1


def test_four_bit_palettes_are_a_risk_only_with_an_ios18_target(tmp_path):
    ios18 = placement.check(_palettized(tmp_path, ct.target.iOS18, "p18"))
    assert ios18.verdict == placement.MAY_FAIL and "palettized-4bit-ios18" in ios18.fired
    assert placement.check(_palettized(tmp_path, ct.target.iOS18, "p18b"), without("palettized-4bit-ios18")).passes
    ios17 = placement.check(_palettized(tmp_path, ct.target.iOS17, "p17"))
    assert ios17.passes and "palettized-4bit-ios18" not in ios17.fired


def test_int8_weights_are_priced_as_folded_to_fp16_on_a13_and_m1(tmp_path):
    model = _converted(_program(_clean), tmp_path / "plain.mlpackage", ct.target.iOS17)
    config = OptimizationConfig(global_config=OpLinearQuantizerConfig(dtype="int8", weight_threshold=1))
    path = tmp_path / "int8.mlpackage"
    linear_quantize_weights(model, config).save(str(path))
    quantized = placement.check(path)
    fired = {r.id: r for r in quantized.functions[0].fired}
    assert fired["int8-weights-folded"].effect == placement_rules.COST and fired["int8-weights-folded"].ops == 3
    assert "2606.22283" in fired["int8-weights-folded"].source
    assert quantized.passes  # a cost, not a failure
    assert "int8-weights-folded" not in placement.check(tmp_path / "plain.mlpackage").fired


@pytest.mark.parametrize("rows, fires, words", [
    (SMALL_TABLE, False, "a fitted vocabulary clears the axis limit"),
    (FITTED_ROWS, False, "a fitted vocabulary clears the axis limit"),
    (FULL_ROWS, True, "leaves the Neural Engine on the A15 and earlier; within 65,536 from the A16"),
    (LARGE_ROWS, True, "off the Neural Engine on every chip"),
])
def test_the_axis_limit_by_chip_generation_and_a_fitted_vocabulary(tmp_path, rows, fires, words):
    result = placement.check(saved(_program(_gather(rows)), tmp_path / f"g{rows}.mlpackage"))
    summary = result.summary()
    assert ("gather-large-table" in result.fired) is fires
    assert words in summary["axis_limit"] and f"{rows:,} rows" in summary["axis_limit"]


def test_a_failed_neural_engine_compile_is_a_stated_risk(tmp_path):
    summary = placement.check(saved(_program(_clean), tmp_path / "c.mlpackage")).summary()
    assert any("kills the process at its first prediction" in r and "coremltools#2758" in r
               for r in summary["risks"])
