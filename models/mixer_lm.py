"""A decoder-only LM around any sequence mixer (built-in or a plugin's), so that a new layer
trains on the tasks and the corpus with the same embedding, FFN, norms and head as the rest.

Each layer is Pre-LN: x = x + Dropout(mixer(LN(x))); x = x + Dropout(FFN(LN(x))).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from models.blocks import (
    POS_ENCODINGS,
    OutputHead,
    PositionwiseFFN,
    TokenEmbedding,
    positional_encoding,
)
from models.checks import check_choice, check_dropout, check_flag, check_positive


@dataclass(frozen=True)
class MixerLMConfig:
    mixer_kind: str = "self-attention"  # a models.mixer kind, made causal by the registry
    vocab_size: int = 37000  # as TransformerConfig: the paper's shared vocabulary
    d_model: int = 512  # the paper's base width
    n_layers: int = 6  # the paper's N
    n_heads: int | None = None  # handed to a mixer that takes n_heads; None: its own default
    d_ff: int | None = None  # None: 4 * d_model, the paper's ratio (whatever the width)
    dropout: float = 0.1  # the paper's P_drop
    max_len: int = 1024  # positions tabulated up front
    pos_encoding: str = "sinusoidal"  # the paper's; "none" for a mixer that orders by itself
    tie_weights: bool = True  # embedding and output projection share one matrix

    def __post_init__(self) -> None:
        check_positive(self, "vocab_size", "d_model", "n_layers", "max_len")
        for knob in ("n_heads", "d_ff"):
            if getattr(self, knob) is not None:
                check_positive(self, knob)
        check_dropout(self.dropout)
        check_choice("pos_encoding", self.pos_encoding, POS_ENCODINGS)
        check_flag("tie_weights", self.tie_weights)


class MixerBlock(nn.Module):
    """One Pre-LN layer: a causal mixer and the position-wise FFN, each in a residual."""

    def __init__(self, mixer: nn.Module, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.mixer, self.ffn = mixer, PositionwiseFFN(d_model, d_ff, dropout=dropout)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, n, d) -> (B, n, d)
        x = x + self.drop(self.mixer(self.norm1(x)))
        return x + self.drop(self.ffn(self.norm2(x)))


class MixerLM(nn.Module):
    """Embedding, positions, n_layers MixerBlocks, final LayerNorm and head. `make_mixer`
    returns a fresh causal mixer per layer (the registry builds it from the config)."""

    def __init__(self, config: MixerLMConfig, make_mixer: Callable[[], nn.Module]) -> None:
        super().__init__()
        c = config
        self.embed = TokenEmbedding(c.vocab_size, c.d_model)
        self.pos = positional_encoding(c.pos_encoding, c.d_model, c.max_len)
        self.drop = nn.Dropout(c.dropout)
        d_ff = c.d_ff or 4 * c.d_model
        self.layers = nn.ModuleList(MixerBlock(make_mixer(), c.d_model, d_ff, c.dropout)
                                    for _ in range(c.n_layers))
        self.head = OutputHead(self.embed, c.vocab_size, c.d_model, c.tie_weights, True)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # (B, n) -> (B, n, V)
        x = self.drop(self.pos(self.embed(tokens)))
        for layer in self.layers:
            x = layer(x)
        return self.head(x)
