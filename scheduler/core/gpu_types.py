"""Canonical GPU type keys: how an NVML model name maps onto the profiles' and power model's keys."""

from __future__ import annotations

import re

# Longest first where one key contains another; the first key found in the squashed name wins.
KNOWN_TYPES = ("h200", "h100", "a100", "v100", "p100", "k80", "t4", "rtx6000", "rtx2080ti", "l40s")


def gpu_type_key(model: str) -> str:
    """``"NVIDIA A100-SXM4-80GB"`` → ``"a100"``, ``"Quadro RTX 6000"`` → ``"rtx6000"``.

    A model of no known family keeps its name, lowercased, without spaces or punctuation,
    so two GPUs of one unknown model still share a type.
    """
    squashed = re.sub(r"[^a-z0-9]", "", model.lower())
    return next((key for key in KNOWN_TYPES if key in squashed), squashed or "unknown")


# Peak FP32 throughput of one GPU (TFLOPS, boost clock), from NVIDIA's datasheets: Tesla K80 (8.73 for the
# two-GPU board, one GPU counted), Tesla P100 SXM2, Tesla V100 SXM2, T4, A100 SXM4, H100 SXM5, H200 SXM (the same
# chip as H100), Quadro RTX 6000, GeForce RTX 2080 Ti, L40S. Used only to estimate a job's speed on a type its
# profile has no measurement for (speed.estimated_model), until its own reports refit it: FP32 peak is the one
# figure published for every generation, and it ranks them as training throughput does, though it understates
# tensor-core generations' lead in mixed precision.
PEAK_FP32_TFLOPS: dict[str, float] = {
    "k80": 4.37, "p100": 10.6, "v100": 15.7, "t4": 8.1, "a100": 19.5, "h100": 67.0, "h200": 67.0,
    "rtx6000": 16.3, "rtx2080ti": 13.4, "l40s": 91.6,
}
PEAK_FP32_SOURCE = "NVIDIA datasheets, peak FP32 TFLOPS per GPU (scheduler/core/gpu_types.py)"


def relative_speed(gpu_type: str, reference: str) -> float | None:
    """How many times faster ``gpu_type`` computes than ``reference`` by peak FP32; None when either is unknown."""
    if gpu_type not in PEAK_FP32_TFLOPS or reference not in PEAK_FP32_TFLOPS:
        return None
    return PEAK_FP32_TFLOPS[gpu_type] / PEAK_FP32_TFLOPS[reference]
