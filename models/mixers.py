"""Sequence mixers: x (B, n, d) -> y (B, n, d), the one thing a layer-level comparison changes."""

from __future__ import annotations

import torch
from torch import nn

from models.blocks import MultiHeadAttention, attention
from models.rnn import Recurrent


class SelfAttention(nn.Module):
    """Multi-head self-attention alone (projections included), optionally causal."""

    def __init__(self, d_model: int, n_heads: int, dropout: float, attn_scale: bool,
                 attn_backend: str, causal: bool) -> None:
        super().__init__()
        self.causal = causal
        self.attn = MultiHeadAttention(d_model, n_heads, dropout, attn_scale, attn_backend)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x, causal=self.causal)


class AttentionCore(nn.Module):
    """softmax(Q K^T / sqrt(d_k)) V with Q = K = V = the input split into heads: attention
    without its projections, the part the paper's O(n^2 d) per layer describes."""

    def __init__(self, n_heads: int, attn_scale: bool, attn_backend: str, causal: bool) -> None:
        super().__init__()
        self.n_heads, self.attn_scale, self.attn_backend, self.causal = (
            n_heads, attn_scale, attn_backend, causal)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, n, d) -> (B, n, d)
        h = x.unflatten(-1, (self.n_heads, -1)).transpose(1, 2)  # (B, h, n, d_k)
        z = attention(h, h, h, causal=self.causal, scale=self.attn_scale,
                      backend=self.attn_backend)  # (B, h, n, d_k)
        return z.transpose(1, 2).flatten(2)


class RecurrentMixer(nn.Module):
    """One LSTM or GRU layer with hidden size d, returning every step's hidden state."""

    def __init__(self, kind: str, d_model: int, rnn_impl: str) -> None:
        super().__init__()
        self.rnn = Recurrent(kind, d_model, 1, rnn_impl)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0]
