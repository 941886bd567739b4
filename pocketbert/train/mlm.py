"""`pocketbert train mlm`: the task-agnostic stage of DistilBERT, masked-LM distillation on plain text.

The teacher needs its masked-LM head. The student is cut from it (every other layer) and learns from
soft-target KL on the masked positions, the masked-LM cross-entropy and cosine alignment of hidden states.
The result, <run>/student_mlm/, is a Hugging Face folder with the teacher's vocabulary: pass it to
`pocketbert train distill --student-model` for the task-specific stage.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import Field

from pocketbert.core.errors import ConfigError, DataError, ModelError
from pocketbert.core.run.run_files import MLM_STUDENT_DIR, MLM_STUDENT_RECORD
from pocketbert.core.tasks import losses
from pocketbert.core.students import models
from pocketbert.core.config.recipe import Section, TrainingSection
from pocketbert.train import registry, trainer
from pocketbert.train.distillation import aligned_teacher_layers, freeze, loss_weights
from pocketbert.train.stage import StageRun, TrainingRecipe, as_record
from pocketbert.train.student import build_student

HELD_OUT_FRACTION = 20  # one text in 20, at most HELD_OUT_MAX, is kept out of training to measure perplexity
HELD_OUT_MAX = 256
MASKED_LM_HEAD_PREFIXES = ("cls.predictions", "lm_head", "vocab_projector", "vocab_transform", "generator_lm_head")


class MLMSection(Section):
    """Masked-LM distillation on plain text (the recipe's `mlm:` section)."""

    max_length: int = Field(128, gt=0)
    batch_size: int = Field(32, gt=0)
    epochs: int = Field(1, gt=0)
    learning_rate: float = Field(5.0e-4, gt=0)
    warmup_ratio: float = Field(0.05, ge=0.0, le=1.0)
    weight_decay: float = Field(0.01, ge=0)
    temperature: float = Field(2.0, gt=0)
    kl_weight: float = Field(5.0, ge=0)
    ce_weight: float = Field(2.0, ge=0)
    cos_weight: float = Field(1.0, ge=0)
    mask_probability: float = Field(0.15, gt=0.0, lt=1.0)
    max_train_examples: Optional[int] = Field(None, gt=0)
    checkpoint_every: int = Field(200, gt=0)

    def training(self) -> TrainingSection:
        """The loop's settings: this section's, the loop's defaults for the rest (no focal loss, no compile)."""
        return TrainingSection.model_validate(self.model_dump(include=set(TrainingSection.model_fields)))


@dataclass
class MaskedFeature:
    input_ids: list[int]  # with [MASK] and random tokens in place
    labels: list[int]     # the original token where masked, IGNORE_LABEL elsewhere


class MaskedLMTask:
    """What the training loop needs of a task, for masked-LM batches."""

    name = registry.MASKED_LM
    input_names = ("input_ids", "attention_mask")
    head_skips_pooler = False  # the masked-LM head reads every token state; BertForMaskedLM has no pooler

    @staticmethod
    def collate(features: list[MaskedFeature], pad_id: int) -> dict[str, np.ndarray]:
        width = max(len(f.input_ids) for f in features)
        ids = np.full((len(features), width), pad_id, dtype=np.int64)
        labels = np.full((len(features), width), losses.IGNORE_LABEL, dtype=np.int64)
        for i, f in enumerate(features):
            ids[i, :len(f.input_ids)] = f.input_ids
            labels[i, :len(f.labels)] = f.labels
        mask = (np.arange(width)[None, :] < np.array([len(f.input_ids) for f in features])[:, None]).astype(np.int64)
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def read_corpus(path: Path) -> list[str]:
    """Non-empty lines of a UTF-8 text file."""
    try:
        lines = [line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines()]
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read corpus {path}: {exc}; pass a UTF-8 text file, one passage a line") from exc
    lines = [line for line in lines if line]
    if not lines:
        raise DataError(f"corpus {path} has no text; pass a UTF-8 text file, one passage a line")
    return lines


def mask_tokens(ids: list[int], tokenizer, probability: float, rng: random.Random) -> MaskedFeature:
    """BERT's masking: of the chosen tokens, 80 % become [MASK], 10 % a random token, 10 % stay."""
    special = set(tokenizer.all_special_ids)
    out, labels = list(ids), [losses.IGNORE_LABEL] * len(ids)
    for i, token in enumerate(ids):
        if token in special or rng.random() >= probability:
            continue
        labels[i] = token
        roll = rng.random()
        if roll < 0.8:
            out[i] = tokenizer.mask_token_id
        elif roll < 0.9:
            out[i] = rng.randrange(len(tokenizer))
    return MaskedFeature(out, labels)


def load_masked_lm_teacher(source: str):
    """The teacher with its masked-LM head, or an error saying it has none."""
    import pickle

    from transformers import AutoModelForMaskedLM

    models.quiet_transformers()
    try:
        model, info = AutoModelForMaskedLM.from_pretrained(source, output_loading_info=True, weights_only=True,
                                                           attn_implementation="eager", dtype=models.master_dtype())
    except pickle.UnpicklingError as exc:
        raise ModelError(f"refused to load '{source}': its pickled weights would run code; use safetensors") from exc
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot load a masked-LM model from '{source}': {str(exc).splitlines()[0]}") from exc
    if any(key.startswith(MASKED_LM_HEAD_PREFIXES) for key in info.get("missing_keys", [])):
        raise ConfigError(f"'{source}' has no masked-LM head (its checkpoint lacks the prediction layer), so there "
                          "is nothing to distil on plain text: use a checkpoint saved with its MLM head "
                          "(e.g. bert-base-uncased) or go straight to `pocketbert train distill`")
    return model.eval()


class MaskedLMRecipe(TrainingRecipe):
    """A student cut from a masked-LM teacher (`source`), distilled on plain text (`corpus`)."""

    name = registry.MASKED_LM
    stage_dir = MLM_STUDENT_DIR
    manifest_stage = "student_mlm"
    section = "mlm"
    progress = "masked-LM distill"
    sections = {"mlm": MLMSection}

    def load_inputs(self, run: StageRun) -> None:
        source = models.resolve_model_source(run.source)
        self.tokenizer = models.load_tokenizer(source)
        if self.tokenizer.mask_token_id is None:
            raise ConfigError(f"the tokenizer of '{run.source}' has no [MASK] token: it cannot drive masked-LM")
        self.teacher = load_masked_lm_teacher(source)
        texts = read_corpus(run.corpus)
        cfg = run.recipe.mlm
        if cfg.max_train_examples:
            texts = random.Random(run.seed).sample(texts, min(len(texts), int(cfg.max_train_examples)))
        self.texts, self.task = texts, MaskedLMTask()

    def build_model(self, run: StageRun):
        student, self.layer_map = build_student(self.teacher, run.recipe.student.layer_map)
        return student

    def place(self, run: StageRun, dev) -> None:
        freeze(self.teacher, dev)
        self.targets = aligned_teacher_layers(len(self.layer_map), models.layer_count(self.teacher.config))

    def training_rows(self, run: StageRun, dev) -> list:
        cfg = run.recipe.mlm
        encoded = self.tokenizer(self.texts, truncation=True, max_length=int(cfg.max_length))["input_ids"]
        rng = random.Random(run.seed)
        masked_all = [mask_tokens(ids, self.tokenizer, float(cfg.mask_probability), rng) for ids in encoded]
        self.n_held = min(HELD_OUT_MAX, len(masked_all) // HELD_OUT_FRACTION)  # perplexity on text not trained on
        self.held_out = masked_all[:self.n_held]
        return masked_all[self.n_held:]

    def step_loss(self, run: StageRun, dev):
        teacher, targets, temperature = self.teacher, self.targets, float(run.recipe.mlm.temperature)
        weights = loss_weights(run.recipe.mlm)
        task = self.task

        def step_loss(forward_model, batch):
            inputs = trainer.model_inputs(task, batch)
            with torch.no_grad():
                t_out = teacher(**inputs, output_hidden_states=weights["cos"] > 0)
            s_out = forward_model(**inputs, output_hidden_states=weights["cos"] > 0)
            labels = batch["labels"]
            parts = {"kl": losses.soft_target_kl_per_row(s_out.logits, t_out.logits, temperature,
                                                         labels != losses.IGNORE_LABEL),
                     "ce": losses.cross_entropy(s_out.logits.flatten(0, 1), labels.flatten())}
            if weights["cos"]:
                parts["cos"] = losses.hidden_cosine_loss(list(s_out.hidden_states[1:]),
                                                         [t_out.hidden_states[k] for k in targets],
                                                         batch["attention_mask"])
            loss = sum(weights[k] * v for k, v in parts.items())
            return loss, parts

        return step_loss, None

    def loop_settings(self, run: StageRun) -> TrainingSection:
        return run.recipe.mlm.training()

    def checkpoint_identity(self, run: StageRun) -> dict:
        return {"cfg": as_record(run.section), "seed": run.seed, "layer_map": self.layer_map, "teacher": run.source}

    def evaluate(self, run: StageRun, model, dev) -> dict:
        self.perplexities = {name: masked_lm_perplexity(m, self.held_out, self.tokenizer.pad_token_id, dev)
                             for name, m in (("student", model), ("teacher", self.teacher))}
        return self.perplexities

    def save(self, run: StageRun, model, out) -> None:
        model.save_pretrained(out, safe_serialization=True)
        self.tokenizer.save_pretrained(out)
        (out / MLM_STUDENT_RECORD).write_text(json.dumps({"layer_map": self.layer_map, "teacher": run.source}) + "\n")

    def manifest(self, run: StageRun, model, dev, stats: dict) -> tuple[dict, dict, dict]:
        config = {"mlm": as_record(run.section), "teacher": run.source, "layer_map": self.layer_map,
                  "corpus": str(run.corpus), "device": str(dev)}
        metrics = {"train": stats, "masked_lm_perplexity_held_out": self.perplexities, "held_out_texts": self.n_held,
                   "texts": len(self.texts)}
        return config, {"corpus": Path(run.corpus)}, metrics

    def result(self) -> dict:
        return {"perplexity": self.perplexities}


@torch.no_grad()
def masked_lm_perplexity(model, features: list[MaskedFeature], pad_id: int, dev, batch_size: int = 32) -> float:
    """exp(mean cross-entropy on the masked tokens): the student's against the teacher's, on the same masks."""
    model.to(dev).eval()
    total, count = 0.0, 0
    for start in range(0, len(features), batch_size):
        batch = trainer.to_device(MaskedLMTask.collate(features[start:start + batch_size], pad_id), dev)
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        masked = batch["labels"] != losses.IGNORE_LABEL
        if masked.any():
            total += F.cross_entropy(logits[masked].float(), batch["labels"][masked], reduction="sum").item()
            count += int(masked.sum())
    return float(np.exp(total / count)) if count else float("nan")
