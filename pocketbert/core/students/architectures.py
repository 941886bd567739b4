"""The student architectures behind one interface: how each loads, saves, describes itself and is wrapped for
export, and what it can take (attention, a dynamic length under torch.export, pruning): BERT-family, BiLSTM,
static embeddings.

A stage folder's pocketbert_task.json names its architecture; folders written before it did are BERT-family.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pocketbert.core.errors import ModelError

if TYPE_CHECKING:  # torch loads when a model is wrapped for export, not when an architecture is named
    from pocketbert.core.students.export_wrapper import ExportWrapper


class Architecture:
    name: str
    attends = True            # attention layers: the export wrapper gives them an additive mask and position ids
    supports_pruning = False  # `train prune` removes FFN channels
    traces_dynamic_length = True  # torch.export keeps its sequence length dynamic (ExecuTorch and Core AI need it)
    hub_layout = True  # transformers.js and Optimum can rebuild it from config.json's model type

    def load(self, folder: Path, task):
        raise NotImplementedError

    def save(self, model, folder: Path) -> None:
        model.save_pretrained(folder, safe_serialization=True)

    def describe(self, model) -> str:
        """A few words for model metadata, e.g. '3-layer, 384 wide' or 'BiLSTM'."""
        raise NotImplementedError

    def export_wrapper(self, model, task, additive_mask: bool = False, fixed_length: int | None = None) -> ExportWrapper:
        from pocketbert.core.students.export_wrapper import ExportWrapper

        return ExportWrapper(model, task, additive_mask=additive_mask, fixed_length=fixed_length, attends=self.attends)

    def encode(self, model, inputs: dict, pooling: str, with_attention: bool):
        """(sentence embeddings [batch, dim], logits, attention per layer [batch, heads, T, T] or None)."""
        raise NotImplementedError

    def embedding_name(self, pooling: str) -> str:
        """What encode's sentence embedding is, in words."""
        return {"cls": "[CLS] hidden state of the last layer", "mean": "mean of the last layer's token states"}[pooling]


class BertFamily(Architecture):
    """BERT, DistilBERT, MiniLM, RoBERTa...: any Hugging Face encoder with a task head."""

    name = "bert-family"
    supports_pruning = True

    def load(self, folder: Path, task):
        from pocketbert.core.students.models import load_for_task

        return load_for_task(str(folder), task, num_labels_from_source=True, whole=True)

    def describe(self, model) -> str:
        from pocketbert.core.students.models import layer_count

        return f"{layer_count(model.config)}-layer, {model.config.hidden_size} wide"

    def encode(self, model, inputs: dict, pooling: str, with_attention: bool):
        out = model(**inputs, output_hidden_states=True, output_attentions=with_attention)
        last = out.hidden_states[-1]
        if pooling == "cls":
            embedding = last[:, 0]
        else:
            mask = inputs["attention_mask"].unsqueeze(-1).to(last.dtype)
            embedding = (last * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
        return embedding, out.logits, list(out.attentions) if with_attention else None


class BiLSTM(Architecture):
    """Tang et al.'s BiLSTM student (core/students/bilstm.py): no attention, so the wrapper hands it the 0/1 mask."""

    name = "bilstm"
    attends = False
    hub_layout = False  # its config.json names a model type no Hugging Face library knows
    # the packed sequences tie the length to the mask's sums, so no ExecuTorch or Core AI program
    traces_dynamic_length = False

    def load(self, folder: Path, task):
        from pocketbert.core.students.bilstm import load_bilstm

        return load_bilstm(folder)

    def save(self, model, folder: Path) -> None:
        from pocketbert.core.students.bilstm import save_bilstm

        save_bilstm(model, folder)

    def describe(self, model) -> str:
        return "BiLSTM"

    def encode(self, model, inputs: dict, pooling: str, with_attention: bool):
        ids, mask = inputs["input_ids"], inputs["attention_mask"]
        return model.sentence_vector(ids, mask), model(ids, mask).logits, None

    def embedding_name(self, pooling: str) -> str:
        return "final states of both LSTM directions (no attention, so no pooling choice)"


class StaticEmbedding(Architecture):
    """A token-embedding table averaged over the sentence, then a small classifier (core/students/static_embedding.py):
    no attention, so the wrapper hands it the 0/1 mask."""

    name = "static"
    attends = False
    hub_layout = False  # its config.json names a model type no Hugging Face library knows

    def load(self, folder: Path, task):
        from pocketbert.core.students.static_embedding import load_static

        return load_static(folder)

    def save(self, model, folder: Path) -> None:
        from pocketbert.core.students.static_embedding import save_static

        save_static(model, folder)

    def describe(self, model) -> str:
        return f"static embeddings, {model.config.embedding_dim} dimensions"

    def encode(self, model, inputs: dict, pooling: str, with_attention: bool):
        ids, mask = inputs["input_ids"], inputs["attention_mask"]
        return model.sentence_vector(ids, mask), model(ids, mask).logits, None

    def embedding_name(self, pooling: str) -> str:
        return "mean of the word pieces' static vectors (no attention, so no pooling choice)"


BERT_FAMILY, BILSTM, STATIC = BertFamily(), BiLSTM(), StaticEmbedding()
ARCHITECTURES = {a.name: a for a in (BERT_FAMILY, BILSTM, STATIC)}


# config.json model_type values of the encoders the BERT-family path trains, exports and benches: a decoder
# (GPT-2, Llama) also loads with a classification head, but fails export minutes later.
BERT_FAMILY_MODEL_TYPES = ("bert", "distilbert", "roberta", "xlm-roberta", "camembert", "albert", "electra",
                           "mobilebert", "mpnet", "deberta", "deberta-v2", "ernie", "megatron-bert")


def check_bert_family(config, source: str) -> None:
    """Refuse a checkpoint that is not a BERT-family encoder, from its config alone (before any weight loads)."""
    model_type = getattr(config, "model_type", None)
    if model_type not in BERT_FAMILY_MODEL_TYPES:
        raise ModelError(f"'{source}' is a {model_type or 'model of unknown type'} checkpoint, not BERT-family "
                         f"({', '.join(BERT_FAMILY_MODEL_TYPES)}): import a fine-tuned encoder of one of those types")


def architecture_of(info: dict) -> Architecture:
    """The architecture a stage folder's task info names (none: BERT-family, as folders written before it said)."""
    name = info.get("architecture") or BERT_FAMILY.name
    if name not in ARCHITECTURES:
        raise ModelError(f"unknown architecture '{name}' in the stage folder: use one of {', '.join(ARCHITECTURES)}")
    return ARCHITECTURES[name]
