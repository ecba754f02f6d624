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
from harness.report.evidence import Stored
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


def mqar_rows(acc: dict[str, tuple[float, ...]], seeds: int = 3) -> list[dict]:
    """acc[mixer] = mean accuracy per pairs count (2, 4, 8) at d = 32; seeds spread it by
    +-0.01 so that a difference is the same sign on every seed."""
    return [{"runner": "train", "study": "mqar-state", "model": "mixer-lm", "mixer_kind": m,
             "seq_len": p, "d_model": 32, "seed": s, "alphabet_size": 64,
             "final_accuracy": a + 0.01 * (s - 1), "wall_s": 1.0, "steps": 400}
            for m, accs in acc.items() for p, a in zip((2, 4, 8), accs, strict=True)
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


@pytest.mark.parametrize("acc, seeds, verdict", [
    ({"self-attention": (1.0, 0.9, 0.8)} | RECURRENT_LOW, 3, SUPPORTS),
    ({"self-attention": (1.0, 0.9, 0.8)} | RECURRENT_LOW, 2, rules.INCONCLUSIVE),
    ({"self-attention": (0.8, 0.5, 0.3)} | RECURRENT_LOW, 3, rules.INCONCLUSIVE),  # unlearned
    ({"self-attention": (0.995, 0.3, 0.05)} | RECURRENT_LOW | {"gru": (1.0, 0.8, 0.5)}, 3,
     CONTRADICTS),
    ({"self-attention": (1.0, 0.9, 0.8)} | RECURRENT_LOW | {"gru": (1.0, 0.9, 0.8)}, 3,
     QUALIFIED),  # a tie on every seed: no separation
])
def test_attention_recalls_more(tmp_path, acc, seeds, verdict):
    write_suite(tmp_path, "rematch-quick", mqar_rows(acc, seeds))
    assert rules.attention_recalls_more(Stored(tmp_path)).verdict == verdict


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
