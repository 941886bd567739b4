"""What the processes of a torchrun rely on, checked in one process: durable checkpoints with the loss scaler's
state, the precision the GPU is asked about, and which process writes the stage."""

from __future__ import annotations

import os

import torch

from pocketbert.core.config.recipe import TrainingSection
from pocketbert.train import checkpoint, distributed, precision, trainer


def tiny_model():
    torch.manual_seed(0)
    return torch.nn.Linear(4, 2)


def test_a_checkpoint_is_on_disk_before_and_after_its_rename(tmp_path, monkeypatch):
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(descriptor):
        synced.append(os.readlink(f"/proc/self/fd/{descriptor}"))
        return real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    model = tiny_model()
    optimizer = torch.optim.AdamW(model.parameters())
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    spec = checkpoint.CheckpointSpec(tmp_path / "ckpt", 1, "fp", resume=True)
    checkpoint.save(spec, 1, model, optimizer, schedule, precision.grad_scaler(torch.device("cpu"), precision.FP32),
                    {}, torch.device("cpu"), precision.FP32)
    assert str(spec.folder / checkpoint.CHECKPOINT_PARTIAL) in synced, "the checkpoint's bytes were not flushed"
    assert synced[-1] == str(spec.folder), "the rename into place was not flushed"


def test_the_loss_scalers_state_survives_a_resume(tmp_path):
    """fp16 training (T4, V100) scales its loss; a resumed run must continue with the scale it had reached."""
    device = torch.device("cpu")
    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=1)
    for _ in range(3):  # each finite step doubles the scale
        scaler.scale(model(torch.ones(1, 4)).sum()).backward()
        scaler.step(optimizer)
        scaler.update()
    spec = checkpoint.CheckpointSpec(tmp_path / "ckpt", 1, "fp", resume=True)
    checkpoint.save(spec, 3, model, optimizer, schedule, scaler, {"loss": 1.0}, device, precision.FP16)
    fresh = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=1)
    fresh_model = tiny_model()
    fresh_optimizer = torch.optim.SGD(fresh_model.parameters(), lr=0.1)
    step, running = checkpoint.load(spec, fresh_model, fresh_optimizer,
                                    torch.optim.lr_scheduler.LambdaLR(fresh_optimizer, lambda step: 1.0), fresh,
                                    device, precision.FP16)
    assert step == 3 and running == {"loss": 1.0}
    assert fresh.get_scale() == scaler.get_scale() == 8192.0
    assert fresh.state_dict() == scaler.state_dict()


def test_the_gpu_is_asked_whether_it_does_bf16_in_hardware(monkeypatch):
    """A T4 or V100 answers yes when emulation counts; the question must exclude it."""
    asked = []

    def is_bf16_supported(including_emulation=True):
        asked.append(including_emulation)
        return including_emulation  # an emulating GPU: yes only when emulation counts

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    assert precision.precision_for(torch.device("cuda")) == precision.FP16
    assert asked == [False]


def test_only_process_0_gets_a_folder_to_write(tmp_path, monkeypatch):
    from pocketbert.core.run.atomic_folder import staged_output

    for name, value in {"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}.items():
        monkeypatch.setenv(name, value)  # what torchrun sets (launch_env refuses half a set)
    with distributed.main_writes(tmp_path, staged_output(tmp_path, "student")) as out:
        assert out is None
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("RANK", "0")
    with distributed.main_writes(tmp_path, staged_output(tmp_path, "student")) as out:
        (out / "weights").write_text("w")
    assert (tmp_path / "student" / "weights").is_file()


def test_a_batch_is_at_most_each_process_share_of_the_data():
    assert trainer.capped_batch_size(16, 64, 1) == 16  # smaller than the data: as asked
    assert trainer.capped_batch_size(100_000, 64, 1) == 64
    assert trainer.capped_batch_size(32, 10, 2) == 5  # one batch of 10 shared by 2 processes gave 0 steps
    assert trainer.capped_batch_size(4, 1, 2) == 1


def test_the_large_batch_rule_scales_the_learning_rate():
    cfg = TrainingSection(learning_rate=1e-4, base_batch_size=32, lr_scaling="sqrt")
    assert trainer.effective_learning_rate(cfg, 32) == 1e-4
    assert abs(trainer.effective_learning_rate(cfg, 512) - 4e-4) < 1e-12
    linear = cfg.model_copy(update={"lr_scaling": "linear"})
    assert abs(trainer.effective_learning_rate(linear, 512) - 16e-4) < 1e-12
    assert trainer.effective_learning_rate(TrainingSection(learning_rate=1e-4), 512) == 1e-4  # no base batch: as given


def test_padding_to_a_multiple_trains_the_same_rows(wordpiece_tokenizer):
    """Rounded-up batch widths only add padding: ids with the pad id, masks 0, per-token labels ignored."""
    import numpy as np

    from pocketbert.core.tasks.losses import IGNORE_LABEL
    from pocketbert.core.tasks.registry import SentimentTask, TextFeature

    task = SentimentTask(["neg", "pos"])
    features = [TextFeature([101, 7, 8, 102], 0), TextFeature([101, 9, 102], 1)]
    batch = trainer.collate_padded(task, features, 0, 8, max_length=64)
    assert batch["input_ids"].shape == (2, 8) and batch["attention_mask"][:, 4:].sum() == 0
    assert (batch["input_ids"][0, :4] == [101, 7, 8, 102]).all() and (batch["input_ids"][:, 4:] == 0).all()
    assert trainer.collate_padded(task, features, 0, 8, max_length=6)["input_ids"].shape == (2, 6)
    per_token = trainer.pad_to({"input_ids": np.ones((1, 3), np.int64), "labels": np.ones((1, 3), np.int64)}, 5, 0)
    assert per_token["labels"].tolist() == [[1, 1, 1, IGNORE_LABEL, IGNORE_LABEL]]
