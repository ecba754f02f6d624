"""Every figure of the committed results, drawn through the registry `tvr plot all` and
`tvr report` use (harness.report.figures.draw) into a temporary folder, and checked, on the
draw that writes the PNG, for what a reviewer would refuse and matplotlib can see: text past
the canvas, on a panel's frame or over other text; an interval or line of an accuracy or BLEU
outside its range; a legend entry that draws nothing or looks like nothing drawn, a legend
over data; an empty panel; two lines on top of each other drawn alike, markers of two series
on top of each other; a band promised and none drawn; and figure_faults' checks: a colour
whose meaning changes between legends, a series whose declared unit its axis label does not
name, a line across a step its points' error bars do not resolve, a log axis whose label does
not say so. Then the defects review named, one by one, on made-up or committed rows
(test_figures_faults.py has the later ones)."""

from __future__ import annotations

import itertools
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import Collection, LineCollection, PathCollection, PolyCollection
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from experiments.rematch import THROUGHPUT
from harness.errors import BadInput
from harness.report import figures as plots
from harness.report import layer_figures, rematch, translation_curves
from harness.report.curves import FRACTION, NONNEGATIVE, band, caption, clip_text
from harness.report.rematch import LOOP_FIX
from harness.report.stats import t_interval
from harness.report.tables import sweep_frame
from harness.results import RESULTS_FILE, SERIES_FILE, load_results
from tests.harness.report.claim_frames import write_suite
from tests.harness.report.figure_faults import (
    colors as shown_colors,
)
from tests.harness.report.figure_faults import (
    colour_problems,
    join_problems,
    log_problems,
    unit_problems,
)

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "results"
# axes whose y label names a bounded metric: (words in the label, its range)
BOUNDED = ((("accuracy",), (0.0, 1.0)), (("BLEU",), (0.0, 100.0)))
CLEAR = 2.0  # a note inside a panel keeps this far (px) from its frame, the spine's width
PX = 3.0  # lines closer than this everywhere (display pixels) are drawn on top of each other


class Checked:
    """Figures checked as they are drawn: Figure.draw and Text.draw wrapped, so the checks
    see the canvas, the layout and every non-empty text of the draw that writes the PNG;
    `problems` holds what they found."""

    def __init__(self, monkeypatch):
        self.texts: list[tuple[Text, object]] = []
        self.problems: list[str] = []
        self.saving = False  # the figure's own draws (title placement...) are not checked
        draw_text, draw_figure = Text.draw, Figure.draw

        def text(artist, renderer):
            draw_text(artist, renderer)
            if artist.get_visible() and artist.get_text().strip():
                self.texts.append((artist, artist.get_window_extent(renderer)))

        def figure(fig, renderer):
            self.texts = []
            draw_figure(fig, renderer)
            # saving with bbox_inches="tight" first draws to measure, on a renderer whose
            # draw_* methods are switched off for it: only the draw that paints is checked
            if self.saving and "draw_path" not in vars(renderer):
                self.problems = (canvas_problems(self.texts, renderer)
                    + text_problems(fig, self.texts, renderer) + range_problems(fig)
                    + legend_problems(fig, renderer) + panel_problems(fig)
                    + colour_problems(fig) + unit_problems(fig) + join_problems(fig)
                    + log_problems(fig))

        monkeypatch.setattr(Text, "draw", text)
        monkeypatch.setattr(Figure, "draw", figure)


def _overlap(a, b) -> float:
    """Area (px^2) two display boxes share."""
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return max(w, 0) * max(h, 0)


def canvas_problems(texts: list, renderer) -> list[str]:
    """A text past the edge of the canvas."""
    return [f"text {t.get_text()!r} outside the canvas" for t, box in texts
            if box.x0 < -1 or box.y0 < -1 or box.x1 > renderer.width + 1
            or box.y1 > renderer.height + 1]


def text_problems(fig: plt.Figure, texts: list, renderer) -> list[str]:
    """A panel's note past its frame; two texts printed over each other."""
    out = []
    for ax in fig.axes:
        frame = ax.get_window_extent(renderer)
        for t in (t for t in ax.texts if t.get_visible() and t.get_text().strip()):
            box = t.get_window_extent(renderer)
            if (box.x0 < frame.x0 + CLEAR or box.x1 > frame.x1 - CLEAR
                    or box.y0 < frame.y0 + CLEAR or box.y1 > frame.y1 - CLEAR):
                out.append(f"text {t.get_text()!r} touches or crosses its panel's frame")
    for (a, ba), (b, bb) in itertools.combinations(texts, 2):
        if _overlap(ba, bb) > 4:
            out.append(f"texts {a.get_text()!r} and {b.get_text()!r} overlap")
    return out


def _bounds(ax: plt.Axes) -> tuple[float, float] | None:
    label = ax.get_ylabel()
    for words, bounds in BOUNDED:
        if any(w in label for w in words):
            return (0.0, 100.0) if "%" in label else bounds
    return None


def _in_data(transform, ax: plt.Axes, axis: int) -> bool:
    """Whether an artist's coordinate `axis` (0: x, 1: y) is in data units: its transform is
    the panel's data transform there up to a constant shift on the page (an offset drawing
    lines apart), as for plotted data and, in y, a horizontal line (not a vertical one)."""
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    probe = np.array([[x0, y0], [x1, y1], [(x0 + x1) / 2, (y0 + y1) / 3]])
    shift = transform.transform(probe)[:, axis] - ax.transData.transform(probe)[:, axis]
    return bool(np.ptp(shift) < 1e-6 * max(1.0, np.abs(shift).max()))


def _data_y(artist) -> np.ndarray:
    """The y values in data units an interval or line artist draws."""
    if isinstance(artist, LineCollection):
        segs = artist.get_segments()
        return np.concatenate([np.asarray(s)[:, 1] for s in segs]) if segs else np.empty(0)
    if isinstance(artist, PolyCollection):
        paths = artist.get_paths()
        return np.concatenate([p.vertices[:, 1] for p in paths]) if paths else np.empty(0)
    if isinstance(artist, Line2D):
        return np.asarray(artist.get_ydata(), float)
    return np.empty(0)


def range_problems(fig: plt.Figure) -> list[str]:
    """An interval (band or error bar) or line of a bounded metric outside its range."""
    out = []
    for ax in fig.axes:
        bounds = _bounds(ax)
        if bounds is None:
            continue
        lo, hi = bounds
        for artist in [*ax.collections, *ax.lines]:
            if isinstance(artist, Line2D) and not _in_data(artist.get_transform(), ax, 1):
                continue  # a vertical line: its y is in axes units
            y = _data_y(artist)
            y = y[np.isfinite(y)]
            if len(y) and (y.min() < lo - 1e-9 or y.max() > hi + 1e-9):
                out.append(f"{ax.get_ylabel()!r}: {type(artist).__name__} from "
                           f"{y.min():.4g} to {y.max():.4g}, outside {lo:g}..{hi:g}")
    return out


def _style(artist) -> tuple | None:
    """(marker, dash pattern) of a line, for style entries that show no hue of their own."""
    if not isinstance(artist, Line2D):
        return None
    dashes = artist.get_linestyle() if artist.get_linestyle() in ("None", "", " ") else \
        tuple(np.round(artist._unscaled_dash_pattern[1] or (), 1))
    return artist.get_marker(), dashes


def _open(artist) -> bool:
    """Open markers (edges only): a legend entry "open circle" stands for all of them."""
    if isinstance(artist, Line2D):
        return artist.get_marker() not in ("None", "", " ", None) and \
            str(artist.get_markerfacecolor()).lower() == "none"
    if isinstance(artist, Collection) and not isinstance(artist, PolyCollection | LineCollection):
        faces = artist.get_facecolors()
        return len(artist.get_edgecolors()) > 0 and (len(faces) == 0 or
                                                     bool((faces[:, 3] == 0).all()))
    return False


def _drawn(fig: plt.Figure) -> list:
    return [a for ax in fig.axes if ax.get_visible()
            for a in [*ax.lines, *ax.collections,
                      *(p for p in ax.patches if not isinstance(p, Rectangle) or p.get_width())]
            if a.get_visible()]


def legend_problems(fig: plt.Figure, renderer) -> list[str]:
    """A legend entry whose handle shows nothing, or looks like nothing drawn; a legend
    inside a panel covering that panel's data."""
    drawn = _drawn(fig)
    colors = set().union(*(shown_colors(a) for a in drawn)) if drawn else set()
    styles = {_style(a) for a in drawn} - {None}
    legends = [lg for lg in [*fig.legends, *(ax.get_legend() for ax in fig.axes)]
               if lg is not None and lg.get_visible()]
    out = []
    for lg in legends:
        for handle, text in zip(lg.legend_handles, lg.get_texts(), strict=True):
            label = text.get_text()
            shown = shown_colors(handle) if handle is not None and handle.get_visible() else set()
            if not shown:
                out.append(f"legend entry {label!r} draws nothing")
            elif not (shown & colors or _style(handle) in styles
                      or _open(handle) and any(_open(a) for a in drawn)):
                out.append(f"legend entry {label!r} looks like nothing drawn")
        out += _legend_over_data(lg, renderer)
    return out


def _points(artist, ax: plt.Axes) -> np.ndarray:
    """Display coordinates of an artist's data points (line vertices, scatter offsets)."""
    if isinstance(artist, Line2D):
        xy = np.column_stack([artist.get_xdata(), artist.get_ydata()]).astype(float)
        return artist.get_transform().transform(xy) if len(xy) else np.empty((0, 2))
    if isinstance(artist, Collection) and not isinstance(artist, PolyCollection):
        offsets = artist.get_offsets()
        if len(offsets) and artist.get_offset_transform() is not None:
            return artist.get_offset_transform().transform(offsets)
    return np.empty((0, 2))


def _legend_over_data(lg: Legend, renderer) -> list[str]:
    ax = lg.axes if isinstance(lg.parent, plt.Axes) else None
    if ax is None:
        return []
    box = lg.get_window_extent(renderer)
    hidden = []
    for artist in [*ax.lines, *ax.collections]:
        pts = _points(artist, ax)
        pts = pts[np.isfinite(pts).all(axis=1)]
        inside = ((pts[:, 0] > box.x0) & (pts[:, 0] < box.x1) & (pts[:, 1] > box.y0)
                  & (pts[:, 1] < box.y1))
        if inside.any():
            hidden.append(f"legend over {int(inside.sum())} data point(s) of "
                          f"{artist.get_label()!r} in panel {ax.get_title()!r}")
    return hidden


def panel_problems(fig: plt.Figure) -> list[str]:
    """An empty panel; two lines of one panel on top of each other, drawn alike; a band
    promised in a title and none drawn."""
    out = []
    for ax in fig.axes:
        if not ax.get_visible() or ax.get_label() == "<colorbar>":
            continue
        if not (ax.lines or ax.collections or ax.patches or ax.images):
            out.append(f"panel {ax.get_title()!r} is empty")
        lines = [ln for ln in ax.lines if ln.get_visible() and len(ln.get_xdata()) > 1
                 and _in_data(ln.get_transform(), ax, 0) and _in_data(ln.get_transform(), ax, 1)]
        for a, b in itertools.combinations(lines, 2):
            pa, pb = _points(a, ax), _points(b, ax)
            if pa.shape == pb.shape and np.all(np.abs(pa - pb) < PX) and \
                    _style(a) == _style(b):
                out.append(f"{a.get_label()!r} and {b.get_label()!r} in panel "
                           f"{ax.get_title()!r} coincide, drawn alike (one hides the other)")
        # markers of two series overlapping (a ring drawn round a dot to mark it aside)
        dots = [c for c in ax.collections if isinstance(c, PathCollection)
                and len(c.get_offsets()) and len(c.get_sizes())]
        for a, b in itertools.combinations(dots, 2):
            if _open(a) != _open(b):
                continue
            reach = (np.sqrt(a.get_sizes().max()) + np.sqrt(b.get_sizes().max())) / 2 \
                * fig.dpi / 72  # the two radii, in px
            pa, pb = _points(a, ax), _points(b, ax)
            near = np.hypot(*(pa[:, None, :] - pb[None, :, :]).transpose(2, 0, 1)) < reach
            if near.any():
                out.append(f"{int(near.any(axis=1).sum())} marker(s) of {a.get_label()!r} "
                           f"overlap those of {b.get_label()!r} in panel {ax.get_title()!r}")
    said = " ".join(t.get_text() for t in fig.findobj(Text) if t.get_visible())
    bands = [c for ax in fig.axes for c in ax.collections
             if isinstance(c, PolyCollection | LineCollection)]
    if "band:" in said and not bands:
        out.append("a band is promised and none is drawn")
    return out


def _applying() -> list[tuple[Path, str, str]]:
    """(out folder, suite, figure) of every figure `tvr plot all` would draw from the stored
    results (results/gpu/ holds the lent GPU's suites)."""
    found = []
    for path in sorted([*RESULTS.glob(f"*/{RESULTS_FILE}"),
                        *(RESULTS / "gpu").glob(f"*/{RESULTS_FILE}")]):
        root, suite = path.parent.parent, path.parent.name
        df = load_results(root, [suite])
        found += [(root, suite, name) for name, f in plots.FIGURES.items() if f.applies(df)]
    return found


FIGURES = _applying()


@pytest.mark.slow
@pytest.mark.parametrize(("root", "suite", "name"), FIGURES,
                         ids=[f"{r.relative_to(RESULTS) / s}/{n}".lstrip("./")
                              for r, s, n in FIGURES])
def test_every_figure_of_the_committed_results_passes_a_reviewers_checks(root, suite, name,
                                                                         tmp_path, monkeypatch):
    """Drawn by `tvr plot`'s own path (harness.report.figures.draw: the figure, the machine's
    signature, the PNG) into a folder reading the committed CSVs (and a search's study)."""
    (tmp_path / suite).mkdir()
    for file in (RESULTS_FILE, SERIES_FILE, "optuna.db"):  # a tuning search's study too
        if (root / suite / file).exists():
            (tmp_path / suite / file).symlink_to(root / suite / file)
    checked = Checked(monkeypatch)
    render = plots.png_bytes

    def saved(fig: plt.Figure) -> bytes:
        checked.saving = True
        return render(fig)

    monkeypatch.setattr(plots, "png_bytes", saved)
    try:
        path, = plots.draw(tmp_path, suite, name)
    except BadInput as exc:  # `plot all` leaves it out too, saying why
        pytest.skip(f"{suite} cannot draw {name}: {exc}")
    assert path.read_bytes()[:4] == b"\x89PNG"
    assert not checked.problems, "\n".join(checked.problems)


# ---------------------------------------------------------------- the figures named in review


def test_a_t_interval_past_an_accuracy_of_one_is_clipped_and_the_caption_says_so():
    pts = pd.DataFrame({"seed": range(5), "model": "m", "final_accuracy": [0.6, 1, 1, 1, 1],
                        "device": "cpu", "device_name": "X"})
    lo, hi = t_interval(pts["final_accuracy"])
    assert hi > 1
    assert band(pts, FRACTION)(pts["final_accuracy"]) == (lo, 1.0)
    assert band(pts, NONNEGATIVE)(-pts["final_accuracy"])[1] <= 0 < hi
    assert "band: the mean's 95% t-interval over seeds, clipped to [0, 1]" in caption(
        pts, clip_text(FRACTION))
    assert "band" not in caption(pts, drawn=None)  # a figure of dots promises no band
    assert band(pts.head(3), FRACTION) == ("pi", 100)  # the seeds' own range: inside any


def _throughput_rows(measured_at: str) -> list[dict]:
    return [{"runner": "fwdbwd", "mixer": kind, "seq_len": n, "d_model": 64, "batch_size": 4,
             "fwdbwd_ms": n / 10, "wall_s": 1.0, "measured_at": measured_at, **cfg}
            for n in (64, 512) for kind, cfg in THROUGHPUT]


@pytest.mark.parametrize(("measured_at", "marked"), [
    ("2026-11-30T21:00:15+00:00", {"lstm (cell)", "min-gru (sequential)",
                                   "min-lstm (sequential)"}),
    (LOOP_FIX, set())])
def test_loops_timed_before_their_backward_was_fixed_are_marked(tmp_path, measured_at, marked):
    write_suite(tmp_path, "rematch-x", _throughput_rows(measured_at))
    fig = rematch.throughput(tmp_path, "rematch-x")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    plt.close(fig)
    stale = {lab.removesuffix(", before the loop fix") for lab in labels
             if lab.endswith("before the loop fix")}
    assert stale == marked
    assert len(labels) == len(THROUGHPUT)


@pytest.mark.slow
def test_crossover_draws_noisy_timings_off_its_lines_and_announces_only_drawn_lines():
    if not (RESULTS / "linear-attention" / RESULTS_FILE).exists():
        pytest.skip("no linear-attention results")
    df = load_results(RESULTS, ["linear-attention"])
    fig = layer_figures.crossover(df)
    title = fig._suptitle.get_text()
    sweep = sweep_frame(df)
    noisy = sweep[layer_figures._noisy(sweep, "fwd_ms")]
    time_axes = [ax for ax in fig.axes if ax.get_subplotspec().rowspan.start == 1]
    on_lines = {(round(x), round(y, 9)) for ax in time_axes for ln in ax.lines
                for x, y in zip(ln.get_xdata(), ln.get_ydata(), strict=True)
                if np.isfinite(y)}
    plt.close(fig)
    assert len(time_axes) == sweep["d_model"].nunique() == 2  # d = 64, 128
    assert "core (-.)" not in title  # the suite has no attention-core rows
    assert "open circles" in title and len(noisy) > 0
    assert not {(int(n), round(ms, 9)) for n, ms in zip(noisy["seq_len"], noisy["ms_per_seq"],
                                                       strict=True)} & on_lines


def test_a_recipe_sweep_draws_a_line_per_recipe_and_what_its_choice_reads():
    if not (RESULTS / "translation-cpu-recipes" / RESULTS_FILE).exists():
        pytest.skip("no translation-cpu-recipes results")
    df = load_results(RESULTS, ["translation-cpu-recipes"])
    fig = translation_curves.bleu_curves(RESULTS, "translation-cpu-recipes")
    lines = [ln for ln in fig.axes[0].lines if len(ln.get_xdata()) > 2]  # not the target
    labels = fig.legends[0].get_texts()
    panel = fig.axes[2].get_title()
    plt.close(fig)
    assert len(lines) == len(df.drop_duplicates(["model", "peak_lr", "dropout"]))
    chosen = [t.get_text() for t in labels if "seed" in t.get_text()]
    assert len(chosen) == df["model"].nunique()
    assert all("lr " in c and "dropout " in c and "1 seed" in c for c in chosen)
    assert "choice" in panel


def test_seeds_evaluated_at_different_updates_share_one_curve():
    """Evaluations every n FLOPs fall on a different update in each seed: the mean line
    matches the seeds by evaluation, so it has every evaluation all of them reached (matched
    by update it kept the few updates the seeds happened to share)."""
    suite = "translation-cpu-tuned"
    if not (RESULTS / suite / SERIES_FILE).exists():
        pytest.skip(f"no {suite} results")
    from harness.results import read_series

    rows = load_results(RESULTS, [suite])
    gru = rows[(rows["model"] == "gru-attention") & (rows["status"] == "ok")]
    if gru["seed"].nunique() < 3:
        pytest.skip(f"{suite} has fewer than 3 attentional GRU seeds")
    curves = read_series(RESULTS, suite)
    curves = curves[curves["point_id"].isin(gru["point_id"])
                    & (curves["metric"] == "dev_bleu_greedy")]
    steps = curves.groupby("point_id")["step"].apply(frozenset)
    assert len(set(steps)) == len(steps)  # the seeds' evaluations are at different updates
    fig = translation_curves.bleu_curves(RESULTS, suite)
    (line,) = [ln for ln in fig.axes[0].lines if ln.get_label().startswith("gru-attention")]
    plt.close(fig)
    assert len(line.get_xdata()) == min(len(s) for s in steps)


def test_a_recipe_measured_again_draws_only_its_last_recipe(tmp_path):
    """A suite run again after its search found a better recipe keeps the old rows beside
    the new (here: the committed suite with its archived rows put back): the figure, as
    Table 2, draws each model's last recipe only (a seed of the old recipe was averaged into
    the Transformer's dots and bands before)."""
    import shutil

    from harness.report.superseded import restore
    from harness.report.translation import finished, last_recipe

    suite = "translation-cpu-tuned"
    if not (RESULTS / suite / SERIES_FILE).exists():
        pytest.skip(f"no {suite} results")
    shutil.copytree(RESULTS / suite, tmp_path / suite,
                    ignore=shutil.ignore_patterns("variants", "*.png"))
    restore(tmp_path, suite)
    rows = finished(load_results(tmp_path, [suite]), "table2")
    rows = rows[rows["runner"] == "translate"]
    kept = last_recipe(rows)
    if len(kept) == len(rows):
        pytest.skip(f"every row of {suite} and its archive is of its model's last recipe")
    fig = translation_curves.bleu_curves(tmp_path, suite)
    dots = sum(len(c.get_offsets()) for c in fig.axes[-1].collections
               if c.get_facecolors().size)  # the seeds' dots; the mean bars have no faces
    plt.close(fig)
    assert dots == len(kept) < len(rows)
