"""Device profiles: peak compute per compute unit and precision, and memory bandwidth, each with its source.

The phones come from device_profiles.yaml. This host is measured, not looked up: a large fp32 matrix
product gives its compute peak (per thread count), a large copy its memory bandwidth.
"""

from __future__ import annotations

import time
from importlib import resources

import yaml

from pocketbert.core.errors import ConfigError

PROFILES_FILE = "device_profiles.yaml"
HOST_DEVICE = "host"
HOST_SOURCE = "measured here by pocketbert (bench.profiles.measure_host)"
GEMM_SIZE = 1024  # large enough to run at the BLAS kernel's peak, small enough to take well under a second
COPY_MEGABYTES = 256  # far beyond any last-level cache, so the copy streams from memory
APPLE_FAMILY = "apple"  # device_profiles.yaml's family of the devices Core ML and Core AI run on


def load_profiles() -> dict:
    text = resources.files("pocketbert.mobile_bench.estimates").joinpath(PROFILES_FILE).read_text()
    data = yaml.safe_load(text)
    validate_profiles(data)
    return data


def validate_profiles(data: dict) -> None:
    """Every number must name a known source and say how it was obtained."""
    sources = data.get("sources", {})

    def check(entry: dict, where: str, key: str) -> None:
        if not isinstance(entry, dict) or key not in entry:
            raise ConfigError(f"{PROFILES_FILE}: {where} has no {key}")
        cited = entry.get("source") or []
        if not cited or any(s not in sources for s in cited):
            raise ConfigError(f"{PROFILES_FILE}: {where} must cite sources listed under 'sources' (got {cited})")
        if not entry.get("derivation"):
            raise ConfigError(f"{PROFILES_FILE}: {where} must say how the number was obtained (derivation)")

    for key, device in data.get("devices", {}).items():
        check(device.get("memory_bandwidth_gbs"), f"{key}.memory_bandwidth_gbs", "value")
        for unit, precisions in device.get("compute", {}).items():
            for precision, entry in precisions.items():
                check(entry, f"{key}.compute.{unit}.{precision}", "peak_gflops")


def resolve_sources(device: dict, sources: dict) -> dict:
    """The profile with each source key replaced by its address, as written into results.json."""
    def cite(entry):
        return {**entry, "source": [sources[s] for s in entry["source"]]}

    return {
        **device,
        "memory_bandwidth_gbs": cite(device["memory_bandwidth_gbs"]),
        "compute": {unit: {p: cite(e) for p, e in precisions.items()} for unit, precisions in device["compute"].items()},
    }


def _matmul_model(n: int) -> bytes:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((n, n), dtype=np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "peak",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])], [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


def _gemm_gflops(threads: int, seconds: float = 0.6) -> float:
    """ONNX Runtime's own fp32 MatMul kernel: torch's BLAS may pick narrower vector code on the same CPU, and a
    floor must come from the fastest kernel the measured runtimes can use."""
    import numpy as np
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3
    session = ort.InferenceSession(_matmul_model(GEMM_SIZE), options, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal((GEMM_SIZE, GEMM_SIZE), dtype=np.float32)
    session.run(None, {"x": x})
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        session.run(None, {"x": x})
        best = max(best, 2 * GEMM_SIZE**3 / (time.perf_counter() - t0) / 1e9)
    return best


def _copy_gbs(seconds: float = 0.6) -> float:
    import numpy as np

    src = np.ones(COPY_MEGABYTES * 2**20 // 4, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = max(best, 2 * src.nbytes / (time.perf_counter() - t0) / 1e9)  # read + write
    return best


def measure_host(thread_counts: list[int], cpu_name: str) -> dict:
    """A profile of this machine in the same shape as the phones', with one fp32 CPU peak per thread count."""
    measured = {t: _gemm_gflops(t) for t in sorted(set(thread_counts))}
    # a run with t threads could use any fewer of them: its floor takes the best peak at or below t
    peaks = {t: max(g for k, g in measured.items() if k <= t) for t in measured}
    return {
        "name": f"this host ({cpu_name})",
        "soc": cpu_name,
        "memory_bandwidth_gbs": {"value": round(_copy_gbs(), 1), "source": [HOST_SOURCE],
                                 "derivation": f"best of repeated {COPY_MEGABYTES} MB array copies (read + write)"},
        "compute": {"cpu": {"fp32": {
            "peak_gflops": round(max(peaks.values()), 1),
            "per_thread_count": {str(t): round(g, 1) for t, g in peaks.items()},
            "source": [HOST_SOURCE],
            "derivation": f"best of repeated {GEMM_SIZE}³ fp32 MatMuls in onnxruntime at each thread count "
                          "(the best at or below it)"}}},
    }
