"""Fixtures shared by the whole-model tests: small float64 models and token batches for them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
import torch
from torch import nn

import models

# Small enough for float64 on one CPU thread; a model gets the keys its config has, as a preset
# applies them (an RNN takes no n_heads or d_ff).
SMALL = dict(vocab_size=16, d_model=16, n_layers=2, n_heads=2, d_ff=32, dropout=0.0, max_len=32)


@pytest.fixture
def small_model() -> Callable[..., nn.Module]:
    """small_model(name, **overrides): models.build at SMALL sizes, in float64 and eval mode."""

    def make(name: str, **overrides: object) -> nn.Module:
        fields = {f.name for f in dataclasses.fields(models.model_config(name))}
        small = {k: v for k, v in SMALL.items() if k in fields}
        return models.build(name, **(small | overrides)).double().eval()

    return make


@pytest.fixture
def tokens() -> Callable[..., torch.Tensor]:
    """tokens(*shape, vocab_size=SMALL's): random token ids."""

    def draw(*shape: int, vocab_size: int = SMALL["vocab_size"]) -> torch.Tensor:
        return torch.randint(0, vocab_size, shape)

    return draw


@pytest.fixture
def change_from() -> Callable[[torch.Tensor, int], torch.Tensor]:
    """change_from(x, t): a copy of x (SMALL's vocabulary) whose tokens at t.. all differ."""

    def change(x: torch.Tensor, t: int) -> torch.Tensor:
        v = SMALL["vocab_size"]
        y = x.clone()
        y[:, t:] = (x[:, t:] + torch.randint_like(x[:, t:], 1, v)) % v
        return y

    return change


@pytest.fixture
def model_inputs(tokens) -> Callable[..., tuple[torch.Tensor, ...]]:
    """model_inputs(name, vocab_size=SMALL's): what the model's forward takes, (src, tgt_in) for
    an encoder-decoder and (tokens,) for a decoder-only "-lm" model."""

    def inputs(name: str, vocab_size: int = SMALL["vocab_size"]) -> tuple[torch.Tensor, ...]:
        if name.endswith("-lm"):
            return (tokens(2, 7, vocab_size=vocab_size),)
        return tokens(2, 7, vocab_size=vocab_size), tokens(2, 5, vocab_size=vocab_size)

    return inputs
