"""Facts about the machine that measured a row: a summary recorded beside every
measurement, and the full report (`environment_report`) stored once per run."""

from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import socket
import subprocess
import time

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


def _physical_cores() -> int:
    """Distinct (package, core) pairs in /proc/cpuinfo: SMT siblings share a core. psutil
    would say the same, but it is not a dependency; elsewhere the logical count stands in."""
    cores: set[tuple[str, str]] = set()
    package = core = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "physical id":
                    package = value
                elif key == "core id":
                    core = value
                elif not key and core:  # a blank line ends one logical CPU's block
                    cores.add((package, core))
                    package = core = ""
        if core:
            cores.add((package, core))
    except OSError:
        pass
    return len(cores) or (os.cpu_count() or 0)


def usable_cpus() -> int:
    """CPUs this process may run on (taskset, cgroups' cpusets): what a timing could use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 0


@functools.cache
def _driver_version() -> str:
    """The NVIDIA driver's version as nvidia-smi reports it (torch does not expose it); ""
    where nvidia-smi is missing or does not answer within 10 s."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ""
    try:
        done = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout else ""


def build_facts() -> dict[str, str]:
    """The BLAS, oneDNN and vector ISA this torch was built with and uses, read from
    torch.__config__.show() (the only public place that names them)."""
    text = torch.__config__.show()
    facts = {}
    for name, pattern in (("blas", r"BLAS_INFO=(\w+)"),
                          ("onednn", r"MKL-DNN (v[\d.]+)"),
                          ("cpu_capability", r"CPU capability usage: (\w+)")):
        found = re.search(pattern, text)
        facts[name] = found.group(1) if found else ""
    return facts


# Every key machine_facts may return: descriptions of the machine, never measurements.


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
        facts["cudnn_version"] = str(torch.backends.cudnn.version() or "")
        facts["driver_version"] = _driver_version()
        facts["tf32_matmul"] = torch.backends.cuda.matmul.allow_tf32
        facts["tf32_cudnn"] = torch.backends.cudnn.allow_tf32
    facts["cpu_count"] = os.cpu_count() or 0
    facts["physical_cores"] = _physical_cores()
    facts["usable_cpus"] = usable_cpus()
    facts.update(build_facts())
    return facts


def environment_report() -> str:
    """Everything torch knows about this machine and its own build, as text: PyTorch's
    collect_env report (OS, compilers, CPU, GPUs, drivers, packages), the build
    configuration and the thread pools (as they are now)."""
    return "\n\n".join([_collect_env(), torch.__config__.show(),
                        torch.__config__.parallel_info()])


@functools.cache
def _collect_env() -> str:
    """collect_env's report, once per process: it runs about 20 programs (pip, lsb_release,
    the compilers, nvidia-smi), 0.4 s, for facts that do not change while the process runs."""
    from torch.utils.collect_env import get_pretty_env_info

    return get_pretty_env_info()


# ---------------------------------------------------------------- how busy the machine was

# A point's process got less than this share of the CPU time its threads could have used,
# over the point's wall time: something else ran on its cores (an idle machine gives 0.95+
# with one thread; two busy loops beside it on two cores give about 0.67).
BUSY_SHARE = 0.8


def load_average() -> float:
    """The 1-minute load average (runnable and waiting processes), NaN where the OS has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # not Unix
        return float("nan")


def is_busy(load_avg: float, cpu_share: float, usable_cpus: int) -> bool:
    """Whether a point was measured on a busy machine: the load average above the CPUs this
    process may use, or the process's share of its threads' CPU time below BUSY_SHARE. A
    missing quantity (NaN) flags nothing."""
    return bool(load_avg > usable_cpus or cpu_share < BUSY_SHARE)


class Occupancy:
    """The load average and the CPU time this process got against wall time over a stretch
    of work (a point): `with Occupancy() as o: ...; o.values()`."""

    def __enter__(self) -> Occupancy:
        self.threads = torch.get_num_threads()
        self.load_start = load_average()
        self.cpu_start, self.wall_start = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cpu_s = time.process_time() - self.cpu_start
        self.wall_s = time.perf_counter() - self.wall_start
        self.load_end = load_average()

    def values(self) -> dict[str, float | bool]:
        """load_avg (the larger of start and end), cpu_share (process CPU seconds over wall
        seconds times the threads it could run, capped by the usable CPUs) and busy."""
        usable = usable_cpus() or 1
        load = max(self.load_start, self.load_end)
        share = self.cpu_s / (self.wall_s * max(1, min(self.threads, usable))) \
            if self.wall_s > 0 else float("nan")
        return {"load_avg": round(load, 2), "cpu_share": round(share, 3),
                "busy": is_busy(load, share, usable)}
