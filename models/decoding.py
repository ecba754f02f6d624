"""Decoding for the encoder-decoder models: greedy and batched beam search, each either
incremental (cached keys and values in the Transformer decoder, the carried recurrent state
in the RNNs) or by full recomputation of the decoder over the whole prefix at every step.
The two must give the same tokens (tested); the recomputing one is the reference the cache
is checked against and the "without cache" side of the decoding-speed measurement.

A stepper wraps a model: start(src, pad) encodes once and returns a state; step(state,
prefix) returns the next-token logits (B, V) for each row's prefix (B, t) (BOS first) and
the new state; select(state, idx) keeps rows idx (beam search reorders its hypotheses).
Beam search follows the paper: beam 4, length penalty lp(Y) = ((5 + |Y|) / 6)^alpha with
alpha 0.6 (Wu et al., 2016), output at most input length + 50 tokens; a sentence is done
once it has `beam` finished hypotheses (fairseq's rule). Which hypotheses finish does not
depend on alpha (the beam ranks by log-probability; alpha only ranks the finished), so one
search (`beam_candidates`) gives the output of every alpha (`pick`): the paper chose its
alpha on the development set, and so can a caller, at the cost of one search.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from models.blocks import attention
from models.rnn import RNNSeq2Seq
from models.rnn_attention import AttentionRNN
from models.transformer import Transformer

State = dict[str, Any]
MAX_EXTRA = 50  # maximum output length = input length + 50


def _rows(x: Any, idx: torch.Tensor, dim: int = 0) -> Any:
    """x (a tensor, None, or a tuple/list of them) with rows idx kept along dim."""
    if x is None:
        return None
    if isinstance(x, (tuple, list)):
        return type(x)(_rows(v, idx, dim) for v in x)
    return x.index_select(dim, idx)


class TransformerStepper:
    """The Transformer's decoder one position at a time; cache=True keeps each layer's
    self-attention keys/values and the cross-attention keys/values of the memory."""

    def __init__(self, model: Transformer, cache: bool) -> None:
        self.model, self.cache = model, cache

    def start(self, src: torch.Tensor, pad: torch.Tensor | None) -> State:
        memory = self.model.encode(src, pad)
        state: State = {"memory": memory, "pad": pad}
        if self.cache:  # per layer: keys (B, h, S, d_k) and values (B, h, S, d_v)
            state["cross"] = [layer.multihead_attn.project_kv(memory)
                              for layer in self.model.decoder]
            state["self"] = [None] * len(self.model.decoder)
        return state

    def step(self, state: State, prefix: torch.Tensor) -> tuple[torch.Tensor, State]:
        m = self.model
        if not self.cache:
            return m.decode(prefix, state["memory"], state["pad"])[:, -1], state
        t = prefix.size(1)
        pe = m.pos(prefix.new_zeros(1, t, m.embed.weight.size(1), dtype=m.embed.weight.dtype))
        x = m.drop(m.embed(prefix[:, -1:]) + pe[:, -1:])  # (B, 1, d), as decode's position t-1
        mask = None if state["pad"] is None else ~state["pad"][:, None, None, :]
        new_self = []
        for i, layer in enumerate(m.decoder):
            def self_attn(h, i=i, layer=layer):
                q, k, v = layer.self_attn.project_qkv(h)
                if state["self"][i] is not None:
                    k = torch.cat([state["self"][i][0], k], dim=2)
                    v = torch.cat([state["self"][i][1], v], dim=2)
                new_self.append((k, v))
                return self._out(layer.self_attn, q, k, v, None)

            def cross_attn(h, i=i, layer=layer):
                mha = layer.multihead_attn
                return self._out(mha, mha.project_q(h), *state["cross"][i], mask)

            x = layer.sublayer(1, x, self_attn)
            x = layer.sublayer(2, x, cross_attn)
            x = layer.sublayer(3, x, layer.ffn)
        return m.head(x)[:, -1], state | {"self": new_self}

    @staticmethod
    def _out(mha: nn.Module, q, k, v, mask) -> torch.Tensor:
        z = attention(q, k, v, mask=mask, scale=mha.attn_scale, backend=mha.attn_backend)
        return mha.output(z)  # (B, 1, d)

    def select(self, state: State, idx: torch.Tensor) -> State:
        out = {k: _rows(v, idx) for k, v in state.items() if k != "self"}
        if "self" in state:
            out["self"] = [_rows(kv, idx) for kv in state["self"]]
        return out


class RNNStepper:
    """The plain LSTM/GRU encoder-decoder: cache=True carries the decoder state."""

    def __init__(self, model: RNNSeq2Seq, cache: bool) -> None:
        self.model, self.cache = model, cache

    def start(self, src: torch.Tensor, pad: torch.Tensor | None) -> State:
        enc = self.model.encode(src, pad)
        return {"enc": enc, "dec": enc}

    def step(self, state: State, prefix: torch.Tensor) -> tuple[torch.Tensor, State]:
        m = self.model
        tokens, init = (prefix[:, -1:], state["dec"]) if self.cache else (prefix, state["enc"])
        y, dec = m.decoder(m.drop(m.embed(tokens)), init)
        return m.head(m.drop(y))[:, -1], state | {"dec": dec}

    def select(self, state: State, idx: torch.Tensor) -> State:
        return {k: _rows(v, idx, dim=1) for k, v in state.items()}  # (L, B, d) states


class AttentionRNNStepper:
    """The attentional RNN: cache=True carries (recurrent state, h~); without, every step
    reruns the decoder from its initial state over the whole prefix."""

    def __init__(self, model: AttentionRNN, cache: bool) -> None:
        self.model, self.cache = model, cache

    def start(self, src: torch.Tensor, pad: torch.Tensor | None) -> State:
        memory, pad, dec = self.model.encode(src, pad)
        return {"memory": memory, "pad": pad, "init": dec, "dec": dec}

    def step(self, state: State, prefix: torch.Tensor) -> tuple[torch.Tensor, State]:
        m, memory, pad = self.model, state["memory"], state["pad"]
        if self.cache:
            logits, dec = m.step(prefix[:, -1], memory, pad, state["dec"])
            return logits, state | {"dec": dec}
        dec = state["init"]
        for t in range(prefix.size(1)):
            logits, dec = m.step(prefix[:, t], memory, pad, dec)
        return logits, state

    def select(self, state: State, idx: torch.Tensor) -> State:
        out = {k: _rows(state[k], idx) for k in ("memory", "pad")}
        for key in ("init", "dec"):
            rnn_state, feed = state[key]
            out[key] = (_rows(rnn_state, idx, dim=1), _rows(feed, idx))
        return out


def stepper(model: nn.Module, cache: bool = True) -> Any:
    """The stepper of an encoder-decoder model (Transformer, LSTM/GRU, attentional RNN)."""
    for cls, make in ((Transformer, TransformerStepper), (RNNSeq2Seq, RNNStepper),
                      (AttentionRNN, AttentionRNNStepper)):
        if isinstance(model, cls):
            return make(model, cache)
    raise ValueError(f"no decoder stepper for {type(model).__name__}; valid: Transformer, "
                     f"RNNSeq2Seq, AttentionRNN")


def _max_lengths(src: torch.Tensor, pad: torch.Tensor | None) -> torch.Tensor:
    lengths = src.new_full((src.size(0),), src.size(1))
    if pad is not None:
        lengths = lengths - pad.sum(1)
    return lengths + MAX_EXTRA


@torch.no_grad()
def greedy(model: nn.Module, src: torch.Tensor, pad: torch.Tensor | None, bos: int, eos: int,
           cache: bool = True) -> list[list[int]]:
    """The most likely next token at each step until EOS or the maximum length; the tokens
    of each sentence without BOS and EOS."""
    st = stepper(model, cache)
    state = st.start(src, pad)
    max_len = _max_lengths(src, pad)
    prefix = src.new_full((src.size(0), 1), bos)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for t in range(int(max_len.max())):
        logits, state = st.step(state, prefix)
        nxt = logits.argmax(-1)
        nxt = torch.where(done | (t + 1 >= max_len), torch.full_like(nxt, eos), nxt)
        prefix = torch.cat([prefix, nxt[:, None]], dim=1)
        done |= nxt == eos
        if bool(done.all()):
            break
    return [_strip(row, eos) for row in prefix[:, 1:].tolist()]


def _strip(tokens: list[int], eos: int) -> list[int]:
    return tokens[: tokens.index(eos)] if eos in tokens else tokens


def length_penalty(length: int, alpha: float) -> float:
    return ((5 + length) / 6) ** alpha


def beam_search(model: nn.Module, src: torch.Tensor, pad: torch.Tensor | None, bos: int,
                eos: int, beam: int = 4, alpha: float = 0.6, cache: bool = True
                ) -> list[list[int]]:
    """Batched beam search (module docstring); each sentence's best finished hypothesis by
    log-probability / lp(length), without BOS and EOS."""
    return [pick(f, alpha) for f in beam_candidates(model, src, pad, bos, eos, beam, cache)]


def pick(finished: list[tuple[float, list[int]]], alpha: float) -> list[int]:
    """The best of a sentence's finished hypotheses (log-probability, tokens) by
    log-probability / lp(length + EOS); the first on a tie; [] if none finished."""
    if not finished:
        return []
    return max(finished, key=lambda h: h[0] / length_penalty(len(h[1]) + 1, alpha))[1]


@torch.no_grad()
def beam_candidates(model: nn.Module, src: torch.Tensor, pad: torch.Tensor | None, bos: int,
                    eos: int, beam: int = 4, cache: bool = True
                    ) -> list[list[tuple[float, list[int]]]]:
    """Batched beam search's finished hypotheses per sentence, (log-probability, tokens
    without BOS and EOS), up to `beam` each, in the order they finished."""
    B, K = src.size(0), beam
    st = stepper(model, cache)
    rows = torch.arange(B, device=src.device).repeat_interleave(K)  # beam b*K+k of sentence b
    state = st.select(st.start(src, pad), rows)
    max_len = _max_lengths(src, pad).repeat_interleave(K)
    prefix = src.new_full((B * K, 1), bos)
    scores = torch.full((B, K), float("-inf"), device=src.device, dtype=torch.float64)
    scores[:, 0] = 0.0  # one live hypothesis per sentence at first
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(B)]
    for t in range(int(max_len.max())):
        logits, state = st.step(state, prefix)
        logp = logits.double().log_softmax(-1)  # (B*K, V)
        forced = t + 1 >= max_len  # these rows may only end
        logp[forced] = torch.where(torch.arange(logp.size(1), device=logp.device) == eos,
                                   logp[forced], float("-inf"))
        cand = (scores.view(-1, 1) + logp).view(B, -1)  # (B, K*V)
        top, flat = cand.topk(2 * K, dim=1)  # enough to keep K that do not end
        origin, token = flat // logp.size(1), flat % logp.size(1)
        keep_src, keep_tok, keep_score = _advance(top, origin, token, prefix, finished, eos, K)
        if all(len(f) >= K for f in finished):
            break
        idx = (torch.arange(B, device=src.device)[:, None] * K + keep_src).view(-1)
        state = st.select(state, idx)
        prefix = torch.cat([prefix.index_select(0, idx), keep_tok.view(-1, 1)], dim=1)
        scores = keep_score
    return finished


def _advance(top, origin, token, prefix, finished, eos: int, K: int):
    """Move the candidates among the best K that end in EOS to `finished` (for sentences not
    yet done) and keep the best K that do not; returns their origin beam, token and score,
    (B, K) each. With K = 1 this is greedy search."""
    B = top.size(0)
    is_eos = token == eos
    top_l, origin_l, eos_l = top.tolist(), origin.tolist(), is_eos.tolist()
    for b in range(B):
        for j in range(K):  # EOS among the best K candidates only, as fairseq
            if eos_l[b][j] and len(finished[b]) < K and top_l[b][j] > float("-inf"):
                toks = prefix[b * K + origin_l[b][j], 1:].tolist()
                finished[b].append((top_l[b][j], toks))
    # the best K non-EOS candidates per sentence (a non-EOS score of -inf stays dead)
    masked = top.masked_fill(is_eos, float("-inf"))
    order = masked.argsort(dim=1, descending=True, stable=True)[:, :K]
    return origin.gather(1, order), token.gather(1, order), masked.gather(1, order)
