"""The thread-scaling runner: a layer timed on 1 and 2 threads, its span measured at 1."""

import pytest
import torch

from experiments.threads import thread_counts, thread_points
from harness.run.runner_table import run_threads
from harness.runner import Context


def test_thread_counts_reach_every_core():
    assert thread_counts(1) == [1]
    assert thread_counts(6) == [1, 2, 4, 6]


@pytest.mark.slow
def test_runner_restores_threads_and_measures_the_span():
    before = torch.get_num_threads()
    points = [p for p in thread_points("t", (16,), cores=2) if p.subject == "lstm"]
    ctx = Context(torch.device("cpu"), min_run_time=0.01)
    one, two = (run_threads(p, ctx).values for p in points)
    assert torch.get_num_threads() == before
    assert one["fwd_ms"] > 0 and two["fwd_ms"] > 0 and "span_ops" not in two
    # an LSTM's depth grows with n: at least one dependent step per position
    assert one["span_ops"] >= 16 and one["step_ms"] > 0


def test_identities_hold_for_attention_and_fail_for_the_lstm_control():
    from experiments.identities import identities
    from harness.run.runner_table import run_identities

    ctx = Context(torch.device("cpu"))
    by_mixer = {p.subject: run_identities(p, ctx).values for p in identities() if p.seed == 0}
    assert by_mixer["self-attention"]["equivariance_error"] < 1e-12
    assert by_mixer["lstm"]["equivariance_error"] > 1e-3
    assert by_mixer["self-attention"]["pe_shift_residual"] < 1e-5
    # the rows say what each identity was computed in: the mixer in float64, the table float32
    assert by_mixer["lstm"]["equivariance_dtype"] == "float64"
    assert by_mixer["lstm"]["pe_table_dtype"] == "float32"
