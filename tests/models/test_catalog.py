"""The catalog (models.catalog): a mixer declared once, in one file, is found by every stage
that lists mixers: the registry, the runners' kinds, the Table 1 suite, Table 1, the
crossover, the figures' legends and colours, and the claims ledger."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import matplotlib.colors
import pandas as pd
import pytest
import torch

import experiments
import models
from experiments.spec import Point, config
from harness.report import claim_layers, layer_figures, table1, tables
from harness.report.evidence import Stored
from harness.results import RESULTS_FILE
from harness.run.runner_table import RUNNERS
from harness.runner import Context
from models import catalog, plugins

# One file: a recurrent mixer (a GRU cell stepped through positions) and its catalog entry.
TOY = textwrap.dedent('''
    import torch
    from torch import nn

    import models
    from models.catalog import Mixer, Row


    class ToyRNN(nn.Module):
        """A GRU cell stepped position by position."""

        def __init__(self, d_model: int, causal: bool = True) -> None:
            super().__init__()
            self.cell = nn.GRUCell(d_model, d_model)

        def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, n, d) -> (B, n, d)
            h, out = x.new_zeros(x.shape[0], x.shape[2]), []
            for t in range(x.shape[1]):
                h = self.cell(x[:, t], h)
                out.append(h)
            return torch.stack(out, 1)


    models.register_mixer(Mixer(
        "toy-rnn", "recurrent", ToyRNN, causal={},
        table1=Row("toy recurrent", "O(n d^2)", "O(n)", "O(n)"), table1_config={},
        flop_coef=20, color="#123456"))
''')


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy mixer's file imported as `tvr --plugin FILE` would; forgotten afterwards."""
    monkeypatch.setattr(plugins, "_LOADED", {})
    monkeypatch.setattr(plugins, "_REGISTERED", {})
    monkeypatch.setattr(catalog, "_ADDED", {catalog.Mixer: {}, catalog.Model: {}})
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "toy_mixer_mod.py").write_text(TOY)
    plugins.import_module(str(tmp_path / "toy_mixer_mod.py"))
    return "toy-rnn"


def _as_toy(path: Path, out: Path, suite: str) -> None:
    """`suite`'s committed rows under `out`, its LSTM rows again as the toy mixer's."""
    rows = pd.read_csv(path / suite / RESULTS_FILE, dtype=str, keep_default_na=False)
    lstm = rows[rows["mixer"] == "lstm"].copy()
    lstm["mixer"] = "toy-rnn"
    lstm["point_id"] = lstm["point_id"].str.replace("lstm", "toy-rnn")
    (out / suite).mkdir(parents=True)
    pd.concat([rows, lstm]).to_csv(out / suite / RESULTS_FILE, index=False)


@pytest.mark.slow  # the Table 1 and crossover reports over the committed rows
def test_a_mixer_from_one_file_is_found_by_every_stage(toy, tmp_path):
    # the registry and the runners: built, causal in mixer-lm, its path counted in steps
    assert toy in models.mixer_kinds() and models.declared(toy).kind == "recurrent"
    assert toy in catalog.of_kind("recurrent")
    lm = models.build("mixer-lm", preset="tiny", mixer_kind=toy, pos_encoding="none")
    assert lm(torch.zeros(1, 3, dtype=torch.long)).shape == (1, 3, 64)
    point = Point("t", "path", toy, 4, 4, 1, config=config({}))
    result = RUNNERS["path"](point, Context(torch.device("cpu"), min_run_time=0.01))
    assert result.values == {"path_length": 3, "path_unit": "steps"}
    # the Table 1 suite measures it with its declared config
    assert {p.subject for p in experiments.points("table1")} >= {toy, "lstm"}

    out = tmp_path / "results"
    for suite in ("table1", "quick"):
        _as_toy(Path("results"), out, suite)
    # Table 1: its row, with the paper's claims it declares
    t1 = pd.read_csv(out / "table1" / RESULTS_FILE)
    rows = table1.table1(t1)[0].set_index("layer")
    assert rows.loc["toy recurrent", "complexity"] == "O(n d^2)"
    assert rows.loc["toy recurrent", "max_path_length"] == "O(n)"
    # the crossover: set against attention, with its closed form n* = (20 - 8) d / 4
    quick = pd.read_csv(out / "quick" / RESULTS_FILE)
    cross = tables.crossover_table(quick)
    mine = cross[(cross["versus"] == toy) & (cross["attention"] == "layer")]
    assert len(mine) and (mine["n_star_closed_form"] == 3 * mine["d_model"]).all()
    # the crossover figure: in its legend, in its declared colour
    fig = layer_figures.crossover(quick)
    legend = {t.get_text(): h for leg in fig.legends
              for t, h in zip(leg.get_texts(), leg.legend_handles, strict=True)}
    assert toy in legend
    assert matplotlib.colors.to_hex(legend[toy].get_color()) == "#123456"
    # the ledger: a recurrent layer the crossover claim reads
    evidence = claim_layers.cheaper_below_d(Stored(out))
    assert f"vs {toy} at d=" in evidence.measured
    shutil.rmtree(out)


def test_kinds_and_rows_of_the_builtins():
    assert catalog.of_kind("recurrent") == ("lstm", "gru")
    assert catalog.of_kind("scanned") == ("min-gru", "min-lstm")
    assert list(models.mixer_kinds()) == list(catalog.mixers())
    assert list(models.names()) == list(catalog.models())
    with pytest.raises(ValueError, match="invalid kind 'loop'"):
        catalog.Mixer("x", "loop", "m:f")


@pytest.mark.slow  # Table 2 and its README block over the committed translation rows
def test_a_metric_declared_once_is_a_metric_shown_in_its_tables(tmp_path, monkeypatch):
    from harness.report import readme_translation as readme
    from harness.report import translation
    from harness.schema import is_metric_name

    monkeypatch.setattr(catalog, "_METRICS", dict(catalog._METRICS))
    assert not is_metric_name("test_ter")
    catalog.register_metric(catalog.Metric(
        "test_ter", "TER", catalog.LOWER, "translation edit rate on the test set",
        ("table2", "table2-readme")))
    assert is_metric_name("test_ter") and catalog.shown_in("table2")[-1] == "test_ter"
    suite = readme.TABLE2_SUITES[0]  # the suite the README's Table 2 reads
    rows = pd.read_csv(Path("results") / suite / RESULTS_FILE, dtype=str,
                       keep_default_na=False)
    rows["test_ter"] = [str(60.0 + i) if r == "translate" else ""
                        for i, r in enumerate(rows["runner"])]
    (tmp_path / suite).mkdir()
    rows.to_csv(tmp_path / suite / RESULTS_FILE, index=False)
    table = translation.table2(pd.read_csv(tmp_path / suite / RESULTS_FILE))
    assert "test_ter" in table and table["test_ter"].notna().any()
    block = readme.translation(tmp_path)
    header = next(line for line in block.splitlines() if line.startswith("| model"))
    assert "test_ter" in header
