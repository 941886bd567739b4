"""Question answering in one call: a question and a context of any length in, the answer out (its text, its
character span in the context in code points, UTF-16 units and UTF-8 bytes, and its score).

Everything the Python pipeline (core/tasks/qa.py) does after tokenizing happens inside the graph, with standard ONNX ops
and the onnxruntime-extensions ops the text-in models already use:
- the context is tokenized whole (up to max_context_tokens word pieces; a longer context is cut there, and the
  output context_cut says so), the question up to the window;
- the doc-stride windows of tokenizers' `truncation="only_second"` with `stride`: window k holds the context
  tokens from k * (room - stride), room = max_length - 3 - question tokens, and the last window is the first that
  reaches the context's end; all windows run as one batch, padded to the first window's width (masked);
- the span search of core/tasks/qa.py: in each window the n_best highest start and end logits over the window's own
  tokens, every pair of them in the context with end >= start and at most max_answer_length tokens, scored
  start + end; the first highest pair in (window, start rank, end rank) order wins, as core/tasks/qa.py's strict `>`;
- the answer's code-point span comes from the tokenizer graph's offsets; UTF-16 and UTF-8 positions from the
  context's own bytes;
- the text: the context's UTF-8 bytes in the answer's span, turned into a string by BpeDecoder (one token per
  byte). The extensions have no substring op; cutting the bytes is exact, since the span starts and ends on code
  points.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pocketbert.core.errors import ExportError, require
from pocketbert.export.text_in.session import text_session
from pocketbert.export.text_in.text_tokenizer import CONTRIB, PREFIX, _Builder, _byte_vocabulary, _vocabulary

QA = "qa/"
OUTPUTS = ("answer", "score", "answer_start", "answer_end", "answer_start_utf16", "answer_end_utf16",
           "answer_start_utf8", "answer_end_utf8", "windows", "context_cut")
NO_SCORE = -3.0e38  # a pair outside the rules, or padding: below every real logit sum
# What a context longer than max_context_tokens gets: its first max_context_tokens word pieces (the manifest says so).
LONG_CONTEXT_POLICY = "cut"


@dataclass(frozen=True)
class QASettings:
    max_length: int          # tokens in one window: [CLS] question [SEP] context part [SEP]
    doc_stride: int          # tokens two windows share (as core/tasks/qa.py adjusts it)
    max_answer_length: int   # tokens in an answer at most
    n_best: int              # start and end candidates per window
    max_context_tokens: int  # word pieces of the context read at most; the windows follow from it

    def max_windows(self, question_tokens: int = 1) -> int:
        room = max(1, self.max_length - 3 - question_tokens)
        step = max(1, room - self.doc_stride)
        return 1 + max(0, -(-(self.max_context_tokens - room) // step))

    def to_dict(self) -> dict:
        return {"max_length": self.max_length, "doc_stride": self.doc_stride,
                "max_answer_length": self.max_answer_length, "n_best": self.n_best,
                "max_context_tokens": self.max_context_tokens, "longer_context": LONG_CONTEXT_POLICY,
                "max_windows": self.max_windows()}


def effective_stride(max_length: int, doc_stride: int | None) -> int:
    """The stride core/tasks/qa.build_qa_features uses for this window and recipe stride."""
    stride = doc_stride or max_length // 3
    return max_length // 4 if stride >= max_length // 2 else stride


def build_qa_model(tokenizer_json: Path, model_path: Path, target: Path, settings: QASettings) -> Path:
    """tokenizer graph -> windows -> the exported graph (one batch of windows) -> span search -> answer; one model."""
    onnx = require("onnx", "export")
    from onnx import helper

    model = onnx.load(str(model_path))
    opsets = {o.domain or "": o.version for o in model.opset_import}
    data = json.loads(Path(tokenizer_json).read_text(encoding="utf-8"))
    vocab, tok_settings, chars = _vocabulary(data, None)
    pad_id = data["model"]["vocab"].get("[PAD]", 0)
    b = _Builder(vocab, tok_settings, chars, offsets=True)
    n, T = b.n, b.T
    model_inputs = [i.name for i in model.graph.input]
    if sorted(model_inputs) != sorted(("input_ids", "attention_mask", "token_type_ids")):
        raise ExportError(f"a QA model in one call needs a graph fed input_ids, attention_mask and token_type_ids; "
                          f"{model_path.name} takes {', '.join(model_inputs)}")

    def const(name: str, values: list[int]) -> str:
        return b.int64(QA + name, values)

    def scalar(name: str, value, dtype=None) -> str:
        b.initializers.append(helper.make_tensor(PREFIX + QA + name, dtype or T.INT64, [1], [value]))
        return PREFIX + QA + name

    zero, one, minus_one = PREFIX + "zero", PREFIX + "one", PREFIX + "minus_one"
    # Tokens: the question cut to a window, the context read up to max_context_tokens + 1 (to know it was cut).
    question, _, _ = b.word_pieces("question", const("pair_room", [settings.max_length - 3]), offsets=False)
    context, c_starts, c_ends = b.word_pieces("context", const("reads", [settings.max_context_tokens + 1]), True)
    cap = const("max_context_tokens", [settings.max_context_tokens])
    read = n("Shape", [context])
    cut = n("Greater", [read, cap])
    count = n("Min", [read, cap])  # N context tokens used
    context, c_starts, c_ends = (n("Slice", [x, zero, count]) for x in (context, c_starts, c_ends))

    # Windows: room R, step R - stride, W = 1 + ceil((N - R) / step) windows of width T = Q + 3 + min(R, N).
    q_len = n("Shape", [question])
    room = n("Max", [n("Sub", [const("room_all", [settings.max_length - 3]), q_len]), one])
    step = n("Max", [n("Sub", [room, const("stride", [settings.doc_stride])]), one])
    over = n("Max", [n("Sub", [count, room]), zero])
    windows = n("Add", [one, n("Div", [n("Sub", [n("Add", [over, step]), one]), step])])
    width = n("Add", [n("Add", [q_len, const("three", [3])]), n("Min", [room, count])])
    w = n("Unsqueeze", [n("Range", [PREFIX + "zero_scalar", n("Squeeze", [windows, zero]), PREFIX + "one_scalar"]),
                        one])  # [W, 1]
    j = n("Unsqueeze", [n("Range", [PREFIX + "zero_scalar", n("Squeeze", [width, zero]), PREFIX + "one_scalar"]),
                        zero])  # [1, T]
    first = n("Mul", [w, step])  # each window's first context token
    length = n("Min", [room, n("Sub", [count, first])])  # each window's context tokens
    q_end = n("Add", [q_len, one])  # position of the first [SEP]
    c_begin = n("Add", [q_len, const("two", [2])])
    c_stop = n("Add", [c_begin, length])  # position of each window's last [SEP]
    sep_at, pad_at = n("Add", [c_begin, count]), n("Add", [n("Add", [c_begin, count]), one])
    source = n("Concat", [PREFIX + "cls", question, PREFIX + "sep", context, PREFIX + "sep", const("pad", [pad_id])],
               axis=0)
    in_context = n("And", [n("GreaterOrEqual", [j, c_begin]), n("Less", [j, c_stop])])  # [W, T]
    real = n("LessOrEqual", [j, c_stop])
    where = n("Where", [n("LessOrEqual", [j, q_end]), j,
                        n("Where", [in_context, n("Add", [first, j]),
                                    n("Where", [n("Equal", [j, c_stop]), sep_at, pad_at])])])
    ids = n("Gather", [source, where], axis=0)
    types = n("Cast", [n("And", [n("GreaterOrEqual", [j, c_begin]), real])], to=T.INT64)
    mask = n("Cast", [real], to=T.INT64)
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    for name in model_inputs:
        n.list.append(helper.make_node("Identity", [feeds[name]], [name], name=f"{PREFIX}{QA}feed_{name}"))

    # Span search over all windows at once.
    minus_inf = scalar("no_score", NO_SCORE, T.FLOAT)
    k = n("Min", [const("n_best", [settings.n_best]), width])
    top = {}
    for side in ("start", "end"):
        logits = n("Where", [real, f"{side}_logits", minus_inf])
        values, positions = n("TopK", [logits, k], 2, axis=1, largest=1, sorted=1)
        top[side] = (values, positions, n("GatherElements", [in_context, positions], axis=1))
    (s_val, s_pos, s_ok), (e_val, e_pos, e_ok) = top["start"], top["end"]
    two_axis, one_axis = const("axis2", [2]), one
    s_pos3, e_pos3 = n("Unsqueeze", [s_pos, two_axis]), n("Unsqueeze", [e_pos, one_axis])
    span = n("Add", [n("Sub", [e_pos3, s_pos3]), one])
    allowed = n("And", [n("And", [n("Unsqueeze", [s_ok, two_axis]), n("Unsqueeze", [e_ok, one_axis])]),
                        n("And", [n("GreaterOrEqual", [span, one]),
                                  n("LessOrEqual", [span, const("max_answer_length", [settings.max_answer_length])])])])
    scores = n("Where", [allowed, n("Add", [n("Unsqueeze", [s_val, two_axis]), n("Unsqueeze", [e_val, one_axis])]),
                         minus_inf])
    flat = n("Reshape", [scores, minus_one])
    best = n("ArgMax", [flat], axis=0, keepdims=1, select_last_index=0)  # the first of equal scores
    score = n("Gather", [flat, best], axis=0)
    found = n("Greater", [score, minus_inf])
    kk = n("Mul", [k, k])
    window = n("Div", [best, kk])
    s_rank, e_rank = n("Div", [n("Mod", [best, kk]), k]), n("Mod", [best, k])
    s_token = n("Gather", [n("Reshape", [s_pos, minus_one]), n("Add", [n("Mul", [window, k]), s_rank])], axis=0)
    e_token = n("Gather", [n("Reshape", [e_pos, minus_one]), n("Add", [n("Mul", [window, k]), e_rank])], axis=0)
    base = n("Sub", [n("Mul", [window, step]), c_begin])

    def context_index(token: str) -> str:  # clamped into [0, N]: an entry past the end when nothing was found
        return n("Min", [n("Max", [n("Add", [base, token]), zero]), count])

    starts_padded = n("Concat", [c_starts, zero], axis=0)
    ends_padded = n("Concat", [c_ends, zero], axis=0)
    char_start = n("Where", [found, n("Gather", [starts_padded, context_index(s_token)], axis=0), zero])
    char_end = n("Where", [found, n("Gather", [ends_padded, context_index(e_token)], axis=0), zero])

    # Code points -> UTF-8 bytes and UTF-16 units, from the context's bytes.
    text_bytes = b.utf8("context", n, restore_special=True)
    leads = n("Squeeze", [n("NonZero", [b.starts_of_characters(text_bytes, n)]), zero])
    byte_at = n("Concat", [leads, n("Shape", [text_bytes])], axis=0)  # each code point's first byte, then the end
    astral = n("Cast", [n("GreaterOrEqual", [n("Gather", [text_bytes, leads], axis=0), PREFIX + "lead4"])],
               to=T.INT64)
    units = n("Concat", [n("Add", [astral, one]), zero], axis=0)
    unit_at = n("CumSum", [units, PREFIX + "zero_scalar"], exclusive=1)
    b_start, b_end = (n("Gather", [byte_at, x], axis=0) for x in (char_start, char_end))
    u_start, u_end = (n("Gather", [unit_at, x], axis=0) for x in (char_start, char_end))

    # The answer's text: its bytes decoded (an empty answer is the empty string: the decoder needs a byte).
    then_nodes, then_tag = b.subgraph("answer_text")
    text = _decoded(then_nodes, then_nodes("Slice", [text_bytes, b_start, b_end]))
    then_graph = b.graph(then_nodes, then_tag + "graph", [], [(text, T.STRING, [1])])
    else_nodes, else_tag = b.subgraph("no_text")
    empty = else_nodes("Constant", [], value=helper.make_tensor("empty", T.STRING, [1], [b""]))
    else_graph = b.graph(else_nodes, else_tag + "graph", [], [(empty, T.STRING, [1])])
    answer = n("If", [n("Squeeze", [n("Greater", [b_end, b_start]), zero])], then_branch=then_graph,
               else_branch=else_graph)

    results = {"answer": answer, "score": n("Where", [found, score, minus_inf]), "answer_start": char_start,
               "answer_end": char_end, "answer_start_utf16": u_start, "answer_end_utf16": u_end,
               "answer_start_utf8": b_start, "answer_end_utf8": b_end, "windows": windows, "context_cut": cut}
    outputs = []
    for name in OUTPUTS:
        n.list.append(helper.make_node("Identity", [results[name]], [name], name=f"{PREFIX}{QA}out_{name}"))
        kind = {"answer": T.STRING, "score": T.FLOAT, "context_cut": T.BOOL}.get(name, T.INT64)
        outputs.append(helper.make_tensor_value_info(name, kind, [1]))
    graph = model.graph
    merged_graph = helper.make_graph(
        n.list[:_feeds_end(n.list)] + list(graph.node) + n.list[_feeds_end(n.list):], f"{graph.name}_qa",
        [helper.make_tensor_value_info(name, T.STRING, [1]) for name in ("question", "context")], outputs,
        b.initializers + list(graph.initializer), value_info=list(graph.value_info))
    opsets[CONTRIB] = 1
    opsets[""] = max(opsets[""], 13)
    merged = helper.make_model(merged_graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()],
                               ir_version=model.ir_version, producer_name="pocketbert")
    onnx.save(merged, str(target))
    return target


def _decoded(nodes, utf8: str) -> str:
    """UTF-8 bytes (1-D int64, not empty) -> the [1] string they spell: BpeDecoder with one token per byte, as the
    tokenizer graph decodes its normalized text."""
    shown = json.loads(_byte_vocabulary())
    by_byte = {b: s for s, b in shown.items() if b < 256}
    return nodes("BpeDecoder", [utf8], domain=CONTRIB, id_vocab="\n".join(by_byte[b] for b in range(256)),
                 byte_decoder="\n".join(f"{ord(by_byte[b])}\t{b}" for b in range(256)))


def _feeds_end(nodes: list) -> int:
    """Index after the last node that feeds the encoder: the encoder's nodes go there (topological order)."""
    return max(k for k, node in enumerate(nodes) if node.name.startswith(f"{PREFIX}{QA}feed_")) + 1


def answer_forward(path: Path, task=None):
    """Examples in, the model's answers out (one dict per example), fed each question and context as an app feeds
    them: one call per question."""
    import numpy as np

    from pocketbert.core.tasks.registry import text_in_string

    session = text_session(path)
    names = [o.name for o in session.get_outputs()]

    def run(examples: list) -> list[dict]:
        answers = []
        for example in examples:
            outputs = dict(zip(names, session.run(None, {
                "question": text_in_string(example.question, "question"),
                "context": text_in_string(example.context, "context")})))
            row = {name: np.asarray(value).reshape(-1)[0] for name, value in outputs.items()}
            answers.append({"answer": str(row["answer"]), "score": float(row["score"]),
                            **{name: int(row[name]) for name in OUTPUTS if name not in ("answer", "score")}})
        return answers

    run.runtime = "onnxruntime + extensions"
    return run


def span_mismatches(examples: list, answers: list[dict]) -> int:
    """Answers whose text is not the context's code points, UTF-16 units and UTF-8 bytes at the spans given."""
    wrong = 0
    for example, a in zip(examples, answers):
        context = example.context.replace("\0", "")
        utf16, utf8 = context.encode("utf-16-le"), context.encode("utf-8")
        if (context[a["answer_start"]:a["answer_end"]] != a["answer"]
                or utf16[2 * a["answer_start_utf16"]:2 * a["answer_end_utf16"]].decode("utf-16-le") != a["answer"]
                or utf8[a["answer_start_utf8"]:a["answer_end_utf8"]].decode("utf-8") != a["answer"]):
            wrong += 1
    return wrong
