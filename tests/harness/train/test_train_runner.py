"""Training and probe runners on tiny sizes; the suites' points are all buildable."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from mlflow import MlflowClient

import experiments
import models
from experiments.spec import Match, Point, TaskSpec, TrainOptions, config
from harness.measure import kernels
from harness.results import read_results, results_path
from harness.run import sweep
from harness.run.runner_table import RUNNERS
from harness.runner import Context
from harness.train.batch import Batch
from harness.train.loop import masked_loss, param_count
from harness.train.probes import (
    attention_stats,
    depth_probe,
    distance_grad_norms,
    diversity,
    run_attn_init,
    run_grad_distance,
)
from harness.train.tasks import make_task
from harness.train.train_runner import run_train, train_spec

CPU = Context(torch.device("cpu"), 0.1)
TINY = dict(n_layers=1, n_heads=2, d_ff=32, dropout=0.0)
CONVERGENCE_SUITES = ["convergence", "scaling-factor", "heads", "ffn-width", "positional",
                     "norm-warmup", "gradient-distance", "convergence-quick",
                     "convergence-smoke"]


pytestmark = pytest.mark.usefixtures("one_thread")


TRAIN_FIELDS = ("steps", "lr", "eval_every", "target", "length_gen")


def tiny_point(runner: str = "train", model: str = "transformer-lm", d: int = 16,
               match: Match | None = None, **settings: object) -> Point:
    """Copy n=4 on 8 symbols, batch 8; settings are TrainOptions fields or model config."""
    train = {"steps": 20, "eval_every": 10} | {k: v for k, v in settings.items()
                                               if k in TRAIN_FIELDS}
    cfg = {k: v for k, v in settings.items() if k not in TRAIN_FIELDS}
    if model.startswith("transformer"):
        cfg = TINY | cfg
    options = TrainOptions(TaskSpec("copy", 8), **train, match=match)
    return Point("t", runner, model, 4, d, 8, config=config(cfg), options=options,
                 study="test")


def test_train_runner_returns_metrics_series_and_restores_threads() -> None:
    torch.set_num_threads(2)  # the runner drops to 1 for a tiny model, then restores 2
    result = run_train(tiny_point(length_gen=True), CPU)
    m = result.values
    assert torch.get_num_threads() == 2
    assert result.status == "ok"
    assert m["steps_run"] == 20 and m["threads_used"] == 1
    assert m["n_params"] == param_count("transformer-lm", **train_spec(tiny_point()).model)
    assert 0 <= m["final_accuracy"] <= 1 and m["flops_fwd_per_token"] > 0
    assert {"accuracy_2n", "accuracy_4n", "loss_4n"} <= set(m)
    steps = [s for s, _ in result.series["loss"]]
    assert steps == [0, 10, 20]
    assert [s for s, _ in result.series["train_loss"]] == [10, 20]  # no training loss at 0


@pytest.mark.parametrize("runner", ["train", "grad-distance"])
def test_a_training_runner_checkpoints_and_a_rerun_resumes_from_a_kept_checkpoint(
        tmp_path, runner: str) -> None:
    from harness.train import checkpoint

    point = tiny_point(runner, model="gru-lm", n_layers=1, dropout=0.0)
    for keep in (False, True):
        ctx = dataclasses.replace(CPU, cache_dir=tmp_path, keep_checkpoints=keep)
        first = RUNNERS[runner](point, ctx)
        assert checkpoint.point_path(point, ctx).exists() == keep
        assert "resumed_from_step" not in first.values
    again = RUNNERS[runner](point, ctx)  # its kept checkpoint says it ended: no update runs
    assert again.values["resumed_from_step"] == again.values["steps_run"] == 20
    assert again.series == first.series and again.values["final_loss"] == \
        first.values["final_loss"]


def test_train_runner_records_the_unigram_baseline_of_a_corpus(tmp_path) -> None:
    text = tmp_path / "t.txt"
    text.write_text("the lord spake unto moses " * 40, encoding="utf-8")
    options = TrainOptions(TaskSpec("corpus", None, keywords=(("path", str(text)),)),
                           steps=2, eval_every=2)
    point = Point("t", "train", "transformer-lm", 8, 16, 4, config=config(TINY),
                  options=options, study="test")
    m = run_train(point, CPU).values
    assert m["unigram_bits_per_char"] == pytest.approx(
        train_spec(point).task.unigram_bits_per_char())
    assert "unigram_bits_per_char" not in run_train(tiny_point(steps=2), CPU).values


def test_train_runner_early_stop_records_steps_to_target() -> None:
    m = run_train(tiny_point(target=0.01), CPU).values  # chance accuracy already passes 1%
    assert m["steps_to_target"] == m["steps_run"] == 10


def test_match_knob_resolves_the_width_at_run_time(tmp_path) -> None:
    """A Match: the LSTM gets the d_model matching the Transformer (built from its own
    config at Point.d_model) within 10%, and the row records that width; Transformer-only
    config keys are unknown to an LSTM."""
    wide = TINY | {"d_ff": 256}  # a Transformer an LSTM of the same d_model falls short of
    match = Match("transformer-lm", config(wide))
    matched = tiny_point(model="lstm-lm", d=16, match=match, n_layers=1, dropout=0.0)
    ref = train_spec(tiny_point(d=16, **wide)).model
    got = train_spec(matched).model
    assert got["d_model"] > 16 and "n_heads" not in got
    n_ref, n_got = param_count("transformer-lm", **ref), param_count("lstm-lm", **got)
    assert abs(n_got - n_ref) <= 0.1 * n_ref
    assert train_spec(tiny_point(match=match, **wide)).model == ref  # itself
    with pytest.raises(ValueError, match="unknown config key .* for model .lstm-lm."):
        train_spec(tiny_point(model="lstm-lm", **TINY))
    sweep.run_suite("t", [matched], CPU.device, tmp_path, None, progress=False)
    row = read_results(results_path(tmp_path, "t")).iloc[0]
    assert row["status"] == "ok" and row["d_model"] == got["d_model"]


@pytest.mark.slow
def test_diverged_row_and_curves_through_the_sweep(tmp_path) -> None:
    """A forced NaN (lr 1e30) becomes a "diverged" row naming the step; an ok point's curves
    reach series.csv and MLflow with step=; a bad config key becomes an error row."""
    points = [tiny_point(lr=1e30), tiny_point(), tiny_point(bogus=1)]
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    summary = sweep.run_suite("t", points, CPU.device, tmp_path, uri, progress=False)
    assert summary.statuses == {"diverged": 1, "ok": 1, "error": 1}
    df = read_results(results_path(tmp_path, "t")).set_index("point_id")
    bad = df.loc[points[0].point_id]
    assert bad["status"] == "diverged" and bad["diverged_at"] >= 1
    assert f"step {int(bad['diverged_at'])}" in bad["message"]
    assert "bogus" in df.loc[points[2].point_id, "message"]
    ok = df.loc[points[1].point_id]  # the sweep names the linear kernel the training ran
    assert ok["linear_kernel"] in kernels.linear_candidates("cpu", torch.float32)
    assert ok["mfu"] > 0 and ok["train_flops_per_s"] > 0
    client = MlflowClient(uri)
    run = client.search_runs([client.get_experiment_by_name("t").experiment_id],
                             f"tags.point_id = '{points[1].point_id}'")[0]
    history = client.get_metric_history(run.info.run_id, "accuracy")
    assert sorted(h.step for h in history) == [0, 10, 20]


def test_attention_stats_unit_variance_matches_seed() -> None:
    """For q, k with independent N(0, 1) components, Var(q.k) = d_k (the seed's footnote);
    without the 1/sqrt(d_k) factor large d_k saturates softmax."""
    gen = torch.Generator().manual_seed(0)
    for d_k in (16, 64, 256):
        q, k = (torch.randn(8, 2, 64, d_k, generator=gen) for _ in range(2))
        scaled = attention_stats(q, k, scale=True, causal=True)
        assert scaled["qk_var"] == pytest.approx(d_k, rel=0.1)
        assert scaled["qk_var_normalised"] == pytest.approx(d_k, rel=0.1)
        raw = attention_stats(q, k, scale=False, causal=True)
        assert raw["qk_var"] == scaled["qk_var"]  # the scale acts after the dot product
        if d_k == 256:
            assert raw["attn_entropy"] < 0.2 * scaled["attn_entropy"]
            assert raw["softmax_jacobian_norm"] < 0.6 * scaled["softmax_jacobian_norm"]


def test_softmax_jacobian_norm_matches_autograd() -> None:
    s = torch.randn(1, 1, 3, 5, dtype=torch.float64)
    q, k = s, torch.eye(5, dtype=torch.float64)[None, None, :3]  # makes scores = s[..., :3]
    stats = attention_stats(q, k, scale=False, causal=False)
    norms = [torch.autograd.functional.jacobian(lambda x: x.softmax(-1), s[0, 0, i, :3]).norm()
             for i in range(3)]
    assert stats["softmax_jacobian_norm"] == pytest.approx(float(sum(norms) / 3), rel=1e-9)


def test_attn_init_runner_reports_model_and_reference() -> None:
    p = tiny_point("attn-init", d=32, attn_scale=False, n_heads=1)
    m = run_attn_init(p, CPU).values
    assert m["d_k"] == 32 and m["qk_var"] > 0
    assert m["qk_var_unit"] == pytest.approx(32, rel=0.25)  # a 1-batch Monte Carlo
    assert 0 < m["attn_entropy"] <= m["attn_entropy_max"]


def test_post_ln_gradients_grow_toward_output_more_than_pre_ln() -> None:
    """Xiong et al. 2020 at init, depth 6: Post-LN's last/first layer gradient ratio is above
    Pre-LN's, for each of three seeds."""
    task = make_task("copy", 8, 16, "lm", seed=0)
    batch = task.train_batch(0, 16)
    for seed in range(3):
        ratios = {}
        for norm in ("post", "pre"):
            torch.manual_seed(seed)
            model = models.build("transformer-lm", vocab_size=task.vocab_size, d_model=32,
                                 n_layers=6, n_heads=2, d_ff=64, dropout=0.0, norm=norm)
            norms = depth_probe(model, batch).grad_norms
            assert len(norms) == 6 and all(n > 0 for n in norms)
            ratios[norm] = norms[-1] / norms[0]
        assert ratios["post"] > ratios["pre"], (seed, ratios)


def test_depth_probe_reads_the_signal_and_gradient_the_stack_passes() -> None:
    """depth_probe against a direct computation: the first layer's input and each layer's
    output by running the layers by hand, the gradients by torch.autograd.grad; without
    residual branches a depth-12 stack collapses its positions to one vector at
    initialisation (Dong et al. 2021), with them it keeps most of the input's diversity."""
    task = make_task("copy", 8, 16, "lm", seed=0)
    batch = task.train_batch(0, 16)
    kept = {}
    for residual in (True, False):
        torch.manual_seed(0)
        model = models.build("transformer-lm", vocab_size=task.vocab_size, d_model=32,
                             n_layers=12, n_heads=2, d_ff=64, dropout=0.0, norm="pre",
                             residual=residual)
        probe = depth_probe(model, batch)
        x0 = model.drop(model.pos(model.embed(batch.tokens)))
        outs, x = [], x0
        for layer in model.layers:
            x = layer(x)
            outs.append(x)
        loss = masked_loss(model.head(x), batch)
        g_in, g_out = torch.autograd.grad(loss, [x0, x])
        assert probe.signal == pytest.approx([diversity(o) / diversity(x0) for o in outs],
                                             rel=1e-9)
        assert probe.grad_in_over_out == pytest.approx(float(g_in.norm() / g_out.norm()),
                                                       rel=1e-5)
        assert len(probe.grad_norms) == 12 and all(n > 0 for n in probe.grad_norms)
        kept[residual] = probe.signal[-1]
    assert kept[False] < 0.05 < 0.3 < kept[True], kept
    # an encoder-decoder: gradients of all 2 + 2 layers, the signal of the decoder's stream
    task = make_task("copy", 8, 16, "seq2seq", seed=0)
    seq2seq = task.train_batch(0, 4)
    torch.manual_seed(0)
    model = models.build("transformer", vocab_size=task.vocab_size, d_model=32, n_layers=2,
                         n_heads=2, d_ff=64, dropout=0.0)
    probe = depth_probe(model, seq2seq)
    memory = model.encode(seq2seq.src)
    y0 = model.drop(model.pos(model.embed(seq2seq.tgt_in)))
    outs, y = [], y0
    for layer in model.decoder:
        y = layer(y, memory)
        outs.append(y)
    assert len(probe.grad_norms) == 4 and probe.first == 3  # the decoder's: layers 3 and 4
    assert probe.signal == pytest.approx([diversity(o) / diversity(y0) for o in outs], rel=1e-9)
    same = torch.ones(2, 5, 3)
    assert diversity(same) == 0.0 and diversity(torch.randn(2, 5, 3)) > 0.5


def test_distance_grads_vanish_in_lstm_not_in_transformer() -> None:
    task = make_task("distance-k", 48, 8, "lm", seed=0, k=1)
    batch = task.eval_batches(8, 1)[0]
    decay = {}
    for name, cfg in (("lstm-lm", {}), ("transformer-lm", TINY)):
        torch.manual_seed(0)
        model = models.build(name, vocab_size=task.vocab_size, d_model=16,
                             **({"n_layers": 1, "dropout": 0.0} | cfg)).eval()
        g = distance_grad_norms(model, batch)
        assert len(g) == 48 and g[0] > 0
        decay[name] = math.log10(g[-1] / g[1])
    assert decay["lstm-lm"] < -3 < decay["transformer-lm"]


def test_distance_grads_need_a_scored_last_position() -> None:
    tokens = torch.zeros(2, 4, dtype=torch.long)
    mask = torch.ones(2, 4, dtype=torch.bool)
    mask[:, -1] = False
    model = models.build("lstm-lm", vocab_size=8, d_model=8, n_layers=1, dropout=0.0)
    with pytest.raises(ValueError, match="last position"):
        distance_grad_norms(model, Batch("lm", targets=tokens, mask=mask, tokens=tokens))


def test_grad_distance_runner_measures_before_and_after_training() -> None:
    result = run_grad_distance(tiny_point("grad-distance", model="gru-lm", steps=5,
                                          n_layers=1, dropout=0.0), CPU)
    series, m = result.series, result.values
    n = len(series["grad_norm_init"])
    assert n == len(series["grad_norm_trained"]) == 8  # copy n=4, LM: 2n input tokens
    assert series["grad_norm_init"] != series["grad_norm_trained"]
    assert math.isfinite(m["grad_decay_init"]) and m["steps_run"] == 5


@pytest.mark.slow
@pytest.mark.parametrize("suite", CONVERGENCE_SUITES)
def test_suite_points_are_valid(suite: str) -> None:
    """Every point has a runner, a study, a unique id, and options and config that build
    its task and pass models.model_config (train_spec validates both)."""
    points = experiments.points(suite)
    assert len({p.point_id for p in points}) == len(points)
    for p in points:
        assert p.runner in RUNNERS and p.study
        spec = train_spec(p)
        models.model_config(p.subject, **spec.model)


@pytest.mark.slow
def test_quick_convergence_models_are_parameter_matched() -> None:
    """Within 10% of the Transformer's count on the same task."""
    counts: dict[tuple, dict[str, int]] = {}
    for p in experiments.points("convergence-quick"):
        if p.study == "convergence" and p.seed == 0:
            key = (p.options.task, p.seq_len)
            counts.setdefault(key, {})[p.subject] = param_count(p.subject,
                                                                **train_spec(p).model)
    for key, c in counts.items():
        ref = c.pop("transformer-lm")
        assert set(c) == {"lstm-lm", "gru-lm"}
        for model, n in c.items():
            assert abs(n - ref) <= 0.1 * ref, (key, model, n, ref)


def test_quick_studies_pair_five_seeds() -> None:
    """Every arm of every study in convergence-quick runs on the same 5 seeds, so each
    comparison the claims ledger judges pairs 5 seeds (an interval, a paired t-test)."""
    arms: dict[str, set[int]] = {}
    for p in experiments.points("convergence-quick"):
        arm = dataclasses.replace(p, seed=0).point_id
        arms.setdefault(arm, set()).add(p.seed)
    assert arms and all(seeds == set(range(5)) for seeds in arms.values()), arms


def test_train_rows_carry_throughput_flops_and_mfu(monkeypatch) -> None:
    from harness.train import train_runner

    monkeypatch.setattr(train_runner, "peak_rate", lambda device, threads: 1e12)  # no timing here
    point = tiny_point()
    m = run_train(point, CPU).values
    spec = train_spec(point)
    model = train_runner.build_model(point, spec, torch.device("cpu"))
    # one step's counted FLOPs, counted again by hand: forward + backward of a batch
    batch = spec.task.train_batch(1, spec.train.batch_size)
    from torch.utils.flop_counter import FlopCounterMode

    from harness.measure.flops import FLOP_FORMULAS  # CPU flash attention counts too

    with FlopCounterMode(display=False, custom_mapping=FLOP_FORMULAS) as counter:
        train_runner.masked_loss(batch.logits(model), batch).backward()
    per_token = counter.get_total_flops() / batch.n_input_tokens
    assert m["train_flops_per_token"] == pytest.approx(per_token)
    assert m["train_flops_per_token"] > 2 * m["flops_fwd_per_token"]  # backward ~ 2x forward
    assert m["train_tokens_per_s"] == m["tokens_per_s"] > 0
    assert m["train_flops_per_s"] == pytest.approx(per_token * m["tokens_per_s"])
    assert m["peak_flops_per_s"] == 1e12
    assert m["mfu"] == pytest.approx(m["train_flops_per_s"] / 1e12)


def test_step_flops_leave_no_gradients_behind() -> None:
    from harness.train import train_runner

    point = tiny_point()
    spec = train_spec(point)
    model = train_runner.build_model(point, spec, torch.device("cpu"))
    assert train_runner.step_flops_per_token(model, spec.task, 8, torch.device("cpu")) > 0
    assert all(p.grad is None for p in model.parameters())


def test_throughput_measures_the_peak_once_per_thread_count(monkeypatch) -> None:
    from harness.measure import compare
    from harness.train import train_runner

    calls = []
    monkeypatch.setattr(compare, "timer_ms", lambda fn, t: calls.append(1) or 1.0)
    compare.peak_rate.cache_clear()
    monkeypatch.setattr(train_runner, "peak_rate", compare.peak_rate)
    first = train_runner.throughput(100.0, 10.0, torch.device("cpu"))
    n = len(calls)
    second = train_runner.throughput(100.0, 20.0, torch.device("cpu"))
    assert len(calls) == n > 0 and first["peak_flops_per_s"] == second["peak_flops_per_s"]
    assert second["mfu"] == pytest.approx(2 * first["mfu"])
    assert train_runner.throughput(100.0, None, torch.device("cpu")) == {}
    compare.peak_rate.cache_clear()
