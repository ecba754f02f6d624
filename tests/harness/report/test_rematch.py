"""The rematch's tables and its later-work claims, on made-up rows that must yield each
verdict; the suites declare what they promise."""

from __future__ import annotations

import pandas as pd
import pytest

import experiments
import models.minrnn
from experiments.rematch import MQAR_MIXERS, THROUGHPUT
from harness.report import claim_later as rules
from harness.report.claims import all_claims
from harness.report.document import write_report
from harness.report.evidence import Stored, gated
from harness.report.readme import render_block
from harness.report.rematch import speedup_table, state_floats, throughput_table
from harness.report.verdicts import CONTRADICTS, QUALIFIED, SUPPORTS
from tests.harness.report.claim_frames import write_suite

NS = (64, 512, 4096)


def fwdbwd_rows(seq_ms=lambda n: n / 10, scan_ms=lambda n: 1.0, log_ms=None,
                **extra) -> list[dict]:
    """Timings of every throughput variant: loops take seq_ms(n), scans scan_ms(n) (the log
    scan log_ms(n) where given)."""
    rows = []
    for n in NS:
        for kind, cfg in THROUGHPUT:
            loop = cfg.get("scan") == "sequential" or cfg.get("rnn_impl") == "cell"
            ms = seq_ms(n) if loop else (log_ms or scan_ms)(n) if cfg.get("scan") == "log" \
                else scan_ms(n)
            rows.append({"runner": "fwdbwd", "mixer": kind, "seq_len": n, "d_model": 64,
                         "batch_size": 4, "fwdbwd_ms": ms, "wall_s": 1.0, **cfg, **extra})
    return rows


def seq_ops_rows(depth=lambda n: 10 * n.bit_length()) -> list[dict]:
    return [{"runner": "seq-ops", "fit": "seq-ops", "mixer": "min-gru", "seq_len": n,
             "d_model": 16, "scan": "levels", "seq_ops": depth(n)}
            for n in (16, 32, 64, 128, 256)]


def mqar_rows(acc: dict[str, tuple[float, ...]], seeds: int = 3, spread: float = 0.01,
              settings: tuple[tuple[int, int], ...] = ((2, 32), (4, 32), (8, 32)),
              lr: float = 3e-3, steps: int = 400) -> list[dict]:
    """acc[mixer] = mean accuracy per setting (pairs, d) of `settings`; the seeds spread it
    evenly by `spread` apart, the mean unmoved."""
    return [{"runner": "train", "study": "mqar-state", "model": "mixer-lm", "mixer_kind": m,
             "seq_len": p, "d_model": d, "seed": s, "alphabet_size": 64, "lr": lr,
             "final_accuracy": a + spread * (s - (seeds - 1) / 2), "wall_s": 1.0,
             "steps": steps}
            for m, accs in acc.items() for (p, d), a in zip(settings, accs, strict=True)
            for s in range(seeds)]


def test_throughput_and_speedup_tables():
    df = pd.DataFrame(fwdbwd_rows())
    df["status"] = "ok"
    table = throughput_table(df)
    assert list(table["seq_len"]) == list(NS)
    assert table.loc[table["seq_len"] == 512, "min-gru (sequential)"].item() == 51.2
    speed = speedup_table(df).set_index(["layer", "scan"])
    assert speed.loc[("min-lstm", "log"), "n=4096"] == pytest.approx(409.6)
    assert speed.loc[("min-gru", "levels"), "paper, n=512 (GPU)"] == 175


def test_state_sizes():
    row = {"d_model": 32, "seq_len": 8}
    assert state_floats(pd.Series(row | {"mixer_kind": "lstm"})) == 64
    assert state_floats(pd.Series(row | {"mixer_kind": "min-gru"})) == 32
    assert state_floats(pd.Series(row | {"mixer_kind": "self-attention"})) == 2 * 32 * 32


@pytest.mark.parametrize("depth, scan_ms, verdict", [
    (lambda n: 10 * n.bit_length(), lambda n: 1.0, SUPPORTS),
    (lambda n: 10 * n.bit_length(), lambda n: n / 20 if n < 4096 else 1.0, SUPPORTS),
    (lambda n: 3 * n, lambda n: 1.0, CONTRADICTS),  # depth linear in n
    (lambda n: 10 * n.bit_length(), lambda n: n, CONTRADICTS),  # scans slower everywhere
    (lambda n: 10 * n.bit_length() + (40 if n == 64 else 0), lambda n: 1.0, QUALIFIED),
])
def test_log_depth_training(tmp_path, depth, scan_ms, verdict):
    write_suite(tmp_path, "table1", seq_ops_rows(depth))
    write_suite(tmp_path, "rematch-quick", fwdbwd_rows(scan_ms=scan_ms))
    assert rules.log_depth_training(Stored(tmp_path)).verdict == verdict


def test_scan_claim_names_the_form_and_device_it_holds_on(tmp_path):
    """The level scan beats the loop, the log scan does not: qualified, naming each."""
    write_suite(tmp_path, "table1", seq_ops_rows())
    write_suite(tmp_path, "rematch-quick", fwdbwd_rows(log_ms=lambda n: n))
    evidence = rules.log_depth_training(Stored(tmp_path))
    assert evidence.verdict == QUALIFIED
    assert "holds for: levels scan on cpu (test CPU); not for: log scan on cpu (test CPU)" \
        in evidence.measured
    assert evidence.figure == "rematch-quick/scan-throughput.png"


def test_gpu_rows_measured_before_the_loop_fix_are_not_judged(tmp_path):
    write_suite(tmp_path, "table1", seq_ops_rows())
    write_suite(tmp_path, "rematch-quick", fwdbwd_rows())
    write_suite(tmp_path / "gpu", "rematch-gpu-quick", fwdbwd_rows(
        log_ms=lambda n: n, device="cuda", device_name="test GPU",
        measured_at="2026-11-30T21:00:00+00:00"))
    evidence = rules.log_depth_training(Stored(tmp_path))
    assert evidence.verdict == SUPPORTS  # the stale GPU log scan does not count against it
    assert "gpu/rematch-gpu-quick, log scan on cuda (test GPU)" in evidence.measured
    assert "shown, not judged" in evidence.measured


def test_scan_error_is_measured_and_grows_with_n_for_the_log_scan(tmp_path):
    rows = [{"runner": "scan-error", "mixer": k, "seq_len": n, "d_model": 8, "scan": scan,
             "scan_rel_error": models.minrnn.scan_error(k, 8, 1, n, scan)}
            for k in ("min-gru",) for n in (64, 4096) for scan in ("sequential", "log")]
    err = {(r["scan"], r["seq_len"]): r["scan_rel_error"] for r in rows}
    assert err[("log", 4096)] > 10 * err[("log", 64)] and err[("log", 4096)] > 1e-5
    assert err[("sequential", 4096)] < 1e-5
    write_suite(tmp_path, "table1", seq_ops_rows())
    write_suite(tmp_path, "rematch-quick", fwdbwd_rows())
    write_suite(tmp_path, "scan-error", rows)
    measured = rules.log_depth_training(Stored(tmp_path)).measured
    assert f"log n=64: {err[('log', 64)]:.2g}, n=4096: {err[('log', 4096)]:.2g}" in measured


RECURRENT_LOW = {m: (0.5, 0.2, 0.1) for m in MQAR_MIXERS if m != "self-attention"}
LEARNS = {"self-attention": (1.0, 0.995, 0.8)}  # learned recall up to 4 pairs


def _recall(tmp_path, rows, suite="mqar-cpu"):
    write_suite(tmp_path, suite, rows)
    return rules.attention_recalls_more(Stored(tmp_path))


@pytest.mark.parametrize("acc, seeds, spread, verdict", [
    (LEARNS | RECURRENT_LOW, 5, 0.01, SUPPORTS),  # every seed apart, both exact tests p < .05
    (LEARNS | RECURRENT_LOW, 3, 0.01, QUALIFIED),  # apart, but 3 + 3 seeds: p >= 0.1
    ({"self-attention": (0.995, 0.3, 0.05)} | RECURRENT_LOW | {"gru": (1.0, 0.8, 0.5)}, 5,
     0.001, CONTRADICTS),  # the GRU above attention where attention learned (2 pairs)
    (LEARNS | RECURRENT_LOW | {"gru": LEARNS["self-attention"]}, 5, 0.01, QUALIFIED),  # a tie
])
def test_attention_recalls_more(tmp_path, acc, seeds, spread, verdict):
    evidence = _recall(tmp_path, mqar_rows(acc, seeds, spread))
    assert evidence.verdict == verdict
    learned = 4 if acc["self-attention"][1] >= rules.RECALLED else 2
    assert evidence.points.startswith("mqar-cpu, study mqar-state")
    assert evidence.points.endswith(f"judged at {learned} pairs, d = 32")
    # accuracy against pairs and against state size, each mixer's
    assert "lstm 2: 0.5 (state 64, lr 0.003), 4: 0.2 (state 64" in evidence.measured
    assert "self-attention 2:" in evidence.measured and "(state 512, lr 0.003)" in \
        evidence.measured


def test_three_seeds_cannot_decide_and_the_seeds_gate_says_what_would(tmp_path):
    """mqar-cpu's 3 seeds: every seed apart, but the exact tests over 3 + 3 seeds cannot
    reach p < 0.05, so the seeds gate fails and names 4+ seeds."""
    evidence = gated(_recall(tmp_path, mqar_rows(LEARNS | RECURRENT_LOW, 3)))
    failed = {g.name: g for g in evidence.gates if not g.passed}
    assert evidence.verdict == rules.INCONCLUSIVE and set(failed) == {"seeds"}
    assert "4+ seeds per mixer and setting" in failed["seeds"].remedy
    assert "smallest attainable exact p 0.1" in failed["seeds"].detail


def test_recall_waits_for_attention_to_learn_and_says_how_far_it_got(tmp_path):
    evidence = _recall(tmp_path, mqar_rows({"self-attention": (0.9, 0.7, 0.4)} | RECURRENT_LOW))
    assert evidence.verdict == rules.INCONCLUSIVE
    assert evidence.measured.startswith("attention has not learned recall at any setting: its "
                                        "best mean accuracy 0.9 at 2 pairs, d = 32 (lr 0.003)")
    assert "not run" not in evidence.measured and "tvr run mqar-cpu" in evidence.measured
    assert "depends on the seed" not in evidence.measured  # no seed learned it


def test_recall_says_when_learning_it_depends_on_the_seed(tmp_path):
    """Two seeds of three at 99.5%, the third at the floor: the mean is below 99%, and the
    reason says how many seeds learned recall there."""
    rows = mqar_rows({"self-attention": (0.995, 0.6, 0.4)} | RECURRENT_LOW, spread=0.0)
    for row in rows:
        if row["mixer_kind"] == "self-attention" and row["seq_len"] == 2 and row["seed"] == 2:
            row["final_accuracy"] = 0.75
    evidence = _recall(tmp_path, rows)
    assert evidence.verdict == rules.INCONCLUSIVE
    assert "at 2 pairs, d = 32 (lr 0.003), 3 seeds (2 of them at 0.99 or more: whether " \
           "attention learns recall at this size depends on the seed), below 0.99" in \
        evidence.measured


def test_each_mixer_at_its_best_learning_rate_per_setting_and_each_width_judged(tmp_path):
    """Attention learns at lr 1e-2 only, the recurrent models do best at 3e-3: each mixer is
    judged at its own best lr, which the text names; a width where attention learned fewer
    pairs is judged at those."""
    settings = ((2, 32), (4, 32), (8, 32), (2, 16), (8, 16))
    low = {m: (0.5, 0.2, 0.1, 0.4, 0.1) for m in RECURRENT_LOW}
    rows = (mqar_rows({"self-attention": (1.0, 0.995, 0.8, 0.995, 0.5)}, 5,
                      settings=settings, lr=1e-2)
            + mqar_rows({"self-attention": (0.6, 0.4, 0.2, 0.5, 0.2)}, 5, settings=settings)
            + mqar_rows(low, 5, settings=settings)
            + mqar_rows({m: tuple(v - 0.1 for v in a) for m, a in low.items()}, 5,
                        settings=settings, lr=1e-2))
    evidence = _recall(tmp_path, rows)
    assert evidence.verdict == SUPPORTS
    assert evidence.points.endswith("judged at 2 pairs, d = 16, 4 pairs, d = 32")
    assert "self-attention 2: 1 (state 512, lr 0.01)" in evidence.measured
    assert "lstm 2: 0.5 (state 64, lr 0.003)" in evidence.measured
    assert "each model at its best learning rate of 0.003, 0.01" in evidence.scope


def test_recall_judges_every_mixer_and_its_label_names_only_what_it_judged(tmp_path):
    """d = 16, where attention learned nothing, is named as not judged and left out of the
    label; the label lists every learning rate swept, one that never won included; a mixer
    with no row at the judged setting fails the seeds gate (0 seeds), never skipped."""
    settings = ((4, 32), (4, 16))
    rows = (mqar_rows({"self-attention": (0.995, 0.4)} | {m: (0.5, 0.4) for m in RECURRENT_LOW},
                      5, settings=settings)
            + mqar_rows({m: (0.3, 0.3) for m in MQAR_MIXERS}, 5, settings=settings, lr=1e-4))
    evidence = gated(_recall(tmp_path, rows))
    assert evidence.verdict == SUPPORTS and evidence.points.endswith("judged at 4 pairs, d = 32")
    assert evidence.scope.startswith("d = 32 at 4 pairs, ") and "d = 16" not in evidence.scope
    assert "each model at its best learning rate of 0.0001, 0.003" in evidence.scope
    assert "d = 16: attention's best mean accuracy 0.4 (at 4 pairs), below 0.99: not judged" \
        in evidence.measured
    without = [r for r in rows if not (r["mixer_kind"] == "lstm" and r["d_model"] == 32)]
    evidence = gated(_recall(tmp_path, without))
    failed = {g.name: g for g in evidence.gates if not g.passed}
    assert evidence.verdict == rules.INCONCLUSIVE and set(failed) == {"seeds"}
    assert "lstm at 4 pairs, d = 32 0" in failed["seeds"].detail


def test_recall_reads_mqar_cpu_before_the_quick_suite_which_is_too_short_to_judge(tmp_path):
    quick = _recall(tmp_path, mqar_rows(LEARNS | RECURRENT_LOW, 5), suite="rematch-quick")
    assert quick.verdict == SUPPORTS and quick.points.startswith("rematch-quick")
    shown = gated(quick)
    assert shown.verdict == rules.INCONCLUSIVE
    (scale,) = [g for g in shown.gates if not g.passed]
    assert scale.name == "scale" and "tvr run mqar-cpu" in scale.remedy
    assert quick.scope.startswith("rematch-quick, too short to judge: d = 32 at 4 pairs, up "
                                  "to 400 steps")
    write_suite(tmp_path, "mqar-cpu", mqar_rows(LEARNS | RECURRENT_LOW, 5, steps=3000))
    cpu = gated(rules.attention_recalls_more(Stored(tmp_path)))
    assert cpu.verdict == SUPPORTS and cpu.points.startswith("mqar-cpu")
    assert cpu.figure == "mqar-cpu/mqar-state.png"


def test_later_claims_follow_the_papers_and_say_whose_they_are():
    claims = all_claims()
    later = claims[-len(rules.CLAIMS):]
    assert later == rules.CLAIMS
    assert all(c.claim.startswith(rules.LATER) for c in later)
    assert not any(c.claim.startswith(rules.LATER) for c in claims[:-len(rules.CLAIMS)])
    assert {c.suite for c in later} <= set(experiments.suite_names())


def test_suites_declare_what_they_promise():
    quick = experiments.points("rematch-quick")
    timed = [p for p in quick if p.runner == "fwdbwd"]
    assert {p.seq_len for p in timed} >= {512, 4096} and len({p.d_model for p in timed}) == 1
    assert [p.subject for p in timed[:len(THROUGHPUT)]] == [k for k, _ in THROUGHPUT]
    train = [p for p in quick if p.runner == "train"]
    kinds = {dict(p.config)["mixer_kind"] for p in train}
    assert kinds == set(MQAR_MIXERS)
    per_config = pd.Series([(dict(p.config)["mixer_kind"], p.seq_len, p.d_model)
                            for p in train]).value_counts()
    assert per_config.min() >= 3  # seeds
    assert len({p.point_id for p in quick}) == len(quick)
    gpu = experiments.points("rematch-gpu-quick")
    assert all(p.runner == "fwdbwd" for p in gpu) and 512 in {p.seq_len for p in gpu}


@pytest.mark.slow
def test_report_section_figures_and_readme_blocks(tmp_path):
    acc = {"self-attention": (1.0, 0.9, 0.8)} | RECURRENT_LOW
    write_suite(tmp_path, "rematch-quick", fwdbwd_rows() + mqar_rows(acc))
    text = write_report(tmp_path, "rematch-quick").read_text()
    assert "Speed-up of the scans over the sequential loop" in text
    assert "MQAR against state size" in text
    for name in ("scan-throughput", "mqar-state"):
        assert (tmp_path / "rematch-quick" / f"{name}.png").exists(), name
    throughput = render_block("rematch-throughput", tmp_path)
    assert "| min-gru" in throughput and "GPU" in throughput
    assert "mqar-state.png" in render_block("rematch-mqar", tmp_path)
    assert "not measured: run `tvr run rematch-quick`" in render_block("rematch-mqar",
                                                                         tmp_path / "none")


def test_mqar_figure_names_the_learning_rates_each_mixer_was_picked_from(tmp_path):
    """mqar-cpu sweeps two learning rates: each point is its mixer's best at that setting
    (the better lr's accuracy drawn, never a mean over lrs), and the title says so."""
    from harness.report.rematch import mqar_state

    settings = ((8, 32), (2, 32), (8, 16))
    acc = {m: (0.6, 0.9, 0.4) for m in MQAR_MIXERS}
    rows = mqar_rows(acc, settings=settings) + mqar_rows(
        {m: tuple(v - 0.3 for v in a) for m, a in acc.items()}, settings=settings, lr=1e-2)
    write_suite(tmp_path, "mqar-cpu", rows)
    fig = mqar_state(tmp_path, "mqar-cpu")
    assert "each mixer at its best learning rate per setting (of 0.003, 0.01)" in \
        fig.texts[0].get_text()
    drawn = {round(float(y), 3) for ax in fig.axes for line in ax.lines
             for y in line.get_ydata() if line.get_marker() not in (None, "None", "")}
    assert drawn == {0.6, 0.9, 0.4}


@pytest.mark.slow
def test_mqar_suite_has_its_table_at_the_best_lr_and_the_docs_block_reads_it(tmp_path):
    """A suite of MQAR points only (mqar-cpu) gets REPORT.md's MQAR section, its table at
    each mixer's better learning rate (the lr named, 99% reached counted), and the docs
    block shows it rather than rematch-quick's, which it calls too short to judge."""
    settings = ((8, 32), (4, 32))
    acc = {m: (0.6, 0.9) for m in MQAR_MIXERS}
    rows = mqar_rows(acc, settings=settings, seeds=4) + mqar_rows(
        {m: (0.3, 0.5) for m in MQAR_MIXERS}, settings=settings, seeds=4, lr=1e-2)
    for r in rows:
        r["steps_to_target"] = 700 if r["final_accuracy"] >= 0.9 else None
    write_suite(tmp_path, "rematch-quick", mqar_rows({m: (0.8, 0.5, 0.4) for m in MQAR_MIXERS}))
    assert "Too short to judge" in render_block("rematch-mqar", tmp_path)
    write_suite(tmp_path, "mqar-cpu", rows)
    text = write_report(tmp_path, "mqar-cpu").read_text()
    assert "### MQAR against state size" in text and "of 0.003, 0.01 (`lr`)" in text
    table = pd.read_csv(tmp_path / "mqar-cpu" / "mqar.csv")
    assert set(table["lr"]) == {0.003} and set(table["seeds"]) == {4}
    assert set(table.loc[table["pairs"] == 4, "reached_99"]) == {2}  # 2 of 4 seeds >= 0.9
    block = render_block("rematch-mqar", tmp_path)
    assert "results/mqar-cpu/mqar-state.png" in block and "Too short" not in block
