"""The reference the student is timed against: BERT-base's shape when no checkpoint is named, and its ExecuTorch
programs a cache entry of their own, built only when they are asked for. (The bench itself, against a tiny
reference checkpoint, is end_to_end/test_sentiment_bench_end_to_end.py's.)"""

from __future__ import annotations

import pytest

from pocketbert.mobile_bench.timing import reference
from pocketbert.core.tasks.registry import make_task


BERT_BASE_PARAMETERS = (109_000_000, 110_000_000)  # 12 x 768 with the uncased vocabulary and a 2-label head
LOCK_FREE_BOUND_S = 120  # the tiny reference's ONNX export alone, on a loaded machine


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
def test_a_references_executorch_programs_are_an_entry_of_their_own(tiny_base, tmp_path, monkeypatch):
    import os
    import threading

    from pocketbert.core.run.cache_dir import CACHE_ENV, building
    from pocketbert.core.run.run_files import EXECUTORCH_FP32, EXECUTORCH_INT8, MODEL_CONFIG, ONNX_FP32, ONNX_INT8

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))  # an empty cache: this test builds every entry
    task = make_task("sentiment", ["negative", "positive"])
    source = str(tiny_base)
    onnx = reference.bert_base_folder(task, source)
    built = {}

    def onnx_alone():
        built["onnx"] = reference.bert_base(task, source)

    # another process exporting the programs (their entry's lock held) keeps no bench from the ONNX entry
    with building(reference.programs_folder(onnx)):
        bench = threading.Thread(target=onnx_alone, daemon=True)
        bench.start()
        bench.join(timeout=LOCK_FREE_BOUND_S)
        assert not bench.is_alive(), "the ONNX entry waited for the ExecuTorch programs' lock"
    assert built["onnx"][0] == onnx and source in built["onnx"][1]
    assert all((onnx / name).is_file() for name in (ONNX_FP32, ONNX_INT8, reference.PYTORCH_DIR + "/" + MODEL_CONFIG))
    assert not (onnx / EXECUTORCH_FP32).exists() and not reference.programs_folder(onnx).exists()
    before = {name: os.stat(onnx / name).st_ino for name in (ONNX_FP32, ONNX_INT8)}
    programs = reference.bert_base_programs(task, source)
    assert programs == reference.programs_folder(onnx)
    assert (programs / EXECUTORCH_FP32).is_file() and (programs / EXECUTORCH_INT8).is_file()
    assert {name: os.stat(onnx / name).st_ino for name in before} == before  # the ONNX entry not built again


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
