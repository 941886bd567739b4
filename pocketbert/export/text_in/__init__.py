"""Text in: the tokenizer as an ONNX graph (its code-point table and exhaustive check), the text-in models built on
it, and the one-call QA graph."""
