"""models/blocks.py against PyTorch's own attention, multi-head attention and layers.

Parity runs in float64 so a tolerance of 1e-10 separates rounding from a wrong transpose,
mask or chunk order (those move outputs by ~1e-1).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import models
from models.blocks import (
    DecoderLayer,
    EncoderLayer,
    LearnedPositions,
    MultiHeadAttention,
    PositionwiseFFN,
    SinusoidalPositions,
    TokenEmbedding,
    attention,
    causal_mask,
    positional_encoding,
    sinusoid_table,
)

F64 = dict(atol=1e-10, rtol=1e-10)  # float64 parity: rounding only
B, H, N, S, DK = 2, 2, 5, 7, 4  # batch, heads, query length, key length, head size
D, HEADS, D_FF = 8, 2, 16  # layer sizes


def rand(*shape: int, grad: bool = False) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float64, requires_grad=grad)


def random_mask(*shape: int) -> torch.Tensor:
    """Bool, True = may attend, with key 0 always visible so no query row is empty."""
    mask = torch.rand(*shape) < 0.6
    mask[..., 0] = True
    return mask


def right_padding(lengths: list[int], s: int) -> torch.Tensor:
    """(B, s) bool key padding mask, True = padding (nn.MultiheadAttention's convention)."""
    return torch.arange(s)[None, :] >= torch.tensor(lengths)[:, None]


def masked_above_diagonal(n: int) -> torch.Tensor:
    """PyTorch modules' bool attn_mask convention: True = may NOT attend."""
    return torch.ones(n, n, dtype=torch.bool).triu(1)


# --- scaled dot-product attention ------------------------------------------------------------

MASK_SHAPES = {"full": (B, H, N, S), "per-batch": (B, 1, 1, S), "shared": (N, S)}


def test_causal_mask_is_lower_triangular() -> None:
    expected = torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]], dtype=torch.bool)
    assert torch.equal(causal_mask(3, 3), expected)


@pytest.mark.parametrize("scale", [True, False])
@pytest.mark.parametrize("mask_shape", [None, *MASK_SHAPES])
def test_math_attention_matches_sdpa(mask_shape: str | None, scale: bool) -> None:
    q, k, v = rand(B, H, N, DK), rand(B, H, S, DK), rand(B, H, S, DK)
    mask = random_mask(*MASK_SHAPES[mask_shape]) if mask_shape else None
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=None if scale else 1.0)
    got = attention(q, k, v, mask=mask, scale=scale, backend="math")
    torch.testing.assert_close(got, ref, **F64)


@pytest.mark.parametrize("s", [N, S])  # square, and more keys than queries
@pytest.mark.parametrize("scale", [True, False])
def test_math_causal_attention_matches_sdpa(s: int, scale: bool) -> None:
    q, k, v = rand(B, H, N, DK), rand(B, H, s, DK), rand(B, H, s, DK)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=None if scale else 1.0)
    torch.testing.assert_close(attention(q, k, v, causal=True, scale=scale), ref, **F64)


def test_math_causal_plus_mask_matches_sdpa() -> None:
    q, k, v = rand(B, H, N, DK), rand(B, H, N, DK), rand(B, H, N, DK)
    mask = random_mask(B, 1, N, N)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask & causal_mask(N, N))
    torch.testing.assert_close(attention(q, k, v, mask=mask, causal=True), ref, **F64)


def test_attention_without_scale_differs_from_scaled() -> None:
    q, k, v = rand(B, H, N, DK), rand(B, H, S, DK), rand(B, H, S, DK)
    gap = (attention(q, k, v, scale=True) - attention(q, k, v, scale=False)).abs().max()
    assert gap > 1e-3


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("scale", [True, False])
@pytest.mark.parametrize("mask_shape", [None, *MASK_SHAPES])
def test_sdpa_backend_matches_math(mask_shape: str | None, scale: bool, causal: bool) -> None:
    q, k, v = rand(B, H, N, DK, grad=True), rand(B, H, S, DK, grad=True), rand(B, H, S, DK)
    mask = random_mask(*MASK_SHAPES[mask_shape]) if mask_shape else None
    outs, grads = [], []
    for backend in ("math", "sdpa"):
        out = attention(q, k, v, mask=mask, causal=causal, scale=scale, backend=backend)
        outs.append(out)
        grads.append(torch.autograd.grad(out.square().sum(), (q, k)))
    torch.testing.assert_close(outs[1], outs[0], **F64)
    torch.testing.assert_close(grads[1], grads[0], **F64)


def test_query_with_no_visible_key_gives_zeros_in_both_backends() -> None:
    """A fully padded sequence must not turn the batch into NaN: sdpa gives zeros."""
    q, k, v = rand(B, H, N, DK, grad=True), rand(B, H, S, DK, grad=True), rand(B, H, S, DK)
    mask = random_mask(B, 1, 1, S)
    mask[1] = False  # batch element 1 sees no key at all
    outs, grads = [], []
    for backend in ("math", "sdpa"):
        out = attention(q, k, v, mask=mask, backend=backend)
        outs.append(out)
        grads.append(torch.autograd.grad(out.square().sum(), (q, k)))
    assert torch.equal(outs[0][1], torch.zeros_like(outs[0][1]))
    assert all(torch.isfinite(g).all() for g in grads[0])
    torch.testing.assert_close(outs[0], outs[1], **F64)
    torch.testing.assert_close(grads[0], grads[1], **F64)


def test_attention_rejects_unknown_backend() -> None:
    q = rand(1, 1, 2, DK)
    with pytest.raises(ValueError, match=r"'flash'.*'math', 'sdpa'"):
        attention(q, q, q, backend="flash")


# --- multi-head attention vs nn.MultiheadAttention -------------------------------------------


def perturb_(module: nn.Module) -> None:
    """Move every parameter off its init (LayerNorm ones/zeros, zero biases) so a swapped
    norm or a dropped bias shows up in parity."""
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.3 * torch.randn_like(p))


def copy_params_(ours: nn.Module, ref: nn.Module, names: dict[str, str]) -> None:
    """Copy ours -> ref along a complete name map (every parameter of both sides)."""
    ours_p, ref_p = dict(ours.named_parameters()), dict(ref.named_parameters())
    assert set(names) == set(ours_p) and set(names.values()) == set(ref_p)
    with torch.no_grad():
        for mine, theirs in names.items():
            ref_p[theirs].copy_(ours_p[mine])


def twin(t: torch.Tensor) -> torch.Tensor:
    """A separate leaf with t's values, for the reference module's gradients."""
    return t.detach().clone().requires_grad_()


def assert_parity_with_grads(
    out: torch.Tensor,
    expected: torch.Tensor,
    inputs: list[tuple[torch.Tensor, torch.Tensor]],  # (ours, the reference's twin) leaves
    ours: nn.Module,
    ref: nn.Module,
    names: dict[str, str],
) -> None:
    """Outputs agree, and so do the gradients of one random loss for each input pair and for
    each parameter pair along `names`."""
    torch.testing.assert_close(out, expected, **F64)
    g = rand(*out.shape)
    (out * g).sum().backward()
    (expected * g).sum().backward()
    for mine, theirs in inputs:
        torch.testing.assert_close(mine.grad, theirs.grad, **F64)
    ours_p, ref_p = dict(ours.named_parameters()), dict(ref.named_parameters())
    for mine, theirs in names.items():
        assert ours_p[mine].grad is not None, mine
        torch.testing.assert_close(ours_p[mine].grad, ref_p[theirs].grad, **F64, msg=mine)


def mha_names(prefix: str = "") -> dict[str, str]:
    return {
        f"{prefix}in_proj.weight": f"{prefix}in_proj_weight",
        f"{prefix}in_proj.bias": f"{prefix}in_proj_bias",
        f"{prefix}out_proj.weight": f"{prefix}out_proj.weight",
        f"{prefix}out_proj.bias": f"{prefix}out_proj.bias",
    }


def mha_pair(backend: str) -> tuple[MultiHeadAttention, nn.MultiheadAttention]:
    ours = MultiHeadAttention(D, HEADS, attn_backend=backend).double()
    ref = nn.MultiheadAttention(D, HEADS, batch_first=True).double()
    perturb_(ours)
    copy_params_(ours, ref, mha_names())
    return ours, ref


@pytest.mark.parametrize("backend", ["math", "sdpa"])
@pytest.mark.parametrize("masks", ["none", "padding", "causal", "padding+causal"])
def test_self_attention_matches_nn_multihead_attention(backend: str, masks: str) -> None:
    ours, ref = mha_pair(backend)
    x = rand(B, N, D, grad=True)
    x_ref = twin(x)
    kpm = right_padding([N, 3], N) if "padding" in masks else None
    causal = "causal" in masks
    out = ours(x, key_padding_mask=kpm, causal=causal)
    expected, _ = ref(x_ref, x_ref, x_ref, key_padding_mask=kpm, need_weights=False,
                      attn_mask=masked_above_diagonal(N) if causal else None, is_causal=causal)
    assert_parity_with_grads(out, expected, [(x, x_ref)], ours, ref, mha_names())


@pytest.mark.parametrize("backend", ["math", "sdpa"])
@pytest.mark.parametrize("padding", [False, True])
def test_cross_attention_matches_nn_multihead_attention(backend: str, padding: bool) -> None:
    ours, ref = mha_pair(backend)
    x, mem = rand(B, N, D, grad=True), rand(B, S, D, grad=True)
    x_ref, mem_ref = twin(x), twin(mem)
    kpm = right_padding([S, 4], S) if padding else None
    out = ours(x, mem, key_padding_mask=kpm)
    expected, _ = ref(x_ref, mem_ref, mem_ref, key_padding_mask=kpm, need_weights=False)
    assert_parity_with_grads(out, expected, [(x, x_ref), (mem, mem_ref)], ours, ref, mha_names())


def test_multihead_attention_rejects_indivisible_heads() -> None:
    with pytest.raises(ValueError, match=r"d_model=10.*n_heads=4"):
        MultiHeadAttention(10, 4)


# --- FFN, embeddings -------------------------------------------------------------------------


def test_ffn_is_relu_between_two_linears() -> None:
    ffn = PositionwiseFFN(D, D_FF).double()
    x = rand(B, N, D)
    w1, b1, w2, b2 = ffn.linear1.weight, ffn.linear1.bias, ffn.linear2.weight, ffn.linear2.bias
    expected = torch.clamp(x @ w1.T + b1, min=0) @ w2.T + b2  # max(0, x W1 + b1) W2 + b2
    torch.testing.assert_close(ffn(x), expected, **F64)


def test_token_embedding_is_scaled_by_sqrt_d() -> None:
    emb = TokenEmbedding(11, D)
    tokens = torch.tensor([[0, 3, 10]])
    torch.testing.assert_close(emb(tokens), emb.weight[tokens] * math.sqrt(D), atol=0, rtol=0)


# --- encoder / decoder layers vs nn.TransformerEncoderLayer / DecoderLayer --------------------


def layer_names(attn: tuple[str, ...], n_norms: int) -> dict[str, str]:
    names = {"ffn.linear1.weight": "linear1.weight", "ffn.linear1.bias": "linear1.bias",
             "ffn.linear2.weight": "linear2.weight", "ffn.linear2.bias": "linear2.bias"}
    for a in attn:
        names |= mha_names(f"{a}.")
    for i in range(1, n_norms + 1):
        names |= {f"norm{i}.weight": f"norm{i}.weight", f"norm{i}.bias": f"norm{i}.bias"}
    return names


ENCODER_NAMES = layer_names(("self_attn",), 2)
DECODER_NAMES = layer_names(("self_attn", "multihead_attn"), 3)


def encoder_twins(norm: str, **ours_kwargs: object
                   ) -> tuple[EncoderLayer, nn.TransformerEncoderLayer, torch.Tensor, torch.Tensor]:
    """Our encoder layer (perturbed) and nn.TransformerEncoderLayer with its weights, in
    float64, and an input with its twin for each."""
    ours = EncoderLayer(D, HEADS, D_FF, dropout=0.0, norm=norm, **ours_kwargs).double()
    ref = nn.TransformerEncoderLayer(D, HEADS, D_FF, dropout=0.0, activation="relu",
                                     batch_first=True, norm_first=norm == "pre").double()
    perturb_(ours)
    copy_params_(ours, ref, ENCODER_NAMES)
    x = rand(B, N, D, grad=True)
    return ours, ref, x, twin(x)


@pytest.mark.parametrize("backend", ["math", "sdpa"])
@pytest.mark.parametrize("masks", ["none", "padding", "causal"])
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_encoder_layer_matches_nn_transformer_encoder_layer(
    norm: str, masks: str, backend: str
) -> None:
    causal = masks == "causal"
    ours, ref, x, x_ref = encoder_twins(norm, attn_backend=backend, causal=causal)
    kpm = right_padding([N, 2], N) if masks == "padding" else None
    out = ours(x, key_padding_mask=kpm)
    expected = ref(x_ref, src_mask=masked_above_diagonal(N) if causal else None,
                   src_key_padding_mask=kpm, is_causal=causal)
    assert_parity_with_grads(out, expected, [(x, x_ref)], ours, ref, ENCODER_NAMES)


@pytest.mark.parametrize("backend", ["math", "sdpa"])
@pytest.mark.parametrize("padding", [False, True])
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_decoder_layer_matches_nn_transformer_decoder_layer(
    norm: str, padding: bool, backend: str
) -> None:
    ours = DecoderLayer(D, HEADS, D_FF, dropout=0.0, norm=norm, attn_backend=backend).double()
    ref = nn.TransformerDecoderLayer(D, HEADS, D_FF, dropout=0.0, activation="relu",
                                     batch_first=True, norm_first=norm == "pre").double()
    perturb_(ours)
    copy_params_(ours, ref, DECODER_NAMES)
    y, mem = rand(B, N, D, grad=True), rand(B, S, D, grad=True)
    y_ref, mem_ref = twin(y), twin(mem)
    kpm = right_padding([S, 3], S) if padding else None
    out = ours(y, mem, memory_key_padding_mask=kpm)
    expected = ref(y_ref, mem_ref, tgt_mask=masked_above_diagonal(N), tgt_is_causal=True,
                   memory_key_padding_mask=kpm)
    assert_parity_with_grads(out, expected, [(y, y_ref), (mem, mem_ref)], ours, ref, DECODER_NAMES)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_encoder_layer_without_residual_is_the_same_sublayers_unsummed(norm: str) -> None:
    """residual=False: nn.TransformerEncoderLayer's own sub-layer blocks (its _sa_block and
    _ff_block, weights copied) composed without the `x +`: LN(F(x)) post, F(LN(x)) pre."""
    ours, ref, x, x_ref = encoder_twins(norm, residual=False)
    out = ours(x)
    if norm == "pre":
        h = ref._sa_block(ref.norm1(x_ref), None, None)
        expected = ref._ff_block(ref.norm2(h))
    else:
        h = ref.norm1(ref._sa_block(x_ref, None, None))
        expected = ref.norm2(ref._ff_block(h))
    assert_parity_with_grads(out, expected, [(x, x_ref)], ours, ref, ENCODER_NAMES)
    with_residual = EncoderLayer(D, HEADS, D_FF, dropout=0.0, norm=norm).double()
    with_residual.load_state_dict(ours.state_dict())
    assert not torch.allclose(with_residual(x), out)  # the knob changes the layer


def test_a_transformer_without_residuals_is_built_from_its_config() -> None:
    model = models.build("transformer-lm", preset="tiny", residual=False)
    assert all(not layer.residual for layer in model.layers)
    assert all(layer.residual for layer in models.build("transformer-lm", preset="tiny").layers)
    with pytest.raises(ValueError, match="residual"):
        models.build("transformer-lm", preset="tiny", residual="no")


@pytest.mark.parametrize("layer", [EncoderLayer, DecoderLayer])
def test_layers_reject_unknown_norm(layer: type) -> None:
    with pytest.raises(ValueError, match=r"'mid'.*'post', 'pre'"):
        layer(D, HEADS, D_FF, norm="mid")


# --- positional encodings --------------------------------------------------------------------


def formula_table(n: int, d: int) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(same), element by element."""
    pe = torch.empty(n, d, dtype=torch.float64)
    for pos in range(n):
        for j in range(d):
            angle = pos / 10000 ** ((j - j % 2) / d)
            pe[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return pe


@pytest.mark.parametrize("d", [8, 7])  # even, and odd (the last sine has no cosine partner)
def test_sinusoid_table_matches_formula(d: int) -> None:
    got = sinusoid_table(50, d).double()
    torch.testing.assert_close(got, formula_table(50, d), atol=1e-7, rtol=0)


def rotation(k: int, d: int) -> torch.Tensor:
    """M_k: block-diagonal 2x2 rotations by k * omega_i, independent of the position."""
    m = torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        angle = k / 10000 ** (2 * i / d)
        c, s = math.cos(angle), math.sin(angle)
        # sin(a + b) = sin a cos b + cos a sin b;  cos(a + b) = cos a cos b - sin a sin b
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]])
    return m


@pytest.mark.parametrize("k", [1, 2, 5, 17, 40])
def test_sinusoid_shift_is_a_fixed_linear_map(k: int) -> None:
    d, n = 16, 60
    pe = sinusoid_table(n + k, d).double()  # (n + k, d)
    shifted = pe[:n] @ rotation(k, d).T  # row pos -> M_k PE[pos]
    torch.testing.assert_close(shifted, pe[k : n + k], atol=1e-6, rtol=0)


def test_sinusoid_shift_matrix_depends_on_k() -> None:
    pe = sinusoid_table(30, 16).double()
    wrong = pe[:20] @ rotation(2, 16).T
    assert (wrong - pe[3:23]).abs().max() > 1e-2


def test_sinusoidal_positions_extend_past_max_len() -> None:
    pos = SinusoidalPositions(8, max_len=6)
    x = torch.zeros(1, 20, 8)
    added = pos(x)[0].double()  # (20, 8)
    torch.testing.assert_close(added, formula_table(20, 8), atol=1e-6, rtol=0)
    torch.testing.assert_close(pos(x[:, :6]), added[None, :6].float(), atol=0, rtol=0)


def test_learned_positions_refuse_past_max_len() -> None:
    pos = LearnedPositions(8, max_len=6)
    assert pos(torch.zeros(1, 6, 8)).shape == (1, 6, 8)
    with pytest.raises(ValueError, match="7.*max_len=6"):
        pos(torch.zeros(1, 7, 8))


def test_positional_encoding_kinds() -> None:
    x = torch.randn(1, 4, 8)
    assert torch.equal(positional_encoding("none", 8, 16)(x), x)
    assert isinstance(positional_encoding("sinusoidal", 8, 16), SinusoidalPositions)
    assert isinstance(positional_encoding("learned", 8, 16), LearnedPositions)
    with pytest.raises(ValueError, match=r"'rope'.*'sinusoidal', 'learned', 'none'"):
        positional_encoding("rope", 8, 16)


def test_attention_core_mixer_is_sdpa_without_projections():
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    core = models.mixer("attention-core", 16, n_heads=4, attn_backend="math", causal=True)
    h = x.unflatten(-1, (4, 4)).transpose(1, 2)
    expected = F.scaled_dot_product_attention(h, h, h, is_causal=True).transpose(1, 2).flatten(2)
    torch.testing.assert_close(core(x), expected, atol=1e-12, rtol=1e-12)
    assert sum(p.numel() for p in core.parameters()) == 0
