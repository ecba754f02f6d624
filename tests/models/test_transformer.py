"""models/transformer.py: causality, permutation equivariance, masks, tying, positions."""

from __future__ import annotations

import pytest
import torch

import models

SMALL = dict(vocab_size=16, d_model=16, n_layers=2, n_heads=2, d_ff=32, dropout=0.0, max_len=32)
F64 = dict(atol=1e-10, rtol=1e-10)
VARIANTS = [  # (norm, attn_backend)
    ("post", "math"),
    ("post", "sdpa"),
    ("pre", "math"),
    ("pre", "sdpa"),
]


def build(name: str, **overrides: object) -> torch.nn.Module:
    return models.build(name, **(SMALL | overrides)).double().eval()


def tokens(*shape: int) -> torch.Tensor:
    return torch.randint(0, SMALL["vocab_size"], shape)


def change_from(x: torch.Tensor, t: int) -> torch.Tensor:
    """A copy of x whose tokens at positions t.. all differ from the original."""
    y = x.clone()
    y[:, t:] = (x[:, t:] + torch.randint_like(x[:, t:], 1, SMALL["vocab_size"])) % SMALL[
        "vocab_size"
    ]
    return y


@pytest.mark.parametrize(("norm", "backend"), VARIANTS)
@pytest.mark.parametrize("t", [1, 4, 9])
def test_transformer_lm_is_causal(norm: str, backend: str, t: int) -> None:
    model = build("transformer-lm", norm=norm, attn_backend=backend)
    x = tokens(2, 10)
    with torch.no_grad():
        before, after = model(x), model(change_from(x, t))
    torch.testing.assert_close(after[:, :t], before[:, :t], **F64)
    assert (after[:, t] - before[:, t]).abs().max() > 1e-3  # the change did reach position t


@pytest.mark.parametrize(("norm", "backend"), VARIANTS)
@pytest.mark.parametrize("t", [1, 5])
def test_transformer_decoder_is_causal(norm: str, backend: str, t: int) -> None:
    model = build("transformer", norm=norm, attn_backend=backend)
    src, tgt = tokens(2, 7), tokens(2, 8)
    with torch.no_grad():
        before, after = model(src, tgt), model(src, change_from(tgt, t))
        other_src = model(change_from(src, 0), tgt)
    torch.testing.assert_close(after[:, :t], before[:, :t], **F64)
    assert (after[:, t] - before[:, t]).abs().max() > 1e-3
    assert (other_src[:, 0] - before[:, 0]).abs().max() > 1e-3  # the decoder reads the source


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_encoder_without_positions_is_permutation_equivariant(norm: str) -> None:
    model = build("transformer", norm=norm, pos_encoding="none")
    src, perm = tokens(2, 9), torch.randperm(9)
    with torch.no_grad():
        memory, permuted = model.encode(src), model.encode(src[:, perm])
    torch.testing.assert_close(permuted, memory[:, perm], **F64)


@pytest.mark.parametrize("pos_encoding", ["sinusoidal", "learned"])
def test_encoder_with_positions_is_not_permutation_equivariant(pos_encoding: str) -> None:
    model = build("transformer", pos_encoding=pos_encoding)
    src = tokens(2, 9)
    perm = torch.roll(torch.arange(9), 1)  # moves every token
    with torch.no_grad():
        memory, permuted = model.encode(src), model.encode(src[:, perm])
    assert (permuted - memory[:, perm]).abs().max() > 1e-3


@pytest.mark.parametrize("backend", ["math", "sdpa"])
def test_source_padding_is_invisible(backend: str) -> None:
    model = build("transformer", attn_backend=backend)
    src, tgt = tokens(2, 7), tokens(2, 5)
    pad = torch.arange(7)[None, :] >= torch.tensor([7, 4])[:, None]  # (B, S) True = padding
    other = torch.where(pad, change_from(src, 0), src)  # differs only at padded positions
    with torch.no_grad():
        masked = model(src, tgt, pad), model(other, tgt, pad)
        unmasked = model(src, tgt), model(other, tgt)
    torch.testing.assert_close(masked[1], masked[0], **F64)
    assert (unmasked[1][1] - unmasked[0][1]).abs().max() > 1e-3


@pytest.mark.parametrize("name", ["transformer", "transformer-lm"])
@pytest.mark.parametrize("tie", [True, False])
def test_weight_tying(name: str, tie: bool) -> None:
    model = build(name, tie_weights=tie)
    assert (model.head.proj.weight is model.embed.weight) == tie


def test_sinusoidal_model_runs_past_max_len_and_learned_refuses() -> None:
    x = tokens(1, 12)
    assert build("transformer-lm", max_len=8)(x).shape == (1, 12, SMALL["vocab_size"])
    with pytest.raises(ValueError, match="12.*max_len=8"):
        build("transformer-lm", max_len=8, pos_encoding="learned")(x)


@pytest.mark.parametrize("name", ["transformer", "transformer-lm"])
def test_attn_backends_give_the_same_model(name: str) -> None:
    math_model = build(name, attn_backend="math")
    sdpa_model = build(name, attn_backend="sdpa")
    sdpa_model.load_state_dict(math_model.state_dict())
    args = (tokens(2, 6), tokens(2, 5)) if name == "transformer" else (tokens(2, 6),)
    with torch.no_grad():
        torch.testing.assert_close(sdpa_model(*args), math_model(*args), **F64)
