"""harness.train.step_profile: one training step of each model, timed and profiled."""

import math

import pytest
import torch

from experiments.convergence import convergence_smoke
from experiments.translation import translation_tiny
from harness.train import step_profile

pytestmark = pytest.mark.slow  # training steps of the Table 2 models, profiled

CPU = torch.device("cpu")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Toy steps on one thread (as the harness runs tiny models): two threads on shared
    cores spend more time waiting for each other than computing."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


@pytest.fixture(scope="module")
def steps(one_thread):
    lm = next(p for p in convergence_smoke() if p.subject == "transformer-lm")
    mt = next(p for p in translation_tiny() if p.subject == "transformer")
    return {"lm": step_profile.lm_step(lm, CPU), "mt": step_profile.mt_step(mt, CPU, 50, 8)}


def test_each_step_updates_its_model_and_is_timed_with_an_mfu(steps):
    for fn, flops in steps.values():
        first, second = fn(), fn()  # each update returns (loss, grad norm)
        assert flops > 0 and all(map(math.isfinite, first + second))
        assert first[0] != second[0]  # the update changed the weights the loss sees
    rows = step_profile.time_steps(steps, CPU, reps=2, min_run_time=0.001, peak_n=128)
    assert set(rows) == {"lm", "mt"}
    for row in rows.values():
        assert row["best_ms"] <= row["step_ms"] and math.isfinite(row["mfu"]) and row["mfu"] > 0


def test_the_profile_names_the_optimizer_and_a_matmul(steps):
    fn, _ = steps["lm"]
    table = step_profile.profile_table(fn, calls=1)
    assert "Optimizer.step" in table and ("_linear_pointwise" in table or "aten::mm" in table
                                          or "aten::addmm" in table)


def test_table2_steps_are_the_four_models_of_the_cpu_table(one_thread):
    """--table2: an update of each of Table 2's four CPU models, with its counted FLOPs."""
    steps = step_profile.table2_steps(CPU, length=6)
    assert set(steps) == {f"translation/{m}" for m in ("transformer", "lstm-attention",
                                                       "gru-attention", "lstm")}
    for fn, flops in steps.values():
        assert flops > 0 and all(map(math.isfinite, fn()))
