"""The student's tokenizer rebuilt for a fitted vocabulary: the same normalizer, pre-tokenizer, template and
settings, its WordPiece vocabulary cut to the kept pieces and renumbered in their order, and every id the
tokenizer states (special tokens, the template's, the padding id) renumbered with them.

The fitted student folder saves it as any stage saves its tokenizer, and the export writes tokenizer.json, vocab.txt,
tokenizer_config.json and the golden file from that, as from any student's, so the four agree.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from pocketbert.core.errors import ModelError
from pocketbert.core.run.run_files import TOKENIZER_JSON, VOCAB

WORDPIECE = "WordPiece"


def wordpiece_vocabulary(tokenizer) -> tuple[dict[str, int], str]:
    """(token -> id, continuation prefix) of a fast WordPiece tokenizer; ModelError for any other."""
    data = _tokenizer_data(tokenizer)
    return dict(data["model"]["vocab"]), data["model"].get("continuing_subword_prefix", "##")


def fitted_tokenizer(tokenizer, kept_ids: list[int]):
    """A tokenizer of the same class and settings that knows only `kept_ids`, kept_ids[k] renumbered k."""
    from pocketbert.core.students.models import load_tokenizer

    data = _tokenizer_data(tokenizer)
    renumber = {old: new for new, old in enumerate(kept_ids)}

    def new_id(old: int, what: str) -> int:
        if old not in renumber:
            raise ModelError(f"the fitted vocabulary dropped {what} (id {old}); keep every special token")
        return renumber[old]

    data["model"]["vocab"] = {token: renumber[i] for token, i in data["model"]["vocab"].items() if i in renumber}
    for added in data.get("added_tokens") or []:
        added["id"] = new_id(added["id"], added["content"])
    _renumber_template(data.get("post_processor"), new_id)
    if data.get("padding"):
        data["padding"]["pad_id"] = new_id(data["padding"]["pad_id"], "the padding token")
    with tempfile.TemporaryDirectory(prefix="pocketbert-vocabulary-") as tmp:
        tokenizer.save_pretrained(tmp)
        (Path(tmp) / VOCAB).unlink(missing_ok=True)  # a slow tokenizer's file would name the full vocabulary
        (Path(tmp) / TOKENIZER_JSON).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        fitted = load_tokenizer(tmp)
    if len(fitted) != len(kept_ids):
        raise ModelError(f"the fitted tokenizer knows {len(fitted)} tokens, not the {len(kept_ids)} kept: "
                          "export the full vocabulary (export.vocabulary: full)")
    return fitted


def _tokenizer_data(tokenizer) -> dict:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    data = json.loads(backend.to_str()) if backend is not None else {}
    if (data.get("model") or {}).get("type") != WORDPIECE:
        raise ModelError("a fitted vocabulary needs a fast WordPiece (BERT) tokenizer: export the full vocabulary "
                          "(export.vocabulary: full)")
    return data


def _renumber_template(processor: dict | None, new_id) -> None:
    """The ids a post-processor adds ([CLS], [SEP]): a template's special tokens, or BERT's and RoBERTa's
    (token, id) pairs, or those of each processor of a sequence."""
    if not processor:
        return
    for inner in processor.get("processors") or []:
        _renumber_template(inner, new_id)
    for token in (processor.get("special_tokens") or {}).values():
        token["ids"] = [new_id(i, token["id"]) for i in token["ids"]]
    for key in ("cls", "sep"):
        if isinstance(processor.get(key), list):
            processor[key][1] = new_id(processor[key][1], processor[key][0])
