"""minGRU and minLSTM (Feng et al. 2024, "Were RNNs all we needed?"): recurrences whose gates
read x_t only, so h_t = a_t * h_{t-1} + b_t is linear in h and a scan computes it.

    minGRU:  z = sigmoid(W_z x), h~ = g(W_h x);  a = 1 - z,  b = z * h~
    minLSTM: f = sigmoid(W_f x), i = sigmoid(W_i x), h~ = g(W_h x);
             f' = f / (f + i), i' = i / (f + i);  a = f',  b = i' * h~

with h_0 = 0. This is the paper's log-space variant (its appendix B.3): the candidate passes
through g(x) = x + 0.5 for x >= 0, sigmoid(x) below, so every b_t > 0 and log b exists; all
three forms use it, so they compute the same function:

- "sequential": the loop h_t = a_t h_{t-1} + b_t, one step after another, as an RNN decodes;
  O(n) dependent steps.
- "levels": a work-efficient odd-even scan (the recursive form of Blelloch's up- and
  down-sweep): pairs are combined level by level, log2(n) levels of whole-tensor ops down and
  log2(n) back, O(n) work. Written out in tensor ops so that the autograd graph, and Table 1's
  graph-depth measurement, sees its O(log n) depth.
- "log": the log-space scan of Heinsen (2023) on torch.cumsum and torch.logcumsumexp:
  h = exp(A + logcumsumexp(log b - A)), A = cumsum(log a): two fused cumulative kernels,
  O(n) work (their depth is inside the kernels, hidden from autograd). Not the fastest form
  everywhere: on the CPUs measured (rematch-quick) its forward+backward is slower than the
  loop at every n, and only the level scan beats the loop; on a GPU it is fast at short n.
  Nor the most exact: |A| grows linearly with n, and exp(A + ...) cancels two large
  numbers, so in float32 its relative error grows with n (runner "scan-error" measures it
  against a float64 loop; `scan_error` below).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from models.checks import check_choice
from models.mixer_lm import MixerLM, MixerLMConfig

MIN_RNN_KINDS = ("min-gru", "min-lstm")
SCANS = ("sequential", "levels", "log")


@dataclass(frozen=True)
class MinRNNConfig:
    scan: str = "log"  # the form that computes the recurrence; all three agree

    def __post_init__(self) -> None:
        check_choice("scan", self.scan, SCANS)


def g(x: torch.Tensor) -> torch.Tensor:
    """The paper's positive activation: x + 0.5 for x >= 0, sigmoid(x) below (continuous)."""
    return torch.where(x >= 0, x + 0.5, torch.sigmoid(x))


def log_g(x: torch.Tensor) -> torch.Tensor:
    """log g(x); relu keeps the unused branch finite, so where() passes no NaN gradient."""
    return torch.where(x >= 0, torch.log(F.relu(x) + 0.5), -F.softplus(-x))


def scan_sequential(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """h_t = a_t h_{t-1} + b_t over dim 1 with h_0 = 0, one step at a time (the steps'
    inputs by one unbind: see models.rnn.lstm_layer)."""
    h = torch.zeros_like(b[:, 0])
    out = []
    for a_t, b_t in zip(a.unbind(1), b.unbind(1), strict=True):
        h = a_t * h + b_t
        out.append(h)
    return torch.stack(out, dim=1)


def scan_levels(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The same recurrence by odd-even reduction: combine each pair (2k, 2k+1) into one step,
    solve the half-length recurrence for the odd positions, then fill in the even ones from
    their odd neighbours. Recursion depth ceil(log2 n)."""
    n = a.size(1)
    if n == 1:
        return b
    if n % 2:  # a neutral step (a = 1, b = 0) at the end changes no earlier h
        a, b = F.pad(a, (0, 0, 0, 1), value=1.0), F.pad(b, (0, 0, 0, 1))
    a_even, a_odd, b_even, b_odd = a[:, 0::2], a[:, 1::2], b[:, 0::2], b[:, 1::2]
    # h_{2k+1} = a_{2k+1} (a_{2k} h_{2k-1} + b_{2k}) + b_{2k+1}
    h_odd = scan_levels(a_odd * a_even, a_odd * b_even + b_odd)
    h_before = F.pad(h_odd[:, :-1], (0, 0, 1, 0))  # h_{2k-1}, with h_{-1} = 0
    h_even = a_even * h_before + b_even
    return torch.stack([h_even, h_odd], dim=2).flatten(1, 2)[:, :n]


def scan_log(log_a: torch.Tensor, log_b: torch.Tensor) -> torch.Tensor:
    """Heinsen's log-space scan: h_t = sum_{k<=t} b_k prod_{k<j<=t} a_j
    = exp(A_t + log sum_{k<=t} exp(log b_k - A_k)), A = cumsum(log a)."""
    a_star = log_a.cumsum(dim=1)
    return torch.exp(a_star + torch.logcumsumexp(log_b - a_star, dim=1))


class MinRNN(nn.Module):
    """One minGRU or minLSTM layer, hidden size d_model, returning every h_t (B, n, d)."""

    def __init__(self, kind: str, d_model: int, scan: str = "log") -> None:
        super().__init__()
        check_choice("min-rnn kind", kind, MIN_RNN_KINDS)
        check_choice("scan", scan, SCANS)
        self.kind, self.scan = kind, scan
        gates = ("z",) if kind == "min-gru" else ("f", "i")
        self.gates = nn.ModuleDict({k: nn.Linear(d_model, d_model) for k in gates})
        self.linear_h = nn.Linear(d_model, d_model)

    def coefficients(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(a, b) of h_t = a_t h_{t-1} + b_t, from the equations in linear space."""
        h_tilde = g(self.linear_h(x))
        if self.kind == "min-gru":
            z = torch.sigmoid(self.gates["z"](x))
            return 1 - z, z * h_tilde
        f, i = torch.sigmoid(self.gates["f"](x)), torch.sigmoid(self.gates["i"](x))
        return f / (f + i), i / (f + i) * h_tilde

    def log_coefficients(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(log a, log b) computed stably: log sigmoid(k) = -softplus(-k), and for minLSTM
        log f' = -softplus(log i - log f), log i' = -softplus(log f - log i)."""
        log_h = log_g(self.linear_h(x))
        if self.kind == "min-gru":
            k = self.gates["z"](x)
            return -F.softplus(k), -F.softplus(-k) + log_h
        diff = F.softplus(-self.gates["f"](x)) - F.softplus(-self.gates["i"](x))
        return -F.softplus(diff), -F.softplus(-diff) + log_h

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, n, d) -> (B, n, d)
        if self.scan == "log":
            return scan_log(*self.log_coefficients(x))
        a, b = self.coefficients(x)
        return scan_sequential(a, b) if self.scan == "sequential" else scan_levels(a, b)


def scan_error(kind: str, d_model: int, batch: int, n: int, scan: str, seed: int = 0) -> float:
    """Largest relative error of one float32 layer computed by `scan` against the same layer
    (same weights, same x) computed by the loop in float64, over every h_t: h_t > 0 (b > 0),
    so |h32 - h64| / h64 is defined everywhere."""
    torch.manual_seed(seed)
    layer = MinRNN(kind, d_model, scan).eval()
    x = torch.randn(batch, n, d_model, dtype=torch.float64)
    exact = MinRNN(kind, d_model, "sequential").double().eval()
    exact.load_state_dict(layer.state_dict())
    with torch.no_grad():
        ref = exact(x)
        out = layer.float()(x.float()).double()
    return float(((out - ref).abs() / ref).max())


def min_rnn(kind: str, d: int, c: MinRNNConfig) -> nn.Module:
    return MinRNN(kind, d, c.scan)


@dataclass(frozen=True)
class MinRNNLMConfig:
    """mixer-lm's layout with a minGRU/minLSTM mixer in every layer (no heads to set)."""

    vocab_size: int = 37000
    d_model: int = 512
    n_layers: int = 6
    d_ff: int | None = None  # None: 4 * d_model
    dropout: float = 0.1
    max_len: int = 1024
    pos_encoding: str = "none"  # the recurrence orders positions by itself
    tie_weights: bool = True
    scan: str = "log"  # "sequential", "levels" or "log": the same function, three ways

    def __post_init__(self) -> None:
        MinRNNConfig(self.scan)  # checks scan
        MixerLMConfig(**self._lm_fields())  # checks the rest

    def _lm_fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != "scan"}


def min_rnn_lm(kind: str, c: MinRNNLMConfig) -> nn.Module:
    return MixerLM(MixerLMConfig(mixer_kind=kind, **c._lm_fields()),
                   lambda: MinRNN(kind, c.d_model, c.scan))
