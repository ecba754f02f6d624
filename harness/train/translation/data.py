"""Sentence pairs as padded id batches.

Training pairs longer than `max_tokens` subwords on either side are left out (counted).
Batches hold `batch_size` pairs of similar length (sorted by source, then target length),
or as many as fit `batch_tokens` padded subwords (pairs x the longer padded side, as
fairseq's --max-tokens counts), and are padded to a multiple of PAD_MULTIPLE, so a run sees
few distinct batch shapes: FLOPs, which depend only on the shape, are counted once per
shape. The order of the batches is reshuffled every epoch from the seed, so a run is a pure
function of (seed, step).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tokenizers import Tokenizer

from harness.train.translation.bpe import EOS

PAD_MULTIPLE = 8


@dataclass(frozen=True)
class PairBatch:
    src: torch.Tensor  # (B, S) ids, PAD after each sentence
    pad: torch.Tensor  # (B, S) bool, True at padding
    tgt_in: torch.Tensor  # (B, T): BOS y_1 .. y_m
    tgt_out: torch.Tensor  # (B, T): y_1 .. y_m EOS
    mask: torch.Tensor  # (B, T) bool, True at counted target positions

    def to(self, device: torch.device) -> PairBatch:
        return PairBatch(*(t.to(device) for t in (self.src, self.pad, self.tgt_in,
                                                   self.tgt_out, self.mask)))

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.src.size(0), self.src.size(1), self.tgt_in.size(1)

    @property
    def n_target_tokens(self) -> int:
        return int(self.mask.sum())


def encode(tok: Tokenizer, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in tok.encode_batch(texts)]


def _round(n: int) -> int:
    return -(-n // PAD_MULTIPLE) * PAD_MULTIPLE


def make_batch(src: list[list[int]], tgt: list[list[int]], ids: dict[str, int]) -> PairBatch:
    pad, bos, eos = ids["<pad>"], ids["<s>"], ids["</s>"]
    B = len(src)
    S, T = _round(max(len(s) for s in src)), _round(max(len(t) for t in tgt) + 1)
    s = torch.full((B, S), pad, dtype=torch.long)
    t_in = torch.full((B, T), pad, dtype=torch.long)
    t_out = torch.full((B, T), pad, dtype=torch.long)
    for b in range(B):
        s[b, : len(src[b])] = torch.tensor(src[b], dtype=torch.long)
        t_in[b, : len(tgt[b]) + 1] = torch.tensor([bos, *tgt[b]], dtype=torch.long)
        t_out[b, : len(tgt[b]) + 1] = torch.tensor([*tgt[b], eos], dtype=torch.long)
    return PairBatch(s, s == pad, t_in, t_out, t_out != pad)


def batches(src: list[list[int]], tgt: list[list[int]], ids: dict[str, int],
            batch_size: int, sort: bool = True, batch_tokens: int = 0) -> list[PairBatch]:
    """Batches of `batch_size` pairs, or of at most `batch_tokens` padded subwords (at least
    one pair); sorted by length (training, teacher-forced evaluation) or in corpus order
    (decoding, so hypotheses keep the references' order)."""
    order = list(range(len(src)))
    if sort:
        order.sort(key=lambda i: (len(src[i]), len(tgt[i])))
    if batch_tokens:
        chunks = _by_tokens(order, src, tgt, batch_tokens)
    else:
        chunks = [order[k: k + batch_size] for k in range(0, len(order), batch_size)]
    return [make_batch([src[i] for i in chunk], [tgt[i] for i in chunk], ids)
            for chunk in chunks]


def _by_tokens(order: list[int], src: list[list[int]], tgt: list[list[int]], budget: int
               ) -> list[list[int]]:
    """`order` cut into runs whose padded size, pairs x the longer padded side, fits budget."""
    chunks: list[list[int]] = [[]]
    longest = 0
    for i in order:
        size = max(_round(len(src[i])), _round(len(tgt[i]) + 1))
        if chunks[-1] and (len(chunks[-1]) + 1) * max(longest, size) > budget:
            chunks.append([])
            longest = 0
        chunks[-1].append(i)
        longest = max(longest, size)
    return [c for c in chunks if c]


class TrainStream:
    """Endless training batches: every epoch visits each batch once in a seeded order."""

    def __init__(self, data: list[PairBatch], seed: int) -> None:
        if not data:
            raise ValueError("no training pairs left after the length filter")
        self.data, self.seed = data, seed

    def tokens_seen(self, steps: int) -> int:
        """Target subwords (EOS included) of the first `steps` batches."""
        return sum(self.batch(step).n_target_tokens for step in range(1, steps + 1))

    def batch(self, step: int) -> PairBatch:  # step from 1
        epoch, i = divmod(step - 1, len(self.data))
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        return self.data[int(torch.randperm(len(self.data), generator=g)[i])]


def tokenized(tok: Tokenizer, pairs: tuple[tuple[str, str], ...], max_tokens: int | None,
              *, source_eos: bool) -> tuple[list[list[int]], list[list[int]], int]:
    """Source and target ids; with max_tokens, the pairs longer than it on a side dropped
    (and counted); with source_eos, every source ends in EOS (after the length filter, so
    the same pairs are kept), as fairseq and JoeyNMT feed their encoders."""
    src = encode(tok, [s for s, _ in pairs])
    tgt = encode(tok, [t for _, t in pairs])
    keep = [i for i in range(len(src)) if max_tokens is None
            or len(src[i]) <= max_tokens and len(tgt[i]) <= max_tokens]
    end = [tok.token_to_id(EOS)] if source_eos else []
    return [src[i] + end for i in keep], [tgt[i] for i in keep], len(src) - len(keep)

