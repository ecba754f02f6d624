"""One training/evaluation batch in either framing, and the Task protocol the loop relies on.

Framings:
- "seq2seq": an encoder-decoder reads `src`; its decoder is teacher-forced with `tgt_in`
  (BOS followed by the answer shifted right) and scored against `targets` (= tgt_out).
- "lm": a decoder-only model reads `tokens` and is scored against `targets`, one per input
  position; `mask` keeps only the positions that are part of the answer, so the model is
  never graded on predicting random input symbols.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import torch
from torch import nn

FRAMINGS = ("seq2seq", "lm")

# Special tokens shared by every synthetic task; data symbols start at N_SPECIAL.
PAD = 0  # fills target positions that do not count (mask False); never an input symbol
BOS = 1  # first decoder input in the seq2seq framing
SEP = 2  # separates input from answer in the LM framing
N_SPECIAL = 3


def check_int(name: str, value: object, low: int, what: str = "") -> int:
    """Raise ValueError naming `value` unless it is an int >= low (bools are not ints here)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"invalid {name} {value!r}; must be an integer >= {low}{what}")
    return value


def seed_generator(seed: int, *key: int) -> torch.Generator:
    """A torch generator for one (seed, stream, ...) key; SeedSequence mixes the key so
    neighbouring steps and the train/eval streams get unrelated 64-bit states."""
    state = np.random.SeedSequence(seed, spawn_key=key).generate_state(1, np.uint64)[0]
    return torch.Generator().manual_seed(int(state))


@dataclass(frozen=True)
class Batch:
    """Tensors for one batch. seq2seq: src, tgt_in, targets; lm: tokens, targets."""

    framing: str  # "seq2seq" | "lm"
    targets: torch.Tensor  # (B, T) long: what the logits are scored against
    mask: torch.Tensor  # (B, T) bool: which target positions count
    src: torch.Tensor | None = None  # (B, S) long, seq2seq only
    tgt_in: torch.Tensor | None = None  # (B, T) long, seq2seq only
    tokens: torch.Tensor | None = None  # (B, T) long, lm only

    def __post_init__(self) -> None:
        if self.framing == "seq2seq":
            ok = self.src is not None and self.tgt_in is not None and self.tokens is None
        elif self.framing == "lm":
            ok = self.tokens is not None and self.src is None and self.tgt_in is None
        else:
            raise ValueError(f"invalid framing {self.framing!r}; valid: {', '.join(FRAMINGS)}")
        if not ok:
            raise ValueError(f"a {self.framing} batch needs exactly its own input tensors")
        if self.mask.shape != self.targets.shape or self.mask.dtype != torch.bool:
            raise ValueError("mask must be a bool tensor shaped like targets")

    @property
    def tgt_out(self) -> torch.Tensor:
        """The seq2seq name for `targets`."""
        return self.targets

    @property
    def batch_size(self) -> int:
        return self.targets.size(0)

    @property
    def n_input_tokens(self) -> int:
        """Tokens the model reads in one forward pass (throughput is counted in these)."""
        if self.framing == "lm":
            return self.tokens.numel()  # type: ignore[union-attr]
        return self.src.numel() + self.tgt_in.numel()  # type: ignore[union-attr]

    @property
    def model_len(self) -> int:
        """Longest sequence one model input has: what max_len / learned positions must cover."""
        if self.framing == "lm":
            return self.tokens.size(1)  # type: ignore[union-attr]
        return max(self.src.size(1), self.tgt_in.size(1))  # type: ignore[union-attr]

    def logits(self, model: nn.Module) -> torch.Tensor:
        """Run `model` the way this framing calls it -> (B, T, V)."""
        if self.framing == "lm":
            return model(self.tokens)
        return model(self.src, self.tgt_in)

    def to(self, device: torch.device | str) -> Batch:
        moved = {
            f.name: getattr(self, f.name).to(device)
            for f in dataclasses.fields(self)
            if isinstance(getattr(self, f.name), torch.Tensor)
        }
        return dataclasses.replace(self, **moved)


def seq2seq_batch(src: torch.Tensor, answers: torch.Tensor,
                  mask: torch.Tensor | None = None) -> Batch:
    """Encoder reads src (B, S); decoder reads BOS + answers[:, :-1] and predicts answers."""
    bos = torch.full_like(answers[:, :1], BOS)
    mask = torch.ones_like(answers, dtype=torch.bool) if mask is None else mask
    return Batch("seq2seq", targets=answers, mask=mask, src=src,
                 tgt_in=torch.cat([bos, answers[:, :-1]], dim=1))


def stream_batch(stream: torch.Tensor, answer_mask: torch.Tensor) -> Batch:
    """Next-token LM over `stream` (B, L): tokens = stream[:, :-1], targets = stream[:, 1:],
    counting only targets that `answer_mask` (B, L) marks as answer tokens."""
    return Batch("lm", targets=stream[:, 1:], mask=answer_mask[:, 1:], tokens=stream[:, :-1])


def suffix_batch(inputs: torch.Tensor, answers: torch.Tensor, framing: str) -> Batch:
    """The input -> answer framings: seq2seq (src=inputs) or LM over `inputs SEP answers`."""
    if framing == "seq2seq":
        return seq2seq_batch(inputs, answers)
    sep = torch.full_like(inputs[:, :1], SEP)
    stream = torch.cat([inputs, sep, answers], dim=1)  # (B, S + 1 + T)
    answer_mask = torch.zeros_like(stream, dtype=torch.bool)
    answer_mask[:, inputs.size(1) + 1:] = True
    return stream_batch(stream, answer_mask)


def aligned_batch(inputs: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor,
                  framing: str) -> Batch:
    """Streaming tasks with one target per input position (targets[:, t] due at step t).
    LM: a causal model reads inputs and answers at every counted position. seq2seq: the
    encoder reads inputs and the decoder emits the target sequence (PAD where not counted)."""
    targets = targets.masked_fill(~mask, PAD)
    if framing == "seq2seq":
        return seq2seq_batch(inputs, targets, mask)
    return Batch("lm", targets=targets, mask=mask, tokens=inputs)


@runtime_checkable
class Task(Protocol):
    """What train() and the suites need from a task; synthetic tasks and the corpus both are."""

    name: str
    framing: str  # "seq2seq" | "lm"
    seq_len: int  # training problem size n
    vocab_size: int  # every token id a batch can hold, specials included
    reports_bpc: bool  # True for character-level text: report bits per character

    def train_batch(self, step: int, batch_size: int) -> Batch: ...

    def eval_batches(self, batch_size: int = 64, n_batches: int = 4,
                     seq_len: int | None = None) -> list[Batch]: ...
