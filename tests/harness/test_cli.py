"""End to end through the `tvr` command: run smoke, then table, plot, report from it."""

import re
import time

import pytest
from click.testing import CliRunner
from mlflow import MlflowClient

import experiments
from harness.cli import cli
from harness.results import read_results, results_path
from harness.run.runner_table import RUNNERS

FAST = ["--min-run-time", "0.01"]


def tvr(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture(scope="module")
def smoke_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    result = tvr("run", "smoke", "--out", str(out), "--device", "cpu", *FAST)
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.slow
def test_run_smoke_writes_one_ok_row_per_point(smoke_out):
    df = read_results(results_path(smoke_out, "smoke"))
    assert len(df) == len(experiments.points("smoke"))
    assert (df["status"] == "ok").all()
    for col in ("suite", "point_id", "model", "mixer", "seq_len", "d_model", "batch_size",
                "device", "dtype", "seed", "status", "flops_fwd", "fwd_ms", "saved_bytes",
                "torch_version", "host"):
        assert col in df.columns, col
    # the whole suite's plan beside its rows: what the ledger waits for
    from harness.plan import read_plan

    plan = read_plan(smoke_out / "smoke")
    assert [e["point_id"] for e in plan] == [p.point_id for p in experiments.points("smoke")]


@pytest.mark.slow
def test_run_logs_parent_and_nested_runs_to_mlflow(smoke_out):
    client = MlflowClient(f"sqlite:///{smoke_out}/mlflow.db")
    exp = client.get_experiment_by_name("smoke")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert len(parents) == 1 and len(children) == len(experiments.points("smoke"))
    child = children[0]
    assert child.data.tags["status"] == "ok"
    assert child.data.metrics["flops_fwd"] > 0 and "seq_len" in child.data.params
    assert re.fullmatch(r"\S+ seq_len=\d+ d_model=\d+", child.info.run_name), child.info.run_name
    artifacts = {a.path for a in client.list_artifacts(parents[0].info.run_id)}
    assert {"results.csv", "environment.txt", "crossover.png", "complexity.md"} <= artifacts
    assert parents[0].data.metrics["points_ok"] == len(experiments.points("smoke"))
    assert "PyTorch version" in (smoke_out / "mlartifacts").joinpath(
        "smoke", parents[0].info.run_id, "artifacts", "environment.txt").read_text()


@pytest.mark.slow
def test_table_json(smoke_out):
    import json

    result = tvr("table", "--out", str(smoke_out), "--suite", "smoke", "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["suite"] == "smoke" and doc["machine"]
    assert {r["layer"] for r in doc["rows"]} >= {"self-attention", "lstm"}


@pytest.mark.slow
def test_table_formats(smoke_out):
    md = tvr("table", "--out", str(smoke_out), "--suite", "smoke")
    assert md.exit_code == 0, md.output
    assert "| self-attention" in md.output and "O(n^2 d)" in md.output
    csv = tvr("table", "--out", str(smoke_out), "--suite", "smoke", "--format", "csv")
    assert csv.output.splitlines()[0].startswith("layer,complexity,flops_n_exp")
    tex = tvr("table", "--out", str(smoke_out), "--suite", "smoke", "--format", "latex")
    assert "\\begin{tabular}" in tex.output
    cross = tvr("table", "--out", str(smoke_out), "--suite", "smoke", "--crossover")
    assert cross.exit_code == 0 and "n_star_flops" in cross.output


@pytest.mark.slow
def test_plot_and_report_write_pngs(smoke_out):
    result = tvr("plot", "all", "--out", str(smoke_out), "--suite", "smoke")
    assert result.exit_code == 0, result.output
    for name in ("crossover", "throughput"):
        png = smoke_out / "smoke" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = tvr("report", "--out", str(smoke_out), "--suite", "smoke")
    assert report.exit_code == 0, report.output
    assert "crossover.png" in (smoke_out / "REPORT.md").read_text()


def test_suites_lists_point_counts():
    result = tvr("suites")
    assert result.exit_code == 0
    for name in experiments.suite_names():
        count = len(experiments.points(name))
        assert re.search(rf"^{name}\s+{count} points", result.output, re.M), name


def test_only_filters_points_by_mixer(tmp_path):
    result = tvr("run", "smoke", "--only", "lstm", "--dry-run", "--out", str(tmp_path))
    assert result.exit_code == 0
    ids = result.output.splitlines()[:-1]
    assert ids and all("-lstm-" in i for i in ids)


def test_dry_run_measures_nothing(tmp_path):
    result = tvr("run", "quick", "--out", str(tmp_path), "--dry-run")
    assert result.exit_code == 0 and "dry run" in result.output
    assert not results_path(tmp_path, "quick").exists()


@pytest.mark.slow
def test_resume_after_kill_measures_no_point_twice(tmp_path, monkeypatch):
    measured: list[str] = []
    real = RUNNERS["layer"]

    def counting(point, ctx):
        if len(measured) == 2:
            raise KeyboardInterrupt  # the user kills the run during the third point
        measured.append(point.point_id)
        return real(point, ctx)

    monkeypatch.setitem(RUNNERS, "layer", counting)
    args = ("run", "smoke", "--out", str(tmp_path), "--tracking-uri", "none", *FAST)
    assert tvr(*args).exit_code != 0
    assert len(read_results(results_path(tmp_path, "smoke"))) == 2

    def after(point, ctx):
        measured.append(point.point_id)
        return real(point, ctx)

    monkeypatch.setitem(RUNNERS, "layer", after)
    result = tvr(*args)
    assert result.exit_code == 0 and "2 already done on this machine, skipped" in result.output
    assert sorted(measured) == sorted(p.point_id for p in experiments.points("smoke"))
    assert len(read_results(results_path(tmp_path, "smoke"))) == len(measured)


@pytest.mark.slow
def test_failed_point_is_an_error_row_not_a_crash(tmp_path, monkeypatch):
    real = RUNNERS["layer"]

    def flaky(point, ctx):
        if point.subject == "gru":
            raise RuntimeError("forced failure")
        return real(point, ctx)

    monkeypatch.setitem(RUNNERS, "layer", flaky)
    result = tvr("run", "smoke", "--out", str(tmp_path), "--tracking-uri", "none", *FAST)
    assert result.exit_code == 0, result.output
    df = read_results(results_path(tmp_path, "smoke"))
    errors = df[df["status"] == "error"]
    assert set(errors["mixer"]) == {"gru"} and (df["status"] == "ok").sum() == len(df) - 2
    assert errors["message"].str.contains("RuntimeError: forced failure").all()
    log = (tmp_path / "smoke" / "errors.log").read_text()
    assert log.count("Traceback") == 2 and "in flaky" in log


def test_max_memory_skips_with_the_prediction(tmp_path):
    result = tvr("run", "smoke", "--out", str(tmp_path), "--tracking-uri", "none",
                 "--max-memory", "1KB", *FAST)
    assert result.exit_code == 0, result.output
    df = read_results(results_path(tmp_path, "smoke"))
    assert (df["status"] == "skipped").all()
    assert (df["predicted_bytes"] > 1000).all()
    assert df["message"].str.contains("--max-memory 1,000").all()


@pytest.mark.parametrize("args,needle", [
    (["run", "nosuch"], "nosuch"),
    (["run", "smoke", "--device", "tpu"], "tpu"),
    (["run", "smoke", "--max-memory", "-5"], "-5"),
    (["run", "smoke", "--max-memory", "lots"], "lots"),
    (["run", "smoke", "--min-run-time", "abc"], "abc"),
    (["run", "smoke", "--tracking-uri", "http://127.0.0.1:abc"], "malformed"),
    (["run", "smoke", "--tracking-uri", "sqlite://"], "in-memory store"),
    (["run", "smoke", "--tracking-uri", "ftp://x"], "ftp://x"),
    (["plot", "nosuch"], "nosuch"),
    (["run", "smoke", "--only", "mamba"], "mamba"),
    (["ui", "--port", "0"], "0"),
])
def test_bad_input_exits_2_with_one_clear_line(tmp_path, args, needle):
    result = tvr(*args, "--out", str(tmp_path)) if args[0] != "ui" else tvr(*args)
    assert result.exit_code == 2, result.output
    assert needle in result.output and "Traceback" not in result.output


def test_cuda_without_cuda_is_bad_input(tmp_path, monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    result = tvr("run", "smoke", "--device", "cuda", "--out", str(tmp_path))
    assert result.exit_code == 2 and "no CUDA device" in result.output


def test_unwritable_out_dir_is_bad_input(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = tvr("run", "smoke", "--out", str(blocker / "sub"), "--tracking-uri", "none")
    assert result.exit_code == 2 and "cannot write" in result.output


def test_table_without_results_says_what_to_run(tmp_path):
    result = tvr("table", "--out", str(tmp_path), "--suite", "quick")
    assert result.exit_code == 2
    assert "tvr run quick" in result.output and "Traceback" not in result.output


@pytest.mark.slow
def test_corpus_option_trains_on_a_local_text_file(tmp_path):
    text = tmp_path / "tiny.txt"
    text.write_text("the quick brown fox jumps over the lazy dog.\n" * 200, encoding="utf-8")
    result = tvr("run", "convergence-smoke", "--only", "gru-lm", "--corpus", str(text),
                 "--out", str(tmp_path / "out"), "--tracking-uri", "none")
    assert result.exit_code == 0, result.output
    df = read_results(results_path(tmp_path / "out", "convergence-smoke/variants/corpus-tiny"))
    corpus = df[df["task"] == "corpus"]
    assert len(corpus) and (corpus["status"] == "ok").all()
    assert (corpus["path"] == str(text.resolve())).all()
    assert (corpus["n_params"] > 0).all()


def test_missing_or_binary_corpus_file_is_bad_input(tmp_path):
    result = tvr("run", "convergence-smoke", "--corpus", str(tmp_path / "nope.txt"))
    assert result.exit_code == 2 and "nope.txt" in result.output
    binary = tmp_path / "data.bin"
    binary.write_bytes(b"\xff\xfe\x00abc")
    result = tvr("run", "convergence-smoke", "--corpus", str(binary), "--out", str(tmp_path))
    assert result.exit_code == 2 and "not UTF-8" in result.output


@pytest.mark.slow
def test_plot_all_skips_a_figure_the_data_cannot_support(tmp_path):
    out = str(tmp_path)
    assert tvr("run", "smoke", "--only", "lstm", "--out", out, "--tracking-uri", "none",
               *FAST).exit_code == 0
    result = tvr("plot", "all", "--out", out, "--suite", "smoke")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "smoke" / "throughput.png").exists()
    assert not (tmp_path / "smoke" / "crossover.png").exists()
    assert "skipped crossover" in result.output


def test_sync_to_an_unreachable_tracking_server_is_bad_input(tmp_path):
    (tmp_path / "smoke").mkdir()
    (tmp_path / "smoke" / "results.csv").write_text("suite,point_id,status\nsmoke,p,ok\n")
    result = tvr("sync", "smoke", "--out", str(tmp_path), "--tracking-uri",
                 "http://alice:s3cret@127.0.0.1:9")
    assert result.exit_code == 2 and "unreachable" in result.output
    assert "s3cret" not in result.output and len(result.output.strip().splitlines()) == 1


def test_unreachable_tracking_server_is_bad_input_before_any_point(tmp_path):
    """A tracking server asked for that does not answer: exit 2, one line, within seconds,
    nothing measured (a server that goes away mid-run is tests/harness/run/test_server.py's)."""
    started = time.perf_counter()
    result = tvr("run", "smoke", "--only", "lstm", "--out", str(tmp_path), "--tracking-uri",
                 "http://alice:s3cret@127.0.0.1:9", *FAST[:2])
    assert time.perf_counter() - started < 10
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and "unreachable" in result.output
    assert "s3cret" not in result.output and "Traceback" not in result.output
    assert not results_path(tmp_path, "smoke").exists()
