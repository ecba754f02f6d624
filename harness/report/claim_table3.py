"""The paper's Table 3 judged from translation (suite `translation-table3-tuned`, around the
tuned Transformer of Table 2, once it has rows; else `translation-table3-quick`): each
variation against the base model on dev perplexity and dev BLEU (beam 4), by an exact
permutation test over seeds and the clustered paired bootstrap and approximate randomization
over the dev sentences (all seeds of a variation kept together), behind the power gates.
The synthetic-task rows (claims table3-heads, table3-ffn, table3-positions) are
supplementary evidence."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.files import read_lines
from harness.report import gates
from harness.report.claim_training import training_scale
from harness.report.claim_translation import BASELINES, clustered_tests, translation_scope
from harness.report.evidence import Claim, Evidence, Missing, Stored, scale_facts
from harness.report.rulebook import TRAINED_QUALITY
from harness.report.verdicts import CONTRADICTS, QUALIFIED, SUPPORTS
from harness.results import read_results, results_path

SUITE = "translation-table3-quick"
TUNED_SUITE = "translation-table3-tuned"  # judges the claims once it has trained rows
# dev perplexity has no sentence-level test: the exact test over seeds decides it, and
# 3 + 3 seeds cannot reach p < 0.05 that way (smallest two-sided p 0.1)
MIN_SEEDS = 4
NEAR_PPL = 0.02  # dev perplexities within 2% (relative) count as "nearly identical"
RUN = (f"`tvr tune translation-cpu-tune --only transformer`, then `tvr run {TUNED_SUITE} "
       "--executor ray` (about 15 core-hours)")
REMEDY = f"{MIN_SEEDS}+ seeds per variation: {RUN}, which runs {MIN_SEEDS} and the baselines"


def suite_of(stored: Stored) -> str:
    """TUNED_SUITE once it has a trained row, else SUITE (read, not noted as evidence)."""
    path = results_path(stored.out_dir, TUNED_SUITE)
    rows = read_results(path) if path.is_file() else pd.DataFrame()
    trained = not rows.empty and rows["runner"].eq("translate").any() \
        and rows["status"].isin(["ok", "diverged"]).any()
    return TUNED_SUITE if trained else SUITE


@dataclass(frozen=True)
class Versus:
    """A variation against a reference: dev perplexity and BLEU differences, and tests."""
    label: str
    ppl: float  # variation minus reference (lower is better)
    bleu: float  # variation minus reference (higher is better)
    ppl_tests: tuple[gates.Test, ...]
    bleu_tests: tuple[gates.Test, ...]

    def separated(self, which: str) -> bool:
        tests = self.ppl_tests if which == "ppl" else self.bleu_tests
        return bool(tests) and all(t.p < gates.ALPHA for t in tests)

    def text(self) -> str:
        return (f"{self.label}: dev perplexity {self.ppl:+.3g}, dev BLEU {self.bleu:+.3g} "
                f"against the reference")


def _rows(stored: Stored, study: str) -> pd.DataFrame:
    rows = stored.rows(suite_of(stored), runner="translate", study=study)
    return rows.drop_duplicates(["point_id", "seed"], keep="last")


def _runs(stored: Stored, rows: pd.DataFrame) -> list[list[str]]:
    """The rows' dev hypotheses, one list per seed, by seed."""
    suite = suite_of(stored)
    runs = []
    for f in rows.sort_values("seed")["dev_hypotheses"]:
        if not (stored.out_dir / suite / str(f)).is_file():
            raise Missing(suite, f"suite {suite} lacks its saved hypotheses ({f})")
        runs.append(read_lines(stored.out_dir / suite / str(f)))
    return runs


def versus(stored: Stored, ref: pd.DataFrame, var: pd.DataFrame, label: str) -> Versus:
    """`var` against `ref` on the seeds both ran: dev BLEU by the clustered sentence tests
    and by the test over seeds, dev perplexity by the test over seeds."""
    common = sorted(set(ref["seed"]) & set(var["seed"]))
    ref_c, var_c = ref[ref["seed"].isin(common)], var[var["seed"].isin(common)]
    suite = suite_of(stored)
    refs_file = stored.out_dir / suite / str(ref["dev_references"].iloc[0])
    if not refs_file.is_file():
        raise Missing(suite, f"suite {suite} lacks its saved references ({refs_file.name})")
    name, reference = label.split(" vs ")
    bleu_tests = clustered_tests(_runs(stored, ref_c), _runs(stored, var_c),
                                 read_lines(refs_file), name, reference, metrics=("BLEU",))
    ppl_tests: tuple[gates.Test, ...] = ()
    if min(len(ref), len(var)) >= 2:
        ppl_tests = gates.seed_tests(ref["dev_ppl"], var["dev_ppl"], f"{label}, dev ppl per seed")
        bleu_tests += gates.seed_tests(ref["dev_bleu"], var["dev_bleu"],
                                       f"{label}, dev BLEU per seed")
    return Versus(label, float(var["dev_ppl"].mean() - ref["dev_ppl"].mean()),
                  float(var["dev_bleu"].mean() - ref["dev_bleu"].mean()), ppl_tests,
                  tuple(bleu_tests))


def _label(rows: pd.DataFrame, base: pd.DataFrame, knobs: tuple[str, ...]) -> str:
    return ", ".join(f"{k}={rows[k].iloc[0]:g}" if isinstance(rows[k].iloc[0], float) else
                     f"{k}={rows[k].iloc[0]}" for k in knobs
                     if str(rows[k].iloc[0]) != str(base[k].iloc[0])) or "base"


def _gates(stored: Stored, arms: dict[str, pd.DataFrame], pairs: list[Versus]) -> tuple:
    every = stored.rows(suite_of(stored))
    found = every[every["model"].isin(BASELINES)].drop_duplicates("model", keep="last")
    value = dict(zip(found["model"], pd.to_numeric(found["dev_bleu"]), strict=True))
    bleu = {a: float(g["dev_bleu"].mean()) for a, g in arms.items()}
    return (gates.baseline_gate(bleu, {b: value.get(b) for b in BASELINES}, "dev BLEU",
                                f"the {', '.join(BASELINES)} baselines on its dev set: "
                                f"{RUN}, which has them"),
            gates.seeds_gate({a: int(g["seed"].nunique()) for a, g in arms.items()}, REMEDY,
                             MIN_SEEDS),
            gates.range_gate(bleu, "dev BLEU", 100.0, 0.0, "models that learn the task: "
                             f"{RUN}"),
            *_agree(pairs))


def _agree(pairs: list[Versus]) -> tuple[gates.Gate, ...]:
    agree = [gates.agree_gate(p.bleu_tests) for p in pairs]
    bad = [g for g in agree if not g.passed]
    return (bad[0],) if bad else tuple(agree[:1])


def _split(stored: Stored, study: str, knobs: tuple[str, ...]) -> tuple:
    base = _rows(stored, "table3-base")
    rows = _rows(stored, study)
    present = tuple(k for k in knobs if k in rows and k in base)  # what these rows record
    if not present:
        raise Missing(suite_of(stored), f"suite {suite_of(stored)}'s {study} rows record "
                      f"none of {knobs}")
    arms = {_label(g, base, present): g for _, g in rows.groupby(list(present), dropna=False)}
    return base, arms


def _worse(stored: Stored, study: str, knobs: tuple[str, ...], what: str,
           pick_best: bool = False) -> Evidence:
    """The claim that each variation (or h=1 against the best setting) is worse than the
    reference on dev perplexity and BLEU."""
    base, arms = _split(stored, study, knobs)
    every = {"base": base, **arms}
    if pick_best:  # Table 3 (A): the worst-case variation against the best setting
        worst = "n_heads=1"
        if worst not in every:
            raise Missing(suite_of(stored), f"suite {suite_of(stored)} has no single-head row")
        best = min((a for a in every if a != worst), key=lambda a: every[a]["dev_ppl"].mean())
        pairs = [versus(stored, every[best], every[worst], f"{worst} vs {best}")]
    else:
        pairs = [versus(stored, base, g, f"{a} vs base") for a, g in arms.items()]
    worse = [p.ppl > 0 and p.bleu < 0 and p.separated("ppl") and p.separated("bleu")
             for p in pairs]
    better = [p.ppl < 0 and p.bleu > 0 and p.separated("ppl") and p.separated("bleu")
              for p in pairs]
    verdict = SUPPORTS if all(worse) else CONTRADICTS if all(better) else QUALIFIED
    direction = "; ".join(
        f"{p.text()} ({'the paper' if p.ppl > 0 else 'against the paper'}'s direction on "
        "perplexity)" for p in pairs)
    return _evidence(stored, every, pairs, verdict, direction,
                     f"supports if {what} has higher dev perplexity and lower dev BLEU, each "
                     f"separated (every test p < {gates.ALPHA:g}); contradicts if lower and "
                     "higher, so separated; else qualified")


def _evidence(stored: Stored, every: dict, pairs: list[Versus], verdict: str,
              direction: str, rule: str) -> Evidence:
    rows = pd.concat(every.values())
    measured = "; ".join(f"{a}: dev perplexity {g['dev_ppl'].mean():.4g}, dev BLEU "
                         f"{g['dev_bleu'].mean():.3g} ({g['seed'].nunique()} seed"
                         f"{'s' if g['seed'].nunique() > 1 else ''})"
                         for a, g in every.items())
    return Evidence(
        f"{suite_of(stored)}: Table 3's variations of the "
        f"{'tuned' if suite_of(stored) == TUNED_SUITE else 'quick'} translation Transformer, "
        "dev set, beam 4",
        f"{measured}. {direction}", verdict,
        rule + f". Gates: every variation above the trivial baselines on dev BLEU, "
        f"{MIN_SEEDS}+ seeds per variation, dev BLEU off its ceiling (100) and floor (0), the "
        "sentence tests and the test over seeds agree",
        training_scale(rows), _gates(stored, every, pairs),
        tuple(t for p in pairs for t in (*p.ppl_tests, *p.bleu_tests)),
        scale_facts(rows, int(rows["dev_sentences"].iloc[0]) if "dev_sentences" in rows
                    else ""),
        scope=translation_scope(rows, _budget(rows, every)))


def _budget(rows: pd.DataFrame, every: dict[str, pd.DataFrame]) -> str:
    """The budget beside the updates run: one peak learning rate for every variation (or
    those used), and the seeds per variation."""
    lrs = sorted(pd.to_numeric(rows.get("peak_lr", pd.Series(dtype=float)),
                               errors="coerce").dropna().unique())
    parts = [f"peak learning rate {lrs[0]:g} for every variation" if len(lrs) == 1 else
             f"peak learning rates {', '.join(f'{v:g}' for v in lrs)}" if lrs else ""]
    seeds = sorted({int(g["seed"].nunique()) for g in every.values()})
    if seeds:
        lo, hi = seeds[0], seeds[-1]
        count = str(lo) if lo == hi else f"{lo}-{hi}"
        parts.append(f"{count} seed{'s' if hi > 1 else ''} per variation")
    return ", ".join(p for p in parts if p)


def heads(stored: Stored) -> Evidence:
    return _worse(stored, "table3-A", ("n_heads",), "single-head attention (against the "
                  "best number of heads)", pick_best=True)


def key_size(stored: Stored) -> Evidence:
    return _worse(stored, "table3-B", ("d_k",), "each smaller d_k (against the base)")


def bigger(stored: Stored) -> Evidence:
    """Row C: a variation with more parameters than the base should have lower dev
    perplexity, one with fewer higher."""
    base, arms = _split(stored, "table3-C", ("n_layers", "d_model", "d_ff"))
    pairs, agrees, against = [], [], []
    for a, g in arms.items():
        pair = versus(stored, base, g, f"{a} vs base")
        larger = float(g["n_params"].mean()) > float(base["n_params"].mean())
        pairs.append(pair)
        agrees.append((pair.ppl < 0) == larger and pair.separated("ppl"))
        against.append((pair.ppl > 0) == larger and pair.separated("ppl"))
    verdict = SUPPORTS if all(agrees) else CONTRADICTS if all(against) else QUALIFIED
    return _evidence(stored, {"base": base, **arms}, pairs, verdict,
                     "; ".join(f"{p.text()} ({int(g['n_params'].mean())} parameters, base "
                               f"{int(base['n_params'].mean())})"
                               for p, g in zip(pairs, arms.values(), strict=True)),
                     "supports if every larger variation has lower dev perplexity and every "
                     "smaller one higher, separated by the test over seeds; contradicts if "
                     "every one goes the other way, so separated; else qualified")


def dropout(stored: Stored) -> Evidence:
    base, arms = _split(stored, "table3-D", ("dropout", "label_smoothing"))
    arms = {a: g for a, g in arms.items() if a.startswith("dropout")}
    if not arms:
        raise Missing(suite_of(stored), f"suite {suite_of(stored)} has no dropout variation")
    pairs = [versus(stored, base, g, f"{a} vs base") for a, g in arms.items()]
    off = [p for p, a in zip(pairs, arms, strict=True) if a == "dropout=0"]
    worse = all(p.ppl > 0 and p.separated("ppl") for p in off)
    better = all(p.ppl < 0 and p.separated("ppl") for p in off)
    verdict = SUPPORTS if off and worse else CONTRADICTS if off and better else QUALIFIED
    return _evidence(stored, {"base": base, **arms}, pairs, verdict,
                     "; ".join(p.text() for p in pairs) + (
                         "" if suite_of(stored) == TUNED_SUITE else " (600 updates: "
                         "over-fitting, what dropout guards against, may not have begun)"),
                     "supports if the model without dropout has higher dev perplexity, "
                     "separated by the test over seeds; contradicts if lower, so separated; "
                     "else qualified")


def learned_positions(stored: Stored) -> Evidence:
    base, arms = _split(stored, "table3-E", ("pos_encoding",))
    pairs = [versus(stored, base, g, f"{a} vs base") for a, g in arms.items()]
    close = all(abs(p.ppl) <= NEAR_PPL * base["dev_ppl"].mean() for p in pairs)
    apart = any(p.separated("ppl") or p.separated("bleu") for p in pairs)
    verdict = (SUPPORTS if close and not apart else CONTRADICTS if apart and not close
               else QUALIFIED)
    return _evidence(stored, {"base": base, **arms}, pairs, verdict,
                     "; ".join(p.text() for p in pairs),
                     f"supports if learned positions' dev perplexity is within {NEAR_PPL:.0%} "
                     "of the sinusoids' and no test separates them; contradicts if farther "
                     "and separated; else qualified")


CLAIMS = [
    Claim("table3-heads-translation", "Table 3 (A), translation: single-head attention is "
          "worse than the best number of heads", TUNED_SUITE, "", heads, kind=TRAINED_QUALITY),
    Claim("table3-key-size", "Table 3 (B), translation: reducing the attention key size d_k "
          "hurts model quality", TUNED_SUITE, "", key_size, kind=TRAINED_QUALITY),
    Claim("table3-bigger", "Table 3 (C), translation: bigger models are better", TUNED_SUITE, "",
          bigger, kind=TRAINED_QUALITY),
    Claim("table3-dropout", "Table 3 (D), translation: dropout is very helpful in avoiding "
          "over-fitting", TUNED_SUITE, "", dropout, kind=TRAINED_QUALITY),
    Claim("table3-positions-translation", "Table 3 (E), translation: learned positional "
          "embeddings give nearly identical results to sinusoids", TUNED_SUITE, "",
          learned_positions, kind=TRAINED_QUALITY),
]
