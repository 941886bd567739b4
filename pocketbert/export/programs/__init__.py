"""The program makers (ONNX, int8, Core ML, Core AI, ExecuTorch, the Neural Engine layout) and the catalogue of variants: each program's builder, runtime and gate."""
