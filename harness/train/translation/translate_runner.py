"""Runner "translate" (train one model, decode, score) on the corpus a point names
(harness.train.translation.bitext); the baselines are in harness.train.translation.baselines.

A "translate" point's row: parameters, training FLOPs (forward + backward, counted) and
seconds, dev perplexity per subword, dev and test BLEU and chrF of beam search with their
sacrebleu signatures, the FLOPs and seconds at which the dev curve first reached the stated
BLEU, and decoding speed (sentences/s) with and without the cache, with whether the two gave
the same tokens. Its hypotheses go to
<suite>/hypotheses/<model>-s<seed>-<digest>-<device>-<machine>.<split>.txt (Point.digest),
the references once per corpus beside them, so anyone can rescore them.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from functools import cache
from typing import Any

import torch
from sacrebleu.metrics import BLEU
from tokenizers import Tokenizer
from torch import nn

import models
from experiments.spec import STOP_ON, Config, Point, TranslateOptions, config
from harness.measure.compare import peak_rate
from harness.measure.kernel_swap import use_kernels
from harness.runner import Context, Result
from harness.train import checkpoint
from harness.train.loop import count_params, matched_config, param_count
from harness.train.train_runner import tiny_threads
from harness.train.translation import bitext as corpora
from harness.train.translation.bpe import shared_bpe, special_ids
from harness.train.translation.data import (
    PairBatch,
    TrainStream,
    batches,
    make_batch,
    tokenized,
)
from harness.train.translation.scoring import score
from harness.train.translation.tfidf import TfIdf
from harness.train.translation.train import Plan, TrainLog, perplexity, to_reach, train
from models.decoding import beam_candidates, greedy, pick

DECODE_BATCH = 32  # sentences per decoding batch
FLAT_WINDOW, FLAT_BLEU, FLAT_FRACTION = 3, 0.5, 0.05  # a flattened dev curve: convergence()
SAMPLE_SEED = 0  # the draw of a subsampled dev/test set (the same for every point)


def options(point: Point) -> TranslateOptions:
    if not isinstance(point.options, TranslateOptions):
        raise ValueError(f"point {point.point_id} has no TranslateOptions")
    return point.options


def load_corpus(opts: TranslateOptions) -> corpora.Corpus:
    if opts.bitext:
        return corpora.user_corpus(opts.bitext, opts.reverse)
    return corpora.bible(opts.reverse)


def split_of(point: Point) -> str:
    """The digest of the split `point` would train and score on now (its row's corpus_split)."""
    return corpora.split_digest(load_corpus(options(point)))


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


_BATCHES: dict[tuple[str, int, int, int, bool], tuple[list[PairBatch], int]] = {}


def _train_batches(corpus: corpora.Corpus, tok: Tokenizer, max_tokens: int,
                   batch_size: int, batch_tokens: int, source_eos: bool
                   ) -> tuple[list[PairBatch], int]:
    """Training batches and how many pairs the length limit left out; kept per vocabulary
    (corpus name and size), limit, batch size or tokens and source EOS, since the points of
    a suite share them."""
    key = (f"{corpus.name}-{tok.get_vocab_size()}-{hash(tok.to_str())}", max_tokens,
           batch_size, batch_tokens, source_eos)
    if key not in _BATCHES:
        src, tgt, too_long = tokenized(tok, corpus.train, max_tokens, source_eos=source_eos)
        _BATCHES[key] = batches(src, tgt, special_ids(tok), batch_size,
                                batch_tokens=batch_tokens), too_long
    return _BATCHES[key]


def held_out(corpus: corpora.Corpus, split: str, opts: TranslateOptions, limit: int = 0
             ) -> tuple[tuple[str, str], ...]:
    """The dev or test pairs a point evaluates on, the same for every model and every
    baseline: those of at most `eval_max_words` words a side (0: all), and of those `limit`
    (0: all) drawn at random with a fixed seed across all the split's books, kept in corpus
    order."""
    pairs = getattr(corpus, split)
    if opts.eval_max_words:
        pairs = tuple((s, t) for s, t in pairs
                      if max(len(s.split()), len(t.split())) <= opts.eval_max_words)
    return subsample(pairs, limit)


def subsample(pairs: tuple[tuple[str, str], ...], limit: int) -> tuple[tuple[str, str], ...]:
    """`limit` of the pairs drawn with a fixed seed, in their own order (0 or more: all)."""
    if not limit or limit >= len(pairs):
        return pairs
    keep = sorted(random.Random(SAMPLE_SEED).sample(range(len(pairs)), limit))
    return tuple(pairs[i] for i in keep)


def _held_out(tok: Tokenizer, pairs: tuple[tuple[str, str], ...], opts: TranslateOptions,
              limit: int = 0) -> tuple[list[list[int]], list[list[int]], list[str]]:
    pairs = subsample(pairs, limit)
    src, tgt, _ = tokenized(tok, pairs, None, source_eos=opts.source_eos)
    return src, tgt, [t for _, t in pairs]


def translate(model: nn.Module, tok: Tokenizer, src: list[list[int]], device: torch.device,
              beam: int = 0, alpha: float = 0.6, cache: bool = True) -> list[str]:
    """Detokenised translations of `src` (beam 0: greedy), in order."""
    if beam:
        return by_alpha(model, tok, src, device, beam, (alpha,), cache)[alpha]
    return tok.decode_batch(_batched(model, tok, src, device,
                                     lambda *batch: greedy(model, *batch, cache=cache)))


def by_alpha(model: nn.Module, tok: Tokenizer, src: list[list[int]], device: torch.device,
             beam: int, alphas: tuple[float, ...], cache: bool = True
             ) -> dict[float, list[str]]:
    """Beam search's detokenised translations of `src` under each length penalty in
    `alphas`, from one search (models.decoding.pick), in order."""
    found = _batched(model, tok, src, device,
                     lambda *batch: beam_candidates(model, *batch, beam=beam, cache=cache))
    return {a: tok.decode_batch([pick(f, a) for f in found]) for a in alphas}


def _batched(model: nn.Module, tok: Tokenizer, src: list[list[int]], device: torch.device,
             search: Callable[..., list]) -> list:
    """search(src, pad, bos, eos) over `src` in batches of DECODE_BATCH, in eval mode."""
    ids = special_ids(tok)
    was = model.training
    model.eval()
    out: list = []
    for k in range(0, len(src), DECODE_BATCH):
        chunk = src[k: k + DECODE_BATCH]
        b = make_batch(chunk, [[0]] * len(chunk), ids).to(device)
        out += search(b.src, b.pad, ids["<s>"], ids["</s>"])
    model.train(was)
    return out


def choose_alpha(hyps: dict[float, list[str]], refs: list[str]) -> tuple[float, str]:
    """The length penalty whose translations score the highest corpus BLEU (the first of
    the grid on a tie), and every alpha's BLEU as text ("0.6:10.39;1:11.2")."""
    bleu = {a: BLEU().corpus_score(h, [refs]).score for a, h in hyps.items()}  # as score()
    best = max(bleu, key=bleu.__getitem__)
    return best, ";".join(f"{a:g}:{b:.2f}" for a, b in bleu.items())


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


def score_split(split: str, hyps: list[str], refs: list[str], corpus: corpora.Corpus,
                opts: TranslateOptions, stem: str, files: dict[str, list[str]]
                ) -> dict[str, Any]:
    """A split's BLEU and chrF with their signatures and sentence count; the hypotheses
    (and the references, once per corpus and draw) added to `files`, their paths in the
    row (relative to the suite folder; the sweep writes them)."""
    s = score(hyps, refs)
    out = {f"{split}_{k}": v for k, v in s.items() if not k.endswith("signature")}
    out |= {k: v for k, v in s.items() if k.endswith("signature")}
    out[f"{split}_sentences"] = len(refs)
    out[f"{split}_hypotheses"] = f"{HYPOTHESES}/{stem}.{split}.txt"
    words = f"-w{opts.eval_max_words}" if opts.eval_max_words else ""
    out[f"{split}_references"] = f"{HYPOTHESES}/{corpus.name}{words}-{len(refs)}.{split}.ref.txt"
    files[out[f"{split}_hypotheses"]] = hyps
    files[out[f"{split}_references"]] = refs
    return out


def _final(model, tok, corpus, opts, device, stem, files) -> dict[str, Any]:
    """Beam-search dev and test, scored; hypotheses (and references) added to `files`. With
    a grid of length penalties (opts.alphas), the one with the highest dev BLEU decodes
    dev and test, as the paper chose its alpha on the development set."""
    out: dict[str, Any] = {}
    alpha = opts.alpha
    for split in ("dev", "test") if opts.score_test else ("dev",):
        src, _, refs = _held_out(tok, held_out(corpus, split, opts, opts.final_sentences), opts)
        choose = split == "dev" and bool(opts.alphas) and opts.beam > 0
        hyps = (by_alpha(model, tok, src, device, opts.beam, opts.alphas if choose else (alpha,))
                if opts.beam else {alpha: translate(model, tok, src, device)})  # 0: greedy
        if choose:
            alpha, out["dev_bleu_by_alpha"] = choose_alpha(hyps, refs)
            out["alpha_chosen"] = alpha
        out |= score_split(split, hyps[alpha], refs, corpus, opts, stem, files)
    return out


def warmup_steps(opts: TranslateOptions) -> int:
    """The warm-up in updates: stated, or the stated fraction of the run's steps."""
    return opts.warmup_steps or max(1, round(opts.warmup * opts.steps))


def run_translate(point: Point, ctx: Context) -> Result:
    """A point naming a tuning search (options.recipe) arrives with that search's recipe
    already in its config and options (harness.train.translation.recipe.apply), so its id
    says what it trained with."""
    opts, device = options(point), ctx.device
    corpus = load_corpus(opts)
    tok = shared_bpe(corpus, opts.bpe, ctx.cache_dir)
    cfg = model_config(point, tok.get_vocab_size())
    torch.manual_seed(point.seed)
    model = use_kernels(models.build(point.subject, **cfg)).to(device)
    with tiny_threads(model, device) as threads:
        result = _train_and_score(point, opts, ctx, model, cfg, corpus, tok)
    # the recipe it trained with, whether the point set it or took a default
    result.values |= {"threads_used": threads, "peak_lr": opts.peak_lr,
                      "warmup_steps": warmup_steps(opts), "dropout": cfg.get("dropout"),
                      "label_smoothing": opts.label_smoothing}
    return result


def _train_and_score(point: Point, opts: TranslateOptions, ctx: Context, model: nn.Module,
                     cfg: dict[str, Any], corpus: corpora.Corpus, tok: Tokenizer) -> Result:
    device, ids = ctx.device, special_ids(tok)
    train_data, too_long = _train_batches(corpus, tok, opts.max_tokens, point.batch_size,
                                          opts.batch_tokens, opts.source_eos)
    stream = TrainStream(train_data, point.seed)
    dev_src, dev_tgt, _ = _held_out(tok, held_out(corpus, "dev", opts), opts)
    curve_src, _, curve_refs = _held_out(tok, held_out(corpus, "dev", opts), opts,
                                         opts.eval_sentences)

    dev = batches(dev_src, dev_tgt, ids, 64)

    def evaluate() -> dict[str, float]:
        hyps = translate(model, tok, curve_src, device)
        # the curve's own name: the row's dev_bleu is beam search on more sentences; its
        # perplexity is on the whole dev set, as the row's (what a search's pruner ranks)
        return {"dev_bleu_greedy": score(hyps, curve_refs)["bleu"],
                "dev_ppl": perplexity(model, dev, device)}

    target = opts.target_bleu
    if opts.target_from == "retrieval":  # the bar a model must pass to beat a lookup
        target = retrieval_bleu(corpus, held_out(corpus, "dev", opts, opts.eval_sentences))
    ckpt = checkpoint.point_path(point, ctx)
    prune = ctx.prune
    plan = Plan(opts.steps, opts.peak_lr, warmup_steps(opts), opts.label_smoothing,
                opts.eval_every, opts.patience, opts.stop_on, checkpoint=ckpt,
                checkpoint_key=point.config_key, resume=ctx.resume,
                max_flops=opts.budget_flops, eval_flops=opts.eval_flops,
                prune=None if prune is None else lambda flops, curve: prune(point, flops, curve),
                clip=opts.clip)
    log = train(model, stream, plan, device, point.seed, evaluate)
    values: dict[str, Any] = {
        "n_params": count_params(model), "d_model": cfg["d_model"], "vocab": tok.get_vocab_size(),
        "train_flops": log.flops, "train_s": log.seconds, "steps_run": log.steps,
        "train_pairs": sum(b.shape[0] for b in train_data), "train_pairs_too_long": too_long,
        "train_tokens": stream.tokens_seen(log.steps), "resumed_from_step": log.resumed_from,
        "train_batches": len(train_data), "epochs": log.steps / len(train_data),
        "stopped_by": log.stopped_by or "steps",
        **convergence(log, opts), **{f"corpus_{k}": v for k, v in corpus.stats.items()},
        "corpus_split": corpora.split_digest(corpus)}
    values |= throughput(values["train_tokens"], log, device)
    if log.diverged_at is not None:
        checkpoint.finished(ckpt, ctx)
        return Result(values, log.series, "diverged",
                      f"training loss not finite at step {log.diverged_at}")
    values["dev_ppl"] = perplexity(model, dev, device)
    if target:
        values |= {"target_bleu": target, **to_reach(log, "dev_bleu_greedy", target)}
        values |= {"target_from": opts.target_from} if opts.target_from else {}
    stem = (f"{point.subject}-s{point.seed}-{point.digest}-{device.type}"
            f"-{ctx.machine}")
    files: dict[str, list[str]] = {}
    if log.stopped_by == "pruned":  # a search's loser: its curve is all the search reads
        checkpoint.finished(ckpt, ctx)
        return Result(values, log.series, files=files)
    values |= _final(model, tok, corpus, opts, device, stem, files)
    if opts.speed_sentences:
        test_src = _held_out(tok, held_out(corpus, "test", opts, opts.speed_sentences), opts)[0]
        values |= decode_speed(model, tok, test_src, device, opts.beam, opts.alpha)
    checkpoint.finished(ckpt, ctx)
    return Result(values, log.series, files=files)


_INDEX: dict[str, TfIdf] = {}


def retrieval_bleu(corpus: corpora.Corpus, pairs: tuple[tuple[str, str], ...]) -> float:
    """BLEU of the retrieval baseline (harness.train.translation.baselines) on `pairs`."""
    if corpus.name not in _INDEX:
        _INDEX[corpus.name] = TfIdf([s for s, _ in corpus.train])
    nearest = _INDEX[corpus.name].nearest([s for s, _ in pairs])
    return float(score([corpus.train[i][1] for i in nearest], [t for _, t in pairs])["bleu"])


def throughput(tokens: int, log: TrainLog, device: torch.device) -> dict[str, float]:
    """Target subwords and counted FLOPs per second of update time, and the MFU: that FLOP
    rate over this machine's peak matmul rate at the point's thread count (measured once
    per process, beside whatever else the machine runs)."""
    if log.seconds <= 0:
        return {}
    peak = peak_rate(device, torch.get_num_threads())
    rate = log.flops / log.seconds
    return {"train_tokens_per_s": tokens / log.seconds, "train_flops_per_s": rate,
            "peak_flops_per_s": peak, "mfu": rate / peak}


def convergence(log: TrainLog, opts: TranslateOptions) -> dict[str, Any]:
    """Whether the dev curve had flattened: early stopping ended the run, or the best value
    of its last FLAT_WINDOW evaluations beat the best before them by less than FLAT_BLEU
    and by less than FLAT_FRACTION of that best (a curve still near zero, where every gain
    is small in BLEU, has not flattened)."""
    curve = [v for _, v in log.series.get("dev_bleu_greedy", [])]
    before = max(curve[:-FLAT_WINDOW]) if len(curve) > FLAT_WINDOW else float("nan")
    gain = max(curve[-FLAT_WINDOW:]) - before if len(curve) > FLAT_WINDOW else float("nan")
    flat = log.stopped_early or (gain < FLAT_BLEU and gain < FLAT_FRACTION * before)
    bleu = log.best  # the BLEU at the rule's best: its own best where it watches BLEU
    if opts.stop_on != STOP_ON[0]:  # else the curve's BLEU where the watched metric was best,
        at_best = dict(log.series.get("dev_bleu_greedy", [])).get(log.best_step, math.nan)
        bleu = math.nan if log.best == -math.inf else at_best  # NaN: no finite value, no best
    return {"best_step": log.best_step, "best_dev_bleu_greedy": bleu,
            "stopped_early": int(log.stopped_early), "dev_curve_gain_last": gain,
            "converged": int(flat)}
