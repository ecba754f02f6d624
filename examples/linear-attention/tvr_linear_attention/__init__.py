"""Linear attention (Katharopoulos et al. 2020, "Transformers are RNNs") as a tvr-bench mixer.

softmax(q k^T) is replaced by the kernel phi(q) phi(k)^T with phi(x) = elu(x) + 1, so that

    y_i = phi(q_i) S / (phi(q_i) . z),   S = sum_j phi(k_j) v_j^T,   z = sum_j phi(k_j)

costs O(n d_k d_v) per head instead of O(n^2 d_k). The parallel form computes S and z for
every position at once (causal: prefix sums), the form for training; the recurrent form
carries (S, z) through the sequence one step at a time, the form for causal decoding. The
two give the same outputs (the package's test checks it).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from models.catalog import Mixer

FORMS = ("parallel", "recurrent")


def feature_map(x: torch.Tensor) -> torch.Tensor:
    """phi(x) = elu(x) + 1: positive, so the normaliser phi(q) . z never vanishes."""
    return F.elu(x) + 1


def parallel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
             eps: float) -> torch.Tensor:
    """(B, h, n, d_k) x3 -> (B, h, n, d_k) with phi applied; every position at once."""
    if causal:  # prefix sums of phi(k_j) v_j^T: O(n d_k d_v) work and memory
        s = torch.einsum("bhnd,bhne->bhnde", k, v).cumsum(2)  # (B, h, n, d_k, d_v)
        z = k.cumsum(2)  # (B, h, n, d_k)
        num = torch.einsum("bhnd,bhnde->bhne", q, s)
    else:
        s = torch.einsum("bhnd,bhne->bhde", k, v)  # (B, h, d_k, d_v)
        z = k.sum(2, keepdim=True)  # (B, h, 1, d_k)
        num = torch.einsum("bhnd,bhde->bhne", q, s)
    return num / ((q * z).sum(-1, keepdim=True) + eps)


def recurrent(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, eps: float) -> torch.Tensor:
    """The same outputs, causal, one step at a time: the RNN view, state (S, z)."""
    b, h, n, dk = q.shape
    s = q.new_zeros(b, h, dk, v.shape[-1])  # (B, h, d_k, d_v)
    z = q.new_zeros(b, h, dk)  # (B, h, d_k)
    out = []
    for t in range(n):
        s = s + k[:, :, t, :, None] * v[:, :, t, None, :]
        z = z + k[:, :, t]
        num = torch.einsum("bhd,bhde->bhe", q[:, :, t], s)
        out.append(num / ((q[:, :, t] * z).sum(-1, keepdim=True) + eps))
    return torch.stack(out, dim=2)  # (B, h, n, d_v)


class LinearAttention(nn.Module):
    """Linear attention with elu+1 features, Q/K/V/O projections like self-attention."""

    def __init__(self, d_model: int, n_heads: int = 4, causal: bool = False,
                 form: str = "parallel", eps: float = 1e-6) -> None:
        super().__init__()
        if isinstance(n_heads, bool) or not isinstance(n_heads, int) or n_heads <= 0 \
                or d_model % n_heads:
            valid = ", ".join(str(h) for h in range(1, d_model + 1) if d_model % h == 0)
            raise ValueError(f"invalid n_heads {n_heads!r} for d_model={d_model}; valid: {valid}")
        if not isinstance(causal, bool):
            raise ValueError(f"invalid causal {causal!r}; valid: True, False")
        if form not in FORMS:
            raise ValueError(f"invalid form {form!r}; valid: {', '.join(FORMS)}")
        if form == "recurrent" and not causal:
            raise ValueError("invalid form 'recurrent' with causal=False; valid: 'parallel' "
                             "(the recurrent form is the causal one)")
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0:
            raise ValueError(f"invalid eps {eps!r}; must be a positive number")
        self.n_heads, self.causal, self.form, self.eps = n_heads, causal, form, float(eps)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, n, d) -> (B, n, d)
        q, k, v = (t.unflatten(-1, (self.n_heads, -1)).transpose(1, 2)  # (B, h, n, d_k)
                   for t in self.qkv(x).chunk(3, dim=-1))
        q, k = feature_map(q), feature_map(k)
        if self.form == "recurrent":
            y = recurrent(q, k, v, self.eps)
        else:
            y = parallel(q, k, v, self.causal, self.eps)
        return self.out(y.transpose(1, 2).flatten(2))


def recurrent_linear_attention(d_model: int, n_heads: int = 4, eps: float = 1e-6) -> nn.Module:
    """Linear attention in its recurrent form: causal, the state (S, z) carried step by step."""
    return LinearAttention(d_model, n_heads, causal=True, form="recurrent", eps=eps)


# The catalog entries the entry points name (pyproject.toml): what tvr-bench's runners and
# reports read of a mixer besides its factory. The parallel form mixes every position at once
# (attention's kind; a causal knob of its own), the recurrent form steps through positions
# (already causal). No Table 1 row: the paper does not speak of linear attention.
MIXER = Mixer("linear-attention", "attention", LinearAttention, color="#e377c2")
RECURRENT_MIXER = Mixer("linear-attention-rnn", "recurrent", recurrent_linear_attention,
                        causal={}, color="#7f7f7f")
