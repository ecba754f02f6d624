"""Machine facts: the summary in every row and the full report stored once per run."""

from __future__ import annotations

import os

import torch

from harness.measure.machine import build_facts, environment_report, machine_facts
from harness.schema import FACT_KEYS


def test_facts_describe_this_machine() -> None:
    facts = machine_facts(torch.device("cpu"))
    assert set(facts) <= set(FACT_KEYS)  # sync keeps every fact a param, never a metric
    assert 1 <= facts["physical_cores"] <= (os.cpu_count() or 1)
    assert 1 <= facts["usable_cpus"] <= (os.cpu_count() or 1)
    assert facts["threads"] == torch.get_num_threads()


def test_build_facts_are_read_from_torch() -> None:
    facts = build_facts()
    config = torch.__config__.show()
    for key in ("blas", "onednn", "cpu_capability"):
        assert facts[key] == "" or facts[key] in config, key


def test_environment_report_is_torch_collect_env() -> None:
    text = environment_report()
    assert "PyTorch version" in text and "ATen/Parallel" in text and "PyTorch built with" in text


def test_environment_report_shows_the_thread_pools_as_they_are_now() -> None:
    """collect_env runs once per process; the thread pools are read at each report."""
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = environment_report()
        torch.set_num_threads(3)
        three = environment_report()
    finally:
        torch.set_num_threads(before)
    assert "at::get_num_threads() : 1" in one and "at::get_num_threads() : 3" in three
