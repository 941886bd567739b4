"""The reference the student is timed against: BERT-base's shape when no checkpoint is named, and a cache entry
that gains BERT-base's ExecuTorch programs only when they are asked for. (The bench itself, against a tiny
reference checkpoint, is end_to_end/test_sentiment_bench_end_to_end.py's.)"""

from __future__ import annotations

import pytest

from pocketbert.mobile_bench.timing import reference
from pocketbert.core.tasks.registry import make_task


BERT_BASE_PARAMETERS = (109_000_000, 110_000_000)  # 12 x 768 with the uncased vocabulary and a 2-label head


@pytest.mark.slow
def test_without_a_checkpoint_the_reference_is_bert_base_built_from_its_config():
    task = make_task("sentiment", ["negative", "positive"])
    model = reference._from_config(task, reference.BERT_BASE_CONFIG["num_hidden_layers"])
    config = model.config
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads, config.intermediate_size,
            config.vocab_size) == (12, 768, 12, 3072, 30522)
    low, high = BERT_BASE_PARAMETERS
    assert low < sum(p.numel() for p in model.parameters()) < high


@pytest.mark.slow
def test_a_reference_entry_gains_its_executorch_programs_only_when_asked(tiny_base, private_cache):
    from pocketbert.core.run.run_files import EXECUTORCH_FP32, EXECUTORCH_INT8, MODEL_CONFIG, ONNX_FP32, ONNX_INT8

    task = make_task("sentiment", ["negative", "positive"])
    folder, describe = reference.bert_base(task, str(tiny_base), with_pte=False)
    assert str(tiny_base) in describe
    assert all((folder / name).is_file() for name in (ONNX_FP32, ONNX_INT8, reference.PYTORCH_DIR + "/" + MODEL_CONFIG))
    assert not (folder / EXECUTORCH_FP32).exists() and not (folder / EXECUTORCH_INT8).exists()
    again, _ = reference.bert_base(task, str(tiny_base), with_pte=True)
    assert again == folder and (folder / EXECUTORCH_FP32).is_file() and (folder / EXECUTORCH_INT8).is_file()


def _edited_copy(source, target, **changes):
    import json
    import shutil

    shutil.copytree(source, target)
    config = json.loads((target / "config.json").read_text())
    (target / "config.json").write_text(json.dumps({**config, **changes}))
    return target


def test_a_reference_is_checked_before_any_work(tiny_base, tmp_path):
    from pocketbert.core.errors import ModelError

    task = make_task("sentiment", ["negative", "positive"])
    vocab = 30522
    with pytest.raises(ModelError, match="does not exist"):
        reference.checked_reference(str(tmp_path / "missing"), task, vocab)
    with pytest.raises(ModelError, match="reads 100 token ids and the student's vocabulary has 30522"):
        reference.checked_reference(str(_edited_copy(tiny_base, tmp_path / "small", vocab_size=100)), task, vocab)
    with pytest.raises(ModelError, match="not BERT-family|the reference is a BERT-family encoder"):
        reference.checked_reference(str(_edited_copy(tiny_base, tmp_path / "gpt", model_type="gpt2")), task, vocab)
    with pytest.raises(ModelError, match="million parameters; a reference is at most"):
        reference.checked_reference(str(_edited_copy(tiny_base, tmp_path / "huge", num_hidden_layers=100_000)),
                                    task, vocab)
    assert reference.checked_reference(None, task, vocab) is None


def test_the_cache_key_is_what_the_reference_holds_not_its_name(tiny_base, tmp_path):
    task = make_task("sentiment", ["negative", "positive"])
    folder = _edited_copy(tiny_base, tmp_path / "reference")
    before = reference.checked_reference(str(folder), task, 30522)
    assert before == reference.checked_reference(str(folder), task, 30522)
    (folder / "config.json").write_text((folder / "config.json").read_text().rstrip()[:-1] + ', "note": 1}')
    assert reference.checked_reference(str(folder), task, 30522) != before  # the same path, other contents
