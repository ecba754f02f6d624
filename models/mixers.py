"""Sequence mixers: x (B, n, d) -> y (B, n, d), the one thing a layer-level comparison changes."""

from __future__ import annotations

from typing import Protocol

import torch
from torch import nn

from models.blocks import EncoderLayer, MultiHeadAttention
from models.rnn import Recurrent


class Mixer(Protocol):
    def __call__(self, x: torch.Tensor) -> torch.Tensor: ...  # (B, n, d) -> (B, n, d)


class SelfAttention(nn.Module):
    """Multi-head self-attention alone (projections included), optionally causal."""

    def __init__(self, d_model: int, n_heads: int, dropout: float, attn_scale: bool,
                 attn_backend: str, causal: bool) -> None:
        super().__init__()
        self.causal = causal
        self.attn = MultiHeadAttention(d_model, n_heads, dropout, attn_scale, attn_backend)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x, causal=self.causal)


class RecurrentMixer(nn.Module):
    """One LSTM or GRU layer with hidden size d, returning every step's hidden state."""

    def __init__(self, kind: str, d_model: int, rnn_impl: str) -> None:
        super().__init__()
        self.rnn = Recurrent(kind, d_model, 1, rnn_impl)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0]
