"""The tokenizer files an app loads, made to mean what the exported model means, and a golden file to prove it.

save_pretrained writes the training truncation (max_length of the stage) into tokenizer.json, and transient
loading keys into tokenizer_config.json. Any client that loads tokenizer.json as it is (tokenizers,
transformers.js, swift-transformers' tokenizer.json path) would cut inputs at the training length without a
word. Here tokenizer.json truncates at the export's max_length, keeping [CLS] and [SEP]; tokenizer_config.json
carries the keys swift-transformers reads. The golden file lists texts that tokenizers get wrong most often
with the ids the reference tokenizer gives; export fails if the shipped tokenizer.json disagrees on any.
"""

from __future__ import annotations

import json
from pathlib import Path

from pocketbert.core.errors import ExportError

TRANSIENT_CONFIG_KEYS = ("is_local", "local_files_only", "name_or_path", "_commit_hash")
LONG_WORD_CHARS = 120  # WordPiece maps a word over 100 characters to [UNK]


def golden_texts(max_length: int) -> list[tuple[str, str]]:
    """(what it probes, text): the cases where hand-written tokenizers and loaders part ways."""
    return [
        ("ascii", "A gripping, well-acted film; I'd watch it again!"),
        ("accents", "Café naïve résumé, señor Müller"),
        ("cjk", "中国电影 很好看"),
        ("emoji", "great😀 movie 👍🏽"),
        ("currency and digits", "5€ tickets, 3.5 stars, 1,000 fans"),
        ("zero-width space", "wonder\u200bful act\u200cing"),
        ("control characters", "tab\tnew\nline\r\x00end\x07"),
        ("long word", "a" + "b" * (LONG_WORD_CHARS - 2) + "c is one word"),
        ("longer than max_length", " ".join(["terrific"] * (2 * max_length))),
        ("empty", ""),
        ("only spaces", "   "),
    ]


def golden_pairs(max_length: int) -> list[tuple[str, str, str]]:
    """(what it probes, question, context): the pairs an extractive-QA tokenizer must cut as the model was fed."""
    return [
        ("ascii pair", "Who directed the film?", "The film was directed by Jane Doe in 1999."),
        ("accents and emoji", "Où est le café?", "Le café 😀 est près de la Seine, señor Müller."),
        ("context longer than max_length", "What repeats?", " ".join(["terrific"] * (2 * max_length))),
        ("question longer than max_length", " ".join(["why"] * (2 * max_length)), "Because."),
        ("empty question", "", "A context with no question."),
        ("cjk, emoji, zero-width and spaces", "哪部电影?", "电影  wonder\u200bful\t很好看 👍🏽, 5€ a ticket"),
    ]


def make_tokenizer_json_truncate_at(path: Path, max_length: int) -> None:
    """Truncation at the export's max_length (the special tokens counted in, so [SEP] stays), no padding."""
    data = json.loads(path.read_text(encoding="utf-8"))
    data["truncation"] = {"direction": "Right", "max_length": int(max_length), "strategy": "LongestFirst", "stride": 0}
    data["padding"] = None
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def clean_tokenizer_config(path: Path, tokenizer_json: Path, max_length: int) -> None:
    """Without loading-time keys; with the normalizer's settings under the names swift-transformers reads."""
    config = json.loads(path.read_text(encoding="utf-8"))
    for key in TRANSIENT_CONFIG_KEYS:
        config.pop(key, None)
    normalizer = json.loads(tokenizer_json.read_text(encoding="utf-8")).get("normalizer") or {}
    if normalizer.get("type") == "BertNormalizer":
        config["handle_chinese_chars"] = bool(normalizer.get("handle_chinese_chars", True))
        config["tokenize_chinese_chars"] = config["handle_chinese_chars"]
        config["do_lower_case"] = bool(normalizer.get("lowercase", True))
        if normalizer.get("strip_accents") is not None:
            config["strip_accents"] = bool(normalizer["strip_accents"])
    config["model_max_length"] = int(max_length)
    if "max_length" in config:  # transformers records the loading call's value: make it say the same
        config["max_length"] = int(max_length)
    path.write_text(json.dumps(config, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def hard_texts(tokenizer_json: Path) -> list[tuple[str, str]]:
    """(what it probes, text): one text per class of code point the exhaustive check of the text-in graph found
    tokenizing specially for this tokenizer (none when the graph cannot express it: no text-in model ships then)."""
    from pocketbert.export.text_in.text_normalization import hard_cases
    from pocketbert.export.text_in.text_tokenizer import mapping_for

    try:
        return hard_cases(mapping_for(json.loads(tokenizer_json.read_text(encoding="utf-8"))))
    except ExportError:
        return []


def golden(reference_tokenizer, max_length: int, with_pairs: bool = False,
           hard: list[tuple[str, str]] = ()) -> dict:
    """Each golden text (and each of `hard`) with the ids the reference tokenizer (the one the parity gate feeds)
    gives it; with_pairs (a task that reads a question and a context): each golden pair (and each hard text as
    question and context) with its ids, token types and offsets (each token's code-point span in its own text;
    (0, 0) for [CLS] and [SEP]), the context cut to fit. A question longer than the window is cut to
    max_length - 3 tokens, as the text-in model cuts it."""
    rows = []
    for name, text in [*golden_texts(max_length), *hard]:
        ids = reference_tokenizer(text, truncation=True, max_length=max_length)["input_ids"]
        rows.append({"probe": name, "text": text, "ids": list(map(int, ids))})
    golden_file = {"max_length": int(max_length),
                   "special_tokens_kept": "[CLS] first, [SEP] last, also when truncated", "texts": rows}
    if with_pairs:
        golden_file["pairs"] = [{"probe": name, **golden_pair(reference_tokenizer, question, context, max_length)}
                                for name, question, context in [*golden_pairs(max_length),
                                                                *((name, text, text) for name, text in hard)]]
    return golden_file


def golden_pair(reference_tokenizer, question: str, context: str, max_length: int) -> dict:
    """A question and context with the ids, token types and offsets the reference tokenizer gives them, the
    context cut to fit (the question too, to max_length - 3 tokens, when it alone is longer)."""
    q, q_offsets = _pieces(reference_tokenizer, question, max_length - 3)
    c, c_offsets = _pieces(reference_tokenizer, context, max_length - 3 - len(q))
    cls, sep = reference_tokenizer.cls_token_id, reference_tokenizer.sep_token_id
    return {"question": question, "context": context, "ids": [cls, *q, sep, *c, sep],
            "token_type_ids": [0] * (len(q) + 2) + [1] * (len(c) + 1),
            "offsets": [[0, 0], *q_offsets, [0, 0], *c_offsets, [0, 0]]}


def _pieces(reference_tokenizer, text: str, room: int) -> tuple[list[int], list[list[int]]]:
    """The first `room` word pieces of a text, and their code-point offsets in it."""
    encoded = reference_tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return (list(map(int, encoded["input_ids"][:room])),
            [[int(a), int(b)] for a, b in encoded["offset_mapping"][:room]])


def ids_from_tokenizer_json(path: Path, texts: list[str]) -> list[list[int]]:
    """What a client that loads tokenizer.json as it is gets (the tokenizers library reads the same file)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    return [tokenizer.encode(text).ids for text in texts]


def mismatches(expected: dict, got: list[list[int]]) -> list[str]:
    return [row["probe"] for row, ids in zip(expected["texts"], got) if ids != row["ids"]]


def check_tokenizer_json(tokenizer_json: Path, expected: dict) -> None:
    wrong = mismatches(expected, ids_from_tokenizer_json(tokenizer_json, [r["text"] for r in expected["texts"]]))
    if wrong:
        raise ExportError(f"the exported tokenizer.json gives other ids than the student's tokenizer for: "
                          f"{', '.join(wrong)}; re-save the student's tokenizer with transformers and export again")
