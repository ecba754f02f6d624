"""LSTM and GRU: one set of parameters, two kernels, and the encoder-decoder / LM models.

rnn_impl="fused" calls nn.LSTM / nn.GRU (cuDNN on CUDA, oneDNN on CPU); rnn_impl="cell"
runs the same parameters through an explicit per-step loop written from the gate equations,
so the recurrence h_t = f(h_{t-1}, x_t) is visible to autograd and to FLOP counters.
Gate order and weight layout are PyTorch's: LSTM (i, f, g, o), GRU (r, z, n).
The whole models take an RNNConfig (and the kind); the layers take flat arguments.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from models.blocks import OutputHead, TokenEmbedding
from models.checks import check_choice, check_dropout, check_flag, check_positive

RNN_KINDS = ("lstm", "gru")
RNN_IMPLS = ("fused", "cell")


@dataclass(frozen=True)
class RNNConfig:
    vocab_size: int = 37000  # same vocabulary as the Transformer it is compared with
    d_model: int = 512  # hidden size = embedding size, as the Transformer's d_model
    n_layers: int = 6  # stacked recurrent layers
    dropout: float = 0.1  # on embeddings, between layers and before the head
    # Validated but unused: presets and sweeps set max_len for every model, and a recurrence,
    # having no positional table, runs on any length.
    max_len: int = 1024
    rnn_impl: str = "fused"  # cuDNN/oneDNN kernel; "cell" is the explicit per-step loop
    tie_weights: bool = True  # as in the Transformer, so both have the same head

    def __post_init__(self) -> None:
        check_positive(self, "vocab_size", "d_model", "n_layers", "max_len")
        check_dropout(self.dropout)
        check_choice("rnn_impl", self.rnn_impl, RNN_IMPLS)
        check_flag("tie_weights", self.tie_weights)

State = torch.Tensor | tuple[torch.Tensor, torch.Tensor]


def lstm_layer(
    x: torch.Tensor,  # (B, n, d_in)
    h: torch.Tensor,  # (B, d)
    c: torch.Tensor,  # (B, d)
    w_ih: torch.Tensor,  # (4d, d_in)
    w_hh: torch.Tensor,  # (4d, d)
    b_ih: torch.Tensor,  # (4d,)
    b_hh: torch.Tensor,  # (4d,)
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """i, f, o = sigmoid(.), g = tanh(.); c_t = f c_{t-1} + i g; h_t = o tanh(c_t).

    The steps take their input products by one unbind, not by indexing xw[:, t] at each step:
    each indexing's backward writes a zero tensor of xw's whole size, so the backward pass did
    O(n^2 B d) memory work (B=8, n=d=512, one thread, forward+backward: 9.7 s, 62% of it
    zero fills; 0.9 s by unbind; nn.LSTM 0.3 s)."""
    xw = F.linear(x, w_ih, b_ih)  # (B, n, 4d): the input products have no recurrence
    ys = []
    for xw_t in xw.unbind(1):  # one unbind: see the docstring
        gates = xw_t + F.linear(h, w_hh, b_hh)  # (B, 4d)
        i, f, g, o = gates.chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        ys.append(h)
    return torch.stack(ys, dim=1), h, c  # (B, n, d), (B, d), (B, d)


def gru_layer(
    x: torch.Tensor,  # (B, n, d_in)
    h: torch.Tensor,  # (B, d)
    w_ih: torch.Tensor,  # (3d, d_in)
    w_hh: torch.Tensor,  # (3d, d)
    b_ih: torch.Tensor,  # (3d,)
    b_hh: torch.Tensor,  # (3d,)
) -> tuple[torch.Tensor, torch.Tensor]:
    """r, z = sigmoid(.); n = tanh(x_n + r (W_hn h + b_hn)); h_t = (1 - z) n + z h_{t-1}."""
    xw = F.linear(x, w_ih, b_ih)  # (B, n, 3d)
    ys = []
    for xw_t in xw.unbind(1):  # see lstm_layer
        xr, xz, xn = xw_t.chunk(3, dim=-1)
        hr, hz, hn = F.linear(h, w_hh, b_hh).chunk(3, dim=-1)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        h = torch.lerp(torch.tanh(xn + r * hn), h, z)  # (1 - z) n + z h
        ys.append(h)
    return torch.stack(ys, dim=1), h


class Recurrent(nn.Module):
    """A stack of LSTM or GRU layers, hidden size = input size = d_model, batch first."""

    def __init__(
        self, kind: str, d_model: int, n_layers: int = 1, impl: str = "fused", dropout: float = 0.0
    ) -> None:
        super().__init__()
        check_choice("rnn kind", kind, RNN_KINDS)
        check_choice("rnn_impl", impl, RNN_IMPLS)
        self.kind, self.impl, self.n_layers, self.dropout = kind, impl, n_layers, dropout
        cls = nn.LSTM if kind == "lstm" else nn.GRU
        self.rnn = cls(d_model, d_model, n_layers, batch_first=True,
                       dropout=dropout if n_layers > 1 else 0.0)

    def forward(
        self, x: torch.Tensor, state: State | None = None
    ) -> tuple[torch.Tensor, State]:  # (B, n, d) -> (B, n, d), final state (L, B, d)[x2]
        if self.impl == "fused":
            return self.rnn(x, state)
        return self._cells(x, state)

    def _cells(self, x: torch.Tensor, state: State | None) -> tuple[torch.Tensor, State]:
        B, L, d = x.size(0), self.n_layers, self.rnn.hidden_size
        zeros = x.new_zeros(L, B, d)
        if self.kind == "lstm":
            h0, c0 = state if state is not None else (zeros, zeros)
        else:
            h0 = state if state is not None else zeros
        hs, cs = [], []
        for layer in range(L):
            p = [getattr(self.rnn, f"{name}_l{layer}")
                 for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
            if layer > 0:  # nn.LSTM/GRU put dropout between layers, not after the last
                x = F.dropout(x, self.dropout, self.training)
            if self.kind == "lstm":
                x, h, c = lstm_layer(x, h0[layer], c0[layer], *p)
                cs.append(c)
            else:
                x, h = gru_layer(x, h0[layer], *p)
            hs.append(h)
        h_n = torch.stack(hs)
        return x, ((h_n, torch.stack(cs)) if self.kind == "lstm" else h_n)


class RNNLM(nn.Module):
    """Decoder-only LSTM/GRU LM: embedding -> recurrent stack -> LayerNorm -> head, the same
    embedding and head as the Pre-LN Transformer."""

    def __init__(self, kind: str, config: RNNConfig) -> None:
        super().__init__()
        c = config
        self.embed = TokenEmbedding(c.vocab_size, c.d_model)
        self.drop = nn.Dropout(c.dropout)
        self.rnn = Recurrent(kind, c.d_model, c.n_layers, c.rnn_impl, c.dropout)
        self.head = OutputHead(self.embed, c.vocab_size, c.d_model, c.tie_weights, final_norm=True)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # (B, n) -> (B, n, V)
        y, _ = self.rnn(self.drop(self.embed(tokens)))
        return self.head(self.drop(y))


class RNNSeq2Seq(nn.Module):
    """Encoder-decoder LSTM/GRU: the decoder starts from the encoder's final state."""

    def __init__(self, kind: str, config: RNNConfig) -> None:
        super().__init__()
        c = config
        self.embed = TokenEmbedding(c.vocab_size, c.d_model)  # shared source/target vocabulary
        self.drop = nn.Dropout(c.dropout)
        self.encoder = Recurrent(kind, c.d_model, c.n_layers, c.rnn_impl, c.dropout)
        self.decoder = Recurrent(kind, c.d_model, c.n_layers, c.rnn_impl, c.dropout)
        self.head = OutputHead(self.embed, c.vocab_size, c.d_model, c.tie_weights, final_norm=True)

    def encode(self, src: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None
               ) -> State:
        """The encoder's final state after each source's own last token: the padding
        (True in the mask, after the tokens) is never read, so a sentence encodes alike
        alone and in any batch (packed sequences; the cell loop runs row by row)."""
        x = self.drop(self.embed(src))
        if src_key_padding_mask is None:
            return self.encoder(x)[1]
        lengths = (src.size(1) - src_key_padding_mask.sum(1)).clamp(min=1)
        if self.encoder.impl == "fused":
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True,
                                                       enforce_sorted=False)
            return self.encoder.rnn(packed)[1]  # final states in the batch's own order
        rows = [self.encoder(x[b: b + 1, : int(lengths[b])])[1] for b in range(src.size(0))]
        if self.encoder.kind == "lstm":
            return torch.cat([h for h, _ in rows], 1), torch.cat([c for _, c in rows], 1)
        return torch.cat(rows, 1)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor,
                src_key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        # src (B, S), tgt_in (B, T) -> logits (B, T, V)
        state = self.encode(src, src_key_padding_mask)
        y, _ = self.decoder(self.drop(self.embed(tgt_in)), state)
        return self.head(self.drop(y))
