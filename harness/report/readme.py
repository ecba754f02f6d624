"""The generated blocks of README.md and docs/*.md: every measured number they quote,
rewritten by `tvr report` from the stored results so that no number in them is typed by hand.

A block sits between `<!-- begin generated: NAME -->` and `<!-- end generated: NAME -->`;
BLOCKS maps NAME to the function that writes its text. The README's explanations stay
outside the blocks. A block whose results are missing says which suite to run.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from harness.errors import BadInput
from harness.files import write_atomic
from harness.report import rulebook, tables
from harness.report.block_rows import machine as _machine
from harness.report.block_rows import rows as _rows
from harness.report.claims import counts, ledger
from harness.report.evidence import NO_ONEDNN, seeds_per_configuration
from harness.report.expected_time import (
    MAKE_RUN,
    MAKE_RUN_BUDGET_S,
    OUTSIDE_MAKE_RUN,
    duration,
    point_seconds,
)
from harness.report.labels import labelled
from harness.report.markdown import markdown_table, rebase_links, wrap
from harness.report.readme_translation import (
    toolkit_gap,
    translation,
    translation_converged,
    translation_table3,
)
from harness.report.stats import fmt
from harness.report.studies import BY_NAME, STUDIES
from harness.report.table1 import table1
from harness.results import RESULTS_FILE

MARKER = re.compile(r"(<!-- begin generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)"
                    r"(<!-- end generated: (?P=name) -->)", re.DOTALL)


def _suite_time(out: Path, suite: str) -> tuple[str, float]:
    """One suite's points and point time in words, on the machine whose rows the report
    shows (the reference on a fresh clone); NaN seconds where it has none."""
    try:
        df = _rows(out, suite)
    except BadInput as exc:
        return f"`{suite}`: {exc}", float("nan")
    seconds = float(point_seconds(df).sum())
    return f"`{suite}` {len(df)} points, {seconds:.0f} s on {_machine(df)}", seconds


def run_times(out: Path) -> str:
    """`make run`'s expected time: each of its suites' point time on the machine whose rows
    the report shows (the reference on a fresh clone), and their sum; then the quick suites
    left out of it, with theirs."""
    parts, total, missing = [], 0.0, []
    for suite in MAKE_RUN:
        text, seconds = _suite_time(out, suite)
        parts.append(text)
        if seconds == seconds:
            total += seconds
        else:
            missing.append(suite)
    which = f"the {len(MAKE_RUN) - len(missing)} measured suites" if missing else "its suites"
    outside = [_suite_time(out, suite)[0] for suite in OUTSIDE_MAKE_RUN]
    return (f"`make run`: {total:.0f} s (about {duration(total)}) of point time, {which} on "
            "the machines named below, each point's wall time as its row records it (a point "
            "resumed from a checkpoint adds its earlier attempts' training), summed: "
            + "; ".join(parts) + ". Start-up, installing, MLflow and the report come on top; "
            "the training suites run one point per core (`--executor ray`), so on two or more "
            "cores they take less wall time than their sum. `make run` first prints `tvr "
            "estimate`: these times scaled to your machine. Left out of it to keep it within "
            f"{MAKE_RUN_BUDGET_S // 60} minutes, run on its own (`tvr run SUITE --executor "
            "ray`): " + "; ".join(outside) + ".")


def crossover(out: Path) -> str:
    df = _rows(out, "quick")
    cross = tables.crossover_table(df)
    lines = [f"`tvr run quick` ({len(df)} points, n = {df['seq_len'].min()}.."
             f"{df['seq_len'].max()}, d = {', '.join(map(str, sorted(df['d_model'].unique())))}"
             f"; {df['wall_s'].sum():.0f} s of point wall time on {_machine(df)}). "
             "Measured n* per d:", ""]
    shown = cross[["attention", "versus", "d_model", "n_star_flops", "n_star_closed_form",
                   "n_star_time", "time_note"]]
    return "\n".join(lines) + "\n" + markdown_table(shown, ".4g") + "\n"


def table1_block(out: Path) -> str:
    df = _rows(out, "table1")
    table, notes = table1(df)

    def exp(row: pd.Series, key: str) -> str:
        k, se = row[f"{key}_exp"], row[f"{key}_se"]
        return "too few points" if pd.isna(k) else f"{k:.2f} ± {se:.2f}"

    rows = [{"layer": r["layer"],
             "paper: complexity / sequential / path":
                 f"{r['complexity']} / {r['sequential_ops']} / {r['max_path_length']}",
             "FLOPs in n": exp(r, "flops_n"), "FLOPs in d": exp(r, "flops_d"),
             "seq. ops in n": exp(r, "seq_ops_n"), "path in n": exp(r, "path_n"),
             "memory in n": exp(r, "memory_n"), "time in n": exp(r, "time_n"),
             "time in d": exp(r, "time_d")} for _, r in table.iterrows()]
    return (f"`tvr run table1` ({len(df)} points; {df['wall_s'].sum():.0f} s of point wall "
            f"time on {_machine(df)}). Exponents: log-log slope ± standard error "
            "(scipy.stats.linregress; none from fewer than 4 points).\n\n"
            + markdown_table(pd.DataFrame(rows)) + "\n\n"
            + "\n".join(f"- {n}" for n in notes) + "\n")


def _per_seed(frame: pd.DataFrame, by: list[str], cells: dict[str, Callable]) -> pd.DataFrame:
    """One row per `by` group; each column's cell from its function of the group's rows."""
    rows = []
    for keys, g in frame.groupby(by, sort=True):
        keys = keys if isinstance(keys, tuple) else (keys,)
        values = {c: f(g) for c, f in cells.items()}
        rows.append(dict(zip(by, keys, strict=True))
                    | {c: "" if v == "no value" else v for c, v in values.items()})
    return pd.DataFrame(rows)


def study(out: Path, name: str) -> str:
    """The study's per-seed table(s) (harness.report.studies declares them)."""
    spec = BY_NAME[name]
    parts = []
    for table in spec.readme:
        rows = labelled(_rows(out, spec.suite, study=name, runner=table.runner))
        cells = {c: f for c, f in table.cells.items() if _has(rows, f)}
        parts.append(markdown_table(_per_seed(rows, list(table.by), cells)))
    first = labelled(_rows(out, spec.suite, study=name))
    return ("\n\n".join(parts) + f"\n\nFrom `results/{spec.suite}` on {_machine(first)}; "
            "steps to 99% are at evaluation granularity, \"> N\" a run that never reached it "
            "within its N steps.\n")


def _has(rows: pd.DataFrame, cell: Callable) -> bool:
    """Whether the cell's column has values in these rows (corpus runs have no steps)."""
    try:
        return cell(rows) not in ("no value",) and not rows.empty
    except KeyError:
        return False


# the bench comparisons the README quotes, and what it calls them
BENCH_VARIANTS = (("transformer-layer/sdpa", "our transformer layer (sdpa)"),
                  ("lstm/fused", "fused LSTM"), ("gru/fused", "fused GRU"))


def bench(out: Path) -> str:
    """The headline ratios of `tvr bench` (ours / PyTorch's time, median over sizes), each
    with the machine, the linear kernel and the matmul peak it holds on: a ratio is a
    property of one machine's kernels. Then the same with oneDNN removed from the candidates
    (`tvr bench --no-onednn`), where measured."""
    text = _bench_text(_rows(out, "bench"), "On ", "chosen by measurement")
    if (out / NO_ONEDNN / RESULTS_FILE).exists():
        text += "\n\n" + _bench_text(
            _rows(out, NO_ONEDNN), "With oneDNN removed from the candidates (`tvr "
            "bench --no-onednn`, as on a machine whose fastest matmul is torch.mm), on ",
            "the only candidate left")
    return text


def _bench_text(df: pd.DataFrame, lead: str, why: str) -> str:
    parts = []
    for variant, what in BENCH_VARIANTS:
        sel = df[df["variant"] == variant] if "variant" in df else df.iloc[0:0]
        if not sel.empty:
            parts.append(f"{what} at {sel['ratio'].astype(float).median():.3f}x "
                         f"PyTorch's time (median over {len(sel)} sizes)")
    text = lead + _machine(df) + ": " + ("; ".join(parts) or "no comparison measured") + "."
    kernels = df["linear_kernel"].dropna().unique() if "linear_kernel" in df else []
    if len(kernels):
        text += f" Linear maps on {', '.join(map(str, kernels))} there ({why})."
    if {"peak_mm_flops_per_s", "peak_onednn_flops_per_s"} <= set(df):
        ratio = (df["peak_mm_flops_per_s"] / df["peak_onednn_flops_per_s"]).dropna()
        if len(ratio):
            text += (f" torch.mm reaches {fmt(ratio.median(), 2)}x oneDNN's matmul rate "
                     f"there (median over {len(ratio)} bench points).")
    return text


def threads(out: Path) -> str:
    from harness.report.threads import projection_table, scaling_table

    df = _rows(out, "threads")
    proj = projection_table(df)[["mixer", "seq_len", "span_ops", "ms_1_thread", "ms_P100",
                                 "ms_P10000", "P_span"]]
    return (f"Measured on {_machine(df)}, {len(df)} points:\n\n"
            + markdown_table(scaling_table(df)) + "\n\nWork-span projection (Brent's bound, "
            "not a measurement):\n\n" + markdown_table(proj) + "\n")


def plugin_example(out: Path) -> str:
    """The example plugin's suite file results: exponents beside self-attention's and the
    LSTM's, and where softmax attention's counted FLOPs cross linear attention's."""
    df = _rows(out, "linear-attention")
    table, _ = table1(df)

    def exp(row: pd.Series, key: str) -> str:
        k, se = row.get(f"{key}_exp"), row.get(f"{key}_se")
        return "" if k is None or pd.isna(k) else f"{k:.2f} ± {se:.2f}"

    rows = pd.DataFrame([{"layer": r["layer"], "FLOPs in n": exp(r, "flops_n"),
                          "FLOPs in d": exp(r, "flops_d"), "seq. ops in n": exp(r, "seq_ops_n"),
                          "path in n": exp(r, "path_n"), "memory in n": exp(r, "memory_n")}
                         for _, r in table.iterrows()])
    cross = tables.crossover_table(df)
    cross = cross[cross["versus"] != "lstm"][["attention", "versus", "d_model",
                                              "n_star_flops", "flops_note"]]
    return (f"`tvr run --suite-file examples/linear-attention/linear-attention.toml` "
            f"({len(df)} points, {df['wall_s'].sum():.0f} s of point wall time on "
            f"{_machine(df)}); fitted log-log exponents ± SE:\n\n" + markdown_table(rows)
            + "\n\nWhere the whole self-attention layer's counted FLOPs cross linear "
            "attention's:\n\n" + markdown_table(cross, ".4g") + "\n")


def rematch_throughput(out: Path) -> str:
    """Training throughput of scanned vs sequential recurrences, LSTM, GRU and attention."""
    from harness.report.rematch import speedup_table, throughput_table

    df = _rows(out, "rematch-quick", runner="fwdbwd")
    first = df.iloc[0]
    return (f"`tvr run rematch-quick` ({len(df)} timed points, d = {int(first['d_model'])}, "
            f"batch {int(first['batch_size'])}, {df['wall_s'].sum():.0f} s of point wall time "
            f"on {_machine(df)}): forward+backward ms of one layer, median of one timing per "
            "point.\n\n" + markdown_table(throughput_table(df), ".4g")
            + "\n\nSpeed-up of each scan over the same layer's sequential loop (time ratio); "
            "the paper's figures (Feng et al. 2024) were measured on a GPU, not here:\n\n"
            + markdown_table(speedup_table(df), ".3g") + "\n")


def rematch_mqar(out: Path) -> str:
    """MQAR accuracy against pairs and width, from the suite the recall claim reads (the
    first of RECALL_SUITES with MQAR rows): the figure and its numbers."""
    from harness.report.claim_later import RECALL_RUN, RECALL_SUITES
    from harness.report.rematch import STUDY, mqar_caption, mqar_frame, mqar_table

    def measured(suite: str) -> bool:
        if not (out / suite / RESULTS_FILE).is_file():
            return False
        df = _rows(out, suite)
        return "study" in df and bool(df["study"].eq(STUDY).any())

    suite = next((s for s in RECALL_SUITES if measured(s)), None)
    if suite is None:  # not measured: one line naming the quick suite to run
        raise BadInput(f"not measured: run `tvr run {RECALL_SUITES[-1]}`")
    pts = mqar_frame(out, suite)
    low, high = seeds_per_configuration(pts)
    seeds = f"{low}{f'-{high}' if high > low else ''} seed{'s' if high > 1 else ''}"
    small = (f" Too short to judge (the ledger shows it, does not judge it); the claim's "
             f"suite: {RECALL_RUN}." if suite == RECALL_SUITES[-1] else "")
    return (f"![MQAR against state size](results/{suite}/mqar-state.png)\n\n"
            f"`tvr run {suite}` ({len(pts)} training points, {seeds} per setting, "
            f"{pts['wall_s'].sum():.0f} s of point wall time on {_machine(pts)}).{small} "
            + mqar_caption(pts) + "\n\n" + markdown_table(mqar_table(pts), ".3g") + "\n")


def gpu_fixed_tokens(out: Path) -> str:
    """Time per token at a fixed token count over n on a GPU (scripts/gpu-check's
    fixed-tokens-gpu): attention against the cuDNN LSTM and GRU, per dtype."""
    df = _rows(out / "gpu", "fixed-tokens-gpu")
    df = df.assign(us=df["fwdbwd_ms"] * 1e3 / (df["batch_size"] * df["seq_len"]))
    table = df.pivot_table(index="seq_len", columns=["dtype", "mixer"], values="us")
    for dtype in table.columns.get_level_values(0).unique():
        table[(dtype, "lstm / attention")] = (table[(dtype, "lstm")]
                                              / table[(dtype, "self-attention")])
    table = table.sort_index(axis=1)
    table.columns = [f"{dtype} {what}" for dtype, what in table.columns]
    first = df.iloc[0]
    return ("![time per token at fixed tokens](results/gpu/fixed-tokens-gpu/fixed-tokens.png)"
            f"\n\n`scripts/gpu-check` on {_machine(df)}, CUDA {first['cuda_version']}, "
            f"cuDNN {first['cudnn_version']}, driver "
            f"{first['driver_version']}, TF32 matmul {first['tf32_matmul']}: forward+backward "
            f"µs per token at B*n = {int(first['batch_size'] * first['seq_len'])}, "
            f"d = {int(first['d_model'])}, one timing per point:\n\n"
            + markdown_table(table.reset_index(), ".3g") + "\n")


def seed_gates(table: pd.DataFrame) -> str:
    """"Seeds per arm the gates ask: 5 (claims 8, 12, ...); 3 (claim 27); ..." from the
    seeds gate of each claim as its rule applied it."""
    need: dict[int, list[int]] = {}
    for i, gates in enumerate(table["gates"], start=1):
        for g in gates:
            found = re.search(r"need >= (\d+)", g["detail"]) if g["name"] == "seeds" else None
            if found and i not in need.setdefault(int(found[1]), []):
                need[int(found[1])].append(i)
    return "; ".join(f"{n} (claim{'s' if len(c) > 1 else ''} {', '.join(map(str, c))})"
                     for n, c in sorted(need.items(), reverse=True))


def claims(out: Path) -> str:
    table = ledger(out)
    # the verdict as labelled with its scope; kind: empirical, or an identity check
    summary = table[["claim", "label", "kind"]].rename(columns={"label": "verdict"})
    return (counts(table) + " (the evidence, rule and scale of each: `tvr claims`, or "
            "[REPORT.md](results/REPORT.md)). Seeds per arm the seeds gate asks, as the rules "
            f"apply it: {seed_gates(table)}.\n\n" + markdown_table(summary) + "\n")


def claims_tally(out: Path) -> str:
    """The README's line on the ledger: the tally of verdicts; the table is in docs."""
    table = ledger(out)
    return (counts(table) + ". Each verdict and its scope: [docs/results.md]"
            "(docs/results.md#the-claims-ledger); the evidence, rule and gates of each: "
            "`tvr claims` or [REPORT.md](results/REPORT.md).\n")


BLOCKS: dict[str, Callable[[Path], str]] = {
    "run-times": run_times, "crossover": crossover, "table1": table1_block, "bench": bench,
    "claims": claims, "claims-tally": claims_tally, "threads": threads,
    "linear-attention": plugin_example,
    "translation": translation, "translation-table3": translation_table3,
    "translation-converged": translation_converged, "toolkit-gap": toolkit_gap,
    "rematch-throughput": rematch_throughput, "rematch-mqar": rematch_mqar,
    "gpu-fixed-tokens": gpu_fixed_tokens, "rulebook": lambda out: rulebook.table(),
    **{f"study-{s.name}": (lambda out, name=s.name: study(out, name))
       for s in STUDIES if s.readme},
}


Writers = dict[str, Callable[[Path], str]]  # block name -> its text from the results folder


def render_block(name: str, out: Path, blocks: Writers | None = None) -> str:
    try:
        return wrap((blocks or BLOCKS)[name](out).rstrip("\n")) + "\n"
    except BadInput as exc:  # missing results: the block says what to run
        return wrap(str(exc)) + "\n"


def rewrite(text: str, out: Path, extra: Writers | None = None, to_root: str = "") -> str:
    """`text` with every generated block regenerated from the results under `out`; `extra`
    adds blocks that are not results (the CLI reference), `to_root` is the path from the
    file's folder to the repository root ("../" in docs/), put before the blocks' links."""
    blocks = BLOCKS | (extra or {})

    def block(match: re.Match) -> str:
        name = match["name"]
        if name not in blocks:
            raise BadInput(f"README block {name!r} is unknown; known: {', '.join(blocks)}")
        body = rebase_links(render_block(name, out, blocks), to_root)
        return match.group(1) + body + match.group(4)
    return MARKER.sub(block, text)


def update_readme(path: Path, out: Path, extra: Writers | None = None, to_root: str = "") -> bool:
    """Rewrite the generated blocks of the Markdown file at `path`; True if it changed."""
    old = path.read_text(encoding="utf-8")
    if (new := rewrite(old, out, extra, to_root)) != old:
        write_atomic(path, new)
    return new != old
