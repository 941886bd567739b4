"""A WordPiece tokenizer as an ONNX graph (onnxruntime-extensions ops), giving tokenizer.json's ids.

Only ops of the extensions' BERT-tokenizer group, the one the published Android package carries
(onnxruntime-extensions-android), and standard ONNX ops are used:
- BasicTokenizer splits the text into words as BERT's normalizer and pre-tokenizer do (lower case, accents
  stripped, punctuation and CJK characters apart, control characters removed);
- a Loop runs BertTokenizer on one word at a time. Run on a whole text, its WordPiece keeps the pieces it matched
  before a piece missing from the vocabulary ("great😀" -> great [UNK]); tokenizer.json makes such a word one
  [UNK], and so does the loop;
- Slice and Concat truncate as tokenizer.json does: [CLS] first and [SEP] last also when truncated; for a pair,
  only the second text (the QA context) is cut.

Its offset_mapping output is not used: the op computes it from token lengths, not from the text.
"""

from __future__ import annotations

import json
from pathlib import Path

from pocketbert.errors import ExportError, require

CONTRIB = "ai.onnx.contrib"
PREFIX = "tokenizer/"


def _vocabulary(tokenizer_json: Path) -> tuple[str, dict]:
    """The vocabulary one token a line in id order, and the normalizer's settings, from tokenizer.json."""
    data = json.loads(Path(tokenizer_json).read_text(encoding="utf-8"))
    model = data.get("model") or {}
    if model.get("type") != "WordPiece":
        raise ExportError("a text-in model needs a WordPiece tokenizer.json (BERT family); export this model's "
                          "token-id graphs only")
    vocab = model["vocab"]
    ordered = sorted(vocab.items(), key=lambda item: item[1])
    if [i for _, i in ordered] != list(range(len(ordered))):
        raise ExportError("tokenizer.json's vocabulary ids are not 0..n-1: re-save the tokenizer with transformers")
    normalizer = data.get("normalizer") or {}
    lowercase = bool(normalizer.get("lowercase", True))
    strip = normalizer.get("strip_accents")
    settings = {"do_lower_case": int(lowercase), "strip_accents": int(lowercase if strip is None else strip),
                "tokenize_chinese_chars": int(bool(normalizer.get("handle_chinese_chars", True))),
                "unk": vocab[model.get("unk_token", "[UNK]")], "cls": vocab["[CLS]"], "sep": vocab["[SEP]"]}
    return "\n".join(token for token, _ in ordered), settings


class _Builder:
    """Nodes and initializers of the tokenizer graph, with unique names."""

    def __init__(self, vocab: str, settings: dict):
        self.onnx = require("onnx", "export")
        from onnx import TensorProto, helper

        self.helper, self.T = helper, TensorProto
        self.vocab, self.settings = vocab, settings
        self.nodes, self.initializers = [], []
        self.count = 0
        self.int64("zero", [0])
        self.int64("one", [1])
        self.int64("minus_one", [-1])
        for key in ("unk", "cls", "sep"):
            self.int64(key, [settings[key]])
        self.initializers.append(helper.make_tensor(PREFIX + "no_ids", TensorProto.INT64, [0], []))
        self.initializers.append(helper.make_tensor(PREFIX + "true", TensorProto.BOOL, [], [True]))

    def int64(self, name: str, values: list[int]) -> str:
        self.initializers.append(self.helper.make_tensor(PREFIX + name, self.T.INT64, [len(values)], values))
        return PREFIX + name

    def node(self, op: str, inputs: list[str], n_out: int = 1, domain: str = "", **attributes) -> list[str]:
        self.count += 1
        outputs = [f"{PREFIX}{op.lower()}_{self.count}_{k}" for k in range(n_out)]
        self.nodes.append(self.helper.make_node(op, inputs, outputs, name=f"{PREFIX}{op}_{self.count}",
                                                domain=domain, **attributes))
        return outputs

    def word_pieces(self, text: str) -> str:
        """A [1] string tensor -> the WordPiece ids of its words, no special tokens (1-D int64)."""
        h, T, s = self.helper, self.T, self.settings
        scalar, = self.node("Squeeze", [text, PREFIX + "zero"])
        words, = self.node("BasicTokenizer", [scalar], domain=CONTRIB, do_lower_case=s["do_lower_case"],
                           strip_accents=s["strip_accents"], tokenize_chinese_chars=s["tokenize_chinese_chars"],
                           tokenize_punctuation=1, remove_control_chars=1)
        n_words, = self.node("Shape", [words])
        trips, = self.node("Squeeze", [n_words, PREFIX + "zero"])
        tag = f"w{self.count}_"
        body = [
            h.make_node("Unsqueeze", ["i", PREFIX + "zero"], [tag + "i1"]),
            h.make_node("Gather", [words, tag + "i1"], [tag + "word"], axis=0),
            h.make_node("BertTokenizer", [tag + "word"], [tag + "ids", tag + "types", tag + "mask"], domain=CONTRIB,
                        vocab_file=self.vocab, do_lower_case=s["do_lower_case"], strip_accents=s["strip_accents"],
                        tokenize_chinese_chars=s["tokenize_chinese_chars"]),
            h.make_node("Slice", [tag + "ids", PREFIX + "one", PREFIX + "minus_one"], [tag + "pieces"]),
            h.make_node("Equal", [tag + "pieces", PREFIX + "unk"], [tag + "is_unk"]),
            h.make_node("Cast", [tag + "is_unk"], [tag + "unk_count_in"], to=T.INT64),
            h.make_node("ReduceMax", [tag + "unk_count_in"], [tag + "any_unk"], keepdims=0),
            h.make_node("Cast", [tag + "any_unk"], [tag + "has_unk"], to=T.BOOL),
            # A word with a piece missing from the vocabulary is one [UNK], as tokenizer.json makes it.
            h.make_node("If", [tag + "has_unk"], [tag + "word_ids"],
                        then_branch=h.make_graph([h.make_node("Identity", [PREFIX + "unk"], [tag + "then"])], "unk", [],
                                                 [h.make_tensor_value_info(tag + "then", T.INT64, [None])]),
                        else_branch=h.make_graph([h.make_node("Identity", [tag + "pieces"], [tag + "else"])], "pieces",
                                                 [], [h.make_tensor_value_info(tag + "else", T.INT64, [None])])),
            h.make_node("Concat", [tag + "acc_in", tag + "word_ids"], [tag + "acc_out"], axis=0),
            h.make_node("Identity", [tag + "cond_in"], [tag + "cond_out"]),
        ]
        graph = h.make_graph(body, f"{tag}per_word",
                             [h.make_tensor_value_info("i", T.INT64, []),
                              h.make_tensor_value_info(tag + "cond_in", T.BOOL, []),
                              h.make_tensor_value_info(tag + "acc_in", T.INT64, [None])],
                             [h.make_tensor_value_info(tag + "cond_out", T.BOOL, []),
                              h.make_tensor_value_info(tag + "acc_out", T.INT64, [None])])
        pieces, = self.node("Loop", [trips, PREFIX + "true", PREFIX + "no_ids"], body=graph)
        return pieces

    def first(self, ids: str, count: str) -> str:
        """The first `count` ids (count >= 0)."""
        return self.node("Slice", [ids, PREFIX + "zero", count])[0]

    def filled(self, like: str, value: int) -> str:
        shape, = self.node("Shape", [like])
        return self.node("ConstantOfShape", [shape],
                         value=self.helper.make_tensor("value", self.T.INT64, [1], [value]))[0]

    def output(self, name: str, source: str) -> None:
        self.nodes.append(self.helper.make_node("Identity", [source], [PREFIX + name], name=f"{PREFIX}out_{name}"))


def tokenizer_graph(tokenizer_json: Path, text_inputs: tuple[str, ...], max_length: int, opset: int, ir_version: int):
    """The tokenizer as an ONNX model: one string input per text (text, or question and context) ->
    tokenizer/input_ids, tokenizer/attention_mask, tokenizer/token_type_ids (1-D int64)."""
    if len(text_inputs) not in (1, 2):
        raise ExportError(f"a text-in model takes one text or a pair, not {len(text_inputs)}")
    vocab, settings = _vocabulary(tokenizer_json)
    b = _Builder(vocab, settings)
    h, T = b.helper, b.T
    cls, sep = PREFIX + "cls", PREFIX + "sep"
    if len(text_inputs) == 1:
        pieces = b.first(b.word_pieces(text_inputs[0]), b.int64("room", [max_length - 2]))
        ids, = b.node("Concat", [cls, pieces, sep], axis=0)
        types = b.filled(ids, 0)
    else:
        # A question longer than the window is cut to it (then no context fits): the model never sees more
        # than max_length tokens.
        pair_room = b.int64("pair_room", [max_length - 3])
        question = b.first(b.word_pieces(text_inputs[0]), pair_room)
        context = b.word_pieces(text_inputs[1])
        n_question, = b.node("Shape", [question])
        room, = b.node("Sub", [pair_room, n_question])
        room, = b.node("Max", [room, PREFIX + "zero"])  # a question that fills the window leaves no context
        first, = b.node("Concat", [cls, question, sep], axis=0)
        second, = b.node("Concat", [b.first(context, room), sep], axis=0)
        ids, = b.node("Concat", [first, second], axis=0)
        types, = b.node("Concat", [b.filled(first, 0), b.filled(second, 1)], axis=0)
    b.output("input_ids", ids)
    b.output("attention_mask", b.filled(ids, 1))
    b.output("token_type_ids", types)
    graph = h.make_graph(b.nodes, "wordpiece_tokenizer",
                         [h.make_tensor_value_info(n, T.STRING, [1]) for n in text_inputs],
                         [h.make_tensor_value_info(PREFIX + n, T.INT64, ["tokens"])
                          for n in ("input_ids", "attention_mask", "token_type_ids")], b.initializers)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset), h.make_opsetid(CONTRIB, 1)],
                        ir_version=ir_version)
