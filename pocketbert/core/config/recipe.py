"""The recipe, typed: one class per section, every default in one place, every value checked before any work.

Presets (pocketbert/configs/<task>-<preset>.yaml) or a --config file are read here (read_recipe), then --set
and flag overrides go through validate_recipe (with_overrides); what a stage receives is the typed Recipe, every
default filled, and it reads its sections as attributes (recipe_dict gives the same as data, for a manifest).
Records written by earlier versions are read back with complete_recipe, which fills defaults and drops keys that
no longer exist.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Optional, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator, model_validator

from pocketbert.core.config.export_families import CHOSEN
from pocketbert.core.config.int8_budgets import (INT8_ACTIVATION_SCALES, INT8_LATENCY_BUDGET, INT8_PER_CALL,
                                                 INT8_SIZE_BUDGET)
from pocketbert.core.tasks.registry import TASKS
from pocketbert.core.errors import ConfigError

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"  # inside the package: a wheel ships the presets


# Every float in a recipe is finite: `.inf` or `.nan` from YAML or --set is refused (pydantic takes them by default,
# and an infinite learning rate trains to NaN without a word).
class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)


SEED_MAX = 2**32 - 1  # numpy's seed range, the narrowest of the generators a seed reaches (--seed shares it)


class TrainingSection(Section):
    """What the teacher's fine-tuning and the distillation share."""

    max_length: int = Field(128, gt=0)
    doc_stride: Optional[int] = Field(None, gt=0)
    batch_size: int = Field(32, gt=0)
    epochs: int = Field(1, gt=0, description="Override the recipe's epochs.")
    max_train_examples: Optional[int] = Field(None, gt=0, description="Train on a seeded subset of this size.")
    # Epochs until the score stops improving: with stop_patience set, `epochs` is the most trained, validation
    # rows are held out of the training split (the dev set the stage reports stays unseen), and the best epoch's
    # weights are kept (train/epoch_stop.py).
    stop_patience: Optional[int] = Field(
        None, gt=0, description="Stop after this many epochs without a better validation score; keep the best.")
    validation_examples: int = Field(
        2000, gt=0, description="Training examples held out to score each epoch when --stop-patience is set.")
    learning_rate: float = Field(1.0e-4, gt=0)
    warmup_ratio: float = Field(0.0, ge=0.0, le=1.0)
    weight_decay: float = Field(0.0, ge=0)
    checkpoint_every: int = Field(200, gt=0)
    hard_loss: Literal["ce", "focal"] = Field(
        "ce", description="Hard-label loss: cross-entropy, or focal loss (Lin et al. 2017).")
    focal_gamma: float = Field(2.0, ge=0, description="Focal loss gamma (default 2).")
    # One weight for every class, or one per class (their number is checked against the data's classes).
    focal_alpha: Optional[Union[float, list[float]]] = Field(
        None, description="Focal loss alpha, one weight for every class.")
    compile: bool = Field(False, description="Wrap the student in torch.compile.")
    # Large batches: with base_batch_size set, the learning rate is given for that global batch and scaled to
    # the one trained (sqrt: Malladi et al. 2022's rule for Adam; linear: Goyal et al. 2017's for SGD). Warm-up
    # stays warmup_ratio of the steps, so it covers the same share of the examples at any batch size.
    base_batch_size: Optional[int] = Field(None, gt=0)
    lr_scaling: Literal["sqrt", "linear"] = "sqrt"
    # Batch widths rounded up to a multiple of this (a few fixed shapes for CUDA graphs and torch.compile);
    # None: 8 on a GPU, 1 (no rounding: least padding) on the CPU.
    pad_to_multiple: Optional[int] = Field(None, gt=0, le=512)
    # Attention kernel while training: sdpa (PyTorch's fused scaled_dot_product_attention) or eager. Saved and
    # exported models always use eager attention, which the exporters need.
    attention: Literal["sdpa", "eager"] = "sdpa"
    # AdamW's fused kernel (one pass over the weights, on the CPU as on a GPU); off: PyTorch's per-tensor loop.
    # With the 12 M-entry embedding table trained, the update is the largest part of a small student's CPU step.
    fused_adamw: bool = True
    # On one CUDA GPU, each batch shape's step is captured once as a CUDA graph and replayed (train/cuda_graphs.py):
    # the host no longer launches a small student's thousand kernels one by one.
    cuda_graphs: bool = True

    @field_validator("focal_alpha")
    @classmethod
    def _class_weights(cls, value):
        weights = value if isinstance(value, list) else [value] if value is not None else []
        if isinstance(value, list) and not value:
            raise ValueError("an empty list: give one weight per class, or a single number")
        if any(w < 0 for w in weights):
            raise ValueError("class weights must be >= 0")
        return value


class TeacherSection(TrainingSection):
    pass


class DistillSection(TrainingSection):
    # A recipe registered in train/registry.py (`train distill --recipe`); None: the registry's default. The
    # distillation records the name it ran under.
    recipe: Optional[str] = Field(None, description="Distillation recipe, from train/registry.py (default: the "
                                  "recipe file's distill.recipe, else the registry's first).")
    temperature: float = Field(2.0, gt=0, description="Softmax temperature T of the soft targets.")
    kl_weight: float = Field(1.0, ge=0, description="Weight of the soft-target KL loss (scaled by T²).")
    ce_weight: float = Field(0.5, ge=0, description="Weight of the hard-label cross-entropy.")
    cos_weight: float = Field(0.5, ge=0, description="Weight of the hidden-state cosine loss.")
    # the augment: section's rewrites; None: the recipe's own choice (its augments_by_default)
    augment: Optional[bool] = Field(None, description=(
        "Add the augment: section's rewrites (mask, part of speech, n-gram) of labelled and transfer text "
        "(default: the recipe's distill.augment; unset, the recipe's own choice: the BiLSTM recipe rewrites, the "
        "DistilBERT recipe does not)."))
    teacher_cache_mb: float = Field(4096, ge=0)

    @model_validator(mode="after")
    def _some_loss(self):
        if self.kl_weight + self.ce_weight + self.cos_weight == 0:
            raise ValueError("kl_weight, ce_weight and cos_weight are all 0: give at least one loss a weight")
        return self


class StudentSection(Section):
    layer_map: Optional[list[int]] = Field(None, description=(
        "Teacher layers that initialise the student's (default: every other; layerwise: spread evenly, ending on "
        "the last)."))
    model: Optional[str] = Field(None, description=(
        "Start the student from this checkpoint (same vocabulary as the teacher) instead of teacher layers."))
    init: Literal["teacher", "random"] = Field("teacher", description=(
        "Start the student from the teacher's weights (default) or from random ones of the same shape."))
    # The shape of a student cut from the teacher by the layerwise recipe; what is unset follows the teacher:
    # layers half of its own (or len(layer_map)), heads hidden_size / its head width (heads keep their width),
    # hidden_size heads × that width (else its own), intermediate_size its own scaled with the hidden size.
    # What the teacher cannot give is refused against it before any work (train/narrow.py).
    layers: Optional[int] = Field(None, gt=0, description="Layerwise recipe: the student's number of layers.")
    hidden_size: Optional[int] = Field(None, gt=0, description=(
        "Layerwise recipe: the student's width, a multiple of the teacher's head width."))
    heads: Optional[int] = Field(None, gt=0, description=(
        "Layerwise recipe: attention heads (each as wide as the teacher's; default hidden size / width)."))
    intermediate_size: Optional[int] = Field(None, gt=0, description=(
        "Layerwise recipe: FFN neurons a layer (default: the teacher's, scaled with the width)."))

    @model_validator(mode="after")
    def _layers(self):
        if self.layer_map is not None and (not self.layer_map or min(self.layer_map) < 0):
            raise ValueError("layer_map must list teacher layers numbered from 0")
        if self.layer_map is not None and self.layers is not None and len(self.layer_map) != self.layers:
            raise ValueError(f"layer_map names {len(self.layer_map)} teacher layers for a student of {self.layers}: "
                             "give one teacher layer per student layer, or leave one of them unset")
        return self

    def shape_given(self) -> bool:
        """Whether a width or depth other than the DistilBERT recipe's was asked for."""
        return any(v is not None for v in (self.layers, self.hidden_size, self.heads, self.intermediate_size))


class EvalSection(Section):
    max_examples: Optional[int] = Field(None, gt=0)
    batch_size: int = Field(64, gt=0)
    max_answer_length: int = Field(30, gt=0)
    n_best: int = Field(20, gt=0)
    cross_domain: Union[list[str], dict[str, list[str]]] = Field(default_factory=list, description=(
        "Also evaluate student and teacher on these datasets, e.g. imdb (sets eval.cross_domain)."))
    cross_domain_max_examples: int = Field(2000, gt=0)


VOCABULARIES = ("full", "fitted")  # export.vocabulary (the fit: train/vocabulary/, its settings VocabularySection)
# export.tokenizer_check_contexts: where the exhaustive tokenizer checks (the text-in graph's, the app tokenizers')
# put each code point (export/checks/tokenizer_probes.py CONTEXTS spells each).
TOKENIZER_CHECK_CONTEXTS = ("alone", "between words", "inside a word", "repeated")


# Bounds on what an export or a bench can finish: beyond them a setting is a typo, refused in one line before any
# work. The longest sequence any BERT-family encoder pocketbert exports takes (ModernBERT's 8,192 positions); more
# threads than any phone or workstation core count; a bench configuration timed for at most ten minutes.
MAX_SEQUENCE = 8192
MAX_THREADS = 256
MAX_BATCH = 4096
MAX_REPEATS = 100_000
MAX_TIME_CAP_S = 600.0
MAX_RECOVERY_STEPS = 100_000
MAX_JOBS = MAX_THREADS  # export.jobs: processes, each at least one thread


def _no_repeats(section: BaseModel, prefix: str, keys: tuple[str, ...]) -> None:
    for key in keys:
        values = getattr(section, key)
        repeated = sorted({str(v) for v in values or [] if list(values).count(v) > 1})
        if repeated:
            raise ValueError(f"{prefix}{key} names {', '.join(repeated)} more than once; list each once")


class ExportSection(Section):
    max_length: Optional[int] = Field(None, gt=0, le=MAX_SEQUENCE)  # None: the student's training length
    parity_examples: Optional[int] = Field(None, gt=0, description=(
        "Eval examples for the parity checks (default: every one of the eval split)."))
    # 0 would check nothing
    coreml_parity_examples: Optional[int] = Field(None, gt=0, description=(
        "Eval examples for the Core ML parity check (default: every parity example)."))
    coreml_variants: list[str] = Field(default_factory=lambda: ["fp16"])
    # Core AI (iOS 27). None: fp16 and 6-bit where the student's architecture can take it; [] leaves Core AI out.
    coreai_variants: Optional[list[str]] = None
    # ExecuTorch programs. None: every one the student's architecture can take; [] leaves ExecuTorch out.
    executorch_variants: Optional[list[str]] = None
    calibration_examples: int = Field(512, gt=0)
    int8_size_budget: float = Field(INT8_SIZE_BUDGET, gt=0.0, le=1.0)
    int8_latency_budget: Optional[float] = Field(INT8_LATENCY_BUDGET, ge=1.0)  # of all-int8's latency; None: size alone decides
    int8_activation_scale: Literal[INT8_ACTIVATION_SCALES] = Field(  # type: ignore[valid-type]
        INT8_PER_CALL, description=(
            "How the int8 ONNX model scales each weight product's input: per_call (one scale for the whole call) or "
            "per_token (one per token: more of the student's answers kept, a little slower)."))
    static_calibration_examples: int = Field(128, gt=0)
    # QA in one call (model.qa.onnx): the context's word pieces read at most, which bounds the windows; a longer
    # context is cut there (the model's context_cut output says so, the manifest records the policy).
    qa_max_context_tokens: int = Field(4096, gt=0)
    # The exhaustive checks of the text-in tokenizer graph and of the app folders' Swift and Kotlin tokenizers: every
    # code point in each of these contexts (the graph's four took 73 s for one text and 186 s for a QA pair on 2
    # cores, docs/export.md; the app programs' ~10 s each; cached per tokenizer and contexts).
    tokenizer_check_contexts: list[Literal[TOKENIZER_CHECK_CONTEXTS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(TOKENIZER_CHECK_CONTEXTS), min_length=1)
    # The student's word-embedding table as exported: full, every row of the teacher's vocabulary; or the run's
    # fitted student's (`pocketbert train vocabulary`, train/vocabulary/), fitted as the vocabulary section says.
    vocabulary: Literal[VOCABULARIES] = Field("full", description=(  # type: ignore[valid-type]
        "The exported vocabulary: full, or fitted to the recipe's training and transfer text."))
    # The int8 ONNX model's word-piece table is stored per row in int8; this share of its rows, the least frequent
    # in the recipe's text, in 4 bits (export/programs/table_rows.py).
    embedding_int4_share: float = Field(0.0, ge=0.0, lt=1.0, description=(
        "The share of the int8 ONNX model's word-piece rows, the rarest in the recipe's text, stored in 4 bits."))
    # Independent programs built and gated in that many processes at once (export/steps/job_graph.py); 1 is the serial
    # export. Unset: every core this process may run on.
    jobs: Optional[int] = Field(None, gt=0, le=MAX_JOBS, description=(
        "Processes that build and gate the export's programs at once (default: every core this machine gives the "
        "export; 1: one after another)."))

    @model_validator(mode="after")
    def _variant_names(self):
        _no_repeats(self, "export.", ("coreml_variants", "coreai_variants", "executorch_variants",
                                      "tokenizer_check_contexts"))
        for family in CHOSEN:
            family.check_names(getattr(self, family.recipe_key), "export.")
        return self


class VocabularySection(Section):
    """A fitted vocabulary (`pocketbert train vocabulary`, train/vocabulary/; shipped by `export --vocabulary
    fitted`): the word pieces the recipe's training and transfer text holds at least min_count times (its evaluation
    text is never counted), the special tokens and every single-character piece (so no input gains an [UNK]), at
    most max_rows rows (the most common in the source where each is most common)."""

    min_count: int = Field(2, gt=0, description=(
        "Fitted vocabulary: keep the word pieces that occur at least this many times."))
    max_rows: Optional[int] = Field(None, gt=0, description=(
        "Fitted vocabulary: at most this many rows, the most frequent pieces first (default: no cap)."))
    # A short distillation after fitting (train/vocabulary/recovery.py): where a dropped piece cuts a word into
    # smaller ones, the fitted student learns to give the full student's answers again.
    recovery_steps: int = Field(0, ge=0, le=MAX_RECOVERY_STEPS, description=(
        "Fitted vocabulary: steps of a short distillation toward the full student's answers on the recipe's "
        "training and transfer text (0: none)."))
    recovery_learning_rate: float = Field(1.0e-4, gt=0.0, description=(
        "Fitted vocabulary: the recovery distillation's learning rate."))


class BenchSection(Section):
    sequence_length: int = Field(128, gt=0, le=MAX_SEQUENCE)
    batch_size: int = Field(1, gt=0, le=MAX_BATCH)
    threads: list[int] = Field(default_factory=lambda: [1, 2, 4], min_length=1)
    pytorch_threads: list[int] = Field(default_factory=lambda: [1, 2], min_length=1)
    warmup: int = Field(3, ge=0, le=MAX_REPEATS)
    min_repeats: int = Field(10, gt=0, le=MAX_REPEATS)
    max_repeats: int = Field(300, gt=0, le=MAX_REPEATS)
    time_cap_s: float = Field(4.0, gt=0, le=MAX_TIME_CAP_S)
    sequence_sweep: list[int] = Field(default_factory=lambda: [32, 64, 128, 256, 512], min_length=1)
    batch_sweep: list[int] = Field(default_factory=lambda: [1, 2, 4, 8], min_length=1)
    sweep_threads: int = Field(1, gt=0, le=MAX_THREADS)
    cold_start_repeats: int = Field(3, gt=0, le=MAX_REPEATS)
    tokenization_examples: int = Field(200, ge=0)
    architecture_check: bool = True
    # The model the student is timed against: a BERT-base checkpoint (hub name or folder); None builds BERT-base's
    # architecture from its config (latency does not depend on weight values). --reference on the command line wins.
    reference: Optional[str] = None
    repeats: Optional[int] = Field(None, exclude=True)  # retired (min/max repeats replace it): accepted, ignored

    @model_validator(mode="after")
    def _positive_lists(self):
        bounds = {"threads": MAX_THREADS, "pytorch_threads": MAX_THREADS, "sequence_sweep": MAX_SEQUENCE,
                  "batch_sweep": MAX_BATCH}
        for key, most in bounds.items():
            if min(getattr(self, key)) < 1 or max(getattr(self, key)) > most:
                raise ValueError(f"{key} must be a list of whole numbers from 1 to {most}")
        _no_repeats(self, "bench.", tuple(bounds))
        return self


class AugmentSection(Section):
    p_mask: float = Field(0.1, ge=0.0, le=1.0)
    p_pos: float = Field(0.1, ge=0.0, le=1.0)
    p_ng: float = Field(0.25, ge=0.0, le=1.0)
    n_iter: int = Field(20, ge=0)
    pos_tagger: str = "pattern"
    max_transfer_examples: Optional[int] = Field(None, gt=0)


class TransferSection(Section):
    """Unlabelled text the teacher labels with its soft targets, added to the distillation's training rows."""

    data: list[str] = Field(default_factory=list, description=(  # files or datasets
        "Unlabelled text the teacher labels for the student (repeatable): a .txt file with one passage a line, a "
        ".csv/.tsv/.jsonl with a text column, or a dataset name whose labels are ignored."))
    text_column: str = Field("text", description="The text column of CSV/TSV/JSONL transfer data.")
    long_text: Literal["cut", "windows"] = "cut"  # a passage over max_length: its start, or every window of it
    max_examples: Optional[int] = Field(None, gt=0)  # transfer rows at most (a seeded subset)
    share: Optional[float] = Field(None, gt=0.0, lt=1.0)  # of all training rows; None: every transfer row

    @model_validator(mode="after")
    def _named(self):
        if any(not str(name).strip() for name in self.data):
            raise ValueError("an entry of transfer.data is empty: give a file path or a dataset name")
        return self


class PruneSection(Section):
    ffn_ratio: float = Field(0.5, gt=0.0, lt=1.0, description="Share of every FFN's channels to remove (default 0.5).")
    round_to: int = Field(8, gt=0)
    recovery_epochs: int = Field(1, gt=0, description="Epochs of the recovery distillation.")
    recovery_max_train_examples: Optional[int] = Field(20000, gt=0, description=(
        "Recover on a seeded subset of this size."))


class Recipe(Section):
    """The shared sections; each training recipe's own are added by the registry (recipe_model)."""

    task: Literal[TASKS]  # type: ignore[valid-type]  (the task registry's names)
    dataset: str = Field(description="sst2, imdb, emotion, squad, or a data file (default: the recipe's).")
    seed: int = Field(13, ge=0, le=SEED_MAX, description="Override the recipe's seed.")
    teacher: TeacherSection = Field(default_factory=TeacherSection)
    student: StudentSection = Field(default_factory=StudentSection)
    distill: DistillSection = Field(default_factory=DistillSection)
    eval: EvalSection = Field(default_factory=EvalSection)
    export: ExportSection = Field(default_factory=ExportSection)
    vocabulary: VocabularySection = Field(default_factory=VocabularySection)
    bench: BenchSection = Field(default_factory=BenchSection)
    augment: AugmentSection = Field(default_factory=AugmentSection)
    transfer: TransferSection = Field(default_factory=TransferSection)
    prune: PruneSection = Field(default_factory=PruneSection)


# A training recipe owns its settings: it declares them (train/stage.py, TrainingRecipe.sections) and the training
# registry hands every registered recipe's to this module when it loads (use_sections; the `pocketbert` command
# loads it first), and recipes are read with them. A recipe's section is a section of its own (bilstm:) or keys it
# adds to a shared one (distill.alpha).
SectionsProvider = Callable[[], Iterable[tuple[str, type[BaseModel]]]]
_sections_of_recipes: SectionsProvider | None = None


def use_sections(provider: SectionsProvider) -> None:
    """Read recipes with the sections `provider()` names: (section name, its settings model) of every recipe."""
    global _sections_of_recipes
    _sections_of_recipes = provider


def recipe_model() -> type[Recipe]:
    """The recipe's model: the shared sections and every registered recipe's own."""
    if _sections_of_recipes is None:
        return Recipe
    return _model_with(tuple(_sections_of_recipes()))


@lru_cache(maxsize=None)
def _model_with(own: tuple[tuple[str, type[BaseModel]], ...]) -> type[Recipe]:
    declared: dict[str, list[type[BaseModel]]] = {}
    for name, settings in own:
        declared.setdefault(name, []).append(settings)
    fields = {}
    for name, models in declared.items():
        shared = Recipe.model_fields.get(name)
        if shared is not None:  # keys a recipe adds to a shared section
            base = shared.annotation
            if not (isinstance(base, type) and issubclass(base, BaseModel)):
                raise ValueError(f"a recipe declares the section {name}, which is a value of the recipe")
            section = create_model(base.__name__, __base__=(base, *models))
        elif len(models) > 1:
            raise ValueError(f"two recipes declare the section {name}: a section belongs to one recipe")
        else:
            section = models[0]
        fields[name] = (section, Field(default_factory=section))
    return create_model("Recipe", __base__=Recipe, **fields)


def with_recipe_sections(recipe: Recipe) -> Recipe:
    """The recipe read again with every registered recipe's sections, when it was read before they were known."""
    model = recipe_model()
    return recipe if isinstance(recipe, model) else validate_recipe(recipe_dict(recipe))


def _section_class(path: tuple) -> type[BaseModel] | None:
    cls: type[BaseModel] = recipe_model()
    for key in path:
        field = cls.model_fields.get(key) if isinstance(key, str) else None
        annotation = field.annotation if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        cls = annotation
    return cls


def _allowed(field) -> str:
    """What a field takes, in words."""
    rules = []
    for meta in field.metadata:
        for attr, word in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            if getattr(meta, attr, None) is not None:
                rules.append(f"{word} {getattr(meta, attr)}")
    text = str(field.annotation).replace("typing.", "").replace("<class '", "").replace("'>", "")
    return text + (f", {' and '.join(rules)}" if rules else "")


def _one_line(error: dict, source: str) -> str:
    location = tuple(error["loc"])
    keys = [str(p) for p in location]
    dotted = ".".join(keys)
    if error["type"] == "extra_forbidden":
        parent = _section_class(tuple(location[:-1]))
        known = sorted(parent.model_fields) if parent else []
        close = difflib.get_close_matches(keys[-1], known, n=1)
        where = ".".join(keys[:-1]) or "the recipe"
        hint = f"did you mean {'.'.join([*keys[:-1], close[0]])}?" if close else f"{where} takes {', '.join(known)}"
        if _sections_of_recipes is None:  # a library caller that has not loaded the training recipes
            hint += "; a training recipe's own keys are known once pocketbert.train.registry is imported"
        return f"{source}: unknown key {dotted} ({hint})"
    parent = _section_class(tuple(p for p in location[:-1] if isinstance(p, str)))
    field = parent.model_fields.get(keys[-1]) if parent and location and isinstance(location[-1], str) else None
    is_section = field is not None and isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
    allowed = f" ({dotted} takes {_allowed(field)})" if field is not None and not is_section else ""
    message = error["msg"].removeprefix("Value error, ")
    value = error.get("input")
    shown = "" if isinstance(value, dict) or error["type"] == "missing" else f"{value!r}: "
    return f"{source}: {dotted or 'recipe'}: {shown}{message}{allowed}"


def validate_recipe(data: Any, source: str = "recipe") -> Recipe:
    """The typed recipe, or ConfigError naming the first wrong key and what it takes."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a recipe is a mapping of sections (task:, dataset:, distill: ...)")
    try:
        return recipe_model().model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_one_line(exc.errors()[0], source)) from None


def recipe_dict(recipe: Recipe) -> dict:
    """The complete recipe as plain JSON-able data, every default filled."""
    return recipe.model_dump(mode="json")


def with_overrides(recipe: Recipe | dict, overrides: dict[str, Any], source: str = "--set",
                   keep_none: bool = False) -> Recipe:
    """Dotted keys ('distill.temperature') set to values, then validated again. None is an option left unset and
    is skipped, unless keep_none: then it was written (`--set distill.max_train_examples=null`) and sets null."""
    data = copy.deepcopy(recipe_dict(recipe) if isinstance(recipe, Recipe) else recipe)
    for dotted, value in overrides.items():
        if value is None and not keep_none:
            continue
        node = data
        *parents, leaf = dotted.split(".")
        for key in parents:
            if not isinstance(node.setdefault(key, {}), dict):
                raise ConfigError(f"{source}: {key} is a value, not a section: set {key}=... instead of {dotted}")
            node = node[key]
        node[leaf] = value
    return validate_recipe(data, source)


def known_keys(data: dict) -> dict:
    """The recipe's sections and keys that this version knows; the others are dropped."""
    def known(cls: type[BaseModel], node: dict, top: bool) -> dict:
        out = {}
        for key, value in node.items():
            if key not in cls.model_fields:
                continue
            sub = _section_class((key,)) if top else None
            out[key] = known(sub, value, False) if sub and isinstance(value, dict) else value
        return out

    return known(recipe_model(), data, True)


def complete_recipe(data: dict) -> Recipe:
    """A recipe recorded in a manifest, typed, with every default filled; keys this version no longer has are
    dropped."""
    return validate_recipe(known_keys(data), "the recorded recipe")


def recorded_section(recorded: dict, name: str, overrides: dict | None = None, source: str = "recipe") -> Section:
    """One section of a recipe recorded in a manifest, typed, with `overrides` (keys of that section) over what it
    recorded; a key this version does not know is refused, as in a recipe file."""
    return typed_section(name, {**(recorded.get(name) or {}), **(overrides or {})}, source)


def recorded_keys(recorded: dict, name: str) -> dict:
    """The keys of one section of a recorded recipe as it wrote them, those an earlier version wrote included (a
    record's provenance: what a run was made with)."""
    section = recorded.get(name)
    return section if isinstance(section, dict) else {}


def typed_section(name: str, data: dict, source: str = "recipe") -> Section:
    """One section validated on its own, every default filled (for a stage that reads only its section)."""
    cls = recipe_model().model_fields[name].annotation
    try:
        return cls.model_validate(data or {})
    except ValidationError as exc:
        error = exc.errors()[0]
        raise ConfigError(_one_line({**error, "loc": (name, *error["loc"])}, source)) from None


def section_dict(name: str, data: dict, source: str = "recipe") -> dict:
    """typed_section's values as JSON data (what a manifest records)."""
    return typed_section(name, data, source).model_dump(mode="json")


def section_overrides(name: str, set_items: tuple[str, ...], example: str) -> dict:
    """`--set <name>.KEY=VALUE` pairs as keys of that one section (a stage that reads its section alone), checked
    with the recipe's rules before any work: another section's key, an unknown key or a bad value is one line."""
    return {key.partition(".")[2]: value for key, value in sections_overrides((name,), set_items, example).items()}


def sections_overrides(names: tuple[str, ...], set_items: tuple[str, ...], example: str) -> dict:
    """`--set SECTION.KEY=VALUE` pairs of the sections `names`, as dotted keys, checked with the recipe's rules
    before any work: another section's key, an unknown key or a bad value is one line."""
    overrides = {}
    for key, value in parse_set_options(set_items).items():
        section, _, leaf = key.partition(".")
        if section not in names or not leaf or "." in leaf:
            sections = f"the {names[0]} section" if len(names) == 1 else f"the {' and '.join(names)} sections"
            raise ConfigError(f"--set takes keys of {sections} here, like {example} (got '{key}')")
        overrides[key] = value
    for name in names:
        section_dict(name, {key.partition(".")[2]: value for key, value in overrides.items()
                            if key.partition(".")[0] == name}, "--set")
    return overrides


def check_class_weights(section: TrainingSection, label_names: list[str], where: str) -> None:
    """A per-class focal_alpha has one weight per class of the data; checked as soon as the classes are known,
    before any training."""
    alpha = section.focal_alpha
    if isinstance(alpha, list) and len(alpha) != len(label_names):
        raise ConfigError(f"{where}.focal_alpha lists {len(alpha)} weights for {len(label_names)} classes "
                          f"({', '.join(label_names) or 'a span task has none'}): give one weight per class, in "
                          "that order, or a single number")


def cross_domain_datasets(recipe: Recipe | dict) -> list[str]:
    """The datasets `eval.cross_domain` names for the recipe's training dataset. It is a list, or a mapping from
    the training dataset to a list, so that one preset serves several."""
    if isinstance(recipe, Recipe):
        recipe = {"dataset": recipe.dataset, "eval": {"cross_domain": recipe.eval.cross_domain}}
    names = (recipe.get("eval") or {}).get("cross_domain") or []
    if isinstance(names, dict):
        names = names.get(recipe["dataset"]) or []
    return list(names)


def available_presets(task: str) -> list[str]:
    return sorted(p.stem.split("-", 1)[1] for p in CONFIG_DIR.glob(f"{task}-*.yaml"))


def read_recipe(task: str, preset: str = "default", path: Path | None = None) -> Recipe:
    """The recipe for a task and preset (pocketbert/configs/<task>-<preset>.yaml), or the YAML file at `path`."""
    from pocketbert.core.tasks.registry import check_task

    check_task(task)
    if path is None:
        path = CONFIG_DIR / f"{task}-{preset}.yaml"
        if not path.is_file():
            raise ConfigError(
                f"no preset '{preset}' for task '{task}': choose one of {', '.join(available_presets(task)) or 'none'}"
            )
    from pocketbert.core.files import read_text

    text = read_text(Path(path), ConfigError, "recipe (--config)")
    try:
        recipe = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"cannot read recipe {path}: {_yaml_problem(exc)}; fix the YAML or pass another "
                          "--config") from None
    except RecursionError:
        raise ConfigError(f"cannot read recipe {path}: nested too deeply; fix the YAML") from None
    if not isinstance(recipe, dict) or recipe.get("task") != task:
        raise ConfigError(f"recipe {path} is not a '{task}' recipe (its 'task:' key must say {task})")
    return validate_recipe(recipe, str(path))


def load_recipe(task: str, preset: str = "default", path: Path | None = None) -> dict[str, Any]:
    """read_recipe's recipe as plain data, every default filled."""
    return recipe_dict(read_recipe(task, preset, path))


def parse_set_options(items: tuple[str, ...]) -> dict[str, Any]:
    """`--set distill.temperature=4` pairs, values parsed as YAML scalars."""
    parsed = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set expects key=value, got '{item}' (for example --set distill.temperature=4)")
        key, raw = item.split("=", 1)
        key = key.strip()
        if not key or any(not part for part in key.split(".")):
            raise ConfigError(f"--set '{item}': name a recipe key before '=' (for example distill.temperature=4)")
        if not raw.strip():
            raise ConfigError(f"--set '{item}': no value after '='; give one (null sets the key to null, as in "
                              "distill.max_train_examples=null: every example)")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ConfigError(f"--set '{item}': the value is not valid YAML ({_yaml_problem(exc)}); quote it or "
                              "close its brackets") from None
        if key in parsed:
            raise ConfigError(f"--set {key} is given twice; keep one")
        parsed[key] = value
    return parsed


def _yaml_problem(exc) -> str:
    """A YAML error's own words, on one line."""
    return " ".join(str(getattr(exc, "problem", None) or exc).split())
