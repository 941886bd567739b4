"""Text-in models (the tokenizer inside the graph, onnxruntime-extensions): tokenizer.json's ids on real text and
on the golden probes, the student's logits, QA pairs cut as the Python pipeline cuts them, and bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForQuestionAnswering, BertForSequenceClassification

from pocketbert.core.tasks.data import TextExample
from pocketbert.core.config.recipe import EvalSection
from pocketbert.core.tasks.registry import QATask, SentimentTask, text_in_string
from pocketbert.core.errors import DataError
from pocketbert.export.checks import parity
from pocketbert.export.programs import onnx_export
from pocketbert.export.app import tokenizer_files
from pocketbert.export.text_in import model as text_in_model
from pocketbert.export.text_in import session
from pocketbert.export.text_in.text_tokenizer import PREFIX, tokenizer_graph


MAX_LENGTH = 48
SST2_SENTENCES = 300
SQUAD_PAIRS = 120
TEXT_IN_FP32_TOLERANCE = 1e-4
MIN_ANSWERED = 0.5  # a tiny untrained QA head still picks some span for most questions


def tiny(cls, vocab_size: int):
    config = BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128, num_labels=2)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    return cls(config).eval()


@pytest.fixture(scope="module")
def folder(tmp_path_factory, wordpiece_tokenizer):
    """The tokenizer files as export writes them (tokenizer.json truncating at MAX_LENGTH)."""
    out = tmp_path_factory.mktemp("text-in")
    wordpiece_tokenizer.save_pretrained(out)
    tokenizer_files.make_tokenizer_json_truncate_at(out / "tokenizer.json", MAX_LENGTH)
    return out


def sst2_texts(shared_data, n):
    lines = (shared_data / "sst2" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
    return [line.split("\t")[0] for line in lines[:n]]


def tokenizer_session(folder, inputs):
    return session.text_session(tokenizer_graph(folder / "tokenizer.json", inputs, MAX_LENGTH, 17, 8)
                                .SerializeToString())


@pytest.mark.slow  # the tokenizer graph's code-point table is derived once a session (~30 s)
def test_the_graph_gives_tokenizer_json_ids_on_probes_and_real_sentences(folder, shared_data):
    from tokenizers import Tokenizer

    reference = Tokenizer.from_file(str(folder / "tokenizer.json"))
    session = tokenizer_session(folder, ("text",))
    texts = [text for _, text in tokenizer_files.golden_texts(MAX_LENGTH)] + sst2_texts(shared_data, SST2_SENTENCES)
    wrong = []
    for text in texts:
        ids, = session.run([PREFIX + "input_ids"], {"text": text_in_string(text)})
        if ids.tolist() != reference.encode(text).ids:
            wrong.append(text)
    assert not wrong, wrong[:3]
    ids, = session.run([PREFIX + "input_ids"], {"text": np.array([" ".join(["terrific"] * 200)], dtype=object)})
    assert len(ids) == MAX_LENGTH and ids[-1] == reference.token_to_id("[SEP]")  # cut, [SEP] kept


# Words that give many pieces, one, or one [UNK] after pieces the op matched ("great😀"), beside punctuation, accents
# and CJK: where each window ends, the ids (and a pair's types and offsets) must be tokenizer.json's.
WINDOW_WORDS = "Supercalifragilistic great😀 rocks, naïve 東京 😀 tokenization!"
WINDOW_QUESTION = "Who rocks?"


@pytest.mark.slow  # the code-point table of the module's tokenizer (derived once a session)
def test_every_window_holds_the_ids_tokenizer_json_gives_up_to_it(folder):
    from tokenizers import Tokenizer

    reference = Tokenizer.from_file(str(folder / "tokenizer.json"))
    whole = len(reference.encode(WINDOW_QUESTION, WINDOW_WORDS).ids)
    shortest = len(reference.encode(WINDOW_QUESTION).ids) + 2  # the question framed, a [SEP], one id of the context
    for max_length in range(shortest, whole + 2):
        reference.enable_truncation(max_length)
        single = session.text_session(tokenizer_graph(folder / "tokenizer.json", ("text",), max_length, 17, 8)
                                      .SerializeToString())
        ids, = single.run([PREFIX + "input_ids"], {"text": text_in_string(WINDOW_WORDS)})
        assert ids.tolist() == reference.encode(WINDOW_WORDS).ids, max_length
        pair = session.text_session(tokenizer_graph(folder / "tokenizer.json", ("question", "context"), max_length,
                                                    17, 8, offsets=True).SerializeToString())
        ids, types, offsets = pair.run([PREFIX + name for name in ("input_ids", "token_type_ids", "offset_mapping")],
                                       {"question": text_in_string(WINDOW_QUESTION),
                                        "context": text_in_string(WINDOW_WORDS)})
        reference.enable_truncation(max_length, strategy="only_second")
        want = reference.encode(WINDOW_QUESTION, WINDOW_WORDS)
        assert (ids.tolist(), types.tolist(), offsets.tolist()) == (want.ids, want.type_ids,
                                                                    [list(o) for o in want.offsets]), max_length


# A control character: the BertTokenizer op's own clean-up gives it no id, and tokenizer.json's normalizer removes it.
EMPTIED = "\x01"


@pytest.mark.slow  # the code-point table of the module's tokenizer (derived once a session)
def test_words_the_op_empties_leave_the_window_to_the_words_after_them(folder):
    """The derived table removes control characters before the ops see them; with a table that keeps one, words of
    it reach BertTokenizer and give no id, and the window still holds tokenizer.json's ids of the words after them
    (the loop reads another round where the words of the first gave the window fewer ids than it holds)."""
    import dataclasses

    from tokenizers import Tokenizer

    from pocketbert.export.text_in import text_tokenizer

    data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    derived = text_tokenizer.mapping_for(data)
    code = ord(EMPTIED)
    keeping = dataclasses.replace(derived, rows={**derived.rows, code: (code,)},
                                  order={c: entry for c, entry in derived.order.items() if c != code})
    text = " ".join([EMPTIED] * 4 + ["words", EMPTIED, "after", "them"])
    reference = Tokenizer.from_file(str(folder / "tokenizer.json"))
    shortest = len(reference.encode(WINDOW_QUESTION).ids) + 2
    for max_length in range(shortest, len(reference.encode(WINDOW_QUESTION, text).ids) + 2):
        reference.enable_truncation(max_length, strategy="only_second")
        graph = text_tokenizer.probe_graph(data, ("question", "context"), True, keeping, window=max_length)
        pair = session.text_session(graph.SerializeToString())
        got = pair.run([PREFIX + name for name in ("input_ids", "token_type_ids", "offset_mapping")],
                       {"question": text_in_string(WINDOW_QUESTION), "context": text_in_string(text)})
        want = reference.encode(WINDOW_QUESTION, text)
        assert [x.tolist() for x in got] == [want.ids, want.type_ids, [list(o) for o in want.offsets]], max_length


@pytest.mark.slow  # derives the code-point table of a second tokenizer (about half a minute)
def test_golden_check_catches_a_tokenizer_that_keeps_case(folder, tmp_path, wordpiece_tokenizer):
    golden = tokenizer_files.golden(wordpiece_tokenizer, MAX_LENGTH)
    assert text_in_model.golden_mismatches(folder / "tokenizer.json", golden, SentimentTask(["a", "b"]), MAX_LENGTH) == []
    cased = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    cased["normalizer"]["lowercase"] = False
    (tmp_path / "tokenizer.json").write_text(json.dumps(cased), encoding="utf-8")
    wrong = text_in_model.golden_mismatches(tmp_path / "tokenizer.json", golden, SentimentTask(["a", "b"]), MAX_LENGTH)
    assert "ascii" in wrong and "accents" in wrong


@pytest.mark.slow
def test_text_in_model_gives_the_student_logits_and_its_ort_the_same(folder, shared_data, wordpiece_tokenizer,
                                                                     tmp_path):
    model, task = tiny(BertForSequenceClassification, wordpiece_tokenizer.vocab_size), SentimentTask(["n", "p"])
    onnx_export.export_onnx(model, task, tmp_path / "model.onnx")
    text_in_model.build_text_in(folder / "tokenizer.json", tmp_path / "model.onnx", tmp_path / "model.text.onnx", task,
                          MAX_LENGTH)
    onnx_export.convert_to_ort(tmp_path / "model.text.onnx", tmp_path / "model.text.ort", tmp_path / "ops.config",
                               session.extensions_library())
    assert "BertTokenizer" in (tmp_path / "ops.config").read_text()
    texts = sst2_texts(shared_data, 40) + ["", "tab\tnew\nline\r\x00end\x07", " ".join(["great"] * 100)]
    examples = [TextExample(t, 0) for t in texts]
    features, logits = text_in_model.text_in_forward(tmp_path / "model.text.onnx", task)(examples)
    _, ort_logits = text_in_model.text_in_forward(tmp_path / "model.text.ort", task)(examples)
    assert features == [None] * len(texts)  # a sentence classifier returns logits only
    for text, row, ort_row in zip(texts, logits, ort_logits):
        encoded = wordpiece_tokenizer(text, truncation=True, max_length=MAX_LENGTH, return_tensors="pt")
        with torch.no_grad():
            expected = model(**encoded).logits[0].numpy()
        assert np.abs(row - expected).max() < TEXT_IN_FP32_TOLERANCE, text
        assert np.abs(ort_row - row).max() < TEXT_IN_FP32_TOLERANCE


def test_a_lone_surrogate_is_a_one_line_error_not_a_crash():
    with pytest.raises(DataError, match="lone surrogate .U\\+D800 at character 3.") as error:
        SentimentTask(["n", "p"]).text_in_feeds(TextExample("ok \ud800 end", 0))
    assert "\n" not in str(error.value)


@pytest.mark.slow
def test_qa_text_in_cuts_pairs_like_the_pipeline_and_agrees_on_answers(folder, shared_data, wordpiece_tokenizer,
                                                                       tmp_path):
    from pocketbert.core.tasks.data import subsample
    from pocketbert.core.tasks.task_data import load_task_data

    model, task = tiny(BertForQuestionAnswering, wordpiece_tokenizer.vocab_size), QATask()
    onnx_export.export_onnx(model, task, tmp_path / "qa.onnx")
    text_in_model.build_text_in(folder / "tokenizer.json", tmp_path / "qa.onnx", tmp_path / "qa.text.onnx", task,
                          MAX_LENGTH * 2)
    examples = subsample(load_task_data("squad", "qa", shared_data).eval, SQUAD_PAIRS, 3)
    features = task.features(wordpiece_tokenizer, examples, MAX_LENGTH * 2, MAX_LENGTH // 2)
    from pocketbert.core.students.inference import batched_logits, torch_forward

    student = batched_logits(task, features, 0, 8, torch_forward(model, task))
    one_window, one_window_features, one_window_logits = task.within_one_window(examples, features, student)
    assert 0 < len(one_window) < len(examples)  # some contexts need several windows: those are left to the app
    own, logits = text_in_model.text_in_forward(tmp_path / "qa.text.onnx", task)(one_window)
    # the graph normalizes as tokenizer.json does (these SQuAD contexts spell Serbian names: ć, š, ž) and places
    # every context token where the Python pipeline does
    for f, g in zip(own, one_window_features):
        assert (f.input_ids, f.token_type_ids, f.offsets) == (g.input_ids, g.token_type_ids, g.offsets)
    cfg = EvalSection(n_best=10, max_answer_length=30)
    result = parity.compare_text_in(task, one_window, one_window_features, one_window_logits, own, logits, cfg,
                                    "qa.text.onnx", "onnxruntime + extensions", "fp32", parity.TEXT_IN_GATE)
    # every question the model reads in one window: the answer text cut out of the context is the pipeline's
    assert result.passed and result.agreement >= parity.TEXT_IN_MIN_AGREEMENT
    answers = task.answers(one_window, own, logits, cfg)
    assert sum(bool(a) for a in answers) >= MIN_ANSWERED * len(one_window)  # text, not empty spans agreeing
    assert all(a in ex.context for a, ex in zip(answers, one_window))


@pytest.mark.slow  # the tokenizer graph's code-point table is derived once a session (~30 s)
def test_qa_golden_pairs_hold_for_the_graph(folder, wordpiece_tokenizer):
    golden = tokenizer_files.golden(wordpiece_tokenizer, MAX_LENGTH, with_pairs=True)
    assert {row["probe"] for row in golden["pairs"]} >= {"context longer than max_length",
                                                         "question longer than max_length"}
    assert all(len(row["ids"]) <= MAX_LENGTH for row in golden["pairs"])
    assert text_in_model.golden_mismatches(folder / "tokenizer.json", golden, QATask(), MAX_LENGTH) == []
    # the Python pipeline cuts a pair that fits, and places its tokens, as the golden file says
    for row in (golden["pairs"][0], next(r for r in golden["pairs"] if r["probe"].startswith("cjk"))):
        encoded = wordpiece_tokenizer(row["question"], row["context"], truncation="only_second",
                                      max_length=MAX_LENGTH, return_offsets_mapping=True)
        assert encoded["input_ids"] == row["ids"]
        assert [list(o) for o in encoded["offset_mapping"]] == row["offsets"]
    # an offset one character off is caught
    row = next(r for r in golden["pairs"] if r["probe"].startswith("cjk"))
    row["offsets"][-2][1] += 1
    assert text_in_model.golden_mismatches(folder / "tokenizer.json", golden, QATask(), MAX_LENGTH) == [row["probe"]]


@pytest.mark.slow
def test_the_text_in_gate_fails_a_model_that_answers_otherwise(folder, shared_data, wordpiece_tokenizer, tmp_path):
    """A text-in model in front of a graph whose classifier is flipped must fail the gate."""
    import copy

    task = SentimentTask(["n", "p"])
    student = tiny(BertForSequenceClassification, wordpiece_tokenizer.vocab_size)
    other = copy.deepcopy(student)
    with torch.no_grad():
        other.classifier.weight.neg_()
        other.classifier.bias.neg_()
    onnx_export.export_onnx(other, task, tmp_path / "other.onnx")
    text_in_model.build_text_in(folder / "tokenizer.json", tmp_path / "other.onnx", tmp_path / "other.text.onnx", task,
                          MAX_LENGTH)
    examples = [TextExample(t, i % 2) for i, t in enumerate(sst2_texts(shared_data, 60))]
    features = task.features(wordpiece_tokenizer, examples, MAX_LENGTH)
    from pocketbert.core.students.inference import batched_logits, torch_forward

    reference = batched_logits(task, features, 0, 8, torch_forward(student, task))
    own, logits = text_in_model.text_in_forward(tmp_path / "other.text.onnx", task)(examples)
    result = parity.compare_text_in(task, examples, features, reference, own, logits, {}, "other.text.onnx",
                                    "onnxruntime + extensions", "fp32", parity.TEXT_IN_GATE)
    assert not result.passed and result.agreement < parity.TEXT_IN_MIN_AGREEMENT
