"""Which export variants each architecture takes, read from the one variants table: a variant added to a family the
BiLSTM cannot be exported to must not be offered to it (its export would fail after the ONNX and Core ML work)."""

from __future__ import annotations

from pocketbert.core.students.architectures import ARCHITECTURES
from pocketbert.core.tasks.registry import make_task
from pocketbert.export import variants

# torch.export cannot keep a BiLSTM's sequence length dynamic: no ExecuTorch or Core AI program for it
NEEDS_DYNAMIC_TORCH_EXPORT = (variants.EXECUTORCH_FAMILY, variants.COREAI_FAMILY)


def test_the_bilstm_is_offered_no_variant_that_needs_torch_export_at_a_dynamic_length():
    task = make_task("sentiment", ["negative", "positive"])
    bilstm = ARCHITECTURES["bilstm"]
    offered = variants.selected(list(variants.COREML_VARIANTS), task, bilstm, list(variants.COREAI_VARIANTS))
    assert offered and not [v.name for v in offered if v.family in NEEDS_DYNAMIC_TORCH_EXPORT]


def test_the_bert_family_is_offered_every_core_ai_variant():
    task = make_task("sentiment", ["negative", "positive"])
    offered = variants.selected([], task, ARCHITECTURES["bert-family"], list(variants.COREAI_VARIANTS))
    assert {v.name for v in offered if v.family == variants.COREAI_FAMILY} == {
        variants.COREAI_PREFIX + name for name in variants.COREAI_VARIANTS}


def test_the_core_names_every_apple_program_the_export_makes():
    """A recipe and a ladder are checked against core's names when read: they must be the export table's own."""
    from pocketbert.core.config import export_variant_names
    from pocketbert.export.variants import COREAI_VARIANTS, COREML_VARIANTS

    assert export_variant_names.COREML == COREML_VARIANTS
    assert export_variant_names.COREAI == COREAI_VARIANTS
    assert export_variant_names.EXECUTORCH == variants.EXECUTORCH_VARIANTS


def test_a_recipe_chooses_its_executorch_programs_and_an_unknown_one_is_refused_when_read():
    import pytest
    from pydantic import ValidationError

    from pocketbert.core.config.recipe import ExportSection

    task = make_task("sentiment", ["negative", "positive"])
    bert = ARCHITECTURES["bert-family"]
    chosen = variants.selected([], task, bert, [], ["pte-int8"])
    assert [v.name for v in chosen if v.family == variants.EXECUTORCH_FAMILY] == ["pte-int8"]
    assert not [v for v in variants.selected([], task, bert, [], []) if v.family == variants.EXECUTORCH_FAMILY]
    with pytest.raises(ValidationError, match="executorch_variants: unknown 'pte-int4'"):
        ExportSection(executorch_variants=["pte-int4"])


def test_export_refuses_an_executorch_program_the_student_cannot_take_in_one_line():
    import pytest

    from pocketbert.core.errors import ExportError
    from pocketbert.export.pipeline import check_executorch_choice

    task = make_task("sentiment", ["negative", "positive"])
    check_executorch_choice(["pte", "pte-int8"], task, ARCHITECTURES["bert-family"])
    with pytest.raises(ExportError, match=r"^ExecuTorch program pte-int8 does not apply to a sentiment bilstm student: "
                                          r"set export.executorch_variants to \[\]$"):
        check_executorch_choice(["pte-int8"], task, ARCHITECTURES["bilstm"])
    with pytest.raises(ExportError, match=r"takes only pte, pte-int8, pte-coreml \(got \['pte-fp8'\]\)"):
        check_executorch_choice(["pte-fp8"], task, ARCHITECTURES["bert-family"])
