"""Runners "translate" (train one model, decode, score) and "source-copy" (the baseline that
outputs its source), on the corpus a point names (harness.train.translation.corpus).

A "translate" point's row: parameters, training FLOPs (forward + backward, counted) and
seconds, dev perplexity per subword, dev and test BLEU and chrF of beam search with their
sacrebleu signatures, the FLOPs and seconds at which the dev curve first reached the stated
BLEU, and decoding speed (sentences/s) with and without the cache, with whether the two gave
the same tokens. Its hypotheses go to
<suite>/hypotheses/<model>-s<seed>-<digest of point_id>-<device>-<machine>.<split>.txt,
the references once per corpus beside them, so anyone can rescore them.
"""

from __future__ import annotations

import hashlib
import time
from functools import cache
from typing import Any

import torch
from tokenizers import Tokenizer
from torch import nn

import models
from experiments.spec import Config, Point, TranslateOptions, config
from harness.runner import Context, Result
from harness.train.loop import count_params, matched_config, param_count
from harness.train.points import tiny_threads
from harness.train.translation import corpus as corpora
from harness.train.translation.bpe import shared_bpe, special_ids
from harness.train.translation.data import (
    PairBatch,
    TrainStream,
    batches,
    make_batch,
    tokenized,
)
from harness.train.translation.scoring import score
from harness.train.translation.train import perplexity, to_reach, train
from models.decoding import beam_search, greedy

DECODE_BATCH = 32  # sentences per decoding batch


def options(point: Point) -> TranslateOptions:
    if not isinstance(point.options, TranslateOptions):
        raise ValueError(f"point {point.point_id} has no TranslateOptions")
    return point.options


def load_corpus(opts: TranslateOptions) -> corpora.Corpus:
    if opts.parallel:
        return corpora.user_corpus(opts.parallel, opts.reverse)
    return corpora.bible(opts.reverse)


@cache
def _matched(model: str, ref_model: str, ref: Config, own: Config) -> tuple[int, int]:
    """(d_model, its parameter count) of `model` matching `ref_model` built from `ref`."""
    target = param_count(ref_model, **dict(ref))
    cfg = matched_config(model, target, dict(own))
    return cfg["d_model"], target


def model_config(point: Point, vocab_size: int) -> dict[str, Any]:
    """The config models.build gets: the point's, its vocabulary, and its d_model (with a
    Match, the width whose parameter count matches the matched model's within 10%)."""
    cfg = dict(point.config) | {"vocab_size": vocab_size, "d_model": point.d_model}
    match = options(point).match
    if match is not None and match.model != point.subject:
        ref = dict(match.config) | {"vocab_size": vocab_size, "d_model": point.d_model}
        cfg["d_model"], _ = _matched(point.subject, match.model, config(ref), config(cfg))
    models.model_config(point.subject, **cfg)  # validate now: a bad value names itself
    return cfg


_BATCHES: dict[tuple[str, int, int], tuple[list[PairBatch], int]] = {}


def _train_batches(corpus: corpora.Corpus, tok: Tokenizer, max_tokens: int,
                   batch_size: int) -> tuple[list[PairBatch], int]:
    """Training batches and how many pairs the length limit left out; kept per vocabulary
    (corpus name and size), limit and batch size, since the points of a suite share them."""
    key = (f"{corpus.name}-{tok.get_vocab_size()}-{hash(tok.to_str())}", max_tokens, batch_size)
    if key not in _BATCHES:
        src, tgt, too_long = tokenized(tok, corpus.train, max_tokens)
        _BATCHES[key] = batches(src, tgt, special_ids(tok), batch_size), too_long
    return _BATCHES[key]


def held_out(corpus: corpora.Corpus, split: str, opts: TranslateOptions, limit: int = 0
             ) -> tuple[tuple[str, str], ...]:
    """The dev or test pairs a point evaluates on, the same for every model and the
    source-copy baseline: those of at most `eval_max_words` words a side (0: all), in corpus
    order, the first `limit` of them (0: all)."""
    pairs = getattr(corpus, split)
    if opts.eval_max_words:
        pairs = tuple((s, t) for s, t in pairs
                      if max(len(s.split()), len(t.split())) <= opts.eval_max_words)
    return pairs[:limit] if limit else pairs


def _held_out(tok: Tokenizer, pairs: tuple[tuple[str, str], ...], limit: int = 0
              ) -> tuple[list[list[int]], list[list[int]], list[str]]:
    pairs = pairs[:limit] if limit else pairs
    src, tgt, _ = tokenized(tok, pairs, None)
    return src, tgt, [t for _, t in pairs]


def translate(model: nn.Module, tok: Tokenizer, src: list[list[int]], device: torch.device,
              beam: int = 0, alpha: float = 0.6, cache: bool = True) -> list[str]:
    """Detokenised translations of `src` (beam 0: greedy), in order."""
    ids = special_ids(tok)
    was = model.training
    model.eval()
    out: list[list[int]] = []
    for k in range(0, len(src), DECODE_BATCH):
        chunk = src[k: k + DECODE_BATCH]
        b = make_batch(chunk, [[0]] * len(chunk), ids).to(device)
        if beam:
            out += beam_search(model, b.src, b.pad, ids["<s>"], ids["</s>"], beam, alpha, cache)
        else:
            out += greedy(model, b.src, b.pad, ids["<s>"], ids["</s>"], cache)
    model.train(was)
    return tok.decode_batch(out)


def decode_speed(model: nn.Module, tok: Tokenizer, src: list[list[int]], device: torch.device,
                 beam: int, alpha: float) -> dict[str, Any]:
    """Sentences/s of beam search with and without the cache (one warm-up sentence each,
    then one timed pass; taken on whatever else the machine runs), and whether both gave
    the same translations."""
    out: dict[str, Any] = {}
    texts = {}
    for cached in (True, False):
        translate(model, tok, src[:1], device, beam, alpha, cached)
        start = time.perf_counter()
        texts[cached] = translate(model, tok, src, device, beam, alpha, cached)
        name = "cached" if cached else "uncached"
        out[f"decode_sent_per_s_{name}"] = len(src) / (time.perf_counter() - start)
    out["cache_same_tokens"] = int(texts[True] == texts[False])
    return out


HYPOTHESES = "hypotheses"  # the folder, beside results.csv


def _final(model, tok, corpus, opts, device, stem, files) -> dict[str, Any]:
    """Beam-search dev and test, scored; hypotheses (and references) added to `files`."""
    out: dict[str, Any] = {}
    for split in ("dev", "test"):
        src, _, refs = _held_out(tok, held_out(corpus, split, opts, opts.final_sentences))
        hyps = translate(model, tok, src, device, opts.beam, opts.alpha)
        s = score(hyps, refs)
        out |= {f"{split}_{k}": v for k, v in s.items() if not k.endswith("signature")}
        out |= {k: v for k, v in s.items() if k.endswith("signature")}
        out[f"{split}_sentences"] = len(refs)
        # paths relative to the suite folder, in the row; the sweep writes them
        out[f"{split}_hypotheses"] = f"{HYPOTHESES}/{stem}.{split}.txt"
        words = f"-w{opts.eval_max_words}" if opts.eval_max_words else ""
        out[f"{split}_references"] = (f"{HYPOTHESES}/{corpus.name}{words}-{len(refs)}."
                                      f"{split}.ref.txt")
        files[out[f"{split}_hypotheses"]] = hyps
        files[out[f"{split}_references"]] = refs
    return out


def run_translate(point: Point, ctx: Context) -> Result:
    opts, device = options(point), ctx.device
    corpus = load_corpus(opts)
    tok = shared_bpe(corpus, opts.bpe, ctx.cache_dir)
    cfg = model_config(point, tok.get_vocab_size())
    torch.manual_seed(point.seed)
    model = models.build(point.subject, **cfg).to(device)
    with tiny_threads(model, device) as threads:
        result = _train_and_score(point, ctx, model, cfg, corpus, tok)
    result.values["threads_used"] = threads
    return result


def _train_and_score(point: Point, ctx: Context, model: nn.Module, cfg: dict[str, Any],
                     corpus: corpora.Corpus, tok: Tokenizer) -> Result:
    opts, device, ids = options(point), ctx.device, special_ids(tok)
    train_data, too_long = _train_batches(corpus, tok, opts.max_tokens, point.batch_size)
    stream = TrainStream(train_data, point.seed)
    dev_src, dev_tgt, dev_refs = _held_out(tok, held_out(corpus, "dev", opts))
    curve_src = dev_src[: opts.eval_sentences]

    def evaluate() -> dict[str, float]:
        hyps = translate(model, tok, curve_src, device)
        # the curve's own name: the row's dev_bleu is beam search on more sentences
        return {"dev_bleu_greedy": score(hyps, dev_refs[: len(hyps)])["bleu"]}

    log = train(model, stream, opts.steps, opts.peak_lr, opts.warmup, opts.label_smoothing,
                device, point.seed, opts.eval_every, evaluate)
    values: dict[str, Any] = {
        "n_params": count_params(model), "d_model": cfg["d_model"], "vocab": tok.get_vocab_size(),
        "train_flops": log.flops, "train_s": log.seconds, "steps_run": log.steps,
        "train_pairs": sum(b.shape[0] for b in train_data), "train_pairs_too_long": too_long,
        **{f"corpus_{k}": v for k, v in corpus.stats.items()}}
    if log.diverged_at is not None:
        return Result(values, log.series, "diverged",
                      f"training loss not finite at step {log.diverged_at}")
    values["dev_ppl"] = perplexity(model, batches(dev_src, dev_tgt, ids, 64), device)
    if opts.target_bleu:
        values |= {"target_bleu": opts.target_bleu, **to_reach(log, "dev_bleu_greedy",
                                                                   opts.target_bleu)}
    # the point id can pass the 255-byte name limit: model, seed and a digest of the id
    digest = hashlib.sha256(point.point_id.encode()).hexdigest()[:12]
    stem = f"{point.subject}-s{point.seed}-{digest}-{device.type}-{ctx.machine}"
    files: dict[str, list[str]] = {}
    values |= _final(model, tok, corpus, opts, device, stem, files)
    test_src = _held_out(tok, held_out(corpus, "test", opts, opts.speed_sentences))[0]
    values |= decode_speed(model, tok, test_src, device, opts.beam, opts.alpha)
    return Result(values, log.series, files=files)


def run_source_copy(point: Point, ctx: Context) -> Result:
    """The baseline that outputs its source unchanged, scored like a model on dev and test."""
    corpus = load_corpus(options(point))
    values: dict[str, Any] = {"n_params": 0, "train_flops": 0, "train_s": 0.0}
    opts = options(point)
    for split in ("dev", "test"):
        pairs = held_out(corpus, split, opts, opts.final_sentences)
        s = score([src for src, _ in pairs], [tgt for _, tgt in pairs])
        values |= {f"{split}_{k}": v for k, v in s.items() if not k.endswith("signature")}
        values |= {k: v for k, v in s.items() if k.endswith("signature")}
        values[f"{split}_sentences"] = len(pairs)
    return Result(values)
