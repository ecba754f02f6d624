"""The encoder-decoder Transformer and its decoder-only variant, from the same blocks."""

from __future__ import annotations

import torch
from torch import nn

from models.blocks import (
    DecoderLayer,
    EncoderLayer,
    OutputHead,
    TokenEmbedding,
    positional_encoding,
)


def _xavier_init(module: nn.Module) -> None:
    """Xavier-uniform for every projection matrix, as nn.Transformer and the reference code do."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)


class Transformer(nn.Module):
    """Encoder-decoder: shared token embedding (scaled by sqrt(d)) + positions + dropout,
    N encoder layers, N decoder layers (causal self-attention, cross-attention), head."""

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        n_layers: int,
        n_heads: int,
        d_ff: int,
        dropout: float,
        max_len: int,
        norm: str,
        pos_encoding: str,
        attn_scale: bool,
        attn_backend: str,
        tie_weights: bool,
    ) -> None:
        super().__init__()
        layer_args = (d_model, n_heads, d_ff, dropout, norm, attn_scale, attn_backend)
        self.embed = TokenEmbedding(vocab_size, d_model)
        self.pos = positional_encoding(pos_encoding, d_model, max_len)
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(EncoderLayer(*layer_args) for _ in range(n_layers))
        self.decoder = nn.ModuleList(DecoderLayer(*layer_args) for _ in range(n_layers))
        self.enc_norm = nn.LayerNorm(d_model) if norm == "pre" else nn.Identity()
        _xavier_init(self)
        self.head = OutputHead(self.embed, vocab_size, d_model, tie_weights, norm == "pre")

    def encode(
        self, src: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:  # (B, S) -> memory (B, S, d)
        x = self.drop(self.pos(self.embed(src)))
        for layer in self.encoder:
            x = layer(x, src_key_padding_mask)
        return self.enc_norm(x)

    def decode(
        self,
        tgt_in: torch.Tensor,  # (B, T)
        memory: torch.Tensor,  # (B, S, d)
        src_key_padding_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:  # (B, T, V)
        y = self.drop(self.pos(self.embed(tgt_in)))
        for layer in self.decoder:
            y = layer(y, memory, src_key_padding_mask)
        return self.head(y)

    def forward(
        self,
        src: torch.Tensor,
        tgt_in: torch.Tensor,
        src_key_padding_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:  # (B, T, V)
        return self.decode(tgt_in, self.encode(src, src_key_padding_mask), src_key_padding_mask)


class TransformerLM(nn.Module):
    """Decoder-only: causal encoder layers (no cross-attention) over one token stream."""

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        n_layers: int,
        n_heads: int,
        d_ff: int,
        dropout: float,
        max_len: int,
        norm: str,
        pos_encoding: str,
        attn_scale: bool,
        attn_backend: str,
        tie_weights: bool,
    ) -> None:
        super().__init__()
        self.embed = TokenEmbedding(vocab_size, d_model)
        self.pos = positional_encoding(pos_encoding, d_model, max_len)
        self.drop = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, n_heads, d_ff, dropout, norm, attn_scale, attn_backend,
                         causal=True)
            for _ in range(n_layers)
        )
        _xavier_init(self)
        self.head = OutputHead(self.embed, vocab_size, d_model, tie_weights, norm == "pre")

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # (B, n) -> (B, n, V)
        x = self.drop(self.pos(self.embed(tokens)))
        for layer in self.layers:
            x = layer(x)
        return self.head(x)
