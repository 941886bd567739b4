"""How much the teacher uses each of its hidden channels, attention heads and FFN neurons, measured on training
examples (Minitron's activation importance, Muralidharan et al. 2024): the mean magnitude, over real tokens, of

- a hidden channel in the residual stream (the embedding layer's and every layer's LayerNorm output),
- a head's output (the L2 norm of its slice of the context the attention's output projection reads),
- an FFN neuron after its activation,
- a pooler channel (a classifier's [CLS] summary).

A forward pass is all it takes: no labels, no gradients, so the ranking is the same whatever the loss."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pocketbert.core.students import student_shape
from pocketbert.train import bert_layout


@dataclass
class Importance:
    hidden: torch.Tensor             # [hidden]
    heads: torch.Tensor              # [teacher layers, heads]
    ffn: torch.Tensor                # [teacher layers, intermediate]
    pooler: torch.Tensor | None      # [hidden], or None without a pooler
    examples: int


def measure(model, task, features: list, pad_id: int, batch_size: int) -> Importance:
    """The teacher's activation importance over `features` (a few hundred training examples suffice)."""
    layers = bert_layout.encoder_layers(model)
    config = model.config
    width = student_shape.head_width(config)
    n_layers, n_heads = len(layers), config.num_attention_heads
    heads = torch.zeros(n_layers, n_heads, dtype=torch.float64)
    ffn = torch.zeros(n_layers, config.intermediate_size, dtype=torch.float64)
    hidden = torch.zeros(config.hidden_size, dtype=torch.float64)
    pooler_module = bert_layout.pooler(model)
    pooled = torch.zeros(config.hidden_size, dtype=torch.float64) if pooler_module is not None else None
    current: dict = {}

    def real_tokens(values: torch.Tensor) -> torch.Tensor:
        """Sum over real tokens of [batch, tokens, ...] values."""
        mask = current["mask"].to(values.dtype)
        return (values * mask.view(*mask.shape, *[1] * (values.dim() - 2))).sum(dim=(0, 1)).double()

    def on_context(i):
        def hook(module, args):
            context = args[0]  # [batch, tokens, heads * width]
            per_head = context.view(*context.shape[:2], n_heads, width).norm(dim=-1)
            heads[i] += real_tokens(per_head)
        return hook

    def on_neurons(i):
        def hook(module, args, output):
            ffn[i] += real_tokens(output.abs())
        return hook

    def on_pooled(module, args, output):
        pooled.add_(output.abs().sum(dim=0).double())

    handles = []
    for i, layer in enumerate(layers):
        handles.append(bert_layout.attention_output(layer).register_forward_pre_hook(on_context(i)))
        handles.append(bert_layout.ffn_up(layer).register_forward_hook(on_neurons(i)))
    if pooler_module is not None:
        handles.append(pooler_module.register_forward_hook(on_pooled))
    tokens = sequences = 0
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(features), batch_size):
                batch = task.collate(features[start:start + batch_size], pad_id)
                inputs = {k: torch.from_numpy(batch[k]) for k in task.input_names}
                current["mask"] = inputs["attention_mask"]
                out = model(**inputs, output_hidden_states=True)
                for state in out.hidden_states:
                    hidden += real_tokens(state.abs())
                tokens += int(inputs["attention_mask"].sum())
                sequences += len(batch["input_ids"])
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    tokens = max(tokens, 1)
    return Importance(hidden=(hidden / tokens).float(), heads=(heads / tokens).float(), ffn=(ffn / tokens).float(),
                      pooler=None if pooled is None else (pooled / max(sequences, 1)).float(), examples=len(features))
