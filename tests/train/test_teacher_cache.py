"""The teacher-output cache: same outputs as the teacher, reused, bounded, and never corrupt after a full disk."""

from __future__ import annotations

import errno

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from pocketbert.train import teacher_cache
from pocketbert.core.tasks.registry import SentimentTask, TextFeature

FP16_TOLERANCE = 1e-2
TARGETS = [1, 2]


def tiny_teacher():
    config = BertConfig(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, num_labels=2)
    torch.manual_seed(0)
    return BertForSequenceClassification(config).eval()


def features(n=40, seed=0):
    rng = np.random.default_rng(seed)
    return [TextFeature([101, *rng.integers(1000 % 300, 300, size=int(rng.integers(2, 20))).tolist(), 102], i % 2)
            for i in range(n)]


def run(tmp_path, feats, limit_mb=64.0, sha="teacher-a", targets=TARGETS):
    return teacher_cache.teacher_outputs(tiny_teacher(), SentimentTask(["neg", "pos"]), feats, 0, targets, sha, "cpu",
                                         limit_mb, batch_size=8, root=tmp_path)


def test_cached_outputs_equal_the_teachers_and_are_reused(tmp_path):
    feats = features()
    first, report = run(tmp_path, feats)
    assert report["used"] and not report["hit"]
    again, report_again = run(tmp_path, feats)
    assert report_again["hit"] and report_again["total_bytes"] <= report_again["limit_bytes"]
    # What was read back from disk is exactly what was computed and written, row for row.
    assert len(again) == len(feats)
    for i, feature in enumerate(feats):
        (logits_a, hidden_a), (logits_b, hidden_b) = first.row(i), again.row(i)
        assert np.array_equal(logits_a, logits_b) and np.array_equal(hidden_a, hidden_b)
        assert hidden_a.shape == (len(feature.input_ids), len(TARGETS), 32)
    task, teacher = SentimentTask(["neg", "pos"]), tiny_teacher()
    idx = [3, 7, 11]
    batch = task.collate([feats[i] for i in idx], 0)
    with torch.no_grad():
        out = teacher(input_ids=torch.from_numpy(batch["input_ids"]),
                      attention_mask=torch.from_numpy(batch["attention_mask"]), output_hidden_states=True)
    for outputs in (first, again):
        logits, hidden = outputs.batch(idx, batch["input_ids"].shape[1], "cpu")
        assert torch.allclose(logits, out.logits, atol=FP16_TOLERANCE)
        mask = torch.from_numpy(batch["attention_mask"]).bool()
        for layer, k in zip(hidden, TARGETS):
            assert torch.allclose(layer[mask], out.hidden_states[k][mask], atol=FP16_TOLERANCE)


def test_new_teacher_or_data_make_a_new_entry(tmp_path):
    feats = features()
    _, a = run(tmp_path, feats)
    _, b = run(tmp_path, feats, sha="teacher-b")
    _, c = run(tmp_path, features(seed=1))
    assert len({a["path"], b["path"], c["path"]}) == 3
    assert not b["hit"] and not c["hit"]


def test_entry_over_the_limit_is_not_cached(tmp_path):
    outputs, report = run(tmp_path, features(), limit_mb=0.001)
    assert outputs is None and not report["used"] and "over the cache's" in report["reason"]
    outputs, report = run(tmp_path, features(), limit_mb=0)
    assert outputs is None and "off" in report["reason"]
    root = tmp_path / teacher_cache.CACHE_SUBDIR
    assert not root.exists() or not any(root.iterdir())


@pytest.mark.slow
def test_cache_stays_under_its_limit_by_evicting_the_oldest(tmp_path):
    feats_a, feats_b = features(seed=2), features(seed=3)
    _, a = run(tmp_path, feats_a)
    limit_mb = 1.5 * a["entry_bytes"] / 2**20  # room for one entry, not two
    _, b = run(tmp_path, feats_b, limit_mb=limit_mb)
    root = tmp_path / teacher_cache.CACHE_SUBDIR
    assert b["total_bytes"] <= b["limit_bytes"]
    assert [p.name for p in root.iterdir()] == [b["path"].rsplit("/", 1)[-1]]


def test_full_disk_is_a_clear_error_and_leaves_no_entry(tmp_path, monkeypatch):
    real_write = teacher_cache._write_shard

    def disk_full(path, arrays):
        with open(path, "wb") as handle:
            handle.write(b"\x93NUMPY partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(teacher_cache, "_write_shard", disk_full)
    with pytest.raises(teacher_cache.CacheError, match="disk filled up .* free space") as caught:
        run(tmp_path, features())
    assert "\n" not in str(caught.value)
    root = tmp_path / teacher_cache.CACHE_SUBDIR
    assert list(root.iterdir()) == [], "a partial entry was left in the cache"
    monkeypatch.setattr(teacher_cache, "_write_shard", real_write)
    outputs, report = run(tmp_path, features())
    assert report["used"] and not report["hit"] and outputs is not None


def test_run_killed_while_filling_the_cache_leaves_nothing_behind(tmp_path):
    root = tmp_path / teacher_cache.CACHE_SUBDIR
    root.mkdir()
    dead_pid = 2 ** 22 + 4321  # above the default pid_max: no such process
    stale = root / f".0123abcd.tmp-{dead_pid}-aa11bb"
    stale.mkdir()
    (stale / "shard-00000.npz").write_bytes(b"partial")
    _, report = run(tmp_path, features())
    assert report["used"]
    assert not stale.exists()
    assert [p.name for p in root.iterdir()] == [report["path"].rsplit("/", 1)[-1]]
