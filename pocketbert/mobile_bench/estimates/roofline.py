"""Roofline floors: the least time an inference can take on a device, from its FLOPs and bytes.

floor = max(FLOPs / peak compute, bytes / memory bandwidth). A real runtime is slower (kernels below peak,
activations spilling, dispatch overhead), so a floor is an estimate of what is possible, never a prediction.
"""

from __future__ import annotations

# Core ML compute-unit settings and the unit whose peak bounds them: with the Neural Engine allowed, Core ML
# may still place ops elsewhere, and the fastest unit's peak is the honest floor.
COREML_UNIT_FOR = {"CPU_ONLY": "cpu", "CPU_AND_GPU": "gpu", "CPU_AND_NE": "neural_engine", "ALL": "neural_engine"}
# Bytes of weights per precision relative to fp32, for a variant estimated from the fp32 graph.
WEIGHT_BYTES_FACTOR = {"fp32": 1.0, "fp16": 0.5}


def roofline_floor(flops: float, bytes_moved: float, peak_gflops: float, bandwidth_gbs: float) -> dict:
    if peak_gflops <= 0 or bandwidth_gbs <= 0:
        raise ValueError("peak compute and bandwidth must be positive")
    compute_ms = flops / (peak_gflops * 1e9) * 1e3
    memory_ms = bytes_moved / (bandwidth_gbs * 1e9) * 1e3
    return {
        "compute_ms": compute_ms,
        "memory_ms": memory_ms,
        "floor_ms": max(compute_ms, memory_ms),
        "bound": "compute" if compute_ms >= memory_ms else "memory",
        "arithmetic_intensity": flops / bytes_moved if bytes_moved else float("inf"),
        "ridge_point": peak_gflops / bandwidth_gbs,
    }


def device_estimates(device_key: str, profile: dict, model_costs: dict) -> list[dict]:
    """One floor per model × compute unit × precision the profile lists.

    model_costs: {model: {"flops", "io_bytes", "weight_bytes": {precision: bytes}}} at one input shape.
    """
    rows = []
    bandwidth = profile["memory_bandwidth_gbs"]["value"]
    for unit, precisions in profile["compute"].items():
        for precision, entry in precisions.items():
            for model, cost in model_costs.items():
                weights = cost["weight_bytes"].get(precision)
                if weights is None:
                    weights = cost["weight_bytes"]["fp32"] * WEIGHT_BYTES_FACTOR[precision]
                bytes_moved = weights + cost["io_bytes"]
                rows.append({"device": device_key, "compute_unit": unit, "precision": precision, "model": model,
                             "flops": cost["flops"], "bytes": bytes_moved, "peak_gflops": entry["peak_gflops"],
                             "bandwidth_gbs": bandwidth,
                             **roofline_floor(cost["flops"], bytes_moved, entry["peak_gflops"], bandwidth)})
    return rows


def host_floor(measurement: dict, host_profile: dict, cost: dict) -> dict | None:
    """The floor for one fp32 CPU measurement on this host at its thread count (measured peaks only)."""
    if measurement["precision"] != "fp32":
        return None  # int8 kernels (VNNI) can beat the fp32 peak: an fp32 roofline would not be a floor
    fp32 = host_profile["compute"]["cpu"]["fp32"]
    peak = fp32.get("per_thread_count", {}).get(str(measurement["threads"]))
    if peak is None:
        return None
    bytes_moved = cost["weight_bytes"]["fp32"] + cost["io_bytes"]
    return roofline_floor(cost["flops"], bytes_moved, peak, host_profile["memory_bandwidth_gbs"]["value"])
