"""The static-embedding rung: its table distilled from an encoder (one row per vocabulary id), its sentence mean,
its classifier learning real SST-2, its reload from disk alone, its exports gated like the others, and the
recipe's one-line refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import error_line, run_cli

from pocketbert.core.students.architectures import STATIC
from pocketbert.core.students.inference import batched_logits, ort_forward, ort_session, torch_forward
from pocketbert.core.config.recipe import EvalSection
from pocketbert.core.students.static_embedding import StaticEmbeddingClassifier, StaticEmbeddingConfig
from pocketbert.core.tasks.registry import make_task
from pocketbert.export.checks import parity
from pocketbert.export.programs import onnx_export
from pocketbert.train import static_table

DIMS = 16                   # the table's width for the tiny encoder (hidden 32)
ENCODER_BATCH = 8192        # vocabulary ids a batch: four passes of the tiny encoder
DISTANCE_TOLERANCE = 1e-4   # a full-width PCA is a rotation: distances between rows kept to float32 rounding
ROW_SCALE_BYTES = 4         # the int8 table's fp32 scale per row (export/programs/table_rows.py)
INT8_FILE_SLACK = 1.05      # the classifier and the graph beside the table
TRAIN_EXAMPLES, DEV_EXAMPLES = 3000, 400
BATCH, EPOCHS, LEARNING_RATE = 100, 4, 1e-2  # few steps: each costs the same few milliseconds at any batch size
ABOVE_CHANCE = 0.65         # SST-2 dev accuracy a bag of learned word vectors reaches from 3,000 sentences
EXACT_TOLERANCE = 1e-5      # an fp32 runtime against PyTorch
BROKEN_MIN_DIFF = 1e-3      # a Core AI evaluator with one operation wrong must miss the model by at least this


@pytest.fixture(scope="module")
def encoder(tiny_base):
    from transformers import BertModel

    return BertModel.from_pretrained(str(tiny_base)).eval()


@pytest.fixture(scope="module")
def encoder_rows(encoder, wordpiece_tokenizer):
    """Every vocabulary id through the tiny encoder once: the tests derive their tables from these rows."""
    return static_table.encoder_rows(encoder, wordpiece_tokenizer, len(wordpiece_tokenizer), torch.device("cpu"),
                                     batch_size=ENCODER_BATCH, progress=None)


@pytest.fixture(scope="module")
def table(encoder_rows, wordpiece_tokenizer):
    return static_table.table_from_rows(encoder_rows, static_table.ignored_ids(wordpiece_tokenizer), DIMS, 1e-4)


@pytest.mark.slow
def test_the_table_has_one_row_per_vocabulary_id_and_zero_rows_for_ignored_tokens(table, wordpiece_tokenizer):
    rows, report = table
    assert rows.shape == (len(wordpiece_tokenizer), DIMS) and report["rows"] == len(wordpiece_tokenizer)
    ignored = static_table.ignored_ids(wordpiece_tokenizer)
    vocab = wordpiece_tokenizer.get_vocab()
    assert {vocab["[CLS]"], vocab["[SEP]"], vocab["[PAD]"], vocab["[unused0]"]} <= set(ignored)
    assert not rows[ignored].any()
    kept = np.setdiff1d(np.arange(len(wordpiece_tokenizer)), ignored)
    assert (rows[kept].norm(dim=1) > 0).all()
    assert 0 < report["pca_explained_variance"] < 1


@pytest.mark.slow
def test_each_row_is_that_token_through_the_encoder_alone(encoder, encoder_rows, wordpiece_tokenizer):
    """At full width and without weighting the table is a rotation of the encoder's mean outputs: the distance
    between two rows is the distance between the encoder's outputs on `[CLS] token [SEP]` for the two tokens."""
    rows, _ = static_table.table_from_rows(encoder_rows, static_table.ignored_ids(wordpiece_tokenizer),
                                           encoder.config.hidden_size, None)
    words = ["good", "awful", "film", "##ing"]
    ids = wordpiece_tokenizer.convert_tokens_to_ids(words)
    with torch.no_grad():
        direct = torch.stack([encoder(input_ids=torch.tensor([[wordpiece_tokenizer.cls_token_id, i,
                                                                wordpiece_tokenizer.sep_token_id]])
                                      ).last_hidden_state[0].mean(dim=0) for i in ids])
    assert torch.allclose(torch.cdist(rows[ids], rows[ids]), torch.cdist(direct, direct), atol=DISTANCE_TOLERANCE)


@pytest.mark.slow
def test_sif_weighting_damps_the_frequent_word_pieces(encoder_rows, wordpiece_tokenizer, table):
    weighted, _ = table
    plain, _ = static_table.table_from_rows(encoder_rows, static_table.ignored_ids(wordpiece_tokenizer), DIMS, None)
    the, rare = wordpiece_tokenizer.convert_tokens_to_ids(["the", "zeppelin"])
    ratio = weighted.norm(dim=1) / plain.norm(dim=1).clamp(min=1e-12)
    assert ratio[the] < ratio[rare] <= 1.0
    weights = static_table.zipf_sif_weights(1000, 1e-4)
    assert np.all(np.diff(weights) > 0) and weights[-1] < 1


def test_a_table_wider_than_the_encoder_is_refused(encoder, wordpiece_tokenizer):
    from pocketbert.core.errors import ConfigError

    with pytest.raises(ConfigError, match="static.pca_dims must be between 1 and the teacher's hidden size 32"):
        static_table.distill_table(encoder, wordpiece_tokenizer, 64, None, torch.device("cpu"), progress=None)


def small_model(vocab_size=50, dims=4, hidden=6, special=(0, 1, 2), normalize=False) -> StaticEmbeddingClassifier:
    torch.manual_seed(0)
    return StaticEmbeddingClassifier(StaticEmbeddingConfig(vocab_size=vocab_size, num_labels=2, embedding_dim=dims,
                                                           hidden_size=hidden, normalize=normalize,
                                                           ignored_token_ids=list(special))).eval()


def test_the_sentence_vector_is_the_mean_of_its_word_pieces_alone():
    model = small_model()
    cls, sep, pad = 1, 2, 0
    ids = torch.tensor([[cls, 7, 9, 11, sep], [cls, 7, sep, pad, pad]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    rows = model.embeddings.weight.detach()
    with torch.no_grad():
        vectors = model.sentence_vector(ids, mask)
        assert torch.allclose(vectors[0], rows[[7, 9, 11]].mean(dim=0), atol=1e-6)
        assert torch.allclose(vectors[1], rows[7], atol=1e-6)
        # padding changes nothing: the short row alone, at its own length, gives the same logits
        assert torch.allclose(model(ids, mask).logits[1], model(ids[1:, :3], mask[1:, :3]).logits[0], atol=1e-6)
    normalized = small_model(normalize=True)
    with torch.no_grad():
        assert torch.allclose(normalized.sentence_vector(ids, mask).norm(dim=1), torch.ones(2), atol=1e-6)


@pytest.fixture(scope="module")
def sst2(shared_data, wordpiece_tokenizer):
    from pocketbert.core.tasks.data import subsample
    from pocketbert.core.tasks.task_data import load_task_data

    data = load_task_data("sst2", "sentiment", shared_data)
    task = make_task("sentiment", data.label_names)
    train = task.features(wordpiece_tokenizer, subsample(data.train, TRAIN_EXAMPLES, 13), 64)
    dev_examples = subsample(data.eval, DEV_EXAMPLES, 13)
    return task, train, dev_examples, task.features(wordpiece_tokenizer, dev_examples, 64)


@pytest.fixture(scope="module")
def trained(table, wordpiece_tokenizer, sst2):
    """A static student on the tiny encoder's table, trained on real SST-2 sentences: (model, first and last
    epoch's mean loss)."""
    task, train, _, _ = sst2
    torch.manual_seed(0)
    model = StaticEmbeddingClassifier(StaticEmbeddingConfig(
        vocab_size=len(wordpiece_tokenizer), num_labels=2, embedding_dim=DIMS, hidden_size=32,
        ignored_token_ids=sorted(wordpiece_tokenizer.all_special_ids)))
    with torch.no_grad():
        model.embeddings.weight.copy_(table[0])
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    generator = np.random.default_rng(0)
    losses = []
    for _ in range(EPOCHS):
        epoch = []
        order = generator.permutation(len(train))
        for start in range(0, len(train), BATCH):
            rows = [train[i] for i in order[start:start + BATCH]]
            batch = {k: torch.from_numpy(v) for k, v in task.collate(rows, wordpiece_tokenizer.pad_token_id).items()}
            loss = task.hard_loss(model(batch["input_ids"], batch["attention_mask"]).logits, batch)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            epoch.append(loss.item())
        losses.append(float(np.mean(epoch)))
    return model.eval(), losses


@pytest.mark.slow
def test_the_classifier_learns_real_sst2(trained, sst2, wordpiece_tokenizer):
    model, losses = trained
    task, _, dev_examples, dev = sst2
    assert losses[-1] < 0.8 * losses[0]
    logits = batched_logits(task, dev, wordpiece_tokenizer.pad_token_id, 64, torch_forward(model, task))
    assert task.score(dev_examples, dev, logits, EvalSection())["accuracy"] > ABOVE_CHANCE


@pytest.mark.slow
def test_the_saved_student_reloads_from_its_folder_alone(trained, sst2, wordpiece_tokenizer, tmp_path):
    from pocketbert.core.students.stage_folder import load_stage_model, save_stage_model
    from pocketbert.core.run.run_files import STATIC_CONFIG, TOKENIZER_JSON, WEIGHTS

    model, _ = trained
    task, _, _, dev = sst2
    (tmp_path / "student").mkdir()
    save_stage_model(model, wordpiece_tokenizer, tmp_path / "student", task, 64, architecture=STATIC)
    assert {STATIC_CONFIG, WEIGHTS, TOKENIZER_JSON} <= {p.name for p in (tmp_path / "student").iterdir()}
    again, tokenizer, again_task, info = load_stage_model(tmp_path / "student")
    assert info["architecture"] == STATIC.name and isinstance(again, StaticEmbeddingClassifier)
    assert again.config == model.config and again_task.label_names == task.label_names
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))
    pad = tokenizer.pad_token_id
    assert np.array_equal(np.stack(batched_logits(task, dev, pad, 64, torch_forward(model, task))),
                          np.stack(batched_logits(task, dev, pad, 64, torch_forward(again, task))))
    embedding, logits, attention = STATIC.encode(again, {k: torch.from_numpy(v) for k, v in
                                                         task.collate(dev[:4], pad).items()}, "cls", True)
    assert embedding.shape == (4, DIMS) and logits.shape == (4, 2) and attention is None


@pytest.mark.slow
def test_onnx_exports_pass_the_parity_gate(trained, sst2, wordpiece_tokenizer, tmp_path):
    model, _ = trained
    task, _, dev_examples, dev = sst2
    pad = wordpiece_tokenizer.pad_token_id
    student = batched_logits(task, dev, pad, 64, torch_forward(model, task))
    fp32 = onnx_export.export_onnx(model, task, tmp_path / "model.onnx", architecture=STATIC)
    int8 = onnx_export.quantize_int8(fp32, tmp_path / "model.int8.onnx")
    for path, gate in ((fp32, parity.FP32_GATE), (int8, parity.COMPRESSED_GATE)):
        logits = batched_logits(task, dev, pad, 64, ort_forward(ort_session(path), task))
        result = parity.compare(task, dev_examples, dev, student, logits, {}, path.name, "onnxruntime", "fp32", gate)
        assert result.passed, result.failure()
    assert result.max_abs_diff > 0  # the int8 graph did quantize the table
    # the table, nearly all the file: one byte a value and a 4-byte scale a row, against four bytes a value
    int8_share = (DIMS + ROW_SCALE_BYTES) / (4 * DIMS)
    assert (tmp_path / "model.int8.onnx").stat().st_size < INT8_FILE_SLACK * int8_share * (
        tmp_path / "model.onnx").stat().st_size


@pytest.mark.slow
def test_core_ai_evaluates_the_static_graph_and_misses_it_with_a_wrong_comparison_or_relu(trained, sst2,
                                                                                           wordpiece_tokenizer,
                                                                                           tmp_path):
    """The Core AI evaluator runs the static graph's comparisons (special tokens left out) and ReLU as Core AI
    does: exactly; with either operation wrong it misses."""
    pytest.importorskip("coreai_torch")
    from pocketbert.export.programs import coreai
    from pocketbert.export.evaluators import coreai_eval, coreai_ir

    model, _ = trained
    task, _, _, dev = sst2
    path = tmp_path / "static.aimodel"
    coreai.save(coreai.convert_to_coreai(model, task, (64,), STATIC, fp16=False), path, "test")
    batch = task.collate(dev[:8], wordpiece_tokenizer.pad_token_id)
    batch = {k: np.pad(v, ((0, 0), (0, 64 - v.shape[1]))) if v.ndim == 2 else v for k, v in batch.items()}
    expected = torch_forward(model, task)(batch)
    inputs = {k: batch[k][:, None, :] for k in task.input_names}
    program = coreai_ir.load_program(path)
    right = coreai_eval.CoreAIEvaluator(program, coreai.entry_name(64)).predict(inputs)["logits"][:, 0]
    assert np.abs(right - expected).max() < EXACT_TOLERANCE
    broken = {"decomposable.broadcasting_not_equal": coreai_eval._binary("equal"),
              "relu": coreai_eval._unary(lambda x: x)}
    for kind, kernel in broken.items():
        wrong = coreai_eval.CoreAIEvaluator(program, coreai.entry_name(64),
                                            {**coreai_eval.KERNELS, kind: kernel}).predict(inputs)["logits"][:, 0]
        assert np.abs(wrong - expected).max() > BROKEN_MIN_DIFF, kind


@pytest.mark.parametrize("args, fragments", [
    (["--task", "qa"], ["no answer span", "--recipe distilbert"]),
    ([], ["no hidden states", "--cos-weight 0"]),
])
def test_the_recipe_refuses_qa_and_a_cosine_loss_in_one_line_before_any_work(capsys, tmp_path, args, fragments):
    run = tmp_path / "run"  # no teacher: the refusal comes first
    result = run_cli(capsys, "train", "distill", "--run", run, "--recipe", "static", "--preset", "tiny", *args)
    assert result.exit_code == 2
    line = error_line(result)
    assert line.startswith("error:") and all(f in line for f in fragments), line
    assert len([x for x in result.err.splitlines() if x.strip()]) == 1
    assert not (run / "student").exists()
