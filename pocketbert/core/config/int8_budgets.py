"""How much of the fp32 model an int8 export may keep in fp32: the recipe's defaults and the search's, defined once."""

INT8_SIZE_BUDGET = 0.30          # of the fp32 ONNX file
INT8_LATENCY_BUDGET = 1.05       # of the all-int8 model's latency, at 1 thread and the export's max_length
