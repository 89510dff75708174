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
