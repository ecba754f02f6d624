"""The encoder-decoder Transformer and its decoder-only variant, from the same blocks.

Both take their frozen TransformerConfig, the sizes and choices by name that models.build
fills in; the blocks they are made of take flat arguments.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from models.blocks import (
    ATTN_BACKENDS,
    NORMS,
    POS_ENCODINGS,
    DecoderLayer,
    EncoderLayer,
    MultiHeadAttention,
    OutputHead,
    TokenEmbedding,
    positional_encoding,
)
from models.checks import check_choice, check_dropout, check_flag, check_heads, check_positive

INITS = ("normal", "xavier")  # TransformerConfig.init


@dataclass(frozen=True)
class TransformerConfig:
    vocab_size: int = 37000  # the paper's shared source/target BPE vocabulary (WMT14 En-De)
    d_model: int = 512  # Table 3, base model
    n_layers: int = 6  # N = 6 encoder and 6 decoder layers
    n_heads: int = 8  # h = 8, so d_v = 64
    d_k: int = 0  # query/key size per head; 0 means d_model / n_heads (Table 3, rows B set it)
    d_ff: int = 2048  # 4 * d_model
    dropout: float = 0.1  # P_drop of the base model: embeddings and each sub-layer's output
    attn_dropout: float = -1.0  # on attention weights and the FFN hidden; -1: `dropout`, as
    # in the paper (fairseq's recipes set it apart, often to 0)
    max_len: int = 1024  # positions tabulated up front; sinusoids extend past it on demand
    norm: str = "post"  # the paper's LN(x + Sublayer(x))
    residual: bool = True  # the `x +` around every sub-layer; False: the ablation without it
    pos_encoding: str = "sinusoidal"  # the paper's choice; "learned" performed the same there
    attn_scale: bool = True  # divide by sqrt(d_k)
    attn_backend: str = "sdpa"  # same numbers as "math" (tested), and the fast kernel
    tie_weights: bool = True  # embeddings and pre-softmax projection share one matrix
    init: str = "normal"  # "normal": embeddings N(0, 1/d) (fairseq's), Xavier on each whole
    # projection, PyTorch's default biases; "xavier": as JoeyNMT's Transformer, Xavier on the
    # embedding matrix and on each of W^Q, W^K, W^V alone, every bias zero

    def __post_init__(self) -> None:
        check_positive(self, "vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_len")
        check_heads(self.d_model, self.n_heads)
        if type(self.d_k) is not int or self.d_k < 0:
            raise ValueError(f"invalid d_k {self.d_k!r}; must be a positive integer, or 0 for "
                             f"d_model / n_heads")
        check_dropout(self.dropout)
        if self.attn_dropout != -1.0:
            check_dropout(self.attn_dropout)
        check_choice("norm", self.norm, NORMS)
        check_choice("pos_encoding", self.pos_encoding, POS_ENCODINGS)
        check_choice("attn_backend", self.attn_backend, ATTN_BACKENDS)
        check_flag("attn_scale", self.attn_scale)
        check_flag("residual", self.residual)
        check_flag("tie_weights", self.tie_weights)
        check_choice("init", self.init, INITS)


def _layers(layer: type[nn.Module], c: TransformerConfig, **kwargs: bool) -> nn.ModuleList:
    """c.n_layers layers of one type, sized and wired by the config."""
    return nn.ModuleList(
        layer(c.d_model, c.n_heads, c.d_ff, dropout=c.dropout, norm=c.norm,
              attn_scale=c.attn_scale, attn_backend=c.attn_backend, d_k=c.d_k or None,
              attn_dropout=None if c.attn_dropout == -1.0 else c.attn_dropout,
              residual=c.residual, **kwargs)
        for _ in range(c.n_layers)
    )


def _inputs(c: TransformerConfig) -> tuple[TokenEmbedding, nn.Module, nn.Dropout]:
    """What both models apply to tokens first: the embedding (scaled by sqrt(d)), positions
    (per c.pos_encoding), dropout."""
    return (TokenEmbedding(c.vocab_size, c.d_model),
            positional_encoding(c.pos_encoding, c.d_model, c.max_len),
            nn.Dropout(c.dropout))


def _xavier_init(module: nn.Module, init: str = "normal") -> None:
    """Xavier-uniform for every projection matrix, as nn.Transformer and the reference code do;
    init "xavier" (TransformerConfig.init): also on the embedding, on each of W^Q, W^K, W^V
    apart (fan-in and fan-out of one d x d block, not of the stacked in_proj), biases zero."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            if init == "xavier" and m.bias is not None:
                nn.init.zeros_(m.bias)
    if init != "xavier":
        return
    for m in module.modules():
        if isinstance(m, MultiHeadAttention):
            r = m.qk_rows
            for block in m.in_proj.weight.data.split([r, r, m.d_model]):
                nn.init.xavier_uniform_(block)
        if isinstance(m, TokenEmbedding):
            nn.init.xavier_uniform_(m.weight)


class Transformer(nn.Module):
    """Encoder-decoder: shared token embedding (scaled by sqrt(d)) + positions + dropout,
    N encoder layers, N decoder layers (causal self-attention, cross-attention), head."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        c = config
        self.embed, self.pos, self.drop = _inputs(c)
        self.encoder = _layers(EncoderLayer, c)
        self.decoder = _layers(DecoderLayer, c)
        self.enc_norm = nn.LayerNorm(c.d_model) if c.norm == "pre" else nn.Identity()
        _xavier_init(self, c.init)
        self.head = OutputHead(self.embed, c.vocab_size, c.d_model, c.tie_weights, c.norm == "pre")

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

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        c = config
        self.embed, self.pos, self.drop = _inputs(c)
        self.layers = _layers(EncoderLayer, c, causal=True)
        _xavier_init(self, c.init)
        self.head = OutputHead(self.embed, c.vocab_size, c.d_model, c.tie_weights, c.norm == "pre")

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # (B, n) -> (B, n, V)
        x = self.drop(self.pos(self.embed(tokens)))
        for layer in self.layers:
            x = layer(x)
        return self.head(x)
