"""The throughput runner: forward+backward time only, for any mixer and form."""

import pytest
import torch

from experiments.spec import Point, config
from harness.run.runner_table import RUNNERS
from harness.runner import Context


@pytest.mark.parametrize("kind, cfg", [("min-gru", {"scan": "sequential"}),
                                       ("min-lstm", {"scan": "log"}),
                                       ("lstm", {"rnn_impl": "cell"})])
def test_fwdbwd_times_a_training_step(kind, cfg):
    point = Point("t", "fwdbwd", kind, 16, 8, 2, config=config(cfg))
    values = RUNNERS["fwdbwd"](point, Context(torch.device("cpu"), min_run_time=0.01)).values
    assert values["fwdbwd_ms"] > 0 and values["fwdbwd_runs"] >= 5
    assert values["fwdbwd_tokens_per_s"] == pytest.approx(32 / (values["fwdbwd_ms"] / 1e3))
