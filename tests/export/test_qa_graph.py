"""QA in one call (export/text_in/qa_graph.py): the graph's windows, span search, offsets and answer text against the Python
pipeline (core/tasks/qa.py) on the same encoder, on crafted questions whose answer is known and on real SQuAD ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForQuestionAnswering

from helpers import JS_DIR, transformers_js_or_skip

from pocketbert.core.tasks.data import QAExample, read_squad_file
from pocketbert.core.students.inference import batched_logits, ort_forward, ort_session
from pocketbert.core.students.models import load_tokenizer
from pocketbert.core.config.recipe import EvalSection
from pocketbert.core.tasks.registry import QATask
from pocketbert.export.programs import onnx_export
from pocketbert.export.app import tokenizer_files
from pocketbert.export.text_in import qa_graph

pytestmark = pytest.mark.slow  # the tokenizer graph's code-point table is derived once a session (~30 s)

MAX_LENGTH = 32                # short windows: a crafted context of a few dozen words needs several
MAX_ANSWER_LENGTH = 8
N_BEST = 20
SQUAD_QUESTIONS = 150
MIN_SQUAD_AGREEMENT = 1.0      # the same encoder under both: every answer equal
MARK_SCORE = 10.0              # the crafted encoder's logit for the start and end words
START_WORD, END_WORD = "zebra", "tiger"  # each one word piece
FILLER = "the river runs past old mills and quiet farms near town"


def crafted_encoder(path: Path, start_id: int, end_id: int) -> Path:
    """An ONNX encoder whose start logit is MARK_SCORE on START_WORD and end logit on END_WORD, minus a little per
    position (no two logits tie, so top-n order does not depend on how ties are broken)."""
    from onnx import TensorProto, helper

    def int_tensor(name, value):
        return helper.make_tensor(name, TensorProto.INT64, [1], [value])

    def float_tensor(name, value):
        return helper.make_tensor(name, TensorProto.FLOAT, [1], [value])

    nodes = [helper.make_node("CumSum", ["attention_mask", "axis"], ["position_int"]),
             helper.make_node("Cast", ["position_int"], ["position"], to=TensorProto.FLOAT)]
    for side, word_id, slope in (("start", "start_id", "start_slope"), ("end", "end_id", "end_slope")):
        nodes += [helper.make_node("Equal", ["input_ids", word_id], [f"{side}_is"]),
                  helper.make_node("Cast", [f"{side}_is"], [f"{side}_mark"], to=TensorProto.FLOAT),
                  helper.make_node("Mul", [f"{side}_mark", "mark"], [f"{side}_marked"]),
                  helper.make_node("Mul", ["position", slope], [f"{side}_drift"]),
                  helper.make_node("Sub", [f"{side}_marked", f"{side}_drift"], [f"{side}_logits"])]
    nodes.append(helper.make_node("Identity", ["token_type_ids"], ["unused_types"]))
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
              for name in ("input_ids", "attention_mask", "token_type_ids")]
    outputs = [helper.make_tensor_value_info(f"{side}_logits", TensorProto.FLOAT, ["batch", "sequence"])
               for side in ("start", "end")]
    initializers = [int_tensor("start_id", start_id), int_tensor("end_id", end_id),
                    helper.make_tensor("axis", TensorProto.INT64, [], [1]), float_tensor("mark", MARK_SCORE),
                    float_tensor("start_slope", 1e-3), float_tensor("end_slope", 2e-3)]
    model = helper.make_model(helper.make_graph(nodes, "crafted", inputs, outputs, initializers),
                              opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    from onnx import save

    save(model, str(path))
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory, wordpiece_tokenizer):
    out = tmp_path_factory.mktemp("qa-graph")
    wordpiece_tokenizer.save_pretrained(out)
    tokenizer_files.make_tokenizer_json_truncate_at(out / "tokenizer.json", MAX_LENGTH)
    return out


def settings(max_context_tokens: int = 4096) -> qa_graph.QASettings:
    return qa_graph.QASettings(MAX_LENGTH, qa_graph.effective_stride(MAX_LENGTH, None), MAX_ANSWER_LENGTH, N_BEST,
                               max_context_tokens)


@pytest.fixture(scope="module")
def crafted(folder):
    tokenizer = load_tokenizer(str(folder))
    encoder = crafted_encoder(folder / "crafted.onnx", tokenizer.convert_tokens_to_ids(START_WORD),
                              tokenizer.convert_tokens_to_ids(END_WORD))
    model = qa_graph.build_qa_model(folder / "tokenizer.json", encoder, folder / "crafted.qa.onnx", settings())
    return encoder, model


def python_pipeline(folder: Path, encoder: Path, examples: list[QAExample]) -> tuple[list[str], list[int]]:
    """core/tasks/qa.py's answers on the encoder's logits, and each example's window count."""
    task = QATask()
    tokenizer = load_tokenizer(str(folder))
    features = task.features(tokenizer, examples, MAX_LENGTH, None)
    logits = batched_logits(task, features, tokenizer.pad_token_id, 8, ort_forward(ort_session(encoder), task))
    answers = task.answers(examples, features, logits, EvalSection(n_best=N_BEST, max_answer_length=MAX_ANSWER_LENGTH))
    return answers, np.bincount([f.example_index for f in features], minlength=len(examples)).tolist()


def example(context: str, question: str = "what runs?") -> QAExample:
    return QAExample("crafted", question, context, ())


def answers_of(model: Path, examples: list[QAExample]) -> list[dict]:
    found = qa_graph.answer_forward(model)(examples)
    assert qa_graph.span_mismatches(examples, found) == 0  # the text is the context's at every span given
    return found


def test_an_answer_in_the_second_window_is_found_there(folder, crafted):
    """Two windows; the first ends between the start word and the end word, so only the second holds the answer."""
    encoder, model = crafted
    context = f"{FILLER} {FILLER}. A {START_WORD} runs to the {END_WORD}. the end"
    ex = example(context)
    (got,), (expected, windows) = answers_of(model, [ex]), python_pipeline(folder, encoder, [ex])
    features = QATask().features(load_tokenizer(str(folder)), [ex], MAX_LENGTH, None)
    first_window_ends = features[0].offsets[-2][1]  # the last context token's end (the [SEP] after it has none)
    assert windows[0] == got["windows"] == 2
    assert START_WORD in context[:first_window_ends] and END_WORD not in context[:first_window_ends]
    assert got["answer"] == expected[0] == f"{START_WORD} runs to the {END_WORD}"
    assert got["answer_start"] == context.index(START_WORD)
    assert got["score"] == pytest.approx(2 * MARK_SCORE, abs=0.5)


def test_an_answer_longer_than_max_answer_length_is_not_given(folder, crafted):
    encoder, model = crafted
    long_gap = " ".join(["far"] * (MAX_ANSWER_LENGTH + 2))
    ex = example(f"{FILLER}. A {START_WORD} {long_gap} {END_WORD}. {FILLER} {FILLER}.")
    (got,), (expected, _) = answers_of(model, [ex]), python_pipeline(folder, encoder, [ex])
    assert got["answer"] == expected[0]
    assert not (START_WORD in got["answer"] and END_WORD in got["answer"])
    fits = example(f"{FILLER}. A {START_WORD} {' '.join(['far'] * (MAX_ANSWER_LENGTH - 2))} {END_WORD}.")
    assert answers_of(model, [fits])[0]["answer"].startswith(START_WORD)


def test_accented_cjk_and_astral_contexts_give_the_contexts_own_characters(folder, crafted):
    encoder, model = crafted
    contexts = [f"Café naïve résumé {FILLER}. Le {START_WORD} déjà vu à Zürich {END_WORD} été. {FILLER}",
                f"東京 {FILLER} 大阪 {FILLER}. {START_WORD} 京都 と 奈良 {END_WORD}。{FILLER}",
                f"😀 {FILLER} 𝕏 {FILLER}. {START_WORD} 😀 🎉 𝄞 {END_WORD} {FILLER}"]
    examples = [example(c) for c in contexts]
    got, (expected, windows) = answers_of(model, examples), python_pipeline(folder, encoder, examples)
    assert [g["answer"] for g in got] == expected
    for g, context in zip(got, contexts):
        assert g["answer"].startswith(START_WORD) and g["answer"].endswith(END_WORD)
        assert g["answer"] == context[g["answer_start"]:g["answer_end"]]
    astral = got[2]  # four characters outside the BMP before and inside the answer: UTF-16 counts them twice
    assert astral["answer_start_utf16"] == astral["answer_start"] + 2
    assert astral["answer_end_utf16"] == astral["answer_end"] + 2 + 3
    assert [g["windows"] for g in got] == windows


def test_no_answer_and_a_cut_context(folder, crafted):
    encoder, model = crafted
    nothing = example("")  # no context token: no span, the empty answer
    got = answers_of(model, [nothing])[0]
    assert got["answer"] == "" and got["answer_start"] == got["answer_end"] == 0
    short = qa_graph.build_qa_model(folder / "tokenizer.json", encoder, folder / "short.qa.onnx", settings(40))
    beyond = example(f"{FILLER} {FILLER} {FILLER} {FILLER} {FILLER}. {START_WORD} runs to the {END_WORD}.")
    cut = answers_of(short, [beyond])[0]
    assert cut["context_cut"] == 1 and START_WORD not in cut["answer"]
    assert answers_of(model, [beyond])[0]["context_cut"] == 0


def test_a_trained_shape_encoder_gives_the_python_pipelines_answers_on_squad(folder, shared_data, wordpiece_tokenizer):
    """A tiny random BERT (ties are not an issue) on real questions, many of them over several windows."""
    task = QATask()
    config = BertConfig(vocab_size=wordpiece_tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=MAX_LENGTH)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    encoder = onnx_export.export_onnx(BertForQuestionAnswering(config).eval(), task, folder / "bert.onnx")
    model = qa_graph.build_qa_model(folder / "tokenizer.json", encoder, folder / "bert.qa.onnx", settings())
    # short questions: the Python pipeline refuses a question that leaves the context less room than the stride
    examples = [ex for ex in read_squad_file(shared_data / "squad" / "dev-v1.1.json") if len(ex.question) < 40]
    examples = examples[:SQUAD_QUESTIONS]
    got, (expected, windows) = answers_of(model, examples), python_pipeline(folder, encoder, examples)
    assert sum(n > 1 for n in windows) > len(examples) // 2
    assert [g["windows"] for g in got] == windows
    agreement = np.mean([g["answer"] == e for g, e in zip(got, expected)])
    assert agreement >= MIN_SQUAD_AGREEMENT




def test_transformers_js_reads_one_window_where_the_model_in_one_call_reads_them_all(folder, crafted, tmp_path):
    """transformers.js's question-answering pipeline, on the export's hub layout, truncates the context to one
    window (no doc stride): an answer in the first window is found, one in the second is not. The README says so
    and points to model.qa.onnx; this fails when transformers.js starts windowing."""
    import json
    import shutil
    import subprocess

    from transformers import BertConfig

    transformers_js_or_skip()
    encoder, model = crafted
    hub = tmp_path / "crafted"
    (hub / "onnx").mkdir(parents=True)
    shutil.copyfile(encoder, hub / "onnx" / "model.onnx")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(folder / name, hub / name)
    tokenizer_files.clean_tokenizer_config(hub / "tokenizer_config.json", hub / "tokenizer.json", MAX_LENGTH)
    config = json.loads((hub / "tokenizer_config.json").read_text())
    config["model_max_length"] = MAX_LENGTH
    (hub / "tokenizer_config.json").write_text(json.dumps(config))
    BertConfig(architectures=["BertForQuestionAnswering"]).to_json_file(hub / "config.json")
    first = example(f"A {START_WORD} runs to the {END_WORD}. {FILLER} {FILLER}.")
    second = example(f"{FILLER} {FILLER}. A {START_WORD} runs to the {END_WORD}. the end")
    pairs = [{"question": ex.question, "context": ex.context} for ex in (first, second)]
    done = subprocess.run(["node", str(JS_DIR / "question_answering.mjs"), str(hub)], input=json.dumps(pairs),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    js_first, js_second = json.loads(done.stdout.strip().splitlines()[-1])
    expected = f"{START_WORD} runs to the {END_WORD}"
    assert js_first == expected                       # one window: the same answer
    assert END_WORD not in js_second                  # the second window is never read
    assert [a["answer"] for a in answers_of(model, [first, second])] == [expected, expected]
