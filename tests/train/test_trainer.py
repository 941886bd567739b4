"""Batching and device choice of the training loop; a few real steps reduce the loss."""

from __future__ import annotations

import pytest
import torch

from pocketbert.core.errors import ConfigError
from pocketbert.train.trainer import length_grouped_batches, pick_device


def test_length_grouped_batches_cover_every_example_once():
    lengths = [(i * 37) % 50 + 1 for i in range(1000)]
    batches = length_grouped_batches(lengths, 16, seed=3)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(1000))
    assert all(len(b) <= 16 for b in batches)


def test_length_grouping_cuts_padding():
    import random

    rng = random.Random(0)
    lengths = [rng.randint(3, 64) for _ in range(2000)]
    grouped = length_grouped_batches(lengths, 32, seed=0)
    order = list(range(2000))
    rng.shuffle(order)
    plain = [order[i:i + 32] for i in range(0, 2000, 32)]

    def padded(batches):
        return sum(max(lengths[i] for i in b) * len(b) for b in batches)

    assert padded(grouped) < 0.7 * padded(plain)


def test_batches_change_with_seed():
    lengths = list(range(1, 200))
    assert length_grouped_batches(lengths, 8, 0) != length_grouped_batches(lengths, 8, 1)
    assert length_grouped_batches(lengths, 8, 5) == length_grouped_batches(lengths, 8, 5)


def test_pick_device():
    assert pick_device("cpu").type == "cpu"
    assert pick_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA GPU"):
            pick_device("cuda")


def tiny_classifier_features(n: int = 32):
    from pocketbert.core.tasks.registry import SentimentTask, TextFeature

    task = SentimentTask(["neg", "pos"])
    return task, [TextFeature([101, 7 + i % 50, 8 + i % 30, 102], i % 2) for i in range(n)]


@pytest.mark.slow
def test_a_loss_that_stops_being_finite_ends_training_in_one_line():
    from transformers import BertConfig, BertForSequenceClassification

    from pocketbert.core.config.recipe import TrainingSection
    from pocketbert.train.trainer import TrainingDiverged, train

    task, features = tiny_classifier_features()
    model = BertForSequenceClassification(BertConfig(vocab_size=200, hidden_size=16, num_hidden_layers=1,
                                                     num_attention_heads=2, intermediate_size=32, num_labels=2))
    cfg = TrainingSection(epochs=1, batch_size=8, warmup_ratio=0.0, learning_rate=1e-3, weight_decay=0.0)

    def step_loss(forward_model, batch):
        loss = task.hard_loss(task.logits(forward_model(input_ids=batch["input_ids"],
                                                        attention_mask=batch["attention_mask"])), batch)
        return loss * float("nan"), {}

    with pytest.raises(TrainingDiverged, match="training diverged: the running average of loss is nan by step 4") as caught:
        train(model, task, features, 0, cfg, torch.device("cpu"), step_loss, 0, "test")
    assert "\n" not in str(caught.value) and "lower the learning rate" in str(caught.value)


def test_a_checkpoint_saved_in_fp16_trains_in_fp32(tmp_path, wordpiece_tokenizer):
    # transformers 5 loads a checkpoint in the dtype it was saved in; AdamW on fp16 weights lost every update.
    from safetensors.torch import load_file
    from transformers import BertConfig, BertModel

    from pocketbert.core.students.models import load_for_task
    from pocketbert.core.tasks.registry import make_task

    torch.manual_seed(0)
    config = BertConfig(vocab_size=wordpiece_tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64)
    BertModel(config).half().save_pretrained(tmp_path / "fp16")
    wordpiece_tokenizer.save_pretrained(tmp_path / "fp16")
    assert {t.dtype for t in load_file(tmp_path / "fp16" / "model.safetensors").values()} == {torch.float16}
    model = load_for_task(str(tmp_path / "fp16"), make_task("sentiment", ["neg", "pos"]))
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_a_checkpoint_written_in_the_background_holds_the_state_of_its_step(tmp_path, monkeypatch):
    """Training changes the weights in place while the writer thread serialises them: the file must hold the
    weights of the step it was taken at, not later ones."""
    import threading

    from pocketbert.train import checkpoint

    released, write = threading.Event(), checkpoint._write
    monkeypatch.setattr(checkpoint, "_write", lambda *args: (released.wait(), write(*args)))  # writes after the change

    model = torch.nn.Linear(64, 64)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    spec = checkpoint.CheckpointSpec(tmp_path / "ckpt", every=1, fingerprint="f", resume=True)
    saved = model.weight.detach().clone()
    writer = checkpoint.CheckpointWriter()
    checkpoint.save(spec, 7, model, optimizer, schedule, scaler, {}, torch.device("cpu"), "fp32", writer)
    with torch.no_grad():
        model.weight.add_(1.0)  # the next steps, before the file is written
    released.set()
    writer.wait()
    state = torch.load(spec.folder / checkpoint.CHECKPOINT_FILE, weights_only=True)
    assert state["step"] == 7 and torch.equal(state["model"]["weight"], saved)


def test_a_failed_background_write_is_raised_to_the_trainer(tmp_path):
    from pocketbert.train import checkpoint

    writer = checkpoint.CheckpointWriter()
    writer.submit(lambda: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    with pytest.raises(OSError, match="No space left"):
        writer.wait()
    writer.wait()  # raised once


def test_max_steps_trains_that_many_steps_across_epochs_and_dropout_off_trains_in_eval_mode():
    """A stage that trains in steps (a fitted vocabulary's recovery): the schedule spans max_steps whatever the
    epochs, the last epoch stops at its step, and dropout=False runs every step in eval mode."""
    from test_epoch_stop import CPU, rows, step_loss_for, tiny_bert

    from pocketbert.core.config.recipe import TrainingSection
    from pocketbert.train import trainer

    task, features = rows(32)  # 4 batches of 8 an epoch
    modes, steps = [], 10      # two epochs and a half
    loss = step_loss_for(task)

    def step_loss(forward_model, batch):
        modes.append(forward_model.training)
        return loss(forward_model, batch)

    model = tiny_bert()
    cfg = TrainingSection(epochs=1, batch_size=8, learning_rate=1e-2, checkpoint_every=1000)
    stats = trainer.train(model, task, features, 0, cfg, CPU, step_loss, 0, "test", max_steps=steps, dropout=False)
    assert stats["steps"] == len(modes) == steps and not any(modes)
    modes.clear()
    trainer.train(tiny_bert(), task, features, 0, cfg, CPU, step_loss, 0, "test")
    assert len(modes) == 4 and all(modes)  # by default: the section's epochs, with dropout
