"""The building blocks of "Attention is all you need", written from its equations.

Shapes: B batch, n query length, S key length, d d_model, h heads, d_v = d / h, and
d_k = d / h unless set apart (MultiHeadAttention's d_k).
Boolean masks follow F.scaled_dot_product_attention: True means "may attend".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from models.checks import check_choice, check_flag

# "auto": sdpa here; the harness may set a layer's "auto" to whichever of the two it measured
# faster on the machine at hand
ATTN_BACKENDS = ("math", "sdpa", "auto")
NORMS = ("post", "pre")
POS_ENCODINGS = ("sinusoidal", "learned", "none")


def causal_mask(n: int, s: int, device: torch.device | None = None) -> torch.Tensor:
    """(n, s) bool, True on and below the diagonal: query i sees keys 0..i."""
    return torch.ones(n, s, dtype=torch.bool, device=device).tril()


def attention(
    q: torch.Tensor,  # (B, h, n, d_k)
    k: torch.Tensor,  # (B, h, S, d_k)
    v: torch.Tensor,  # (B, h, S, d_v)
    mask: torch.Tensor | None = None,  # bool, broadcastable to (B, h, n, S)
    causal: bool = False,
    scale: bool = True,
    dropout_p: float = 0.0,
    backend: str = "math",
) -> torch.Tensor:  # (B, h, n, d_v)
    """softmax(Q K^T / sqrt(d_k)) V, with the 1/sqrt(d_k) factor optional (attn_scale)."""
    factor = 1.0 / math.sqrt(q.size(-1)) if scale else 1.0
    if causal and mask is not None:
        mask = mask & causal_mask(q.size(-2), k.size(-2), q.device)
        causal = False
    if backend in ("sdpa", "auto"):
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=causal, scale=factor
        )
    check_choice("attn_backend", backend, ATTN_BACKENDS)
    # Scaling q (n x d_k numbers) instead of the scores (n x S) saves two passes over the
    # largest tensor, forward and backward: ~4% of a layer's fwd+bwd at n = d = 512 on CPU.
    scores = (q * factor if scale else q) @ k.transpose(-2, -1)  # (B, h, n, S)
    if causal:
        mask = causal_mask(q.size(-2), k.size(-2), q.device)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)  # alpha_ij
    if mask is not None:  # a query that may see no key gets zeros, as sdpa gives, not 0/0 = NaN
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    weights = F.dropout(weights, dropout_p)
    return weights @ v  # z_i = sum_j alpha_ij v_j


class MultiHeadAttention(nn.Module):
    """Concat(head_1..head_h) W^O with head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    The h per-head matrices W_i^Q (d x d_k) sit side by side in one (d x h*d_k) matrix, and
    Q, K, V projections are stacked in one `in_proj` ((2*h*d_k + d) x d: W^Q and W^K with
    h*d_k rows each, W^V with h*d_v = d rows), the layout of nn.MultiheadAttention when
    d_k = d / h: self-attention then costs one matmul instead of three. d_k may differ from
    d / h (the paper's Table 3, rows B); d_v stays d / h, so W^O is d x d either way.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,  # the options by name, as the layers pass them
        dropout: float = 0.0,
        attn_scale: bool = True,
        attn_backend: str = "math",
        d_k: int | None = None,  # query/key size per head; None means d_model // n_heads
    ) -> None:
        super().__init__()
        check_choice("attn_backend", attn_backend, ATTN_BACKENDS)
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        d_k = d_model // n_heads if d_k is None else d_k
        if isinstance(d_k, bool) or not isinstance(d_k, int) or d_k <= 0:
            raise ValueError(f"invalid d_k {d_k!r}; must be a positive integer")
        self.d_model, self.n_heads = d_model, n_heads
        self.d_k, self.d_v = d_k, d_model // n_heads
        self.dropout, self.attn_scale, self.attn_backend = dropout, attn_scale, attn_backend
        self.qk_rows = n_heads * d_k  # rows of W^Q, and of W^K
        self.in_proj = nn.Linear(d_model, 2 * self.qk_rows + d_model)  # [W^Q; W^K; W^V]
        self.out_proj = nn.Linear(d_model, d_model)  # W^O

    def _heads(self, x: torch.Tensor) -> torch.Tensor:  # (B, n, h*d_x) -> (B, h, n, d_x)
        return x.unflatten(-1, (self.n_heads, -1)).transpose(1, 2)

    def project_q(self, x: torch.Tensor) -> torch.Tensor:  # (B, n, d) -> (B, h, n, d_k)
        """Q W^Q split into heads (cross-attention's queries; decoding caches K and V)."""
        r, w, b = self.qk_rows, self.in_proj.weight, self.in_proj.bias
        return self._heads(F.linear(x, w[:r], b[:r]))

    def project_kv(
        self, memory: torch.Tensor  # (B, S, d)
    ) -> tuple[torch.Tensor, torch.Tensor]:  # (B, h, S, d_k), (B, h, S, d_v)
        """K W^K and V W^V split into heads, from one matmul."""
        r, w, b = self.qk_rows, self.in_proj.weight, self.in_proj.bias
        k, v = F.linear(memory, w[r:], b[r:]).split([r, self.d_model], dim=-1)
        return self._heads(k), self._heads(v)

    def project_qkv(
        self,
        x: torch.Tensor,  # (B, n, d) queries
        memory: torch.Tensor | None = None,  # (B, S, d) keys/values; None = self-attention
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # q, k (.., d_k), v (B, h, S, d_v)
        """Q W^Q, K W^K, V W^V split into heads: what forward attends over (public so that
        restricted attention and probes reuse these projections, not the weight layout)."""
        if memory is not None:
            return self.project_q(x), *self.project_kv(memory)
        r = self.qk_rows
        q, k, v = self.in_proj(x).split([r, r, self.d_model], dim=-1)
        return self._heads(q), self._heads(k), self._heads(v)

    def output(self, z: torch.Tensor) -> torch.Tensor:  # (B, h, n, d_v) -> (B, n, d)
        """Concat(head_1..head_h) W^O."""
        return self.out_proj(z.transpose(1, 2).flatten(2))

    def forward(
        self,
        x: torch.Tensor,  # (B, n, d) queries
        memory: torch.Tensor | None = None,  # (B, S, d) keys/values; None = self-attention
        key_padding_mask: torch.Tensor | None = None,  # (B, S) bool, True = padding
        causal: bool = False,
    ) -> torch.Tensor:  # (B, n, d)
        q, k, v = self.project_qkv(x, memory)  # (B, h, n, d_k), (B, h, S, d_k), (B, h, S, d_v)
        mask = None
        if key_padding_mask is not None:
            mask = ~key_padding_mask[:, None, None, :]  # (B, 1, 1, S)
        z = attention(
            q,
            k,
            v,
            mask=mask,
            causal=causal,
            scale=self.attn_scale,
            dropout_p=self.dropout if self.training else 0.0,
            backend=self.attn_backend,
        )  # (B, h, n, d_v)
        return self.output(z)  # (B, n, d)


class PositionwiseFFN(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2, applied to every position alike."""

    def __init__(self, d_model: int, d_ff: int, *, dropout: float = 0.0) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, n, d) -> (B, n, d)
        h = F.relu(self.linear1(x))  # (B, n, d_ff)
        return self.linear2(self.dropout(h))


def sinusoid_table(n: int, d_model: int) -> torch.Tensor:
    """(n, d): PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(same)."""
    pos = torch.arange(n, dtype=torch.float64)[:, None]  # (n, 1)
    inv_freq = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = pos * inv_freq  # (n, ceil(d/2))
    pe = torch.zeros(n, d_model, dtype=torch.float64)
    pe[:, 0::2] = angles.sin()
    pe[:, 1::2] = angles.cos()[:, : d_model // 2]
    return pe.float()


class SinusoidalPositions(nn.Module):
    """Fixed sinusoids; computed past max_len on demand, since they extrapolate by design."""

    def __init__(self, d_model: int, max_len: int) -> None:
        super().__init__()
        self.d_model = d_model
        self.register_buffer("pe", sinusoid_table(max_len, d_model), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, n, d)
        n = x.size(1)
        pe = self.pe if n <= self.pe.size(0) else sinusoid_table(n, self.d_model).to(x.device)
        return x + pe[:n].to(x.dtype)


class LearnedPositions(nn.Module):
    def __init__(self, d_model: int, max_len: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.table = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.table.weight, std=d_model**-0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, n, d)
        n = x.size(1)
        if n > self.max_len:
            raise ValueError(
                f"sequence length {n} exceeds learned positions max_len={self.max_len}"
            )
        return x + self.table.weight[:n]


def positional_encoding(kind: str, d_model: int, max_len: int) -> nn.Module:
    check_choice("pos_encoding", kind, POS_ENCODINGS)
    if kind == "sinusoidal":
        return SinusoidalPositions(d_model, max_len)
    if kind == "learned":
        return LearnedPositions(d_model, max_len)
    return nn.Identity()


class TokenEmbedding(nn.Module):
    """Embedding scaled by sqrt(d); init N(0, 1/d) so scaled vectors have unit variance.

    Shared by every model family so that a comparison changes only the sequence mixer.
    """

    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__()
        self.scale = math.sqrt(d_model)
        self.weight = nn.Parameter(torch.randn(vocab_size, d_model) * d_model**-0.5)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # (B, n) -> (B, n, d)
        return F.embedding(tokens, self.weight) * self.scale


class OutputHead(nn.Module):
    """Optional final LayerNorm (Pre-LN stacks and RNNs need one; a Post-LN stack already
    ends in one) and the vocabulary projection, optionally tied to the embedding."""

    def __init__(
        self, embed: TokenEmbedding, vocab_size: int, d_model: int, tie: bool, final_norm: bool
    ) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model) if final_norm else nn.Identity()
        self.proj = nn.Linear(d_model, vocab_size, bias=False)
        if tie:
            self.proj.weight = embed.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, n, d) -> (B, n, V)
        return self.proj(self.norm(x))


class _ResidualLayer(nn.Module):
    """What encoder and decoder layers share: the attention sub-layers named in `attentions`
    (in forward order), then the FFN, each wrapped in a residual and a LayerNorm.

    norm="post": x = LN(x + Dropout(F(x)))   (the paper)
    norm="pre":  x = x + Dropout(F(LN(x)))   (needs a final LN after the stack)
    residual=False drops the `x +` (LN(Dropout(F(x))), Dropout(F(LN(x)))): the ablation
    that asks what the residual branch preserves through depth.
    Attribute names follow nn.TransformerEncoderLayer / DecoderLayer (self_attn,
    multihead_attn, norm1.., dropout1..) so weights map one to one.
    """

    attentions: tuple[str, ...] = ()

    def __init__(
        self,
        d_model: int,  # d: the layer maps (B, n, d) -> (B, n, d)
        n_heads: int,  # h, so d_v = d / h
        d_ff: int,  # the FFN's hidden width: (B, n, d) -> (B, n, d_ff) -> (B, n, d)
        *,  # the options by name: a config's fields, not a positional list
        dropout: float = 0.0,  # on each sub-layer output (and, by default, as below)
        norm: str = "post",  # one of NORMS
        attn_scale: bool = True,  # divide scores by sqrt(d_k)
        attn_backend: str = "math",  # one of ATTN_BACKENDS
        d_k: int | None = None,  # query/key size per head; None means d / h
        attn_dropout: float | None = None,  # on attention weights and the FFN hidden; None:
        # `dropout`, as in the paper and nn.TransformerEncoderLayer (fairseq keeps it at 0)
        residual: bool = True,  # x + F(x) around each sub-layer, as the paper; False: F(x)
    ) -> None:
        super().__init__()
        check_choice("norm", norm, NORMS)
        check_flag("residual", residual)
        self.pre = norm == "pre"
        self.residual = residual
        inner = dropout if attn_dropout is None else attn_dropout
        for name in self.attentions:  # before the FFN: a seeded init draws in this order
            self.add_module(name, MultiHeadAttention(
                d_model, n_heads, dropout=inner, attn_scale=attn_scale,
                attn_backend=attn_backend, d_k=d_k))
        self.ffn = PositionwiseFFN(d_model, d_ff, dropout=inner)
        n_sublayers = len(self.attentions) + 1
        for i in range(1, n_sublayers + 1):
            self.add_module(f"norm{i}", nn.LayerNorm(d_model))
        for i in range(1, n_sublayers + 1):
            self.add_module(f"dropout{i}", nn.Dropout(dropout))

    def sublayer(
        self, i: int, x: torch.Tensor, f: Callable[[torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:  # (B, n, d) -> (B, n, d)
        """Sub-layer i (from 1) around f, with norm{i} and dropout{i} placed as `norm` says."""
        norm, drop = getattr(self, f"norm{i}"), getattr(self, f"dropout{i}")
        if self.pre:
            y = drop(f(norm(x)))
            return x + y if self.residual else y
        y = drop(f(x))
        return norm(x + y if self.residual else y)


class EncoderLayer(_ResidualLayer):
    """Self-attention and FFN sub-layers. Takes _ResidualLayer's arguments, and causal=True
    for self-attention that sees no later position (the decoder-only LM's layers)."""

    attentions = ("self_attn",)
    self_attn: MultiHeadAttention

    def __init__(self, *layer_args: Any, causal: bool = False, **layer_kwargs: Any) -> None:
        super().__init__(*layer_args, **layer_kwargs)
        self.causal = causal

    def forward(
        self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:  # (B, n, d) -> (B, n, d)
        x = self.sublayer(1, x, lambda h: self.self_attn(h, None, key_padding_mask, self.causal))
        return self.sublayer(2, x, self.ffn)


class DecoderLayer(_ResidualLayer):
    """Causal self-attention, cross-attention over the encoder memory, FFN; names as in
    nn.TransformerDecoderLayer (self_attn, multihead_attn, norm1..3)."""

    attentions = ("self_attn", "multihead_attn")
    self_attn: MultiHeadAttention
    multihead_attn: MultiHeadAttention

    def forward(
        self,
        x: torch.Tensor,  # (B, T, d)
        memory: torch.Tensor,  # (B, S, d)
        memory_key_padding_mask: torch.Tensor | None = None,  # (B, S)
    ) -> torch.Tensor:  # (B, T, d)
        x = self.sublayer(1, x, lambda h: self.self_attn(h, causal=True))
        x = self.sublayer(2, x, lambda h: self.multihead_attn(h, memory, memory_key_padding_mask))
        return self.sublayer(3, x, self.ffn)
