"""The ways a figure misled that review found, each checked on the matplotlib Figure (never
its pixels): first that each check of figure_faults flags the fault on a small figure made to
have it and passes the same figure without it; then, on made-up and committed rows, the
figures review named: a colour whose meaning changed between the panels of qk-variance, a
path length in ops on an axis of layers and time steps, MQAR points averaged over the pairs
and widths the study sweeps, throughput points joined across steps their spread does not
resolve, a log axis whose label does not say so. test_figures_render.py runs the generic
checks on every figure of the committed results as well."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_hex
from matplotlib.container import ErrorbarContainer
from matplotlib.lines import Line2D

from harness.report import ablations, rematch
from harness.report import layer_figures as plots
from harness.report.labels import declare_unit, unit_of
from harness.report.rematch import floor
from harness.results import RESULTS_FILE, load_results
from tests.harness.report.claim_frames import write_suite
from tests.harness.report.figure_faults import (
    between_values,
    colour_problems,
    error_bars,
    join_problems,
    log_problems,
    unit_problems,
)

RESULTS = Path(__file__).resolve().parents[3] / "results"


def committed(suite: str) -> Path:
    if not (RESULTS / suite / RESULTS_FILE).exists():
        pytest.skip(f"no committed {suite} results")
    return RESULTS


# ---------------------------------------------------------------- the checks themselves


def test_a_colour_two_legends_give_different_meanings_is_flagged():
    fig, (a, b) = plt.subplots(1, 2)
    a.plot([1, 2], [1, 2], color="C0", label="scaled")
    b.plot([1, 2], [1, 2], color="C0", label="i.i.d. q, k")
    b.plot([1, 2], [2, 1], color="0.3", label="a grey reference")
    a.legend()
    b.legend()
    assert colour_problems(fig) == [
        f"colour {to_hex('C0')} means ['scaled'] in one legend and ['i.i.d. q, k'] in another"]
    b.lines[0].set_label("scaled")
    b.legend()
    assert colour_problems(fig) == []
    plt.close(fig)


def test_a_series_whose_unit_its_axis_does_not_name_is_flagged():
    fig, ax = plt.subplots()
    (line,) = ax.plot([8, 16], [23, 29], label="min-gru")
    declare_unit([line], "ops")
    ax.set_ylabel("layers (recurrent: time steps)")
    assert unit_of(line) == "ops"
    assert unit_problems(fig) == ["'min-gru' is in 'ops', plotted on an axis labelled "
                                  "'layers (recurrent: time steps)'"]
    ax.set_ylabel("path length, ops (log scale)")
    assert unit_problems(fig) == []
    plt.close(fig)


def test_a_line_across_a_step_within_its_points_spread_is_flagged():
    fig, ax = plt.subplots()
    x, y = np.array([1.0, 2, 3]), np.array([10.0, 11, 30])
    ax.errorbar(x, y, yerr=2, fmt="o", color="C1")
    (joined,) = ax.plot(x, y, color="C1", label="noisy")
    ax.axvline(2, color="C1")  # spans the panel: no bar
    assert len(error_bars(ax)) == 3
    assert join_problems(fig) == ["'noisy' in panel '' joins x = 1 and 2, a step of 1 within "
                                  "their spread 4"]
    joined.set_data(x[1:], y[1:])  # only the resolved step joined
    assert join_problems(fig) == []
    plt.close(fig)


def test_a_labelled_log_axis_that_does_not_say_so_is_flagged():
    fig, ax = plt.subplots()
    ax.plot([1, 10], [1, 100])
    ax.set(xscale="log", yscale="log", xlabel="n", ylabel="tokens / s (log scale)")
    assert log_problems(fig) == ["x axis 'n' of panel '' is on a log scale and does not say so"]
    ax.set_xlabel("n (log scale)")
    assert log_problems(fig) == []
    plt.close(fig)


def test_points_between_two_settings_values_are_flagged_and_reference_lines_are_not():
    fig, ax = plt.subplots()
    ax.plot([1, 2], [0.95, 0.85], marker="o")
    ax.axhline(0.9)  # a reference line, not a point
    assert between_values(fig, 0.85, 0.95) == []
    ax.plot([3], [0.9], marker="o")  # the mean of the two
    assert len(between_values(fig, 0.85, 0.95)) == 1
    plt.close(fig)


# ---------------------------------------------------------------- qk-variance: one colour


def test_qk_variance_gives_each_colour_one_meaning_in_one_legend():
    fig = ablations.qk_variance(committed("convergence-quick"), "convergence-quick")
    legends = [lg for lg in [*fig.legends, *(ax.get_legend() for ax in fig.axes)] if lg]
    problems = colour_problems(fig)
    labels = [t.get_text() for lg in legends for t in lg.get_texts()]
    plt.close(fig)
    assert problems == []
    assert len(legends) == 1
    assert ablations.SCALES[0] in labels and ablations.SCALES[1] in labels


# ---------------------------------------------------------------- path length: units


def _path_rows() -> list[dict]:
    """Path lengths as the runners store them: attention and restricted attention and the
    contiguous convolution in layers (the last two equal), the LSTM in time steps, minGRU's
    scan in ops."""
    units = {"self-attention": ("layers", lambda n: 1), "lstm": ("steps", lambda n: n - 1),
             "convolutional": ("layers", lambda n: n // 2),
             "restricted-attention": ("layers", lambda n: n // 2),
             "min-gru": ("ops", lambda n: 5 + 6 * int(np.log2(n)))}
    extra = {"convolutional": {"kernel_size": 3}, "restricted-attention": {"window": 4},
             "lstm": {"rnn_impl": "cell"}, "min-gru": {"scan": "levels"}}
    return [{"runner": "path", "fit": "path", "mixer": m, "seq_len": n, "d_model": 8,
             "path_length": f(n), "path_unit": u, **extra.get(m, {})}
            for m, (u, f) in units.items() for n in (8, 16, 32, 64)]


WORDS = {"layers": "layers", "steps": "time steps", "ops": "ops"}


def test_path_length_puts_each_unit_on_an_axis_labelled_with_it(tmp_path):
    """Each line's points are matched to the rows they plot: those rows' unit (path_unit)
    must be named by the label of the axis the line is on (minGRU's ops were plotted on an
    axis of "layers (recurrent: time steps)"), and the line declares it."""
    write_suite(tmp_path, "t1", _path_rows())
    rows = load_results(tmp_path, ["t1"])
    unit_at = {(int(n), float(v)): u for n, v, u in
               zip(rows["seq_len"], rows["path_length"], rows["path_unit"], strict=True)}
    fig = plots.path_length(rows)
    seen, unnamed, undeclared = set(), [], []
    for ax in fig.axes:
        for line in ax.lines:
            units = {unit_at.get((int(x), float(y))) for x, y in zip(
                line.get_xdata(), line.get_ydata(), strict=True)} - {None}
            seen |= units
            unnamed += [f"{line.get_label()!r} in {u!r} on {ax.get_ylabel()!r}"
                        for u in units if WORDS[u] not in ax.get_ylabel()]
            if {unit_of(line)} != {WORDS[u] for u in units}:
                undeclared.append(f"{line.get_label()!r} declares {unit_of(line)!r}, "
                                  f"plots {units}")
    problems = unit_problems(fig)
    plt.close(fig)
    assert seen == {"layers", "steps", "ops"}
    assert unnamed == []
    assert undeclared == [] and problems == []


def test_path_length_shows_a_line_that_lies_on_another(tmp_path):
    """Restricted attention (r = 4) and the contiguous convolution have equal path lengths:
    the one drawn first is wide, faint and with large open markers, so the other, drawn on
    it, does not hide it."""
    write_suite(tmp_path, "t1", _path_rows())
    fig = plots.path_length(load_results(tmp_path, ["t1"]))
    (ax,) = [ax for ax in fig.axes if "layers" in ax.get_ylabel()]
    conv, restricted = ([ln for ln in ax.lines if ln.get_label().startswith(name)]
                        for name in ("convolutional", "restricted-attention"))
    plt.close(fig)
    assert len(conv) == len(restricted) == 1
    (conv,), (restricted,) = conv, restricted
    assert np.array_equal(conv.get_ydata(), restricted.get_ydata())
    assert conv.get_linewidth() > 2 * restricted.get_linewidth()
    assert conv.get_markersize() > restricted.get_markersize()
    assert conv.get_markerfacecolor() == "none" and conv.get_marker() != restricted.get_marker()
    assert "(= convolutional)" in restricted.get_label()


# ---------------------------------------------------------------- MQAR: no mean over settings


MIXERS = ("self-attention", "lstm", "gru", "min-gru", "min-lstm")


def _mqar_rows(value) -> list[dict]:
    """MQAR rows at 2 pairs (d = 32) and 4 pairs (d = 16 and 32), 3 seeds, whose accuracy is
    value(pairs, d) on every mixer and seed."""
    return [{"runner": "train", "study": "mqar-state", "model": "mixer-lm", "mixer_kind": m,
             "seq_len": p, "d_model": d, "seed": s, "alphabet_size": 16, "lr": 3e-3,
             "final_accuracy": value(p, d), "wall_s": 1.0, "steps": 400}
            for m in MIXERS for p, d in ((2, 32), (4, 16), (4, 32)) for s in range(3)]


@pytest.mark.parametrize("setting", ["pairs", "width"])
def test_mqar_draws_no_point_that_averages_a_swept_setting(tmp_path, setting):
    """Accuracy 0.95 at one value of the setting and 0.85 at the other: a drawn point
    between them can only be a mean over both (the state-size panel averaged 2 and 4 pairs
    where a mixer's state was the same, and attention's 2 pairs at d = 32 with 4 at 16)."""
    def value(p, d):
        return 0.95 if (p == 2 if setting == "pairs" else d == 32) else 0.85

    write_suite(tmp_path, "rematch-x", _mqar_rows(value))
    fig = rematch.mqar_state(tmp_path, "rematch-x")
    problems = between_values(fig, 0.85, 0.95)
    plt.close(fig)
    assert problems == []


def test_mqar_has_a_panel_per_pairs_with_its_floor_and_tells_the_mixers_apart(tmp_path):
    write_suite(tmp_path, "rematch-x", _mqar_rows(lambda p, d: 0.5 + 0.1 * p + d / 1000))
    fig = rematch.mqar_state(tmp_path, "rematch-x")
    panels = [ax for ax in fig.axes if ax.has_data()]
    floors = [{round(float(ln.get_ydata()[0]), 6) for ln in ax.lines
               if ln.get_linestyle() == ":" and len(set(ln.get_ydata())) == 1}
              for ax in panels]
    looks = {}  # each mixer's colour and marker, as drawn (an error bar's data line)
    for ax in panels:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            line = handle[0] if isinstance(handle, ErrorbarContainer) else handle
            if label in MIXERS and isinstance(line, Line2D):
                looks.setdefault(label, set()).add((to_hex(line.get_color()),
                                                    line.get_marker()))
    titles = [ax.get_title() for ax in panels]
    plt.close(fig)
    assert len(panels) == 2 and "2 key-value pairs" in titles[0] and "4 " in titles[1]
    assert floors == [{round(floor(2), 6)}, {round(floor(4), 6)}]
    assert set(looks) == set(MIXERS) and all(len(v) == 1 for v in looks.values())
    assert len({c for (c, _), in looks.values()}) == len({m for (_, m), in looks.values()}) == 5


# ---------------------------------------------------------------- throughput: spread


def _throughput_rows() -> list[dict]:
    """Two layers over n at d = 64, batch 4: attention's time grows as n^2 and spreads by 2%
    over its runs (its throughput steps are resolved), the LSTM's grows as n, wobbling by 5%,
    and spreads by 40% (a busy machine: under the 50% that made a timing "noisy" before, so
    its points were joined, across steps its spread does not resolve)."""
    rows = []
    for i, n in enumerate((32, 64, 128, 256, 512)):
        for mixer, ms, iqr in (("self-attention", n * n / 256, 0.02),
                               ("lstm", n / 8 * (1.05 if i % 2 else 1.0), 0.4)):
            rows.append({"runner": "layer", "mixer": mixer, "seq_len": n, "d_model": 64,
                         "batch_size": 4, "flops_fwd": n * 1e6, "fwd_ms": ms / 3,
                         "fwd_iqr_ms": ms / 3 * iqr, "fwdbwd_ms": ms,
                         "fwdbwd_iqr_ms": ms * iqr, "fwdbwd_tokens_per_s": 4 * n / ms * 1e3,
                         "wall_s": 1.0})
    return rows


def test_throughput_draws_every_points_spread_and_joins_only_resolved_steps(tmp_path):
    write_suite(tmp_path, "q", _throughput_rows())
    rows = load_results(tmp_path, ["q"])
    fig = plots.throughput(rows)
    (ax,) = [ax for ax in fig.axes if ax.has_data()]
    bars = error_bars(ax)
    problems = join_problems(fig)
    joined = [ln for ln in ax.lines if ln.get_linestyle() not in ("None", "", " ")
              and len(ln.get_xdata()) > 1]
    plt.close(fig)
    assert len(bars) == len(rows)  # a bar through every point
    assert problems == []
    assert joined  # attention's resolved steps are still joined


def test_throughput_of_the_committed_busy_rows_joins_no_unresolved_step():
    root = committed("linear-attention")
    fig = plots.throughput(load_results(root, ["linear-attention"]))
    problems = join_problems(fig)
    bars = sum(len(error_bars(ax)) for ax in fig.axes)
    plt.close(fig)
    assert bars > 0 and problems == []


# ---------------------------------------------------------------- log axes


def test_layer_grad_norms_says_its_axis_is_log():
    fig = ablations.layer_grad_norms(committed("convergence-quick"), "convergence-quick")
    logs = [ax for ax in fig.axes if ax.get_yscale() == "log"]
    problems = log_problems(fig)
    plt.close(fig)
    assert logs and problems == []
