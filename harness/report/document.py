"""REPORT.md: every suite's measured tables and figures, with the machine they came from.

One section per suite found under <out>, its variants (runs with overrides, under
<out>/<suite>/variants/) as subsections of it; a section function per kind of suite, chosen
by the runners in its results (SECTIONS). Tables are also written per suite as .md and .csv.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from harness.errors import BadInput
from harness.files import write_atomic
from harness.report import figures as plots
from harness.report import tables
from harness.report.claims import ledger
from harness.report.claims import render as render_claims
from harness.report.evidence import GPU_DIR, NO_ONEDNN
from harness.report.labels import busy_flag
from harness.report.markdown import code
from harness.report.rematch import STUDY as STUDY_MQAR
from harness.report.studies import TABLE_RUNNERS, study_tables
from harness.report.superseded import ARCHIVE, archived
from harness.report.table1 import is_table1, table1
from harness.report.toolkit_gap import crosschecks
from harness.report.translation import (
    ANCHOR,
    BASELINES,
    is_search,
    recipes,
    table2,
    table3,
    toolkit_rows,
)
from harness.report.translation import RUNNERS as TRANSLATION_RUNNERS
from harness.results import RESULTS_FILE, SERIES_FILE, load_results
from harness.variants import CONFIG_FILE, last_command, run_command, split_name, stored_names

# the folders that a command other than `tvr run SUITE` measures
COMMANDS = {NO_ONEDNN: "tvr bench --no-onednn", ANCHOR: ".venv/bin/python scripts/anchor",
            "translation-cpu-tune": "tvr tune translation-cpu-tune"}
CROSSCHECK_ROWS = ("joeynmt_own_beam", "beam4", "beam4_our_rule", "greedy", "greedy_no_src_eos")
CROSSCHECK_COLUMNS = ("alpha", "bleu", "chrf", "len_ratio", "repeat_rate")
ANCHOR_COLUMNS = ("model", "toolkit_version", "config", "split", "n_params", "dev_bleu",
                  "test_bleu", "test_chrf", "test_repeat_rate", "test_len_ratio", "updates",
                  "epochs", "train_tokens", "train_s", "train_cpu_s", "train_ended")


def _machine(df: pd.DataFrame, every: pd.DataFrame, command: str = "") -> str:
    """Which machine this section's numbers come from, named (never "this machine", so the
    committed report reads the same wherever it is regenerated), its facts and dates, and the
    other machines in the folder; `command` (Markdown) measures them, default the suite's."""
    first = df.iloc[0]
    name = str(first.get("machine", ""))
    suite = str(first.get("suite", "SUITE"))
    cols = [c for c in ("device", "device_name", "threads", "torch_version") if c in df]
    text = f"Measured on {code(name)}: " + ", ".join(f"{c} {first[c]}" for c in cols)
    if "measured_at" in df and df["measured_at"].notna().any():
        dates = df["measured_at"].dropna().astype(str).str[:10]
        text += f", {dates.min()}" + (f" to {dates.max()}" if dates.max() != dates.min() else "")
    text += _provenance(df)
    others = sorted(set(every["machine"].astype(str)) - {name}) if "machine" in every else []
    if others:
        text += ". Also in this folder: " + ", ".join(code(m) for m in others)
    command = command or f"`{COMMANDS.get(suite, f'tvr run {suite}')}`"
    return text + (f". {command} measures the machine at hand; `tvr compare` puts two "
                   "machines side by side")


def _provenance(df: pd.DataFrame) -> str:
    """The commits the rows were measured at, and a flag where some were measured on a tree
    with uncommitted changes (or before rows recorded their commit)."""
    if "git_commit" not in df or df["git_commit"].isna().all():
        return "; commit not recorded (rows from before rows carried it)"
    commits = df["git_commit"].dropna().astype(str).str[:10].unique()
    text = f"; at commit{'s' if len(commits) > 1 else ''} " + ", ".join(
        code(c) for c in commits[:3]) + (f" and {len(commits) - 3} more" if len(commits) > 3
                                         else "")
    missing = int(df["git_commit"].isna().sum())
    dirty = int(df.get("git_dirty", pd.Series(dtype=str)).astype(str).eq("True").sum())
    if dirty:
        text += (f"; **{dirty} of {len(df)} rows measured with uncommitted changes** "
                 "(`git_diff_sha256` names the diff)")
    if missing:
        text += f"; {missing} rows without a recorded commit"
    return text


def _save_table(out_dir: Path, suite: str, name: str, table: pd.DataFrame) -> str:
    write_atomic(out_dir / suite / f"{name}.md", tables.render(table, "markdown"))
    write_atomic(out_dir / suite / f"{name}.csv", tables.render(table, "csv"))
    return tables.render(table, "markdown")


def layer_section(out_dir: Path, suite: str, df: pd.DataFrame, tag: str = "") -> list[str]:
    """Complexity fits and the crossover of a layer sweep (smoke, quick, complexity...); one
    set of tables per dtype where a suite measures several (the GPU suites)."""
    dtypes = sorted(df["dtype"].astype(str).unique()) if "dtype" in df else []
    if len(dtypes) > 1:
        return [line for dtype in dtypes for line in
                [f"#### {dtype}", ""] + layer_section(out_dir, suite,
                                                      df[df["dtype"].astype(str) == dtype],
                                                      f"-{dtype}")]
    if "fit" in df and (df["fit"] == "fixed-tokens").all():  # one sweep over n: B = tokens / n
        df = df.assign(fit="")
    lines = ["### Complexity per layer: fitted log-log exponents", "",
             "Per-sequence forward cost; `flops` counted by torch.utils.flop_counter, `time` "
             "the measured median. Each fit's range is in `n_fit` / `d_fit`.", "",
             _save_table(out_dir, suite, f"complexity{tag}", tables.complexity_table(df))]
    try:
        cross = tables.crossover_table(df)
    except BadInput:  # a sweep without attention and recurrence side by side has none
        return lines
    return lines + [
        "### Crossover: where self-attention stops being cheaper", "",
        "`n_star_*` is the measured n where attention's per-sequence cost equals that of "
        "the layer in `versus` (log-log interpolation between grid points). `attention` is the "
        "whole layer (with its Q, K, V, O projections) or the core softmax(QK^T)V alone. "
        "`n_star_closed_form` solves p nd^2 + 4n^2d = c nd^2 (p = 8 for the layer, 0 for the "
        "core; c = 16 LSTM, 12 GRU; none for other layers); `n_paper` is the paper's rule "
        "of thumb n = d.", "",
        _save_table(out_dir, suite, f"crossover{tag}", cross)]


def table1_section(out_dir: Path, suite: str, df: pd.DataFrame) -> list[str]:
    """Table 1 reproduced: the paper's claims beside fitted exponents, with fit notes."""
    table, notes = table1(df)
    text = _save_table(out_dir, suite, "table1", table)
    notes_md = "\n".join(f"- {n}" for n in notes)
    if suite == "table1":  # the README's link; another suite's Table 1 stays in its folder
        write_atomic(out_dir / "table1.md", f"# Table 1, measured\n\n{text}\n{notes_md}\n")
    lines = ["### Table 1, measured", "", text, notes_md, ""]
    layer = df[df["runner"] == "layer"]
    if (layer["fit"].isna() | (layer["fit"] == "")).any():  # a plain sweep beside it (a
        lines += layer_section(out_dir, suite, df)  # suite file may declare both)
    return lines


def study_section(out_dir: Path, suite: str, df: pd.DataFrame) -> list[str]:
    """Convergence and ablation studies: one summary table per study and runner."""
    lines = ["Means over seeds (each configuration's seed count is in `seeds`); "
             "`steps_to_target` lists each seed, \"> N\" for one that never reached the "
             "target within its N steps; `reached` counts those that did.", ""]
    for study, spec, table in study_tables(df):
        lines += [f"### {spec.title}", "",
                  _save_table(out_dir, suite, f"{study.name}-{spec.runner}", table)]
    return lines


def translation_section(out_dir: Path, suite: str, df: pd.DataFrame) -> list[str]:
    """Table 2 and Table 3 (whichever the suite has); a tuning search's trials
    (`tvr tune`, its study in optuna.db) are not averaged into a table by model: its own
    search.md lists them."""
    if is_search(out_dir, suite):
        return [f"A tuning search (`tvr tune {suite}`): [search.md]({suite}/search.md) gives "
                "its space, its trials and each model's best recipe.", ""]
    sweep, t3 = recipes(df), table3(df)
    # a recipe sweep's rows are recipes, not seeds of one: its own table, not Table 2's means
    t2 = table2(df, toolkit_rows(out_dir)) if sweep.empty else pd.DataFrame()
    trained = not t2.empty and not t2["model"].isin(BASELINES).all()  # a Table 3 suite: none
    parts = [
        (sweep, "recipes", "Recipe sweep: peak learning rate and dropout per model (dev set)",
         "One seed per recipe; dev perplexity per subword, dev BLEU by beam search on the dev "
         "set; `chosen`: the model's lowest dev perplexity, the recipe a suite naming this "
         "sweep trains with."),
        (t2, "table2", "Table 2: BLEU against training cost",
         "Means over seeds; BLEU and chrF by sacrebleu (signatures in results.csv) on "
         "detokenised beam-search output (hypotheses in `hypotheses/`); `train_flops` counted "
         "forward + backward; `flops_to_bleu` where the dev curve (greedy) first reached "
         "`target_bleu`; decoding speed in sentences/s with and without the cache, measured "
         "on whatever else the machine ran.") if trained else
        (t2, "table2", "The trivial baselines on the same verses",
         "Source copy, the constant sentence and retrieval (the nearest training source's "
         "target), scored by sacrebleu as the models are."),
        (t3, "table3", "Table 3: variations of the base model, one row per run (dev set)",
         "")]
    lines = []
    from harness.report.readme_translation import CONVERGED_SUITE, translation_converged

    if suite == CONVERGED_SUITE:  # each model at convergence beside the matched budget
        lines += ["### Table 2 by stopping rule: matched budget and convergence", "",
                  translation_converged(out_dir)]
    for table, name, title, text in parts:
        if not table.empty:
            lines += [f"### {title}", "", *([text, ""] if text else []),
                      _save_table(out_dir, suite, name, table)]
    return lines


def threads_section(out_dir: Path, suite: str, df: pd.DataFrame) -> list[str]:
    """Thread scaling and the work-span projection of suite `threads`."""
    from harness.report.threads import projection_table, scaling_table

    return ["### Speed-up over CPU threads (measured)", "",
            "Forward time at a fixed number of tokens per batch on 1 thread and on the most "
            "threads; efficiency = speed-up / threads. One timing per point (median of its "
            "timed calls); on a shared machine the other cores may be busy.", "",
            _save_table(out_dir, suite, "scaling", scaling_table(df)),
            "### Work-span projection (Brent's bound; a projection, not a measurement)", "",
            "ms_P<p> = T1 / p + depth * tau: T1 the measured one-thread time, depth the "
            "layer's measured sequential depth, tau the smallest measured time per dependent "
            "step. P_span = T1 / (depth * tau): past it more processors barely help.", "",
            _save_table(out_dir, suite, "projection", projection_table(df))]


def identities_section(out_dir: Path, suite: str, df: pd.DataFrame) -> list[str]:
    """Permutation equivariance and the sinusoids' linear shift, per mixer and seed."""
    cols = ["mixer", "seed", "seq_len", "d_model", "equivariance_error", "equivariance_dtype",
            "pe_shift_residual", "pe_table_dtype"]
    table = df[df["status"] == "ok"][[c for c in cols if c in df]]
    return ["### Identities", "",
            "`equivariance_error`: largest |f(xP) - f(x)P| / |f(x)| (the LSTM is a control that "
            "must fail); `pe_shift_residual`: relative residual of the best linear map PE[pos] "
            "-> PE[pos + k]; each computed in the dtype beside it. These check mathematical "
            "identities of the computation, not trained behaviour.", "",
            _save_table(out_dir, suite, "identities", table)]


def rematch_section(out_dir: Path, suite: str, df: pd.DataFrame) -> list[str]:
    """Training throughput of scanned and sequential recurrences; MQAR against state size."""
    from harness.report import rematch

    timed = df[df["runner"] == "fwdbwd"]
    stale = int(rematch.before_loop_fix(timed).sum())
    caveat = [f"**{stale} of {len(timed)} timings were measured before the sequential loop's "
              "O(n^2) backward was fixed**: their loop times, and every speed-up over the loop "
              "below, are too large. Shown, not judged (the ledger reads none of them); "
              f"`tvr run {suite} --no-resume` on the same device measures them again.",
              ""] if stale else []
    lines = [*caveat, "### Training throughput: forward+backward ms of one layer", "",
             "One timing per point (median of its timed calls), every variant of one n run "
             "back to back.", "",
             _save_table(out_dir, suite, "throughput", rematch.throughput_table(df)),
             "### Speed-up of the scans over the sequential loop", "",
             "The paper column is Feng et al. (2024), measured on a GPU, not here.", "",
             _save_table(out_dir, suite, "speedup", rematch.speedup_table(df))]
    if (df["study"] == rematch.STUDY).any():
        lines += mqar_section(out_dir, suite, df)
    return lines


def mqar_section(out_dir: Path, suite: str, df: pd.DataFrame) -> list[str]:
    """MQAR against state size: final held-out accuracy per mixer, pairs and width, each
    mixer at its best learning rate per setting where the suite sweeps it."""
    from harness.report import rematch

    pts = rematch.mqar_frame(out_dir, suite)
    return ["### MQAR against state size", "",
            f"![MQAR against state size]({suite}/mqar-state.png)", "",
            rematch.mqar_caption(pts), "",
            _save_table(out_dir, suite, "mqar", rematch.mqar_table(pts))]


def scan_error_section(out_dir: Path, suite: str, df: pd.DataFrame) -> list[str]:
    """The float32 error of each minGRU/minLSTM form against a float64 loop, per n."""
    from harness.report import rematch

    return ["### Float32 error of the scans against a float64 loop", "",
            "Largest relative error over every h_t of one layer (same weights and input).", "",
            _save_table(out_dir, suite, "scan-error", rematch.scan_error_table(df))]


def anchor_section(out_dir: Path, suite: str, df: pd.DataFrame) -> list[str]:
    """scripts/anchor's rows: a third-party toolkit on our split, scored by our sacrebleu."""
    table = df[[c for c in ANCHOR_COLUMNS if c in df]]
    return ["### A third-party toolkit on the same split", "",
            "Trained by the toolkit with its documented configuration (`config`, scaled to "
            "our sizes) on our train/dev/test split (`split`: its digest) and BPE pieces, "
            "beam-decoded, detokenised by our tokenizer and scored by our sacrebleu call; "
            "Table 2 adds these rows beside ours when trained on the same data.", "",
            _save_table(out_dir, suite, "anchor", table), *_crosscheck(out_dir, suite)]


def _unreadable(path: Path, exc: Exception) -> str:
    return (f"- {path.name} could not be read ({type(exc).__name__}: {exc}); "
            "rerun `python -m harness.crosscheck.anchor_weights` on its run.")


def _crosscheck(out_dir: Path, suite: str) -> list[str]:
    """The toolkit's trained weights run by our Transformer and decoding, one run per file
    (harness.crosscheck.anchor_weights writes crosscheck/<run>.json), where measured; a file
    that cannot be read is one line, never a lost report."""
    facts, rows = [], []
    for path, got in crosschecks(out_dir / suite):
        if isinstance(got, Exception):
            facts.append(_unreadable(path, got))
            continue
        try:  # both built before either is kept: a run is in the table and text, or neither
            run = [{"run": path.stem, "decoding": name,
                    **{k: got[name].get(k) for k in CROSSCHECK_COLUMNS}}
                   for name in CROSSCHECK_ROWS if isinstance(got.get(name), dict)]
            fact = (
                f"- `{got['checkpoint']}` (update {got['step']}): teacher-forced "
                f"log-probabilities within {float(got['logprob_max_abs_diff']):.1e} of the "
                f"toolkit's own forward on {got['check_positions']} target positions"
                + (f"; dev perplexity {float(got['dev_ppl']):.2f} as our rows' `dev_ppl`"
                   if got.get("dev_ppl") is not None else ""))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            facts.append(_unreadable(path, exc))
        else:
            rows += run
            facts.append(fact)
    if not facts:
        return []
    return ["", "#### The toolkit's weights in our Transformer", "",
            "Each run's checkpoint loaded into our Transformer (`python -m "
            "harness.crosscheck.anchor_weights`, run by `scripts/anchor` after training) and "
            "all dev verses decoded by the toolkit (`joeynmt_own_beam`) and by our code "
            "(`beam4` at its alpha, `beam4_our_rule` at the alpha our rule picks on dev):", "",
            *facts, "", *([_save_table(out_dir, suite, "crosscheck", pd.DataFrame(rows))]
                          if rows else [])]


# (predicate on a suite's results, section) in order; the first that applies is used
SECTIONS: list[tuple[Callable[[str, pd.DataFrame], bool], Callable[..., list[str]]]] = [
    (lambda suite, df: suite == ANCHOR, anchor_section),
    (lambda suite, df: df["runner"].isin(TRANSLATION_RUNNERS).any(), translation_section),
    (lambda suite, df: is_table1(df), table1_section),
    (lambda suite, df: (df["runner"] == "layer").any(), layer_section),
    (lambda suite, df: (df["runner"] == "threads").any(), threads_section),
    (lambda suite, df: (df["runner"] == "identities").any(), identities_section),
    (lambda suite, df: (df["runner"] == "fwdbwd").any(), rematch_section),
    (lambda suite, df: (df["runner"] == "scan-error").any(), scan_error_section),
    (lambda suite, df: (df["study"] == STUDY_MQAR).any(), mqar_section),
    (lambda suite, df: df["runner"].isin(TABLE_RUNNERS).any(), study_section),
]


def _heading(out_dir: Path, name: str, prefix: str) -> tuple[str, str]:
    """(heading, Markdown command that measures it) of a suite's section, or of a variant's
    subsection under its suite (harness.variants)."""
    suite, variant = split_name(name)
    if not variant:
        return f"## Suite `{prefix}{name}`", f"`{COMMANDS.get(name, f'tvr run {name}')}`"
    config = f" (its configuration: [{CONFIG_FILE}]({prefix}{name}/{CONFIG_FILE}))" \
        if (out_dir / name / CONFIG_FILE).is_file() else ""
    return (f"### Variant `{variant}` of `{prefix}{suite}`", run_command(out_dir, name)
            + config)


def _subsection(parts: list[str]) -> list[str]:
    """A variant's section inside its suite's: its own headings one level down."""
    return [f"#{line}" if line.startswith(("### ", "#### ", "##### ")) else line
            for line in parts]


def suite_section(out_dir: Path, name: str, prefix: str = "") -> tuple[list[str], list[Path]]:
    """One suite's part of REPORT.md (its tables and figures regenerated), and the table and
    figure files under <out>/<suite>/ (`tvr run` attaches them to the suite's MLflow run); a
    variant's (`SUITE/variants/VARIANT`) is a subsection, its headings one level down."""
    heading, command = _heading(out_dir, name, prefix)
    df = load_results(out_dir, [name])
    every = load_results(out_dir, [name], machine="all")
    if df.empty:  # a results file with its header only (a sweep stopped before any row)
        return [heading, "", f"No rows yet: {command} measures them.", ""], []
    counts = ", ".join(f"{n} {s}" for s, n in df["status"].value_counts().items())
    parts = [heading, "", f"{len(df)} points ({counts}). {_machine(df, every, command)}.", ""]
    suite, variant = split_name(name)
    saved = last_command(out_dir, name) if variant else None
    flag = busy_flag(df, f"{saved} --no-resume" if saved else
                     f"tvr run {suite} <the overrides of {variant}> --no-resume" if variant
                     else COMMANDS.get(name) or ("tvr bench" if name == "bench" else
                                                 f"tvr run {name} --no-resume"))
    parts += [flag, ""] if flag else []
    moved = archived(out_dir, name)
    parts += [f"{moved} superseded row{'s' if moved != 1 else ''} (a recipe a later one of its "
              f"search replaced) in [{ARCHIVE}/{RESULTS_FILE}]({prefix}{name}/{ARCHIVE}/"
              f"{RESULTS_FILE}), which no table reads.", ""] if moved else []
    for applies, section in SECTIONS:
        if applies(name, df):
            try:
                parts += section(out_dir, name, df)
            except BadInput as exc:  # one unfit suite must not cost the whole report
                parts += [f"No tables for this suite: {exc}", ""]
            except KeyError as exc:  # rows of an older or hand-edited file
                parts += [f"No tables for this suite: {plots.lacking(name, exc, df.columns)}",
                          ""]
            break
    skipped: list[str] = []
    try:
        figures = plots.draw(out_dir, name, skipped=skipped)
    except BadInput:  # no figure applies to this suite's runners
        figures = []
    parts += [f"![{p.stem}]({prefix}{name}/{p.name})" for p in figures] + [""]
    parts += [f"- figure {reason}" for reason in skipped] + ([""] if skipped else [])
    files = [p for p in sorted((out_dir / name).glob("*"))
             if p.suffix in (".md", ".csv", ".png") and p.name not in (RESULTS_FILE, SERIES_FILE)]
    return parts, files


def _section(out_dir: Path, name: str, prefix: str, before: list[str]) -> list[str]:
    """suite_section's Markdown; a variant's as a subsection of its suite, after the
    suite's own section (and a heading for a suite with variants only)."""
    suite, variant = split_name(name)
    if not variant:
        return suite_section(out_dir, name, prefix)[0]
    head = [] if f"## Suite `{prefix}{suite}`" in before else [f"## Suite `{prefix}{suite}`", ""]
    if head and not (out_dir / suite / RESULTS_FILE).is_file():
        head += [f"No rows of its own, only its variants (`tvr run {suite}` measures its "
                 "own points).", ""]
    own, *rest = suite_section(out_dir, name, prefix)[0]
    return [*head, own, *_subsection(rest)]


def write_report(out_dir: Path, suite: str | None = None) -> Path:
    """Regenerate the figures and tables of `suite` (default: every suite with results)
    and write <out>/REPORT.md; returns its path."""
    suites = [suite] if suite else stored_names(out_dir, RESULTS_FILE)
    if not suites:
        load_results(out_dir)  # raises BadInput naming the command to run
    parts: list[str] = []
    for name in suites:
        parts += _section(out_dir, name, "", parts)
    gpu = out_dir / GPU_DIR  # scripts/gpu-check's suites, measured on a lent GPU
    for name in [] if suite else stored_names(gpu, RESULTS_FILE):
        parts += _section(gpu, name, f"{GPU_DIR}/", parts)
    # after the suites' sections: the ledger links the figures they have just drawn
    head = ["# tvr-bench report", "",
            "Generated by `tvr report` from the stored results in this folder; every number "
            "below was measured by this code.", "", "## Claims ledger", "",
            "Each claim of the paper beside the measurements that test it (`tvr claims`).", "",
            render_claims(ledger(out_dir), "markdown"), ""]
    path = out_dir / "REPORT.md"
    write_atomic(path, "\n".join(head + parts))
    return path
