"""export: ONNX, int8 ONNX, ORT Mobile and Core ML, each proven equal to the student on real examples."""
