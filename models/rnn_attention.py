"""The attentional recurrent encoder-decoder (Luong et al., 2015; the GNMT family).

Encoder: n_layers bidirectional LSTM/GRU layers; each direction has half the width
(d_model // 2 forward, the rest backward) so a position's concatenated state has d_model.
The backward direction reads each sequence's own tokens in reverse (padding stays at the
end), so padded and unpadded sources encode alike. Decoder: n_layers unidirectional layers
whose input at step t is [embedding of y_{t-1}; attentional state h~_{t-1}] (input feeding),
then multiplicative ("general") attention over the encoder states, score(h_t, s_j) =
h_t W_a s_j, context c_t, and h~_t = tanh(W_c [c_t; h_t]), which the output head reads.
Embedding and head are the ones every model shares (TokenEmbedding, OutputHead).

The decoder steps one token at a time (input feeding makes step t need h~_{t-1}), so
training and incremental decoding run the same recurrence (`_advance`); `forward`, the
teacher-forced loop, embeds the targets and applies the head once over every position.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from models.blocks import OutputHead, TokenEmbedding
from models.checks import check_choice, check_dropout, check_flag, check_positive
from models.rnn import RNN_IMPLS, RNN_KINDS, State, gru_layer, lstm_layer

DecoderState = tuple[State, torch.Tensor]  # (recurrent state (L, B, d)[x2], h~ (B, d))


@dataclass(frozen=True)
class AttentionRNNConfig:
    vocab_size: int = 37000
    d_model: int = 512  # embedding size = decoder width = concatenated encoder width
    n_layers: int = 2  # encoder and decoder layers each
    dropout: float = 0.1
    max_len: int = 1024  # validated but unused: a recurrence runs on any length
    rnn_impl: str = "fused"  # nn.LSTM/nn.GRU kernels (decoder: their cells); "cell": explicit
    tie_weights: bool = True

    def __post_init__(self) -> None:
        check_positive(self, "vocab_size", "d_model", "n_layers", "max_len")
        if self.d_model < 2:
            raise ValueError(f"invalid d_model {self.d_model!r}; a bidirectional encoder "
                             f"needs at least 2")
        check_dropout(self.dropout)
        check_choice("rnn_impl", self.rnn_impl, RNN_IMPLS)
        check_flag("tie_weights", self.tie_weights)


def _layers(rnn: nn.LSTM | nn.GRU, x: torch.Tensor, state: State, layer_fn) -> tuple[
        torch.Tensor, State]:
    """x through every layer of `rnn` with its parameters, `layer_fn(x, h0, c0, params) ->
    (x, h, c)` running one layer (c0 and c are None for a GRU); dropout between layers as
    nn.LSTM places it; the layers' final states stacked as nn.LSTM/nn.GRU return them."""
    lstm = isinstance(rnn, nn.LSTM)
    hs, cs = [], []
    for layer in range(rnn.num_layers):
        p = [getattr(rnn, f"{n}_l{layer}") for n in ("weight_ih", "weight_hh", "bias_ih",
                                                      "bias_hh")]
        if layer > 0:
            x = torch.nn.functional.dropout(x, rnn.dropout, rnn.training)
        h0, c0 = (state[0][layer], state[1][layer]) if lstm else (state[layer], None)
        x, h, c = layer_fn(x, h0, c0, p)
        hs.append(h)
        cs.append(c)
    return x, ((torch.stack(hs), torch.stack(cs)) if lstm else torch.stack(hs))


def run_rnn(rnn: nn.LSTM | nn.GRU, x: torch.Tensor, state: State | None, impl: str
            ) -> tuple[torch.Tensor, State]:
    """rnn(x, state) through its fused kernel, or through models.rnn's explicit cell loop
    with the same parameters (impl="cell")."""
    if impl == "fused":
        return rnn(x, state)
    lstm = isinstance(rnn, nn.LSTM)
    if state is None:
        zeros = x.new_zeros(rnn.num_layers, x.size(0), rnn.hidden_size)
        state = (zeros, zeros) if lstm else zeros
    if lstm:
        return _layers(rnn, x, state, lambda x, h, c, p: lstm_layer(x, h, c, *p))
    return _layers(rnn, x, state, lambda x, h, c, p: (*gru_layer(x, h, *p), None))


def cell_step(rnn: nn.LSTM | nn.GRU, x: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
    """One step, x (B, d_in) -> (B, d), through every layer of `rnn` by aten's fused cells
    (torch.lstm_cell / gru_cell, what nn.LSTMCell runs). The decoder steps one token at a
    time, and nn.LSTM on a one-token sequence pays oneDNN's setup at every call (CPU: its
    backward took 4.4 ms a step at d 180, B 56; these cells make training 1.1x faster)."""
    def lstm(x: torch.Tensor, h: torch.Tensor, c: torch.Tensor, p: list) -> tuple:
        h, c = torch.lstm_cell(x, (h, c), *p)
        return h, h, c

    def gru(x: torch.Tensor, h: torch.Tensor, _c: None, p: list) -> tuple:
        h = torch.gru_cell(x, h, *p)
        return h, h, None

    return _layers(rnn, x, state, lstm if isinstance(rnn, nn.LSTM) else gru)


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """x (B, n, ...) with each row's first lengths[b] positions reversed, the rest kept."""
    n = x.size(1)
    pos = torch.arange(n, device=x.device)[None, :]  # (1, n)
    idx = torch.where(pos < lengths[:, None], lengths[:, None] - 1 - pos, pos)  # (B, n)
    return x.gather(1, idx.view(*idx.shape, *([1] * (x.dim() - 2))).expand_as(x))


class AttentionRNN(nn.Module):
    def __init__(self, kind: str, config: AttentionRNNConfig) -> None:
        super().__init__()
        if kind not in RNN_KINDS:
            raise ValueError(f"invalid rnn kind {kind!r}; valid: {', '.join(RNN_KINDS)}")
        c = config
        self.kind, self.d, self.impl = kind, c.d_model, c.rnn_impl
        cls = nn.LSTM if kind == "lstm" else nn.GRU
        d_fwd = c.d_model // 2
        self.embed = TokenEmbedding(c.vocab_size, c.d_model)
        self.drop = nn.Dropout(c.dropout)
        self.enc_fwd = nn.ModuleList(cls(c.d_model, d_fwd, batch_first=True)
                                     for _ in range(c.n_layers))
        self.enc_bwd = nn.ModuleList(cls(c.d_model, c.d_model - d_fwd, batch_first=True)
                                     for _ in range(c.n_layers))
        self.bridge = nn.Linear(c.d_model, c.d_model)  # encoder summary -> decoder's h_0
        self.decoder = cls(2 * c.d_model, c.d_model, c.n_layers, batch_first=True,
                           dropout=c.dropout if c.n_layers > 1 else 0.0)
        self.attn = nn.Linear(c.d_model, c.d_model, bias=False)  # W_a
        self.combine = nn.Linear(2 * c.d_model, c.d_model, bias=False)  # W_c
        self.head = OutputHead(self.embed, c.vocab_size, c.d_model, c.tie_weights,
                               final_norm=True)

    def encode(self, src: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None
               ) -> tuple[torch.Tensor, torch.Tensor | None, DecoderState]:
        """src (B, S) -> memory (B, S, d), the padding mask, the decoder's initial state."""
        B, S = src.shape
        pad = src_key_padding_mask
        lengths = (S - pad.sum(1)) if pad is not None else src.new_full((B,), S)
        x = self.drop(self.embed(src))
        for fwd, bwd in zip(self.enc_fwd, self.enc_bwd, strict=True):
            y_f, _ = run_rnn(fwd, x, None, self.impl)
            y_b, _ = run_rnn(bwd, reverse_padded(x, lengths), None, self.impl)
            y_b = reverse_padded(y_b, lengths)
            x = self.drop(torch.cat([y_f, y_b], dim=-1))  # (B, S, d)
        memory = x
        if pad is not None:
            memory = memory.masked_fill(pad[..., None], 0.0)
        summary = memory.sum(1) / lengths.clamp(min=1)[:, None].to(memory.dtype)
        h0 = torch.tanh(self.bridge(summary))[None].expand(self.decoder.num_layers, -1, -1)
        h0 = h0.contiguous()
        rnn_state: State = (h0, torch.zeros_like(h0)) if self.kind == "lstm" else h0
        return memory, pad, (rnn_state, memory.new_zeros(B, self.d))

    def step(self, token: torch.Tensor, memory: torch.Tensor, pad: torch.Tensor | None,
             state: DecoderState) -> tuple[torch.Tensor, DecoderState]:
        """One decoder step: token (B,) -> logits (B, V) and the next state."""
        h_tilde, state = self._advance(self.drop(self.embed(token)), memory, pad, state)
        return self.head(self.drop(h_tilde)), state

    def _advance(self, emb: torch.Tensor, memory: torch.Tensor, pad: torch.Tensor | None,
                 state: DecoderState) -> tuple[torch.Tensor, DecoderState]:
        """The recurrence and attention of one step: the token's embedding (B, d) -> the
        attentional state h~ (B, d), which the head reads, and the next state."""
        rnn_state, feed = state
        x = torch.cat([emb, feed], dim=-1)  # (B, 2d): input feeding
        if self.impl == "fused":
            h, rnn_state = cell_step(self.decoder, x, rnn_state)
            h = h[:, None]  # (B, 1, d)
        else:
            h, rnn_state = run_rnn(self.decoder, x[:, None], rnn_state, self.impl)
        scores = (self.attn(h) @ memory.transpose(1, 2))  # (B, 1, S)
        if pad is not None:
            scores = scores.masked_fill(pad[:, None, :], float("-inf"))
        context = scores.softmax(-1) @ memory  # (B, 1, d)
        h_tilde = torch.tanh(self.combine(torch.cat([context, h], dim=-1)))[:, 0]  # (B, d)
        return h_tilde, (rnn_state, h_tilde)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor,
                src_key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Teacher forcing: src (B, S), tgt_in (B, T) -> logits (B, T, V). Only the
        recurrence steps; the embeddings and the head (the largest product) run once over
        every position (lstm-attention at d 180, 56 pairs: 1.1x faster training than a
        head per step)."""
        memory, pad, state = self.encode(src, src_key_padding_mask)
        states = []
        for emb in self.drop(self.embed(tgt_in)).unbind(1):  # one unbind: see models.rnn
            h_tilde, state = self._advance(emb, memory, pad, state)
            states.append(h_tilde)
        return self.head(self.drop(torch.stack(states, dim=1)))
