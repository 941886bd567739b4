"""Which export variants each architecture takes, read from the one variants table and the architecture's
capabilities: a variant added to a family the BiLSTM cannot be exported to must not be offered to it (its export
would fail after the ONNX and Core ML work). A family's record names its programs and chooses among them."""

from __future__ import annotations

import pytest

from pocketbert.core.config import export_families as families
from pocketbert.core.errors import ExportError
from pocketbert.core.students.architectures import ARCHITECTURES
from pocketbert.core.tasks.registry import make_task
from pocketbert.export.programs import variants

COREML_VARIANTS, COREAI_VARIANTS = families.COREML.names, families.COREAI.names

# torch.export cannot keep a BiLSTM's sequence length dynamic: no ExecuTorch or Core AI program for it
NEEDS_DYNAMIC_TORCH_EXPORT = (variants.EXECUTORCH_FAMILY, variants.COREAI_FAMILY)


def test_the_bilstm_is_offered_no_variant_that_needs_torch_export_at_a_dynamic_length():
    task = make_task("sentiment", ["negative", "positive"])
    bilstm = ARCHITECTURES["bilstm"]
    offered = variants.selected(list(COREML_VARIANTS), task, bilstm, list(COREAI_VARIANTS))
    assert offered and not [v.name for v in offered if v.family in NEEDS_DYNAMIC_TORCH_EXPORT]


def test_the_bert_family_is_offered_every_core_ai_variant():
    task = make_task("sentiment", ["negative", "positive"])
    offered = variants.selected([], task, ARCHITECTURES["bert-family"], list(COREAI_VARIANTS))
    assert {v.name for v in offered if v.family == variants.COREAI_FAMILY} == {
        families.COREAI.variant(name) for name in COREAI_VARIANTS}


def test_each_family_record_names_exactly_the_programs_the_variants_table_builds():
    """A recipe and a ladder are checked against the family records when read: their names must be the table's."""
    for family in families.FAMILIES:
        assert [v.name for v in variants.VARIANTS.values() if v.family == family.name] == [
            family.variant(n) for n in family.names], family.title
    assert {v.family for v in variants.VARIANTS.values()} == {f.name for f in families.FAMILIES}


def test_applicability_is_the_architectures_capabilities_not_lists_of_names():
    """An architecture without attention takes no Neural Engine layout; one torch.export cannot trace at a dynamic
    length takes no ExecuTorch or Core AI program; the BERT family takes every program of a task."""
    task = make_task("sentiment", ["negative", "positive"])
    for architecture in ARCHITECTURES.values():
        for variant in variants.VARIANTS.values():
            expected = (variant.needs(task) and (architecture.attends or not variant.needs_attention)
                        and (architecture.traces_dynamic_length or not variant.needs_dynamic_length))
            assert variant.applies_to(task, architecture) == expected, (architecture.name, variant.name)
    bert = ARCHITECTURES["bert-family"]
    assert all(v.applies_to(task, bert) for v in variants.VARIANTS.values() if v.needs(task))
    static = ARCHITECTURES["static"]
    assert {v.name for v in variants.VARIANTS.values() if v.family == variants.EXECUTORCH_FAMILY
            and v.applies_to(task, static)} == set(families.EXECUTORCH.names)


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


def _choose(family, given, from_recipe, architecture: str, task_name: str = "sentiment") -> list[str]:
    task = make_task(task_name, ["negative", "positive"] if task_name == "sentiment" else [])
    return family.choose(given, from_recipe, variants.applies(family, task, ARCHITECTURES[architecture]), task.name,
                         architecture)


def test_export_refuses_an_executorch_program_the_student_cannot_take_in_one_line():
    assert _choose(families.EXECUTORCH, ["pte", "pte-int8"], None, "bert-family") == ["pte", "pte-int8"]
    with pytest.raises(ExportError, match=r"^ExecuTorch program pte-int8 does not apply to a sentiment bilstm student: "
                                          r"set export.executorch_variants to \[\]$"):
        _choose(families.EXECUTORCH, ["pte-int8"], None, "bilstm")
    with pytest.raises(ExportError, match=r"takes only pte, pte-int8, pte-coreml \(got \['pte-fp8'\]\)"):
        _choose(families.EXECUTORCH, ["pte-fp8"], None, "bert-family")


def test_a_recipes_list_loses_what_the_student_cannot_take_and_a_given_one_is_refused(capsys):
    """A recipe's list is written for BERT-family students: another student takes what it can, with a note."""
    assert _choose(families.COREML, None, ["fp16", "ane", "6bit"], "bilstm") == ["fp16", "6bit"]
    assert "note: the recipe's Core ML ane left out: it does not apply to a bilstm student" in capsys.readouterr().err
    with pytest.raises(ExportError, match=r"^Core ML variant ane does not apply to a sentiment bilstm student: leave "
                                          r"it out of export.coreml_variants$"):
        _choose(families.COREML, ["fp16", "ane"], ["fp16"], "bilstm")
    for given in (["int8"], ["fp16", "int9"]):  # fp16 is every app folder's fallback
        with pytest.raises(ExportError, match=r"must include fp16 and only fp16, int8"):
            _choose(families.COREML, given, None, "bert-family")


def test_unset_lists_take_the_familys_defaults_where_they_apply():
    assert _choose(families.COREAI, None, None, "bert-family") == list(families.COREAI.defaults)
    assert _choose(families.COREAI, None, None, "bilstm") == []
    assert _choose(families.EXECUTORCH, None, None, "bert-family") == list(families.EXECUTORCH.names)
    assert _choose(families.EXECUTORCH, None, None, "bilstm") == []
    assert _choose(families.COREAI, None, [], "bert-family") == []  # [] in the recipe: the family left out
