"""Transfer data: unlabelled text from the app's own domain, labelled by the teacher's soft targets.

Passages come from files (one a line, or a text column) or named datasets (their training split; labels ignored).
Each is cut to what the student reads at max_length, or split into every such window, then de-duplicated against
every text the run trains or is evaluated on, so that no evaluation text leaks into training. A seeded subset
keeps the recipe's number or share of the training rows. A look at the word pieces catches text the teacher's
vocabulary does not cover: mostly [UNK] is an error, a noticeable share or heavily cut-up words a warning.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from pocketbert.core.tasks.data import NAMED_DATASETS, subsample, text_key
from pocketbert.core.config.recipe import Recipe, TransferSection
from pocketbert.core.tasks.task_data import load_task_data, transfer_passages
from pocketbert.core.errors import ConfigError, DataError

UNK_ERROR_SHARE = 0.5  # of a source's word pieces: the teacher would be labelling noise
UNK_WARN_SHARE = 0.05
PIECES_PER_WORD_WARN = 2.5  # English text runs about 1.3 word pieces a word; far more means foreign words cut up
TOKENIZE_CHUNK = 1000  # passages tokenized at a time (the progress bar's step)

log = logging.getLogger(__name__)


@dataclass
class TransferSet:
    texts: list[str]
    report: dict = field(default_factory=dict)


@dataclass
class _Windows:
    texts: list[str]
    pieces: int = 0
    unknown: int = 0
    words: int = 0
    empty: int = 0


def passage_windows(tokenizer, passages: list[str], max_length: int, long_text: str, desc: str) -> _Windows:
    """Each passage cut to the text the model reads at max_length (long_text 'cut'), or every such window of it
    ('windows'), as substrings of the original so that rewrites and de-duplication see real text."""
    from tqdm.auto import tqdm

    windows = long_text == "windows"
    if not getattr(tokenizer, "is_fast", False):
        if windows:
            raise ConfigError("transfer.long_text: windows needs a fast (Rust) tokenizer for character offsets: "
                              "use transfer.long_text: cut")
        return _Windows(list(passages))
    out = _Windows([])
    unk = tokenizer.unk_token_id
    for start in tqdm(range(0, len(passages), TOKENIZE_CHUNK), desc=desc, unit="chunk", leave=False):
        chunk = passages[start:start + TOKENIZE_CHUNK]
        enc = tokenizer(chunk, truncation=True, max_length=max_length, return_overflowing_tokens=windows,
                        return_offsets_mapping=True, return_special_tokens_mask=True)
        owners = enc["overflow_to_sample_mapping"] if windows else range(len(chunk))
        for k, owner in enumerate(owners):
            spans = [(a, b) for (a, b), special in zip(enc["offset_mapping"][k], enc["special_tokens_mask"][k])
                     if not special and b > a]
            if not spans:
                out.empty += 1
                continue
            text = chunk[owner][spans[0][0]:spans[-1][1]]
            out.texts.append(text)
            ids = [i for i, special in zip(enc["input_ids"][k], enc["special_tokens_mask"][k]) if not special]
            out.pieces += len(ids)
            out.unknown += sum(1 for i in ids if i == unk)
            out.words += len(text.split())
    return out


def vocabulary_check(source: str, found: _Windows) -> tuple[dict, list[str]]:
    """The share of [UNK] word pieces and pieces per word; an error when the teacher would read mostly [UNK]."""
    unknown_share = found.unknown / found.pieces if found.pieces else 1.0
    per_word = found.pieces / found.words if found.words else 0.0
    if not found.texts:
        raise DataError(f"transfer data '{source}' tokenizes to nothing (no word pieces): check the file's text")
    if unknown_share > UNK_ERROR_SHARE:
        raise DataError(f"transfer data '{source}' is {100 * unknown_share:.0f} % unknown word pieces ([UNK]) to the "
                        "teacher's vocabulary: use text in a language and script the teacher reads")
    warnings = []
    if unknown_share > UNK_WARN_SHARE:
        warnings.append(f"transfer data '{source}': {100 * unknown_share:.1f} % of its word pieces are unknown "
                        "([UNK]) to the teacher's vocabulary; its soft targets on those rows say little")
    if per_word > PIECES_PER_WORD_WARN:
        warnings.append(f"transfer data '{source}': {per_word:.1f} word pieces a word (English runs about 1.3); "
                        "it may be in another language than the teacher's")
    return {"unknown_piece_share": round(unknown_share, 4), "pieces_per_word": round(per_word, 3)}, warnings


def build_transfer_set(sources: list[str], tokenizer, task_name: str, max_length: int, excluded_texts: list[str],
                       n_labelled: int, cfg: TransferSection, data_dir: Path | None, seed: int) -> TransferSet:
    """The transfer rows of the recipe's `transfer:` section: read, cut or windowed, de-duplicated against
    `excluded_texts` (every training and evaluation text of the run) and each other, then subsampled."""
    excluded = {text_key(text) for text in excluded_texts}
    seen: set[str] = set()
    texts: list[str] = []
    per_source, warnings = [], []
    for source in sources:
        passages = transfer_passages(source, task_name, data_dir, seed, cfg.text_column)
        # A whole passage that is a training or evaluation text goes before cutting, which would hide it.
        fresh = [text for text in passages if text_key(text) not in excluded]
        leaked = len(passages) - len(fresh)
        if not fresh:
            raise DataError(f"every passage of transfer data '{source}' is also a training or evaluation text: "
                            "give text the run does not already hold")
        found = passage_windows(tokenizer, fresh, max_length, cfg.long_text, f"reading {Path(source).name}")
        vocab, source_warnings = vocabulary_check(source, found)
        kept = repeated = 0
        for text in found.texts:
            key = text_key(text)
            if key in excluded:
                leaked += 1
            elif key in seen:
                repeated += 1
            else:
                seen.add(key)
                texts.append(text)
                kept += 1
        per_source.append({"source": source, "passages": len(passages), "rows": len(found.texts),
                           "empty": found.empty, "dropped_as_training_or_eval_text": leaked,
                           "dropped_as_repeats": repeated, "kept": kept, **vocab})
        warnings += source_warnings
    available = len(texts)
    wanted = cfg.max_examples
    share = cfg.share
    if share is not None:
        by_share = round(share / (1.0 - share) * n_labelled)
        if by_share > available:
            warnings.append(f"transfer.share {share} asks for {by_share} transfer rows beside {n_labelled} labelled "
                            f"ones; the transfer data holds {available}, so all are used")
        wanted = by_share if wanted is None else min(wanted, by_share)
    chosen = subsample(texts, wanted, seed)
    for message in warnings:
        log.warning("warning: %s", message)
    total = len(chosen) + n_labelled
    return TransferSet(chosen, {
        "sources": per_source, "long_text": cfg.long_text, "max_length": max_length, "available": available,
        "rows": len(chosen), "labelled_rows": n_labelled, "share_of_rows": round(len(chosen) / total, 4),
        "share_requested": share, "warnings": warnings,
    })


def augments(recipe: Recipe) -> bool:
    """Whether the distillation adds rewrites: distill.augment, which the recipe fills with its own default when
    unset (train/distillation.py)."""
    return bool(recipe.distill.augment)


def check_recipe(recipe: Recipe) -> None:
    """Before any work: a task that cannot learn from unlabelled sentences refuses transfer data and rewrites."""
    from pocketbert.core.tasks.registry import make_task

    task = make_task(recipe.task)
    if recipe.transfer.data:
        task.require_unlabeled("transfer data")
    if augments(recipe):
        task.require_unlabeled("distill.augment")


def excluded_texts(task, data, recipe: Recipe, data_dir: Path | None, seed: int) -> list[str]:
    """Every text the run trains or is evaluated on: the dataset's splits and each cross-domain evaluation split."""
    from pocketbert.core.config.recipe import cross_domain_datasets

    texts = [example.text for example in (*data.train, *data.eval)]
    for name in cross_domain_datasets(recipe):
        other = load_task_data(name, task.name, data_dir, None, task.label_names or None, seed)
        texts += [example.text for example in other.eval]
    return texts


def unlabeled_rows(task, tokenizer, recipe: Recipe, data, labelled: list, data_dir: Path | None,
                   seed: int) -> tuple[list, dict]:
    """The rows beside `labelled` that the teacher alone labels: the transfer data, then the augment: section's
    rewrites of labelled and transfer text alike (when distill.augment says so).
    Returns (examples with no gold label, {"transfer_data": ..., "augmentation": ...} for the manifest)."""
    from pocketbert.train import augment

    transfer_cfg = recipe.transfer
    report: dict = {}
    unlabeled: list = []
    if transfer_cfg.data:
        task.require_unlabeled("transfer data")
        built = build_transfer_set(list(transfer_cfg.data), tokenizer, task.name, recipe.distill.max_length,
                                   excluded_texts(task, data, recipe, data_dir, seed), len(labelled), transfer_cfg,
                                   data_dir, seed)
        unlabeled = task.unlabeled_examples(built.texts)
        report["transfer_data"] = built.report
    if not augments(recipe):
        return unlabeled, report
    task.require_unlabeled("distill.augment")
    augment_cfg = augment.AugmentConfig.from_recipe(recipe.augment)
    if tokenizer.mask_token is None and augment_cfg.p_mask > 0:
        raise ConfigError("the teacher's tokenizer has no mask token for augmentation: set augment.p_mask=0")
    rows, report["augmentation"] = augment.transfer_set([*labelled, *unlabeled], augment_cfg, tokenizer.mask_token,
                                                        seed)
    return rows[len(labelled):], report


def file_inputs(recipe: Recipe) -> dict[str, Path]:
    """The transfer files a run read, for its manifest's inputs (with their sha256)."""
    sources = recipe.transfer.data
    return {f"transfer_{i}": Path(s) for i, s in enumerate(sources) if s not in NAMED_DATASETS and Path(s).is_file()}
