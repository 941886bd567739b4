"""A thin module around the student that fixes its inputs and outputs for export."""

from __future__ import annotations

import torch

# Additive attention-mask value. -1e4 (not the dtype's minimum) keeps masked scores finite in fp16 on Core ML.
ADDITIVE_MASK_VALUE = -1e4


class ExportWrapper(torch.nn.Module):
    """Calls the model with plain tensors and returns its logits as a tuple.

    additive_mask=True builds the 4-D additive mask here, so the traced graph avoids transformers'
    masking utilities (their `new_ones` has no Core ML converter).
    """

    def __init__(self, model, task, additive_mask: bool = False, mask_value: float = ADDITIVE_MASK_VALUE,
                 fixed_length: int | None = None, attends: bool = True):
        """attends: the model has attention (it takes an additive mask and position ids); the BiLSTM has none."""
        super().__init__()
        # At one fixed length, position ids (and token types) are constants here: traced from the model's own
        # buffers they become shape arithmetic that the Core ML converter cannot fold.
        self.fixed_length = fixed_length
        if fixed_length is not None:
            self.register_buffer("position_ids", torch.arange(fixed_length)[None, :], persistent=False)
            self.register_buffer("zero_token_types", torch.zeros(1, fixed_length, dtype=torch.long), persistent=False)
        self.model = model
        self.task = task
        # Models with no attention (the BiLSTM student) take the 0/1 mask as it is.
        self.additive_mask = additive_mask and attends
        self.attends = attends
        self.mask_value = mask_value

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        if self.additive_mask:
            # in the model's own precision: a half-precision model adds it to half-precision scores
            keep = attention_mask[:, None, None, :].to(next(self.model.parameters()).dtype)
            attention_mask = (1.0 - keep) * self.mask_value
        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        if self.fixed_length is not None and self.attends:
            kwargs["position_ids"] = self.position_ids
            kwargs.setdefault("token_type_ids", self.zero_token_types)
        return self.task.output_tuple(self.model(**kwargs))


class ClassifierWrapper(torch.nn.Module):
    """Class probabilities of one sentence, shape [classes]: what Core ML's classifier outputs are built on."""

    def __init__(self, wrapper: ExportWrapper):
        super().__init__()
        self.wrapper = wrapper

    def forward(self, input_ids, attention_mask):
        return torch.softmax(self.wrapper(input_ids, attention_mask)[0].float(), dim=-1)[0]
