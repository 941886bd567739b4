"""Training steps replayed as CUDA graphs: where they are used, and that a replayed step trains as an eager one.

The replay tests need a CUDA GPU and are skipped without one; where graphs cannot be used is decided on the
host and checked everywhere.
"""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from pocketbert.core.tasks import losses
from pocketbert.core.config.recipe import TrainingSection
from pocketbert.core.tasks.registry import SentimentTask, TextFeature
from pocketbert.train import cuda_graphs, trainer
from pocketbert.train.distill import distillation_loss

GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
CUDA, CPU = torch.device("cuda"), torch.device("cpu")
# Replayed kernels are the eager ones, in bf16: the two runs' weights differ by rounding, a small fraction of what
# training moved them (a learning rate frozen at capture moves them by a share of that move).
SAME_WEIGHTS_SHARE = 0.05
CFG = TrainingSection(epochs=2, batch_size=8, warmup_ratio=0.25, learning_rate=3e-3, weight_decay=0.01,
                      max_length=32, pad_to_multiple=8)


def tiny_bert(layers: int, seed: int):
    torch.manual_seed(seed)
    # no dropout: eager and replayed steps then do the same arithmetic, so their weights can be compared
    config = BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=layers, num_attention_heads=2,
                        intermediate_size=64, num_labels=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return BertForSequenceClassification(config)


def varied_features(n: int = 72):
    """Sentences of 3 to 20 tokens: with widths rounded to 8, three shapes (and a short last batch)."""
    task = SentimentTask(["neg", "pos"])
    return task, [TextFeature([101, *[7 + (i * 7 + k) % 100 for k in range(1 + i % 18)], 102], i % 2)
                  for i in range(n)]


def hard_label_loss(task):
    def step_loss(forward_model, batch):
        return task.hard_loss(task.logits(forward_model(**trainer.model_inputs(task, batch))), batch), {}
    return step_loss


def test_where_graphs_cannot_be_used_is_said():
    reason = cuda_graphs.unavailable_reason
    default = TrainingSection()
    assert reason(default, CUDA, 1, "bf16") is None
    assert reason(default, CUDA, 1, "fp32") is None
    assert "cpu" in reason(default, CPU, 1, "fp32")
    assert "several processes" in reason(default, CUDA, 2, "bf16")
    assert "loss scaling" in reason(default, CUDA, 1, "fp16")
    assert reason(TrainingSection(compile=True), CUDA, 1, "bf16") is None  # the compiled step is captured too
    assert "cuda_graphs: false" in reason(TrainingSection(cuda_graphs=False), CUDA, 1, "bf16")


def test_a_cpu_run_records_that_it_trained_eagerly():
    task, features = varied_features(24)
    stats = trainer.train(tiny_bert(1, 0), task, features, 0, CFG, CPU, hard_label_loss(task), 0, "test")
    assert stats["cuda_graphs"] == {"used": False, "not_used_because": "training on cpu, not a CUDA GPU"}


def train_both_ways(model, task, features, step_loss, cfg=CFG):
    eager, graphed = copy.deepcopy(model), copy.deepcopy(model)
    eager_stats = trainer.train(eager, task, features, 0, cfg.model_copy(update={"cuda_graphs": False}), CUDA,
                                step_loss, 0, "eager")
    graphed_stats = trainer.train(graphed, task, features, 0, cfg, CUDA, step_loss, 0, "graphs")
    return eager, graphed, eager_stats, graphed_stats


def assert_same_weights(initial, a, b):
    """The runs' weights differ by less than SAME_WEIGHTS_SHARE of how far training moved them."""
    def flat(model):
        return torch.cat([p.detach().float().flatten().cpu() for p in model.parameters()])

    start, x, y = flat(initial), flat(a), flat(b)
    assert ((x - y).norm() / (x - start).norm()).item() < SAME_WEIGHTS_SHARE


@GPU
def test_replayed_steps_train_as_eager_steps():
    task, features = varied_features()
    initial = tiny_bert(2, 0)
    eager, graphed, eager_stats, stats = train_both_ways(initial, task, features, hard_label_loss(task))
    report = stats["cuda_graphs"]
    assert report["used"] and report["shapes_captured"] >= 3 and report["eager_steps"] == 0
    assert report["rehearsal_steps"] == report["shapes_captured"] * cuda_graphs.WARMUP_STEPS_PER_SHAPE
    assert eager_stats["cuda_graphs"]["used"] is False
    # The learning-rate schedule reaches the replays: a rate frozen at capture would give other weights.
    assert_same_weights(initial, eager, graphed)
    assert stats["final_loss"] == pytest.approx(eager_stats["final_loss"], rel=SAME_WEIGHTS_SHARE)


@GPU
def test_a_distillation_step_with_the_teacher_inside_is_replayed():
    task, features = varied_features()
    teacher = tiny_bert(3, 1).to(CUDA).eval()
    step_loss, extras = distillation_loss(task, teacher, None, {"kl": 1.0, "ce": 0.5, "cos": 0.5}, 2.0, [2, 3],
                                          losses.cross_entropy, CUDA)
    assert extras is None
    initial = tiny_bert(2, 0)
    eager, graphed, _, stats = train_both_ways(initial, task, features, step_loss)
    assert stats["cuda_graphs"]["used"]
    assert_same_weights(initial, eager, graphed)


@GPU
def test_a_step_on_cached_teacher_outputs_is_replayed(tmp_path):
    from pocketbert.train import teacher_cache

    task, features = varied_features()
    teacher = tiny_bert(3, 1).to(CUDA).eval()
    cached, _ = teacher_cache.teacher_outputs(teacher, task, features, 0, [2, 3], "graphs-test", CUDA,
                                              teacher_cache.DEFAULT_LIMIT_MB, 16, root=tmp_path)
    step_loss, extras = distillation_loss(task, teacher, cached, {"kl": 1.0, "ce": 0.5, "cos": 0.5}, 2.0, [2, 3],
                                          losses.cross_entropy, CUDA)
    initial = tiny_bert(2, 0)
    eager, graphed = copy.deepcopy(initial), copy.deepcopy(initial)
    trainer.train(eager, task, features, 0, CFG.model_copy(update={"cuda_graphs": False}), CUDA, step_loss, 0, "eager",
                  batch_extras=extras)
    stats = trainer.train(graphed, task, features, 0, CFG, CUDA, step_loss, 0, "graphs", batch_extras=extras)
    assert stats["cuda_graphs"]["used"]
    assert_same_weights(initial, eager, graphed)


def dropout_bert(seed: int):
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, num_labels=2, hidden_dropout_prob=0.3)
    return BertForSequenceClassification(config).train()


def one_real_step(model, optimizer, averages, task, batch):
    trainer.train_step(model, model, batch, hard_label_loss(task), optimizer, trainer.precision.grad_scaler(CPU, "fp32"),
                       averages, CPU, "fp32")


def test_a_rehearsal_leaves_no_trace_and_the_next_step_is_the_one_without_it():
    """The bookkeeping of a graphed run's warm-up, on the CPU: weights, optimizer moments it created, running
    averages and the random-number state (dropout) are as before it, so the real step after it is bitwise the
    step a run without it takes."""
    task, features = varied_features(16)
    batch = trainer.to_device(trainer.collate_padded(task, features[:8], 0, 8, 32), CPU)
    runs = []
    for rehearse in (False, True):
        model = dropout_bert(0)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        averages: dict[str, torch.Tensor] = {}
        torch.manual_seed(5)
        if rehearse:
            before = [p.detach().clone() for p in model.parameters()]

            def state():
                moments = [v for s in optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
                return [*model.parameters(), *moments, *averages.values()]

            with cuda_graphs.rehearsal(state, CPU):
                for _ in range(cuda_graphs.WARMUP_STEPS_PER_SHAPE):
                    one_real_step(model, optimizer, averages, task, batch)
            assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
            assert optimizer.state and all(float(v.abs().sum()) == 0 for s in optimizer.state.values()
                                           for v in s.values())
            averages.clear()  # a running average the rehearsal made is zeroed; the comparison starts it afresh
        one_real_step(model, optimizer, averages, task, batch)
        runs.append([p.detach().clone() for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*runs))


def test_a_resumed_optimizers_learning_rate_is_put_back_on_the_training_device():
    """A checkpoint loads the rate as a host tensor, which the fused AdamW reads as a number: captured so, a
    graph would replay its capture step's rate for the rest of the run. The meta device stands in for a GPU."""
    weights = [torch.nn.Parameter(torch.zeros(2))]
    saved = torch.optim.AdamW(weights, lr=torch.tensor(3e-4)).state_dict()
    resumed = torch.optim.AdamW(weights, lr=torch.tensor(1.0))
    resumed.load_state_dict(saved)
    assert resumed.param_groups[0]["lr"].device.type == "cpu"
    trainer.learning_rate_on_device(resumed, torch.device("meta"))
    rate = resumed.param_groups[0]["lr"]
    assert isinstance(rate, torch.Tensor) and rate.device.type == "meta"
    on_host = torch.optim.AdamW(weights, lr=torch.tensor(3e-4))
    kept = on_host.param_groups[0]["lr"]
    trainer.learning_rate_on_device(on_host, torch.device("cpu"))  # already where it trains: the same tensor
    assert on_host.param_groups[0]["lr"] is kept
