"""The reports: the latency report and its plots, the calibration report, results diffs, published lines."""
