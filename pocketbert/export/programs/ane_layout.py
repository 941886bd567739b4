"""The student rewritten in the Apple Neural Engine's layout, from its own weights (Apple, "Deploying Transformers on
the Apple Neural Engine", machinelearning.apple.com/research/neural-engine-transformers).

What changes against the Hugging Face module, and why (the article's principles):
- every activation is channels-first (batch, channels, 1, sequence): the ANE's native 4-D layout, whose last axis
  is the one it packs in memory; (batch, sequence, channels) rank-3 tensors are padded and re-laid out on the device;
- every Linear is a 1x1 Conv2d on that layout: the ANE's fastest operation, with no transpose around it;
- attention is split per head (a slice of the channels), each head's scores and mix an einsum whose form coremltools
  lowers to one MIL einsum (its "nchw,nwhu->nchu" form): no (batch, heads, sequence, head size) reshapes; the only
  transpose is the keys' once per layer, inside attention, as in Apple's reference;
- LayerNorm is computed over the channel axis, with an epsilon fp16 can hold (BERT's 1e-12 is zero in fp16);
- the attention mask is an additive bias of shape (batch, keys, 1, 1), built once at the input;
- the whole module in fp16 when the program is converted.

Written from the article and Apple's reference (github.com/apple/ml-ane-transformers, ane_transformers/reference and
huggingface/distilbert.py), not by importing `ane-transformers`: that package is DistilBERT only (its module names
and layout are DistilBERT's), pins no version of transformers newer than 2022's, and a BERT student (MiniLM's shape,
token types, a pooler) needs its own mapping anyway.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from pocketbert.core.students.export_wrapper import ADDITIVE_MASK_VALUE
from pocketbert.core.errors import ExportError

# Apple's reference uses 1e-7 in place of DistilBERT's 1e-12 (huggingface/distilbert.py, EPS): the smallest fp16
# step is 6e-8, so 1e-12 vanishes and a constant channel vector would divide by zero. Against the fp32 student this
# moves a LayerNorm's output by about eps / variance (1e-5 for a variance of 0.01): within fp32 tolerance.
FP16_SAFE_EPS = 1e-7
# The Hugging Face encoder layout this module maps from (BertModel's module names).
SUPPORTED_MODEL_TYPES = ("bert",)


def refuse_unless_bert(architecture, model) -> None:
    """One line for a student this layout cannot take: no attention (BiLSTM, static) or another encoder's layout."""
    if not architecture.attends:
        raise ExportError(f"the ANE-layout program is a transformer's layout; a {architecture.name} student has no "
                          "attention: leave the ane variants out of export.coreml_variants")
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in SUPPORTED_MODEL_TYPES or not hasattr(model, "bert"):
        raise ExportError(f"the ANE-layout program maps BERT students ({', '.join(SUPPORTED_MODEL_TYPES)}), not a "
                          f"{model_type or 'model of unknown type'}: leave the ane variants out of "
                          "export.coreml_variants")


def _conv(linear: nn.Linear) -> nn.Conv2d:
    """A Linear as the 1x1 convolution that computes it on (batch, channels, 1, sequence)."""
    conv = nn.Conv2d(linear.in_features, linear.out_features, 1, bias=linear.bias is not None)
    with torch.no_grad():
        conv.weight.copy_(linear.weight[:, :, None, None])
        if linear.bias is not None:
            conv.bias.copy_(linear.bias)
    return conv


class ChannelLayerNorm(nn.Module):
    """LayerNorm over axis 1 of (batch, channels, 1, sequence), from a torch LayerNorm's weights."""

    def __init__(self, norm: nn.LayerNorm):
        super().__init__()
        self.eps = max(float(norm.eps), FP16_SAFE_EPS)
        self.weight = nn.Parameter(norm.weight.detach().clone()[None, :, None, None])
        self.bias = nn.Parameter(norm.bias.detach().clone()[None, :, None, None])

    def forward(self, x):
        centred = x - x.mean(dim=1, keepdim=True)
        scale = torch.rsqrt((centred * centred).mean(dim=1, keepdim=True) + self.eps)
        return centred * scale * self.weight + self.bias


class HeadwiseAttention(nn.Module):
    """BERT self-attention and its output projection, one head at a time over channel slices."""

    def __init__(self, attention, heads: int):
        super().__init__()
        inner = attention.self.query.out_features  # a pruned student may have fewer heads than hidden / head size
        self.heads, self.head_size = heads, inner // heads
        self.query, self.key, self.value = (_conv(m) for m in (attention.self.query, attention.self.key,
                                                                attention.self.value))
        self.out = _conv(attention.output.dense)
        self.norm = ChannelLayerNorm(attention.output.LayerNorm)

    def forward(self, x, key_bias):
        q = self.query(x) * (1.0 / math.sqrt(self.head_size))
        keys = self.key(x).transpose(1, 3).split(self.head_size, dim=3)   # heads x (batch, keys, 1, head size)
        values = self.value(x).split(self.head_size, dim=1)                # heads x (batch, head size, 1, keys)
        mixed = []
        for q_h, k_h, v_h in zip(q.split(self.head_size, dim=1), keys, values):
            scores = torch.einsum("bchq,bkhc->bkhq", q_h, k_h) + key_bias  # (batch, keys, 1, queries)
            mixed.append(torch.einsum("bkhq,bchk->bchq", scores.softmax(dim=1), v_h))
        return self.norm(self.out(torch.cat(mixed, dim=1)) + x)


class FeedForward(nn.Module):
    def __init__(self, layer, activation):
        super().__init__()
        self.up, self.down = _conv(layer.intermediate.dense), _conv(layer.output.dense)
        self.activation = activation
        self.norm = ChannelLayerNorm(layer.output.LayerNorm)

    def forward(self, x):
        return self.norm(self.down(self.activation(self.up(x))) + x)


class EncoderLayer(nn.Module):
    def __init__(self, layer, heads: int):
        super().__init__()
        self.attention = HeadwiseAttention(layer.attention, heads)
        self.feed_forward = FeedForward(layer, layer.intermediate.intermediate_act_fn)

    def forward(self, x, key_bias):
        return self.feed_forward(self.attention(x, key_bias))


class Embeddings(nn.Module):
    """Word, position and token-type embeddings summed and normalised, handed on channels-first."""

    def __init__(self, embeddings):
        super().__init__()
        self.word = nn.Parameter(embeddings.word_embeddings.weight.detach().clone())
        self.position = nn.Parameter(embeddings.position_embeddings.weight.detach().clone())
        self.token_type = nn.Parameter(embeddings.token_type_embeddings.weight.detach().clone())
        self.norm = ChannelLayerNorm(embeddings.LayerNorm)

    def forward(self, input_ids, token_type_ids=None):
        length = input_ids.shape[1]
        # gathered as (batch, sequence, 1, channels): rank 4 from the start, one transpose into the layout
        summed = nn.functional.embedding(input_ids[:, :, None], self.word) + self.position[:length, None, :]
        if token_type_ids is None:
            summed = summed + self.token_type[0]
        else:
            summed = summed + nn.functional.embedding(token_type_ids[:, :, None], self.token_type)
        return self.norm(summed.permute(0, 3, 2, 1))


class ClassifierHead(nn.Module):
    """BertForSequenceClassification's pooler and classifier on the [CLS] column: (batch, labels)."""

    def __init__(self, model):
        super().__init__()
        self.pooler, self.classifier = _conv(model.bert.pooler.dense), _conv(model.classifier)

    def forward(self, x):
        return (self.classifier(torch.tanh(self.pooler(x[:, :, :, :1]))).squeeze((2, 3)),)


class SpanHead(nn.Module):
    """BertForQuestionAnswering's start and end scores of every token: two (batch, sequence) outputs."""

    def __init__(self, model):
        super().__init__()
        self.scores = _conv(model.qa_outputs)

    def forward(self, x):
        scores = self.scores(x)
        return scores[:, 0, 0, :], scores[:, 1, 0, :]


# The task head of each Hugging Face class a BERT student is, in the ANE layout.
HEADS = {"BertForSequenceClassification": ClassifierHead, "BertForQuestionAnswering": SpanHead}


class AneBert(nn.Module):
    """A BERT student in the ANE layout; takes the export's int32 inputs ((batch, sequence): ids, the 0/1 mask and,
    for QA, token types) and returns the task's outputs as the plain export does."""

    def __init__(self, model, architecture):
        super().__init__()
        refuse_unless_bert(architecture, model)
        head = HEADS.get(type(model).__name__)
        if head is None:
            raise ExportError(f"the ANE-layout program has no head for a {type(model).__name__}: leave the ane "
                              "variants out of export.coreml_variants")
        bert, heads = model.bert, model.config.num_attention_heads
        self.embeddings = Embeddings(bert.embeddings)
        self.layers = nn.ModuleList(EncoderLayer(layer, heads) for layer in bert.encoder.layer)
        self.head = head(model)

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        keep = attention_mask[:, :, None, None].to(self.embeddings.word.dtype)
        key_bias = (1.0 - keep) * ADDITIVE_MASK_VALUE  # (batch, keys, 1, 1): added to every head's scores
        x = self.embeddings(input_ids, token_type_ids)
        for layer in self.layers:
            x = layer(x, key_bias)
        return self.head(x)


def ane_module(model, architecture) -> AneBert:
    """The student in the ANE layout, in eval mode, in fp32 (the converter casts it to fp16)."""
    return AneBert(model, architecture).float().eval()
