"""The arithmetic a training step runs in on this device, and the contexts that set it.

bf16 autocast on GPUs that do bf16 in hardware (Ampere and later); fp16 autocast with loss scaling on older
ones (T4, V100), where bf16 is only emulated and slower than fp32; full fp32 on the CPU, where bf16 is slower
on most chips. Master weights stay fp32 in every case (core.students.models.master_dtype).
"""

from __future__ import annotations

import contextlib

import torch

BF16, FP16, FP32 = "bf16", "fp16", "fp32"
AUTOCAST_DTYPES = {BF16: torch.bfloat16, FP16: torch.float16}
AUTOCAST_DEVICES = ("cuda", "cpu")  # device types autocast knows (tests also run steps on "meta")


def precision_for(device: torch.device, native_bf16: bool | None = None) -> str:
    """BF16, FP16 or FP32 for training on `device`; native_bf16 overrides the GPU query (tests)."""
    if device.type != "cuda":
        return FP32
    if native_bf16 is None:
        # including_emulation=False: a T4 or V100 answers True by default, yet runs bf16 in software.
        native_bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
    return BF16 if native_bf16 else FP16


def autocast(device: torch.device, precision: str | None = None):
    """The autocast context of `precision` (default: this device's); a no-op for fp32."""
    precision = precision or precision_for(device)
    if precision == FP32:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=AUTOCAST_DTYPES[precision])


def grad_scaler(device: torch.device, precision: str) -> torch.amp.GradScaler:
    """Loss scaling for fp16, whose gradients underflow without it; disabled (a pass-through) otherwise."""
    return torch.amp.GradScaler(device.type, enabled=precision == FP16)


def allow_tf32(device: torch.device) -> None:
    """The fp32 matrix products left outside autocast (losses, the optimizer) use TF32 tensor cores on GPUs."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
