"""export: ONNX (fp32, fp16, int8, text-in, one-call QA), ORT Mobile, Core ML, Core AI and ExecuTorch programs, each
proven on its own runtime (or on Linux, for Apple's, by the evaluators) to give the student's answers.

Builds on pocketbert.core; every variant is one entry of variants.py, and the wings hold the evaluators of
Apple's programs (evaluators/), the tokenizer inside the graph (text_in/) and the app folders (app/). Imports
neither train nor bench.
"""
