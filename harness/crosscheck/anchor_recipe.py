"""Our searched recipe in JoeyNMT's terms, for `scripts/anchor --recipe`: which of our
models a JoeyNMT config trains, the config with a trial's recipe and counts, and the token
batch size that gives JoeyNMT the trial's tokens per update (harness.crosscheck.anchor
trains and scores it)."""

from __future__ import annotations

import json
import math
import random
from typing import Any

from tokenizers import Tokenizer

from harness.crosscheck.anchor import pieces
from harness.train.translation.bitext import Corpus


def our_model(cfg: dict[str, Any]) -> str:
    """Which of our Table 2 models a JoeyNMT config trains (its recurrent decoder always
    attends; its default cell is the GRU)."""
    enc = cfg["model"].get("encoder", {})
    if enc.get("type") == "transformer":
        return "transformer"
    return f"{str(enc.get('rnn_type', 'gru')).lower()}-attention"


# What JoeyNMT cannot express of our recipes: one `dropout` per stack acts on the attention
# weights, the FFN hidden and the residuals alike, so attn_dropout takes the residual value.
UNMATCHED = ("attn_dropout",)
# What JoeyNMT always does: it ends every source in EOS, and our `init` "xavier" is its
# initialisation; a recipe choosing otherwise is not matched.
JOEYNMT_DOES = {"source_eos": True, "init": "xavier"}


def unmatched(recipe: dict[str, Any]) -> list[str]:
    """The recipe's keys the toolkit trains otherwise (the row's `recipe_unmatched`)."""
    return [k for k in recipe if k in UNMATCHED
            or k in JOEYNMT_DOES and recipe[k] != JOEYNMT_DOES[k]]


def train_lengths(corpus: Corpus, tok: Tokenizer, max_tokens: int) -> list[tuple[int, int]]:
    """(source, target) pieces of the training pairs export() keeps."""
    src = pieces(tok, [s for s, _ in corpus.train])
    tgt = pieces(tok, [t for _, t in corpus.train])
    return [(len(s), len(t)) for s, t in zip(src, tgt, strict=True)
            if len(s) <= max_tokens and len(t) <= max_tokens]


def batch_size_for(lengths: list[tuple[int, int]], per_update: float, seed: int = 0) -> int:
    """The smallest JoeyNMT token batch size whose batches carry `per_update` target tokens
    (EOS included) on average over an epoch of these (source, target) lengths.

    JoeyNMT's TokenBatchSampler (datasets.py, 2.3.0) takes pairs in shuffled order until
    (the longest side + 1) x pairs reaches its batch size, without sorting by length, so its
    batches carry about half their size in real target tokens; ours are sorted by length and
    carry most of theirs. The same number would give it fewer tokens per update than ours.
    Its rule is replayed here (it is not importable from our venv), over one shuffled epoch;
    the size is found by bisection (the mean grows with the size)."""
    order = list(range(len(lengths)))
    random.Random(seed).shuffle(order)

    def mean_tokens(size: int) -> float:
        tokens = done = longest = pairs = held = 0
        for i in order:
            src, tgt = lengths[i]
            longest, pairs, held = max(longest, src + 1, tgt + 1), pairs + 1, held + tgt + 1
            if longest * pairs >= size:
                tokens, done, longest, pairs, held = tokens + held, done + 1, 0, 0, 0
        return tokens / done if done else math.inf  # the last, partial batch aside

    lo, hi = 1, max(2, int(per_update * 16))
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if mean_tokens(mid) < per_update else (lo, mid)
    return lo


def with_recipe(cfg: dict[str, Any], recipe: dict[str, Any], updates: int,
                validate_every: int, batch_size: int) -> dict[str, Any]:
    """The config trained as our search's trial was: its recipe (recipe.recipe_of) in
    JoeyNMT's keys, with our fixed choices (Adam (0.9, 0.98), the paper's warm-up then
    inverse-square-root schedule, which is JoeyNMT's warmupinversesquareroot, loss per
    token, selection on dev BLEU), `updates` updates and a validation every
    `validate_every`, the trial's own counts, and JoeyNMT's token batches of `batch_size`
    (batch_size_for: the trial's tokens per update). JoeyNMT sets each rate after the update, so its
    update k + 1 runs at our rate of update k and its first at the peak."""
    out = json.loads(json.dumps(cfg))  # a deep copy
    train = out["training"]
    for key in ("patience", "decrease_factor"):  # the plateau schedule's
        train.pop(key, None)
    train |= {"optimizer": "adam", "adam_betas": [0.9, 0.98], "weight_decay": 0.0,
              "scheduling": "warmupinversesquareroot", "learning_rate": recipe["peak_lr"],
              "learning_rate_warmup": recipe["warmup_steps"], "learning_rate_min": 1e-8,
              "label_smoothing": recipe["label_smoothing"],
              "batch_size": batch_size, "batch_type": "token",
              "normalization": "tokens", "early_stopping_metric": "bleu", "updates": updates,
              "validation_freq": validate_every, "logging_freq": validate_every,
              "epochs": 10_000}  # `updates` ends it (a validation a multiple of a log)
    for side in ("encoder", "decoder"):
        stack = out["model"][side]
        stack |= {"num_layers": recipe["n_layers"], "dropout": recipe["dropout"]}
        stack.setdefault("embeddings", {})["dropout"] = recipe["dropout"]
        if "hidden_dropout" in stack:  # the recurrent decoder's, before its output layer
            stack["hidden_dropout"] = recipe["dropout"]
        if "norm" in recipe:
            stack["layer_norm"] = recipe["norm"]
    return out
