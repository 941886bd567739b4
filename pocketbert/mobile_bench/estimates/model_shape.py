"""FLOPs and bytes of one encoder inference from its shape alone, for models pocketbert cannot run.

A published measurement names a model (DistilBERT, MobileBERT, all-MiniLM-L6-v2), not a graph: its floor has
to come from the shape. The count follows graph_cost's rules (a multiply-add is 2 FLOPs; the weights as stored
plus inputs and outputs are the least an inference must read), so a shape's floor and a counted graph's agree:
tests/mobile_bench/test_calibration_and_kit.py holds the two to within SHAPE_VS_GRAPH_TOLERANCE on BERT-base.
Element-wise work (softmax, GELU, layer norm) is left out: under 1 % of a BERT's FLOPs at sequence 128.
"""

from __future__ import annotations

from dataclasses import dataclass

FP32_BYTES = 4
TOKEN_ID_BYTES = 8  # int64 ids and mask, as the exported graphs take them


@dataclass(frozen=True)
class EncoderShape:
    """A BERT-style encoder: per layer Q, K, V and output projections (hidden × hidden), attention over the
    sequence, and a feed-forward block hidden → ffn → hidden."""

    layers: int
    hidden: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int = 512
    mlm_head: bool = False  # a masked-LM head over every position (transform, then the vocabulary projection)

    def layer_macs_per_token(self) -> int:
        return 4 * self.hidden * self.hidden + 2 * self.hidden * self.ffn

    def attention_width(self) -> int:
        """Width of the scores' and context's products: hidden for BERT, the bottleneck for MobileBERT."""
        return self.hidden

    def layer_parameters(self) -> int:
        return self.layer_macs_per_token() + 4 * self.hidden + self.ffn + 4 * self.hidden  # biases and norms

    def embedding_parameters(self) -> int:
        return (self.vocab + self.max_positions + 2) * self.hidden + 2 * self.hidden

    def cost(self, sequence_length: int, batch: int = 1) -> dict:
        """{"flops", "io_bytes", "weight_bytes": {"fp32"}} in the form roofline.device_estimates takes."""
        tokens = batch * sequence_length
        projections = 2 * tokens * self.layer_macs_per_token()
        attention = 2 * 2 * batch * sequence_length * sequence_length * self.attention_width()
        flops = self.layers * (projections + attention)
        parameters = self.embedding_parameters() + self.layers * self.layer_parameters()
        out_width = self.hidden
        if self.mlm_head:  # its decoder shares the word embeddings: FLOPs, but no weights of its own
            flops += 2 * tokens * (self.hidden * self.hidden + self.hidden * self.vocab)
            parameters += self.hidden * self.hidden
            out_width = self.vocab
        weights = parameters * FP32_BYTES
        io = 2 * tokens * TOKEN_ID_BYTES + tokens * out_width * FP32_BYTES
        return {"flops": float(flops), "io_bytes": float(io), "weight_bytes": {"fp32": float(weights)}}

    def describe(self) -> str:
        return f"{self.layers} × {self.hidden}, {self.heads} heads, FFN {self.ffn}, vocabulary {self.vocab}"


@dataclass(frozen=True)
class BottleneckEncoderShape(EncoderShape):
    """MobileBERT (Sun et al. 2020, arXiv:2004.02984): each layer narrows hidden to a bottleneck, attends at
    that width (Q and K from a shared bottleneck, V from the full width), runs `ffn_stack` feed-forward blocks
    bottleneck → ffn → bottleneck, and widens back; the embedding is `embedding` wide, projected to hidden."""

    bottleneck: int = 128
    ffn_stack: int = 4
    embedding: int = 128

    def layer_macs_per_token(self) -> int:
        h, b = self.hidden, self.bottleneck
        bottlenecks = 2 * h * b + b * h  # layer input and shared Q/K bottleneck in, output bottleneck out
        attention = 2 * b * b + h * b + b * b  # Q, K from the shared bottleneck, V from the full width, output
        return bottlenecks + attention + self.ffn_stack * 2 * b * self.ffn

    def attention_width(self) -> int:
        return self.bottleneck

    def layer_parameters(self) -> int:
        return self.layer_macs_per_token() + 6 * self.bottleneck + self.ffn_stack * (self.ffn + 3 * self.bottleneck)

    def embedding_parameters(self) -> int:
        return (self.vocab * self.embedding + 3 * self.embedding * self.hidden
                + (self.max_positions + 2) * self.hidden)

    def describe(self) -> str:
        return (f"{self.layers} × {self.hidden} (bottleneck {self.bottleneck}, {self.ffn_stack} stacked FFNs of "
                f"{self.ffn}), {self.heads} heads, vocabulary {self.vocab}")


@dataclass(frozen=True)
class GatedEncoderShape(EncoderShape):
    """ModernBERT (Granite-Embedding R2): a gated feed-forward block, hidden → 2 × ffn (value and gate) → ffn
    → hidden, no biases anywhere, LayerNorms without bias, and rotary positions (no position table). Its
    parameters are the token table with its norm plus per layer four projections, the gated FFN and two
    norms: layer 0 has no attention pre-norm and the final norm takes its place, so the total is exact."""

    def layer_macs_per_token(self) -> int:
        return 4 * self.hidden * self.hidden + 3 * self.hidden * self.ffn

    def layer_parameters(self) -> int:
        return self.layer_macs_per_token() + 2 * self.hidden

    def embedding_parameters(self) -> int:
        return self.vocab * self.hidden + self.hidden

    def describe(self) -> str:
        return (f"{self.layers} × {self.hidden}, {self.heads} heads, gated FFN {self.ffn}, "
                f"vocabulary {self.vocab}")


SHAPE_KINDS = {"encoder": EncoderShape, "bottleneck-encoder": BottleneckEncoderShape,
               "gated-encoder": GatedEncoderShape}
