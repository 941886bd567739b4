"""How the int8 ONNX export quantizes: how much of the fp32 model it may keep in fp32 (the recipe's defaults and
the search's, defined once), and how its activations are scaled."""

INT8_SIZE_BUDGET = 0.30          # of the fp32 ONNX file
INT8_LATENCY_BUDGET = 1.05       # of the all-int8 model's latency, at 1 thread and the export's max_length

# export.int8_activation_scale: each weight product's input quantized on the fly with one scale for the whole call
# (ONNX Runtime's dynamic quantization), or one scale per token (row) of it (export/programs/onnx_export.py
# quantize_per_token): a token of large activations then coarsens no other token's. Measured on the QA student of
# qa-default, 600 SQuAD train questions on passages it never trained on, one window per call: per call kept 86.8 % of
# its answers and lost 1.07 F1, per token 96.2 % and 0.01, at about 1.5x the per-call model's time on a 2-core x86
# host (results/README.md, "Question answering on SQuAD").
INT8_PER_CALL, INT8_PER_TOKEN = "per_call", "per_token"
INT8_ACTIVATION_SCALES = (INT8_PER_CALL, INT8_PER_TOKEN)
