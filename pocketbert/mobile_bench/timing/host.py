"""What a measurement ran on: CPU model, cores, instruction-set flags, OS and runtime versions."""

from __future__ import annotations

import os
import platform
from pathlib import Path

INTERESTING_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "avx_vnni", "fma", "neon", "asimd",
                     "asimddp", "sve")


def host_info() -> dict:
    cpu_model, flags = platform.processor() or platform.machine(), set()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name" and cpu_model in ("", platform.machine(), platform.processor()):
                cpu_model = value.strip()
            elif key in ("flags", "Features") and not flags:
                flags = set(value.split())
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    return {
        "cpu": cpu_model,
        "cores": cores,
        "isa_flags": sorted(f for f in INTERESTING_FLAGS if f in flags),
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "python": platform.python_version(),
    }
