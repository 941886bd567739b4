"""Epochs until the held-out validation score stops improving: the stopping rule, the best epoch's weights kept,
the held-out rows kept out of training, and a resumed run that stops where the first would have."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from pocketbert.core.errors import ConfigError
from pocketbert.core.config.recipe import TrainingSection
from pocketbert.core.tasks.registry import SentimentTask, TextFeature
from pocketbert.train import epoch_stop, trainer

CPU = torch.device("cpu")


def tiny_bert(seed: int = 0):
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, num_labels=2)
    return BertForSequenceClassification(config)


def rows(n: int = 32):
    task = SentimentTask(["neg", "pos"])
    return task, [TextFeature([101, *[7 + (i * 5 + k) % 100 for k in range(2 + i % 6)], 102], i % 2) for i in range(n)]


def step_loss_for(task):
    def step_loss(forward_model, batch):
        return task.hard_loss(task.logits(forward_model(**trainer.model_inputs(task, batch))), batch), {}
    return step_loss


class Scripted:
    """Validation scores in a given order, each recorded with the weights it was given."""

    def __init__(self, scores):
        self.scores, self.seen = list(scores), []

    def __call__(self, model) -> float:
        self.seen.append(model.classifier.weight.detach().clone())
        return self.scores[len(self.seen) - 1]


def test_training_stops_after_patience_flat_epochs_and_keeps_the_best_epochs_weights(tmp_path):
    task, features = rows()
    model = tiny_bert()
    score = Scripted([0.60, 0.70, 0.65, 0.69, 0.99])  # best after epoch 2, two epochs without better: stop after 4
    stop = epoch_stop.EpochStop(score, patience=2, metric="accuracy", folder=tmp_path, fingerprint="f", writes=True)
    cfg = TrainingSection(epochs=5, batch_size=8, learning_rate=1e-2)
    stats = trainer.train(model, task, features, 0, cfg, CPU, step_loss_for(task), 0, "test", after_epoch=stop)
    assert len(score.seen) == 4  # epoch 5 never ran
    assert stats["steps"] == 5 * 4  # the schedule is laid out over the most epochs
    stop.keep_best(model)
    assert torch.equal(model.classifier.weight, score.seen[1])
    assert stop.report() == {"metric": "accuracy", "validation": {"1": 0.6, "2": 0.7, "3": 0.65, "4": 0.69},
                             "epochs_trained": 4, "best_epoch": 2, "stopped_early": True}

    # A run resumed after the fourth epoch's record stops there without scoring again, with the same best weights.
    again = Scripted([])
    resumed = epoch_stop.EpochStop(again, patience=2, metric="accuracy", folder=tmp_path, fingerprint="f", writes=True)
    assert resumed(3, model) is True and again.seen == []
    assert torch.equal(resumed.best_state["classifier.weight"], score.seen[1])
    # Another configuration's record is not read.
    other = epoch_stop.EpochStop(Scripted([0.5]), patience=2, metric="accuracy", folder=tmp_path, fingerprint="g",
                                 writes=False)
    assert other.scores == {} and other(0, model) is False


def test_validation_rows_are_held_out_of_training_whatever_the_training_subset():
    data = type("Data", (), {"train": [f"sentence {i}" for i in range(500)]})()
    cfg = TrainingSection(stop_patience=1, validation_examples=50)
    held = trainer.validation_examples(data, cfg, 13)
    assert len(held) == 50 and len(set(held)) == 50
    for subset in (None, 100, 449):
        trained = trainer.labelled_examples(data, cfg.model_copy(update={"max_train_examples": subset}), 13)
        assert not set(trained) & set(held)
    assert trainer.validation_examples(data, cfg.model_copy(update={"max_train_examples": 100}), 13) == held
    # Without stopping, training draws from the whole split, as before.
    assert len(trainer.labelled_examples(data, TrainingSection(), 13)) == 500
    with pytest.raises(ConfigError, match="validation_examples 500 leaves none"):
        trainer.validation_examples(data, cfg.model_copy(update={"validation_examples": 500}), 13)
