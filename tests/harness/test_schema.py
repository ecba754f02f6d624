"""A results row's four parts (harness.schema): identity | params | machine facts | metrics,
the same whether a point was just measured or its row is read back from a file."""

import math
from pathlib import Path

import pytest
import torch

import experiments
from harness.measure.machine import machine_facts
from harness.results import read_results, results_path
from harness.schema import FACTS, POINT_FIELDS, Parts, is_metric_name, listed_params
from harness.track.values import declared_params, split_row


def test_point_fields_and_machine_facts_are_the_declared_ones():
    point = experiments.points("smoke")[0]
    assert tuple(point.fields()) == POINT_FIELDS
    assert set(machine_facts(torch.device("cpu"))) <= set(FACTS)


@pytest.mark.parametrize("suite", ["smoke", "convergence-smoke", "translation-tiny", "table1"])
def test_a_config_key_lists_exactly_its_params(suite):
    for point in experiments.points(suite):
        assert listed_params(point.config_key) == set(point.columns()), point.config_key


def test_a_live_point_and_its_stored_row_give_the_same_mlflow_layout():
    point = next(p for p in experiments.points("identities") if dict(p.config))
    values = {"fwd_ms": 1.5, "linear_kernel": "torch", "busy": False}
    facts = {"cpu": "Some CPU", "threads": 2, "machine": "m1", "git_commit": "abc"}
    live = Parts.of_point(point.fields(), point.columns(), values, facts)
    row = {**point.fields(), "point_id": point.point_id, "device": "cpu", "status": "ok",
           **point.columns(), **values, **facts, "measured_at": "2026-01-01T00:00:00+00:00",
           "message": ""}
    params, metrics, tags = split_row(row)
    assert params == {k: str(v) for k, v in live.mlflow_params().items() if v != ""}
    assert metrics == live.metrics == {"fwd_ms": 1.5}
    assert tags["cpu"] == "Some CPU" and tags["mlflow.source.git.commit"] == "abc"
    assert not set(params) & set(FACTS) and "device" not in params


def test_committed_rows_split_into_their_parts():
    rows = read_results(results_path("results", "quick"))
    row = rows[rows["status"] == "ok"].iloc[0].to_dict()
    parts = Parts.of_row(row, declared_params())
    assert parts.identity["point_id"] == row["point_id"] and "seq_len" in parts.identity
    assert "cpu" in parts.facts and "cpu" not in parts.params
    assert all(isinstance(v, (int, float)) and math.isfinite(v)
               for v in parts.metrics.values())
    assert "fwd_ms" in parts.metrics
    assert listed_params(row["point_id"]) <= set(parts.params) | set(parts.identity)


def test_metrics_by_name_are_numbers_in_every_committed_row():
    """A column the catalog declares a metric (fwd_ms, train_s, saved_bytes, dev_bleu,
    flops_fwd, test_repeat_rate) holds a number in every committed row; the timing lists and
    signatures that look like one (linear_kernel_ms 'onednn:39.4;F.linear:73.4',
    ours_reps_ms, bleu_signature) and the point's fields and config are not metrics."""
    import pandas as pd

    named = set()
    for path in sorted(Path("results").glob("**/results.csv")):
        rows = pd.read_csv(path, dtype=str, keep_default_na=False)
        for column in filter(is_metric_name, rows.columns):
            cells = rows[column][rows[column] != ""]
            numbers = pd.to_numeric(cells, errors="coerce").notna() | (cells == "nan")
            assert numbers.all(), (path, column)  # "nan": a float a runner returned
            named.add(column)
    assert {"fwd_ms", "train_s", "saved_bytes", "dev_bleu", "flops_fwd", "mfu",
            "test_repeat_rate", "seq_ops"} <= named
    for column in ("linear_kernel_ms", "ours_reps_ms", "bleu_signature", "d_model", "lr",
                   "steps", "seq_len", "meets_target", "dev_hypotheses"):
        assert not is_metric_name(column), column
