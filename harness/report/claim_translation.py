"""Claims about translation (the paper's Table 2), judged from suite `translation-quick`:
BLEU of the saved test hypotheses, compared with sacrebleu's paired bootstrap resampling."""

from __future__ import annotations

import pandas as pd
from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest

from harness.report.claim_training import training_scale
from harness.report.claims import (
    CONTRADICTS,
    QUALIFIED,
    SUPPORTS,
    Claim,
    Evidence,
    Missing,
    Stored,
)
from harness.results import read_lines

SUITE = "translation-quick"
ALPHA = 0.05  # a BLEU difference counts when the paired bootstrap's p-value is below this
COST_RATIO = 1.1  # "no more training": at most 1.1x the other model's counted FLOPs
SAMPLES = 1000  # bootstrap resamples (sacrebleu's fixed seed: the same verdict every time)


def _test_bleu(stored: Stored, rows: pd.DataFrame) -> dict[str, tuple[float, float, float]]:
    """model -> (BLEU, 95% bootstrap half-width, p-value against the Transformer; NaN for
    the Transformer itself), from the saved test hypotheses of one seed per model."""
    folder = stored.out_dir / SUITE
    files = [rows["test_references"].iloc[0], *rows["test_hypotheses"]]
    missing = [f for f in files if not (folder / str(f)).is_file()]
    if missing:  # results copied without their hypotheses folder
        raise Missing(SUITE, f"suite {SUITE} lacks its saved hypotheses ({missing[0]})")
    refs = read_lines(folder / files[0])
    systems = [(m, read_lines(folder / h)) for m, h in zip(rows["model"],
                                                           rows["test_hypotheses"], strict=True)]
    _, scores = PairedTest(systems, {"BLEU": BLEU()}, [refs], test_type="bs",
                           n_samples=SAMPLES)()
    return {name: (r.score, r.ci, float("nan") if r.p_value is None else r.p_value)
            for name, r in zip(scores["System"], scores["BLEU"], strict=True)}


def table2_bleu_at_cost(stored: Stored) -> Evidence:
    rows = stored.rows(SUITE, runner="translate")
    if "measured_at" in rows:
        rows = rows.sort_values("measured_at", kind="stable")
    # the bootstrap pairs one run per model: one seed, on the device measured last
    one = (rows["seed"] == rows["seed"].min()) & (rows["device"] == rows["device"].iloc[-1])
    rows = rows[one].drop_duplicates("model", keep="last")
    if "transformer" not in set(rows["model"]) or len(rows) < 2:
        raise Missing(SUITE, f"suite {SUITE} lacks the Transformer or a recurrent model")
    rows = pd.concat([rows[rows["model"] == "transformer"], rows[rows["model"] != "transformer"]])
    bleu = _test_bleu(stored, rows)
    flops = dict(zip(rows["model"], pd.to_numeric(rows["train_flops"]), strict=True))
    ours = bleu["transformer"][0]
    better, worse = [], []
    for model in rows["model"].iloc[1:]:
        score, _, p = bleu[model]
        cheaper = flops["transformer"] <= COST_RATIO * flops[model]
        if score < ours and p < ALPHA and cheaper:
            better.append(model)
        elif score > ours and p < ALPHA and flops[model] <= COST_RATIO * flops["transformer"]:
            worse.append(model)
    recurrent = len(rows) - 1
    verdict = CONTRADICTS if worse else SUPPORTS if len(better) == recurrent else QUALIFIED
    measured = "; ".join(
        f"{m}: test BLEU {bleu[m][0]:.2f} ± {bleu[m][1]:.2f}"
        + ("" if m == "transformer" else f" (p = {bleu[m][2]:.3f} against the Transformer)")
        + f", {flops[m]:.3g} training FLOPs" for m in rows["model"])
    return Evidence(
        f"{SUITE}: the Transformer and parameter-matched recurrent encoder-decoders, "
        f"{int(rows['test_sentences'].iloc[0])} test verses, one seed each",
        measured + " (± the 95% bootstrap interval; sacrebleu paired bootstrap, "
        f"{SAMPLES} resamples)", verdict,
        f"supports if the Transformer's test BLEU beats every recurrent model's with paired "
        f"bootstrap p < {ALPHA:g} at no more than {COST_RATIO:g}x its training FLOPs; "
        f"contradicts if a recurrent model beats it so at no more than {COST_RATIO:g}x the "
        "Transformer's FLOPs; qualified otherwise (not separated at this scale)",
        training_scale(rows))


CLAIMS = [
    Claim("table2-bleu-cost", "Table 2: the Transformer reaches better BLEU than recurrent "
          "models at a fraction of the training cost", SUITE, f"{SUITE}/bleu-vs-cost.png",
          table2_bleu_at_cost),
]
