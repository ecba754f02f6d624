"""A query/key size per head d_k apart from d_model / h (the paper's Table 3, rows B): multi-head
attention against a per-head reference written from the paper's equations, the default d_k
keeping the weight layout of nn.MultiheadAttention, and a bad d_k refused by name.

Float64, so a tolerance of 1e-10 separates rounding from a wrong slice of in_proj (~1e-1)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import models
from models.blocks import MultiHeadAttention

F64 = dict(atol=1e-10, rtol=1e-10)
B, N, S, D, H = 2, 5, 7, 8, 2  # batch, query length, key length, d_model, heads: d_v = 4


def per_head_reference(mha: MultiHeadAttention, x: torch.Tensor, memory: torch.Tensor | None,
                       key_padding_mask: torch.Tensor | None, causal: bool) -> torch.Tensor:
    """Concat(head_1..head_h) W^O, head_i = softmax(Q W_i^Q (K W_i^K)^T / sqrt(d_k)) V W_i^V,
    one head at a time. in_proj's rows, as documented: W_1^Q..W_h^Q (d_k rows each), then
    W_1^K..W_h^K (d_k each), then W_1^V..W_h^V (d_v = d / h each)."""
    h, d_k, d_v = mha.n_heads, mha.d_k, mha.d_model // mha.n_heads
    w, b = mha.in_proj.weight, mha.in_proj.bias
    mem = x if memory is None else memory
    heads = []
    for i in range(h):
        rows_q = slice(i * d_k, (i + 1) * d_k)
        rows_k = slice(h * d_k + i * d_k, h * d_k + (i + 1) * d_k)
        rows_v = slice(2 * h * d_k + i * d_v, 2 * h * d_k + (i + 1) * d_v)
        q = torch.einsum("bnd,cd->bnc", x, w[rows_q]) + b[rows_q]  # (B, n, d_k)
        k = torch.einsum("bsd,cd->bsc", mem, w[rows_k]) + b[rows_k]  # (B, S, d_k)
        v = torch.einsum("bsd,cd->bsc", mem, w[rows_v]) + b[rows_v]  # (B, S, d_v)
        scores = torch.einsum("bnc,bsc->bns", q, k) / math.sqrt(d_k)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, :], -math.inf)
        if causal:
            later = torch.ones(x.size(1), mem.size(1), dtype=torch.bool).triu(1)
            scores = scores.masked_fill(later, -math.inf)
        heads.append(torch.einsum("bns,bsc->bnc", scores.softmax(dim=-1), v))  # (B, n, d_v)
    z = torch.cat(heads, dim=-1)  # (B, n, h*d_v) = (B, n, d)
    return torch.einsum("bnd,ed->bne", z, mha.out_proj.weight) + mha.out_proj.bias


def perturbed(mha: nn.Module) -> nn.Module:
    """Every parameter moved off its init (zero biases included), in float64."""
    mha = mha.double()
    with torch.no_grad():
        for p in mha.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return mha


@pytest.mark.parametrize("d_k", [1, 3, 6])  # below, and above, d_v = 4
@pytest.mark.parametrize("backend", ["math", "sdpa"])
@pytest.mark.parametrize("masks", ["none", "padding", "causal"])
def test_self_attention_with_own_d_k_matches_per_head_reference(d_k, backend, masks) -> None:
    torch.manual_seed(0)
    mha = perturbed(MultiHeadAttention(D, H, attn_backend=backend, d_k=d_k))
    assert mha.in_proj.weight.shape == (2 * H * d_k + D, D)
    x = torch.randn(B, N, D, dtype=torch.float64)
    kpm = torch.arange(N)[None, :] >= torch.tensor([N, 3])[:, None] if masks == "padding" else None
    causal = masks == "causal"
    out = mha(x, key_padding_mask=kpm, causal=causal)
    torch.testing.assert_close(out, per_head_reference(mha, x, None, kpm, causal), **F64)


@pytest.mark.parametrize("d_k", [1, 3, 6])
@pytest.mark.parametrize("backend", ["math", "sdpa"])
def test_cross_attention_with_own_d_k_matches_per_head_reference(d_k, backend) -> None:
    torch.manual_seed(1)
    mha = perturbed(MultiHeadAttention(D, H, attn_backend=backend, d_k=d_k))
    x, mem = torch.randn(B, N, D, dtype=torch.float64), torch.randn(B, S, D, dtype=torch.float64)
    kpm = torch.arange(S)[None, :] >= torch.tensor([S, 4])[:, None]
    q, k, v = mha.project_qkv(x, mem)
    assert (q.shape, k.shape, v.shape) == ((B, H, N, d_k), (B, H, S, d_k), (B, H, S, D // H))
    out = mha(x, mem, key_padding_mask=kpm)
    torch.testing.assert_close(out, per_head_reference(mha, x, mem, kpm, False), **F64)


def test_the_reference_also_matches_at_the_default_d_k() -> None:
    """The reference's reading of in_proj is nn.MultiheadAttention's when d_k = d / h."""
    torch.manual_seed(2)
    mha = perturbed(MultiHeadAttention(D, H))
    x = torch.randn(B, N, D, dtype=torch.float64)
    torch.testing.assert_close(mha(x), per_head_reference(mha, x, None, None, False), **F64)


def test_default_d_k_keeps_the_weight_layout_and_count() -> None:
    ours, ref = MultiHeadAttention(D, H), nn.MultiheadAttention(D, H, batch_first=True)
    assert ours.d_k == ours.d_v == D // H
    assert ours.in_proj.weight.shape == ref.in_proj_weight.shape == (3 * D, D)
    assert sum(p.numel() for p in ours.parameters()) == 4 * D * D + 4 * D
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in ref.parameters())
    torch.manual_seed(3)
    default = models.build("transformer", "tiny")
    torch.manual_seed(3)
    explicit = models.build("transformer", "tiny", d_k=64 // 4)  # tiny: d_model 64, h 4
    assert models.model_config("transformer", "tiny").d_k == 0
    a, b = default.state_dict(), explicit.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_smaller_d_k_shrinks_only_w_q_and_w_k() -> None:
    """Per attention: 2 * h * (d / h - d_k) * (d + 1) fewer parameters (W^Q, W^K, biases)."""
    base = models.build("transformer", "tiny")
    small = models.build("transformer", "tiny", d_k=4)
    n_attn = 3 * models.model_config("transformer", "tiny").n_layers  # 1 per encoder, 2 per decoder
    fewer = n_attn * 2 * 4 * (16 - 4) * (64 + 1)
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(base) - count(small) == fewer


@pytest.mark.parametrize("bad", [-1, 2.5, True, "16"])
def test_config_refuses_a_bad_d_k_by_name(bad) -> None:
    with pytest.raises(ValueError, match=r"invalid d_k"):
        models.model_config("transformer", "tiny", d_k=bad)


@pytest.mark.parametrize("bad", [0, -2, 1.5])
def test_attention_refuses_a_bad_d_k_by_name(bad) -> None:
    with pytest.raises(ValueError, match=r"invalid d_k"):
        MultiHeadAttention(D, H, d_k=bad)


@pytest.mark.parametrize("name", ["transformer", "transformer-lm"])
def test_models_with_own_d_k_run_and_train(name, small_model, model_inputs) -> None:
    model = small_model(name, d_k=3)
    assert all(m.d_k == 3 for m in model.modules() if isinstance(m, MultiHeadAttention))
    out = model(*model_inputs(name))
    out.square().mean().backward()
    assert torch.isfinite(out).all()
    assert all(p.grad is not None for p in model.parameters())
