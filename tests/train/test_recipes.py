"""The Tang et al. augmentation and BiLSTM student, and the Linux Core ML kernels they need."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from pocketbert.core.errors import ConfigError
from pocketbert.train import augment
from pocketbert.core.students.bilstm import BiLSTMClassifier, BiLSTMConfig
from pocketbert.core.tasks.data import TextExample
from pocketbert.core.students.inference import ort_session
from pocketbert.core.tasks.losses import IGNORE_LABEL

ONNX_TOLERANCE = 1e-5     # fp32 ONNX Runtime against PyTorch
COREML_TOLERANCE = 5e-3   # fp16 Core ML program, evaluated by the MIL interpreter


SENTENCES = ["a gripping and often funny film", "the plot is thin and the acting is worse",
             "an old story told with new energy", "it never finds its voice"]


def transfer(cfg: augment.AugmentConfig, seed: int = 1):
    examples = [TextExample(s, i % 2) for i, s in enumerate(SENTENCES)]
    return augment.transfer_set(examples, cfg, "[MASK]", seed, progress=False)


@pytest.mark.slow
def test_transfer_set_is_deterministic_deduplicated_and_teacher_labelled():
    cfg = augment.AugmentConfig(n_iter=10)
    first, report = transfer(cfg)
    second, _ = transfer(cfg)
    assert [e.text for e in first] == [e.text for e in second]
    texts = [e.text for e in first]
    assert len(texts) == len(set(texts))
    assert [e.label for e in first[:len(SENTENCES)]] == [0, 1, 0, 1]
    assert all(e.label == IGNORE_LABEL for e in first[len(SENTENCES):])
    assert report["augmented"] == len(first) - len(SENTENCES) > 0
    assert report["augmented"] + report["duplicates_dropped"] == cfg.n_iter * len(SENTENCES)


@pytest.mark.slow
def test_without_any_rewrite_every_sample_is_a_duplicate():
    out, report = transfer(augment.AugmentConfig(p_mask=0, p_pos=0, p_ng=0, n_iter=5))
    assert len(out) == len(SENTENCES) and report["duplicates_dropped"] == 5 * len(SENTENCES)


@pytest.mark.slow
def test_masking_and_ngrams():
    masked, _ = transfer(augment.AugmentConfig(p_mask=1.0, p_pos=0, p_ng=0, n_iter=3))
    assert {e.text for e in masked[len(SENTENCES):]} == {" ".join(["[MASK]"] * len(s.split())) for s in SENTENCES}
    cut, _ = transfer(augment.AugmentConfig(p_mask=0, p_pos=0, p_ng=1.0, n_iter=30))
    new = cut[len(SENTENCES):]
    assert new and all(1 <= len(e.text.split()) <= augment.MAX_NGRAM for e in new)
    assert all(any(e.text in s for s in SENTENCES) for e in new)  # n-grams are contiguous pieces


def test_pos_replacement_keeps_the_tag():
    tag = augment.pos_tagger(augment.DEFAULT_TAGGER)
    words = [s.split() for s in SENTENCES]
    vocab = augment.WordsByTag([(w, tag(w)) for w in words])
    rng = random.Random(0)
    cfg = augment.AugmentConfig(p_mask=0, p_pos=1.0, p_ng=0)
    for w in words:
        tags = tag(w)
        sample = augment.augment_one(w, tags, vocab, cfg, "[MASK]", rng)
        assert all(new in vocab.words[t] for new, t in zip(sample, tags))


@pytest.mark.parametrize("cfg, fragment", [({"p_mask": 1.5}, "p_mask must be between 0 and 1"),
                                           ({"p_mask": 0.6, "p_pos": 0.6}, "at most 1"),
                                           ({"pos_tagger": "nonsense"}, "unknown augment.pos_tagger")])
def test_augment_config_errors(cfg, fragment):
    from pocketbert.core.config.recipe import AugmentSection

    with pytest.raises(ConfigError, match=fragment):
        augment.AugmentConfig.from_recipe(AugmentSection.model_construct(**cfg))  # unchecked: the config checks
        augment.pos_tagger(cfg["pos_tagger"])


def tiny_bilstm(seed: int = 0) -> BiLSTMClassifier:
    torch.manual_seed(seed)
    return BiLSTMClassifier(BiLSTMConfig(vocab_size=120, num_labels=3, embedding_dim=16, hidden_size=8,
                                         relu_size=12)).eval()


def padded_batch():
    ids = torch.randint(1, 120, (3, 9))
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[1, 5:] = 0
    mask[2, 2:] = 0
    return ids * mask, mask


def test_bilstm_outputs_do_not_depend_on_padding():
    model = tiny_bilstm()
    ids, mask = padded_batch()
    with torch.no_grad():
        batched = model(ids, mask).logits
        for row in range(3):
            n = int(mask[row].sum())
            alone = model(ids[row:row + 1, :n], mask[row:row + 1, :n]).logits
            assert torch.allclose(batched[row], alone[0], atol=1e-6)


def test_bilstm_backward_direction_reads_the_sentence_reversed():
    """Swapping the two LSTMs and reversing the input must give the same final state: the backward LSTM sees
    exactly the reversed real tokens."""
    model = tiny_bilstm()
    ids, mask = padded_batch()
    n = int(mask[1].sum())
    row, reversed_row = ids[1:2, :n], ids[1:2, :n].flip(1)
    swapped = tiny_bilstm()
    swapped.load_state_dict(model.state_dict())
    swapped.forward_lstm, swapped.backward_lstm = swapped.backward_lstm, swapped.forward_lstm
    # relu_layer reads [forward; backward]: swap its input halves too
    h = model.config.hidden_size
    with torch.no_grad():
        w = swapped.relu_layer.weight
        swapped.relu_layer.weight.copy_(torch.cat([w[:, h:], w[:, :h]], dim=1))
        assert torch.allclose(model(row, torch.ones_like(row)).logits,
                              swapped(reversed_row, torch.ones_like(row)).logits, atol=1e-6)


@pytest.mark.slow
def test_bilstm_exports_to_onnx_and_core_ml(tmp_path):
    from pocketbert.core.students.architectures import BILSTM
    from pocketbert.core.tasks.registry import make_task
    from pocketbert.export.programs import coreml, onnx_export

    model, task = tiny_bilstm(), make_task("sentiment", ["a", "b", "c"])
    ids, mask = padded_batch()
    with torch.no_grad():
        expected = model(ids, mask).logits.numpy()
    onnx_export.export_onnx(model, task, tmp_path / "m.onnx", architecture=BILSTM)
    session = ort_session(tmp_path / "m.onnx")
    got = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]
    assert np.abs(got - expected).max() < ONNX_TOLERANCE
    coreml.convert_to_coreml(model, task, 16, task.label_names, "test", architecture=BILSTM).save(
        str(tmp_path / "m.mlpackage"))
    forward = coreml.coreml_forward(tmp_path / "m.mlpackage", task)
    assert np.abs(forward({"input_ids": ids.numpy(), "attention_mask": mask.numpy()}) - expected).max() < COREML_TOLERANCE


def test_mil_lstm_kernel_matches_torch():
    """The numpy lstm kernel against torch.nn.LSTM, with the gate order MIL uses (input, forget, output, cell)."""
    from types import SimpleNamespace

    from pocketbert.export.evaluators.mil_reference import REFERENCE_KERNELS as KERNELS

    torch.manual_seed(3)
    lstm = torch.nn.LSTM(5, 4)
    x = torch.randn(6, 2, 5)
    expected, (h, c) = lstm(x)
    i, f, g, o = lstm.weight_ih_l0.detach().numpy().reshape(4, 4, 5)
    hi, hf, hg, ho = lstm.weight_hh_l0.detach().numpy().reshape(4, 4, 4)
    b = (lstm.bias_ih_l0 + lstm.bias_hh_l0).detach().numpy().reshape(4, 4)

    def var(value):
        return SimpleNamespace(val=value)

    op = SimpleNamespace(
        op_type="lstm", x=var(x.numpy()), initial_h=var(np.zeros((2, 4), np.float32)),
        initial_c=var(np.zeros((2, 4), np.float32)), weight_ih=var(np.concatenate([i, f, o, g])),
        weight_hh=var(np.concatenate([hi, hf, ho, hg])), bias=var(np.concatenate([b[0], b[1], b[3], b[2]])),
        direction=var("forward"), output_sequence=var(True), recurrent_activation=var("sigmoid"),
        cell_activation=var("tanh"), activation=var("tanh"), clip=None, peephole=None)
    outputs, h_final, c_final = KERNELS["lstm"](op)
    assert np.abs(outputs - expected.detach().numpy()).max() < 1e-5
    assert np.abs(h_final - h[0].detach().numpy()).max() < 1e-5
