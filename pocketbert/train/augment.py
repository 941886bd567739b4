"""The transfer set of Tang et al. 2019: each example rewritten n_iter times, de-duplicated.

Per word, one draw X ~ U[0, 1]: X < p_mask replaces it with the mask token, p_mask <= X < p_mask + p_pos
with another word of the same part of speech (drawn by frequency from the corpus). Then, with probability
p_ng, the sample is cut to a random n-gram, n from 1 to 5. Words are whitespace tokens: SST-2 and the
other corpora here come tokenised.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Callable

from pocketbert.core.errors import ConfigError, require
from pocketbert.core.tasks.data import TextExample
from pocketbert.core.tasks.losses import IGNORE_LABEL

MAX_NGRAM = 5
DEFAULT_TAGGER = "pattern"  # textblob's bundled Brill-style tagger: installs from PyPI with its lexicon


@dataclass(frozen=True)
class AugmentConfig:
    p_mask: float = 0.1
    p_pos: float = 0.1
    p_ng: float = 0.25
    n_iter: int = 20
    pos_tagger: str = DEFAULT_TAGGER  # or "spacy:<pipeline>", e.g. spacy:en_core_web_sm
    max_transfer_examples: int | None = None

    @classmethod
    def from_recipe(cls, section) -> "AugmentConfig":
        """From the recipe's augment: section (core/config/recipe.py's AugmentSection)."""
        config = cls(**{k: getattr(section, k) for k in cls.__dataclass_fields__ if hasattr(section, k)})
        for name in ("p_mask", "p_pos", "p_ng"):
            if not 0.0 <= float(getattr(config, name)) <= 1.0:
                raise ConfigError(f"augment.{name} must be between 0 and 1 (got {getattr(config, name)})")
        if config.p_mask + config.p_pos > 1.0:
            raise ConfigError("augment.p_mask + augment.p_pos must be at most 1")
        if int(config.n_iter) < 0:
            raise ConfigError(f"augment.n_iter must be >= 0 (got {config.n_iter})")
        return config


def pos_tagger(name: str) -> Callable[[list[str]], list[str]]:
    """A function from a sentence's words to one tag per word."""
    if name == "pattern":
        require("textblob", "train")
        from textblob.en.taggers import PatternTagger

        tagger = PatternTagger()

        def tag_pattern(words: list[str]) -> list[str]:
            tags = [t for _, t in tagger.tag(" ".join(words), tokenize=False)][:len(words)]
            return tags if len(tags) == len(words) else [t for w in words for _, t in tagger.tag(w, tokenize=False)[:1]]

        return tag_pattern
    if name.startswith("spacy:"):
        spacy = require("spacy", "spacy")
        from spacy.tokens import Doc

        try:
            nlp = spacy.load(name.split(":", 1)[1], disable=["parser", "ner", "lemmatizer"])
        except OSError as exc:
            raise ConfigError(f"spaCy pipeline '{name[6:]}' is not installed: pip install it (see spaCy's model "
                              f"list) or use augment.pos_tagger: {DEFAULT_TAGGER}") from exc

        def tag_spacy(words: list[str]) -> list[str]:
            return [t.tag_ for t in nlp(Doc(nlp.vocab, words=words))]

        return tag_spacy
    raise ConfigError(f"unknown augment.pos_tagger '{name}': use '{DEFAULT_TAGGER}' or 'spacy:<pipeline name>'")


class WordsByTag:
    """For each part-of-speech tag, the corpus' words with that tag and their counts, to draw from."""

    def __init__(self, tagged: list[tuple[list[str], list[str]]]):
        counts: dict[str, Counter] = defaultdict(Counter)
        for words, tags in tagged:
            for word, tag in zip(words, tags):
                counts[tag][word] += 1
        self.words = {tag: list(c) for tag, c in counts.items()}
        self.weights = {tag: list(c.values()) for tag, c in counts.items()}

    def draw(self, tag: str, rng: random.Random) -> str | None:
        words = self.words.get(tag)
        return rng.choices(words, self.weights[tag])[0] if words else None


def augment_one(words: list[str], tags: list[str], vocab: WordsByTag, cfg: AugmentConfig, mask_token: str,
                rng: random.Random) -> list[str]:
    sample = []
    for word, tag in zip(words, tags):
        x = rng.random()
        if x < cfg.p_mask:
            sample.append(mask_token)
        elif x < cfg.p_mask + cfg.p_pos:
            sample.append(vocab.draw(tag, rng) or word)
        else:
            sample.append(word)
    if sample and rng.random() < cfg.p_ng:
        n = rng.randint(1, min(MAX_NGRAM, len(sample)))
        start = rng.randint(0, len(sample) - n)
        sample = sample[start:start + n]
    return sample


def transfer_set(examples: list[TextExample], cfg: AugmentConfig, mask_token: str, seed: int,
                 progress: bool = True) -> tuple[list[TextExample], dict]:
    """The originals (with their labels) followed by new de-duplicated samples (label IGNORE_LABEL: the teacher's)."""
    from tqdm.auto import tqdm

    rng = random.Random(seed)
    split = [ex.text.split() for ex in examples]
    seen = {" ".join(words) for words in split}
    out = list(examples)
    if cfg.n_iter == 0:
        return out, {"originals": len(examples), "augmented": 0, "duplicates_dropped": 0}
    tag = pos_tagger(cfg.pos_tagger)
    tagged = [(words, tag(words)) for words in tqdm(split, desc="POS tagging", unit="ex", disable=not progress)]
    vocab = WordsByTag(tagged)
    duplicates = 0
    limit = cfg.max_transfer_examples
    order = list(range(len(tagged)))
    rng.shuffle(order)  # so that a cap on the transfer set keeps samples of a random part of the data
    for i in tqdm(order, desc="augmenting", unit="ex", disable=not progress):
        words, tags = tagged[i]
        for _ in range(cfg.n_iter):
            text = " ".join(augment_one(words, tags, vocab, cfg, mask_token, rng))
            if not text or text in seen:
                duplicates += 1
                continue
            seen.add(text)
            out.append(TextExample(text, IGNORE_LABEL))
        if limit is not None and len(out) >= limit:
            out = out[:limit]
            break
    return out, {"originals": len(examples), "augmented": len(out) - len(examples), "duplicates_dropped": duplicates,
                 "tagger": cfg.pos_tagger}
