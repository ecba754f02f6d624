"""No hand-typed numbers: README.md's generated blocks and everything `tvr report` writes
under results/ are exactly what the committed results regenerate."""

import shutil
from pathlib import Path

import pytest

from harness.cli import cli
from harness.cli.docs import doc_blocks, documents, to_root
from harness.errors import BadInput
from harness.report.document import write_report
from harness.report.readme import BLOCKS, MARKER, rewrite

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_generated_blocks_regenerate_byte_identical_from_the_committed_results():
    """README.md and docs/*.md, the CLI reference and the suite list among them."""
    extra = doc_blocks(cli)
    names = []
    for path in documents(ROOT):
        text = path.read_text(encoding="utf-8")
        mine = [m["name"] for m in MARKER.finditer(text)]
        assert len(mine) == len(set(mine)), f"{path.name}: a block twice"
        names += mine
        assert rewrite(text, ROOT / "results", extra, to_root(ROOT, path)) == text, \
            f"{path.relative_to(ROOT)} is stale: run `tvr report` and commit it and results/"
    # every block somewhere (a headline block may also stand in README.md beside its page)
    assert set(names) == set(BLOCKS | extra), "every block is in README.md or docs/"


def test_readme_is_a_guide():
    """At most 150 lines, none over 200 characters, generated blocks included."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, len(lines)
    assert max(map(len, lines)) <= 200, max(lines, key=len)


def test_blocks_in_docs_link_from_their_own_folder(tmp_path):
    (tmp_path / "docs").mkdir()
    doc = tmp_path / "docs" / "page.md"
    doc.write_text("<!-- begin generated: claims -->\n<!-- end generated: claims -->\n")
    assert rewrite(doc.read_text(), tmp_path, {"claims": lambda out: "[r](results/R.md) "
                                               "[a](#x) [u](https://x.org/y)"},
                   to_root(tmp_path, doc)).splitlines()[1] == \
        "[r](../results/R.md) [a](#x) [u](https://x.org/y)"


@pytest.mark.slow
def test_report_regenerates_results_byte_identical(tmp_path, monkeypatch):
    """Regenerated as a fresh clone on another machine would (a machine name no row has):
    the committed files never depend on which machine regenerates them."""
    monkeypatch.setenv("TVR_MACHINE", "a-machine-that-measured-nothing")
    out = tmp_path / "results"
    # not the git-ignored checkpoints, nor a search's study: `tvr tune`, which may be
    # running beside the test, writes them, and `tvr report` does not
    shutil.copytree(ROOT / "results", out, ignore=shutil.ignore_patterns(
        "mlflow.db*", "*.png", "checkpoints", ".*.lock"))
    studies = {p: p.read_bytes() for p in out.rglob("optuna.db")}
    write_report(out)
    assert all(p.read_bytes() == b for p, b in studies.items())
    from harness.cli.report import _search_documents

    assert (out / "translation-cpu-tune" / "search.md") in _search_documents(out, None)
    for path in sorted(out.rglob("*")):
        if path.is_file() and path.suffix != ".png" and path.name != "optuna.db":
            committed = ROOT / "results" / path.relative_to(out)
            assert committed.exists(), f"tvr report writes {path.name}, which is not committed"
            assert path.read_bytes() == committed.read_bytes(), \
                f"results/{path.relative_to(out)} is stale: run `tvr report` and commit it"


def test_blocks_of_missing_results_name_the_suite_to_run(tmp_path):
    text = "<!-- begin generated: table1 -->\nold\n<!-- end generated: table1 -->\n"
    assert "not measured: run `tvr run table1`" in rewrite(text, tmp_path)


def test_an_unknown_block_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="unknown"):
        rewrite("<!-- begin generated: nope -->\n<!-- end generated: nope -->\n", tmp_path)


def test_bench_block_names_the_machine_each_ratio_holds_on(monkeypatch):
    import pandas as pd

    from harness.report import readme

    rows = pd.DataFrame([
        {"variant": v, "ratio": r, "machine": "box-1", "device_name": "Some CPU", "threads": 1,
         "linear_kernel": "F.linear", "peak_mm_flops_per_s": 9e10,
         "peak_onednn_flops_per_s": 6e10}
        for v, r in (("transformer-layer/sdpa", 0.8), ("transformer-layer/sdpa", 1.0),
                     ("lstm/fused", 1.01), ("transformer-layer/math", 2.0))])
    monkeypatch.setattr(readme, "_rows", lambda out, suite: rows)
    text = readme.bench(Path("unused"))
    assert text.startswith("On machine `box-1` (Some CPU, 1 thread): our transformer layer "
                           "(sdpa) at 0.900x PyTorch's time (median over 2 sizes); fused LSTM "
                           "at 1.010x PyTorch's time (median over 1 sizes).")
    assert "Linear maps on F.linear there" in text and "1.5x oneDNN's matmul rate" in text
    old = rows.drop(columns=["linear_kernel", "peak_onednn_flops_per_s"])
    monkeypatch.setattr(readme, "_rows", lambda out, suite: old)
    assert "Linear maps" not in readme.bench(Path("unused"))
    assert "oneDNN" not in readme.bench(Path("unused"))


def test_bench_block_adds_the_run_without_onednn_where_measured(monkeypatch, tmp_path):
    import pandas as pd

    from harness.report import readme

    def rows(out: Path, suite: str) -> pd.DataFrame:
        ratio, kernel = (0.6, "onednn") if suite == "bench" else (0.95, "F.linear")
        return pd.DataFrame([{"variant": "transformer-layer/sdpa", "ratio": ratio,
                              "machine": "box-1", "device_name": "Some CPU", "threads": 1,
                              "linear_kernel": kernel}])

    monkeypatch.setattr(readme, "_rows", rows)
    assert "\n" not in readme.bench(tmp_path)  # only bench/ measured
    (tmp_path / "bench-no-onednn").mkdir()
    (tmp_path / "bench-no-onednn" / "results.csv").write_text("")
    first, second = readme.bench(tmp_path).split("\n\n")
    assert "at 0.600x" in first and "on onednn" in first
    assert second.startswith("With oneDNN removed from the candidates (`tvr bench "
                             "--no-onednn`, as on a machine whose fastest matmul is "
                             "torch.mm), on machine `box-1`")
    assert "at 0.950x" in second and "on F.linear there (the only candidate left)" in second


@pytest.mark.parametrize(("suite", "command"), [
    ("bench", "tvr run bench"), ("bench-no-onednn", "tvr bench --no-onednn"),
    ("translation-anchor", ".venv/bin/python scripts/anchor"),
    ("translation-cpu-tune", "tvr tune translation-cpu-tune")])
def test_a_sections_machine_line_names_the_command_that_measures_it(suite, command):
    import pandas as pd

    from harness.report.document import _machine

    rows = pd.DataFrame([{"suite": suite, "machine": "box-1", "device": "cpu"}])
    assert f"`{command}` measures the machine at hand" in _machine(rows, rows)


TUNED, CPU, QUICK = "translation-cpu-tuned", "translation-cpu", "translation-quick"


@pytest.mark.parametrize("suites, chosen", [
    # the reference complete beside a comparable demo: the reference
    ({TUNED: {"transformer": 3, "gru-attention": 3}, QUICK: {"transformer": 1, "lstm": 1}},
     TUNED),
    # a diverged seed is a finished seed (never rerun): the reference is complete
    ({TUNED: {"transformer": 3, "gru-attention": (2, 1, 0)}, CPU: {"transformer": 3, "lstm": 3}},
     TUNED),
    # one model's seeds on a GPU, the other's on the CPU: the last device only, so not complete
    ({TUNED: {"transformer": 3, "gru-attention": (0, 0, 3)}, CPU: {"transformer": 3, "lstm": 3}},
     CPU),
    # nothing complete: the last comparable suite, not a demo cut short to one model
    ({CPU: {"transformer": 2, "lstm": 2}, QUICK: {"lstm": 1}}, CPU),
    # nothing comparable: the last with trained runs
    ({CPU: {"lstm": 3}, QUICK: {"lstm": 1}}, QUICK),
])
def test_the_readme_and_the_ledger_read_the_same_table2_suite(tmp_path, suites, chosen):
    """One rule picks Table 2's suite for the README's block and for the ledger's verdict
    (harness.report.translation.table2_choice); counts are (ok, diverged, ok on cuda)."""
    import pandas as pd

    from harness.report import claim_translation
    from harness.report.evidence import Stored
    from harness.report.readme_translation import table2_suite

    for suite, models in suites.items():
        rows = []
        for m, n in models.items():
            ok, diverged, gpu = (n, 0, 0) if isinstance(n, int) else n
            kinds = [("ok", "cpu")] * ok + [("diverged", "cpu")] * diverged + [("ok", "cuda")] * gpu
            rows += [{"suite": suite, "point_id": f"{suite}-{m}-s{s}", "status": status,
                      "device": device, "runner": "translate", "model": m, "seed": s,
                      "study": "table2", "measured_at": f"2026-12-01T00:{s:02d}:00+00:00"}
                     for s, (status, device) in enumerate(kinds)]
        (tmp_path / suite).mkdir()
        pd.DataFrame(rows).to_csv(tmp_path / suite / "results.csv", index=False)
    stored = Stored(tmp_path)
    assert table2_suite(tmp_path) == chosen
    assert claim_translation._suite(stored) == chosen
    assert stored.read == []  # choosing reads nothing into a claim's points


def test_table2_block_moves_to_a_better_suite_once_its_models_have_3_seeds(tmp_path):
    """The README's Table 2 stays on the suite measured so far (translation-cpu) while its
    successor lacks the Transformer, another model, or a seed of either, and moves once the
    successor's models have 3 seeds each, though it trains fewer models (the tuned suite
    leaves out the plain LSTM, which its search found does not translate)."""
    import pandas as pd

    from harness.report.readme_translation import table2_suite

    def write(suite: str, models: dict[str, int]) -> None:
        rows = [{"suite": suite, "point_id": f"{suite}-{m}-s{s}", "status": "ok",
                 "runner": "translate", "model": m, "seed": s, "study": "table2"}
                for m, n in models.items() for s in range(n)]
        (tmp_path / suite).mkdir(exist_ok=True)
        pd.DataFrame(rows).to_csv(tmp_path / suite / "results.csv", index=False)

    with pytest.raises(BadInput, match="translation-quick"):
        table2_suite(tmp_path)
    write("translation-quick", {"transformer": 1, "lstm": 1})
    assert table2_suite(tmp_path) == "translation-quick"
    write("translation-cpu", {"transformer": 3, "lstm": 3, "gru-attention": 3})
    assert table2_suite(tmp_path) == "translation-cpu"
    write("translation-cpu-tuned", {"gru-attention": 3})
    assert table2_suite(tmp_path) == "translation-cpu"
    write("translation-cpu-tuned", {"transformer": 3})
    assert table2_suite(tmp_path) == "translation-cpu"
    write("translation-cpu-tuned", {"transformer": 3, "gru-attention": 2})
    assert table2_suite(tmp_path) == "translation-cpu"
    write("translation-cpu-tuned", {"transformer": 3, "gru-attention": 3})
    assert table2_suite(tmp_path) == "translation-cpu-tuned"


@pytest.mark.slow
def test_report_of_rows_lacking_a_measured_column_names_it_and_draws_the_rest(tmp_path):
    """A results file without a column a table or figure needs (an older or hand-edited
    file): the report still writes, says which column is missing, and draws the others."""
    import pandas as pd
    from click.testing import CliRunner

    rows = pd.read_csv(Path(__file__).resolve().parents[3] / "results/rematch-quick/results.csv")
    (tmp_path / "rematch-quick").mkdir()
    rows.drop(columns=["final_accuracy"]).to_csv(tmp_path / "rematch-quick" / "results.csv",
                                                 index=False)
    r = CliRunner().invoke(cli, ["report", "--out", str(tmp_path), "--suite", "rematch-quick"])
    assert r.exit_code == 0 and r.exception is None, r.output
    text = (tmp_path / "REPORT.md").read_text()
    assert "have no 'final_accuracy' column" in text
    assert "figure mqar-state: the rematch-quick results have no 'final_accuracy' column" \
        in text
    assert (tmp_path / "rematch-quick" / "scan-throughput.png").is_file()


def test_only_a_key_error_on_a_column_the_rows_lack_becomes_a_line():
    """pandas' forms of a missing column read as one line naming it; a KeyError on a column
    the rows have, or on anything else, is a bug and raised again."""
    import pandas as pd

    from harness.report.figures import lacking

    cols = pd.Index(["a", "b"])
    for exc in (KeyError("x"), KeyError("Column not found: x"),
                KeyError("['x'] not in index")):
        assert lacking("s", exc, cols) == "the s results have no 'x' column"
    assert "'x', 'y'" in lacking("s", KeyError("['x', 'y'] not in index"), cols)
    for exc in (KeyError("a"), KeyError(("a", 1)), KeyError(3)):
        with pytest.raises(KeyError):
            lacking("s", exc, cols)


def test_table2_header_counts_the_points_of_an_earlier_recipe(tmp_path):
    """A suite trained again with a better recipe keeps the old rows (until they are
    archived: here the committed suite with its archived rows put back), which Table 2
    leaves out: the line above the table says how many of its points (and their wall time)
    are those, so the count matches the rows shown."""
    from harness.report import readme_translation as readme
    from harness.report.superseded import restore
    from harness.report.translation import finished, last_recipe
    from harness.results import load_results

    suite = "translation-cpu-tuned"
    if not (ROOT / "results" / suite / "results.csv").exists():
        pytest.skip(f"no {suite} results")
    results = tmp_path / "results"  # the suite alone: Table 2's
    shutil.copytree(ROOT / "results" / suite, results / suite,
                    ignore=shutil.ignore_patterns("variants", "*.png"))
    restore(results, suite)
    rows = finished(load_results(results, [suite]), "table2")
    rows = rows[rows["runner"] == "translate"]
    earlier = len(rows) - len(last_recipe(rows))
    if readme.table2_suite(results) != suite or not earlier:
        pytest.skip(f"Table 2 reads another suite, or {suite} has no earlier recipe's rows")
    assert f", {earlier} of them of an earlier recipe and not in the table; " in \
        readme.translation(results).splitlines()[0]
