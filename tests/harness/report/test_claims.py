"""The ledger as a whole (`tvr claims`) and the statistics it is built on."""

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.report.claims import all_claims, counts, ledger, render
from harness.report.evidence import SCALE_FIELDS
from harness.report.stats import censored, loglog_fit, paired, spread, t_interval
from harness.report.verdicts import CONTRADICTS, DECISIVE, NOT_MEASURED, VERDICTS
from tests.harness.report.claim_frames import table1_rows, write_suite

COMMITTED = Path(__file__).resolve().parents[3] / "results"


@pytest.fixture(scope="module")
def committed():
    return ledger(COMMITTED)


@pytest.mark.slow
def test_committed_results_give_every_claim_a_verdict(committed):
    table = committed
    assert len(table) == len(all_claims())
    # a claim whose suite has no rows yet says which command measures it
    verdict = table["verdict"].str.replace(r"^not measured: run `tvr run [^`]+`$",
                                           NOT_MEASURED, regex=True)
    assert verdict.isin(VERDICTS).all(), table[~verdict.isin(VERDICTS)]
    judged = ~table["verdict"].str.startswith(NOT_MEASURED)
    assert (table["rule"] != "").all() and (table.loc[judged, "scale"] != "").all()


@pytest.mark.slow
def test_no_decisive_verdict_stands_on_a_failed_gate(committed):
    for row in committed.itertuples():
        if row.verdict in DECISIVE:
            assert all(g["passed"] for g in row.gates), (row.claim, row.gates)
        if row.verdict == CONTRADICTS and row.gates:
            assert int(row.seeds) >= 3, row.claim  # never on one seed


@pytest.mark.slow
def test_committed_table2_is_decided_by_its_rule_with_every_gate_passed(committed):
    """The tuned reference: every model above its baselines over 3+ seeds, so the verdict
    is the rule's, not stopped by a gate (the earlier Transformer, below retrieval, was)."""
    row = committed[committed["key"] == "table2-matched-budget"].iloc[0]
    if not row["points"].startswith("translation-cpu-tuned"):
        pytest.skip("Table 2 reads another suite than the tuned reference")
    assert row["verdict"] in DECISIVE and int(row["seeds"]) >= 3
    assert all(g["passed"] for g in row["gates"]), row["gates"]
    baselines = " ".join(g["detail"] for g in row["gates"] if g["name"] == "baselines")
    assert "over retrieval" in baselines and "not above" not in baselines


@pytest.mark.slow
def test_json_rows_carry_gates_tests_and_scale(committed):
    rows = json.loads(render(committed, "json"))
    table2 = next(r for r in rows if r["key"] == "table2-matched-budget")
    assert set(SCALE_FIELDS) <= set(table2) and table2["seeds"] >= 1
    # the suite judged: a CPU reference's whole test set, or the demo's 100 verses
    whole = {int(pd.read_csv(f)["test_sentences"].dropna().max())
             for f in COMMITTED.glob("translation-cpu*/results.csv")
             if "test_sentences" in pd.read_csv(f, nrows=0)}
    assert table2["eval_size"] in {100, *whole} and table2["device"].startswith("cpu")
    assert {"name", "passed", "detail", "remedy"} <= set(table2["gates"][0])
    assert any("approximate randomization" in t["name"] for t in table2["tests"])
    csv = render(committed, "csv")
    assert "gates" in csv.splitlines()[0] and "FAIL" in csv


@pytest.mark.slow
def test_markdown_names_the_failed_gates_and_the_rules_own_verdict(committed):
    text = render(committed, "markdown")
    assert 'The rule alone would say "' in text
    assert re.search(r"failed gates: (\w[\w ]*, )*baselines", text)  # named in any place
    for line in text.splitlines():
        if "failed gates: " in line:  # each gate named once (baselines: on BLEU and on chrF)
            names = line.split("failed gates: ")[1].rstrip(".").split(", ")
            assert len(names) == len(set(names)), line
    assert "(identity): supports." in text
    assert "- gates: " in text and "- tests: " in text


@pytest.mark.slow
def test_identity_checks_are_counted_apart(committed):
    text = counts(committed)
    assert "identity checks" in text.split(";")[-1]
    empirical = text.split(";")[0]
    n = int(empirical.split()[0])
    assert n == (committed["kind"] == "empirical").sum()


@pytest.mark.parametrize("fmt", ["text", "markdown", "csv", "json"])
def test_tvr_claims_on_an_empty_folder_names_what_to_run(tmp_path, fmt):
    result = CliRunner().invoke(cli, ["claims", "--out", str(tmp_path), "--format", fmt])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    said = " ".join(result.output.split()) if fmt == "text" else result.output  # wrapped
    assert f"not measured: run `tvr run table1 --out {tmp_path}`" in said
    assert "convergence-quick" in result.output


@pytest.mark.slow
def test_tvr_claims_by_default_fits_a_terminal_and_names_failed_gates(committed):
    """The default text: every claim numbered, its labelled verdict, the gates it failed,
    no line over 100 characters (the Markdown table's lines ran past 400)."""
    text = render(committed, "text")
    assert max(map(len, text.splitlines())) <= 100
    assert sum(bool(re.match(r"\d+\. ", line)) for line in text.splitlines()) == len(committed)
    failed = [r for r in committed.itertuples() if any(not g["passed"] for g in r.gates)]
    assert text.count("failed gates: ") == len(failed)


def test_partial_results_name_what_is_missing_per_row(tmp_path):
    write_suite(tmp_path, "table1", table1_rows())
    rows = json.loads(render(ledger(tmp_path), "json"))
    by_claim = {r["claim"]: r["verdict"] for r in rows}
    assert by_claim["Maximum path length: O(1) for self-attention, O(n) for recurrence"] == \
        "supports"
    assert by_claim["Pre-LN trains stably without warm-up"].startswith(
        "not measured: run `tvr run convergence-quick")


def test_partial_study_names_the_missing_rows(tmp_path):
    write_suite(tmp_path, "convergence-quick",
                [{"runner": "train", "study": "heads", "seq_len": 8, "d_model": 64}])
    table = ledger(tmp_path)
    row = table[table["claim"].str.startswith("Pre-LN")].iloc[0]
    assert "norm-warmup" in row["measured"]


# ---------------------------------------------------------------- statistics


def test_loglog_fit_gives_a_standard_error_and_needs_four_points():
    n = np.array([256, 512, 1024, 2048])
    rng = np.random.default_rng(0)
    fit = loglog_fit(n, n**2 * np.exp(rng.normal(0, 0.05, 4)))
    assert fit.slope == pytest.approx(2, abs=0.1) and 0 < fit.stderr < 0.1
    assert fit.points == 4
    assert loglog_fit(n[:3], n[:3] ** 2) is None


def test_intervals_only_over_five_seeds():
    assert spread([1.0, 2.0]) == "1, 2 (2 seeds)"
    text = spread([1.0, 2.0, 3.0, 4.0, 5.0])
    assert "95% t-interval over 5 seeds" in text and text.startswith("3 ± 1.96")


def test_censored_runs_are_never_a_value():
    assert censored(pd.Series([300.0, np.nan]), pd.Series([600, 600])) == ["300", "> 600"]


def test_paired_differences_say_when_they_are_inside_the_noise():
    a = pd.DataFrame({"seed": [0, 1, 2], "v": [1.0, 2.0, 3.0]})
    same_sign = paired(a, a.assign(v=a["v"] + [0.1, 0.2, 0.3]), "v")
    assert not same_sign.inside_noise and "same sign on all 3 seeds" in same_sign.text()
    mixed = paired(a, a.assign(v=a["v"] + [0.1, -0.2, 0.3]), "v")
    assert mixed.inside_noise and "inside the noise" in mixed.text()
    one = paired(a.head(1), a.head(1).assign(v=5.0), "v")
    assert one.inside_noise and "one seed" in one.text()
    five = pd.DataFrame({"seed": range(5), "v": [1.0, 2, 3, 4, 5]})
    tested = paired(five, five.assign(v=five["v"] + [1.0, 1.1, 0.9, 1.05, 0.95]), "v")
    assert tested.p_value is not None and tested.p_value < 0.05 and not tested.inside_noise


def test_figure_bands_are_named_for_what_they_are():
    from harness.report.curves import band, caption

    few = pd.DataFrame({"seed": [0, 1, 0, 1], "model": ["a", "a", "b", "b"],
                        "n_params": [1e5] * 4, "steps": [400] * 4, "device": ["cpu"] * 4,
                        "device_name": ["X"] * 4})
    assert band(few) == ("pi", 100)
    assert caption(few).startswith("2 seeds per configuration; band: min to max of the seeds")
    assert "100k parameters, up to 400 steps, cpu (X)" in caption(few)
    # configurations with fewer seeds than others: the range, never the largest count
    mqar = pd.DataFrame({"seed": [0, 1, 0, 0], "model": ["mixer-lm"] * 4, "pairs": [8] * 4,
                         "mixer_kind": ["gru", "gru", "lstm", "lstm"], "d_model": [32, 32, 32, 16],
                         "device": ["cpu"] * 4, "device_name": ["X"] * 4})
    assert caption(mqar).startswith("1-2 seeds per configuration")
    assert caption(mqar[mqar["seed"] == 0]).startswith("1 seed per configuration")
    from harness.report.evidence import scale_facts
    from harness.report.rulebook import scope_of

    assert scale_facts(mqar)["seeds"] == "1..2" and scale_facts(few)["seeds"] == 2
    assert scope_of(scale_facts(mqar)) == "1-2 seeds, CPU (X)"
    assert scope_of({"seeds": 1}) == "1 seed" and scope_of({"seeds": 5}) == "5 seeds"
    many = pd.concat([few.assign(seed=few["seed"] + k) for k in range(0, 6, 2)])
    assert band(many) is t_interval and "95% t-interval" in caption(many)
    lo, hi = t_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    assert spread([1.0, 2.0, 3.0, 4.0, 5.0]).startswith(f"3 ± {hi - 3:.3g}")
