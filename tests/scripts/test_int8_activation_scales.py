"""scripts/int8_activation_scales.py: both int8 activation scales measured, on examples the student never trained on."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "scripts"))

import int8_activation_scales as scales  # noqa: E402
from pocketbert.core.config.int8_budgets import INT8_ACTIVATION_SCALES  # noqa: E402
from pocketbert.core.tasks.data import separation_key  # noqa: E402
from pocketbert.train.trainer import labelled_examples  # noqa: E402

pytestmark = pytest.mark.slow
UNSEEN = 24


def test_the_examples_share_nothing_with_the_students_training(exported_run, shared_data):
    data, unseen = scales.unseen_examples(exported_run, shared_data, UNSEEN)
    recipe = scales.student_recipe(exported_run)
    seen = {separation_key(e) for e in labelled_examples(data, recipe.distill, recipe.seed)}
    assert len(unseen) == UNSEEN
    assert not seen & {separation_key(e) for e in unseen}


def test_each_scale_is_measured_against_the_student(exported_run, shared_data, tmp_path):
    _, unseen = scales.unseen_examples(exported_run, shared_data, UNSEEN)
    rows = scales.compare(exported_run / "student", unseen, scales.student_recipe(exported_run).distill.max_length,
                          tmp_path)
    assert [row["activation_scale"] for row in rows] == list(INT8_ACTIVATION_SCALES)
    for row in rows:
        assert row["examples"] == row["inputs"] == UNSEEN  # sentences: one input each
        assert 0.0 <= row["agreement"] <= 1.0 and row["megabytes"] > 0 and row["median_ms"] > 0
        assert row["drop_standard_error"] >= 0.0
