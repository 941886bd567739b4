"""export: ONNX, int8 ONNX, ORT Mobile and Core ML, each proven equal to the student on real examples.

Builds on pocketbert.core; every variant is one entry of variants.py. Imports neither train nor bench.
"""
