"""Facts about the machine that measured a row, recorded beside every measurement."""

from __future__ import annotations

import os
import platform
import socket

import torch


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:  # not Linux: fall back to what the platform module knows
        pass
    return platform.processor() or platform.machine()


def machine_facts(device: torch.device) -> dict[str, str | int | bool]:
    """Facts recorded beside every measurement, so rows from different machines compare."""
    facts: dict[str, str | int | bool] = {
        "cpu": _cpu_model(),
        "threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "host": socket.gethostname(),
        "device_name": _cpu_model(),
        # "highest" = true fp32 matmuls; "high"/"medium" let TF32 or bf16 in (CUDA, oneDNN)
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }
    if device.type == "cuda":
        facts["device_name"] = torch.cuda.get_device_name(device)
        facts["cuda_version"] = torch.version.cuda or ""
        facts["tf32_matmul"] = torch.backends.cuda.matmul.allow_tf32
        facts["tf32_cudnn"] = torch.backends.cudnn.allow_tf32
    facts["cpu_count"] = os.cpu_count() or 0
    return facts
