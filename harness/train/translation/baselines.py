"""The baselines that need no training, scored exactly as the models on the same sentences,
each a row of the suite with its hypotheses saved beside the models':

- "source-copy": the source sentence as its own translation;
- "constant": one sentence output for every source, the training target that scores the
  highest dev BLEU when output for every dev sentence;
- "retrieval": the target of the training pair whose source is nearest to the source by
  cosine similarity of TF-IDF vectors of character n-grams.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from sacrebleu.metrics import BLEU

from experiments.spec import Point
from harness.runner import Context, Result
from harness.train.translation import bitext as corpora
from harness.train.translation.tfidf import CHAR_NGRAMS, TfIdf
from harness.train.translation.translate_runner import held_out, load_corpus, options, score_split

CONSTANT_SHORTLIST = 20  # candidates rescored by sacrebleu after the fast count


def _run(point: Point, ctx: Context, translate_split, extra: dict[str, Any]) -> Result:  # noqa: ANN001
    """Score `translate_split(pairs) -> hypotheses` on dev and test, hypotheses saved."""
    opts = options(point)
    corpus = load_corpus(opts)
    values: dict[str, Any] = {"n_params": 0, "train_flops": 0, "train_s": 0.0,
                              "corpus_split": corpora.split_digest(corpus), **extra}
    stem = f"{point.subject}-{point.digest}-{ctx.device.type}-{ctx.machine}"
    files: dict[str, list[str]] = {}
    for split in ("dev", "test"):
        pairs = held_out(corpus, split, opts, opts.final_sentences)
        hyps = translate_split(pairs)
        values |= score_split(split, hyps, [t for _, t in pairs], corpus, opts, stem, files)
    return Result(values, files=files)


def run_source_copy(point: Point, ctx: Context) -> Result:
    """The baseline that outputs its source unchanged."""
    return _run(point, ctx, lambda pairs: [s for s, _ in pairs], {})


def run_constant(point: Point, ctx: Context) -> Result:
    """The best constant sentence, chosen on the dev sentences this point scores."""
    opts = options(point)
    corpus = load_corpus(opts)
    dev_refs = [t for _, t in held_out(corpus, "dev", opts, opts.final_sentences)]
    best = best_constant(sorted({t for _, t in corpus.train}), dev_refs)
    return _run(point, ctx, lambda pairs: [best] * len(pairs), {"constant_sentence": best})


def best_constant(candidates: list[str], refs: list[str]) -> str:
    """The candidate with the highest corpus BLEU when output for every reference. Every
    candidate is ranked by its BLEU computed from n-gram counts (the clipped matches of a
    constant hypothesis against each reference need only, per n-gram, how many references
    hold it how often), then the best CONSTANT_SHORTLIST are rescored by sacrebleu itself,
    which decides; a hand count because sacrebleu on every candidate would take hours."""
    bleu = BLEU()
    tok = bleu.tokenizer
    ref_tokens = [tok(r).split() for r in refs]
    ref_len = sum(len(r) for r in ref_tokens)
    holders: dict[tuple[str, ...], Counter] = {}  # n-gram -> {count in a ref: refs}
    for words in ref_tokens:
        for gram, k in _ngrams(words).items():
            holders.setdefault(gram, Counter())[k] += 1

    def fast_bleu(text: str) -> float:
        words = tok(text).split()
        if not words:
            return 0.0
        matches, totals = [0] * 4, [max(0, len(words) - n) * len(refs) for n in range(4)]
        for gram, k in _ngrams(words).items():
            matches[len(gram) - 1] += sum(min(k, c) * m for c, m in holders.get(gram, {}).items())
        if min(totals) == 0 or min(matches) == 0:
            return 0.0
        log_p = sum(math.log(m / t) for m, t in zip(matches, totals, strict=True)) / 4
        hyp_len = len(words) * len(refs)
        bp = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
        return bp * math.exp(log_p)

    ranked = sorted(candidates, key=fast_bleu, reverse=True)[:CONSTANT_SHORTLIST]
    return max(ranked, key=lambda c: bleu.corpus_score([c] * len(refs), [refs]).score)


def _ngrams(words: list[str]) -> Counter:
    return Counter(tuple(words[i: i + n]) for n in range(1, 5) for i in range(len(words) - n + 1))


def run_retrieval(point: Point, ctx: Context) -> Result:
    """The English of the training source nearest to each source (TF-IDF, character n-grams)."""
    corpus = load_corpus(options(point))
    index = TfIdf([s for s, _ in corpus.train])
    targets = [t for _, t in corpus.train]
    return _run(point, ctx, lambda pairs: [targets[i] for i in index.nearest(
        [s for s, _ in pairs])], {"retrieval_ngrams": "char " + ",".join(map(str, CHAR_NGRAMS))})
