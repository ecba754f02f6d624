"""Sequence mixers: x (B, n, d) -> y (B, n, d), the one thing a layer-level comparison changes."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from models.blocks import ATTN_BACKENDS, NORMS, EncoderLayer, MultiHeadAttention, attention
from models.checks import check_choice, check_dropout, check_flag, check_heads, check_positive
from models.rnn import RNN_IMPLS, Recurrent


class SelfAttention(nn.Module):
    """Multi-head self-attention alone (projections included), optionally causal."""

    def __init__(self, d_model: int, n_heads: int, dropout: float, attn_scale: bool,
                 attn_backend: str, causal: bool) -> None:
        super().__init__()
        self.causal = causal
        self.attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, attn_scale=attn_scale,
                                       attn_backend=attn_backend)

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


@dataclass(frozen=True)
class AttentionMixerConfig:
    n_heads: int = 8  # the paper's h
    dropout: float = 0.0  # benchmarks measure without dropout: it switches attention kernels
    attn_scale: bool = True
    attn_backend: str = "sdpa"
    causal: bool = False

    def __post_init__(self) -> None:
        check_positive(self, "n_heads")
        check_dropout(self.dropout)
        check_flag("attn_scale", self.attn_scale)
        check_flag("causal", self.causal)
        check_choice("attn_backend", self.attn_backend, ATTN_BACKENDS)


@dataclass(frozen=True)
class LayerMixerConfig(AttentionMixerConfig):
    d_ff: int | None = None  # None means 4 * d_model, the paper's ratio
    norm: str = "post"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.d_ff is not None:
            check_positive(self, "d_ff")
        check_choice("norm", self.norm, NORMS)


@dataclass(frozen=True)
class RecurrentMixerConfig:
    rnn_impl: str = "fused"

    def __post_init__(self) -> None:
        check_choice("rnn_impl", self.rnn_impl, RNN_IMPLS)


def attention_mixer(d: int, c: AttentionMixerConfig) -> nn.Module:
    check_heads(d, c.n_heads)
    return SelfAttention(d, c.n_heads, c.dropout, c.attn_scale, c.attn_backend, c.causal)


def attention_core(d: int, c: AttentionMixerConfig) -> nn.Module:
    check_heads(d, c.n_heads)
    if c.dropout:
        raise ValueError(f"invalid dropout {c.dropout!r} for 'attention-core'; valid: 0")
    return AttentionCore(c.n_heads, c.attn_scale, c.attn_backend, c.causal)


def encoder_layer(d: int, c: LayerMixerConfig) -> nn.Module:
    check_heads(d, c.n_heads)
    return EncoderLayer(d, c.n_heads, c.d_ff or 4 * d, dropout=c.dropout, norm=c.norm,
                        attn_scale=c.attn_scale, attn_backend=c.attn_backend, causal=c.causal)


def recurrent_mixer(kind: str, d: int, c: RecurrentMixerConfig) -> nn.Module:
    return RecurrentMixer(kind, d, c.rnn_impl)
