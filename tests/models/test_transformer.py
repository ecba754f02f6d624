"""models/transformer.py: permutation equivariance, source padding, positions. Causality,
kernel choices and weight tying, which every model shares, are in test_models.py."""

from __future__ import annotations

import pytest
import torch

F64 = dict(atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_encoder_without_positions_is_permutation_equivariant(norm, small_model, tokens):
    model = small_model("transformer", norm=norm, pos_encoding="none")
    src, perm = tokens(2, 9), torch.randperm(9)
    with torch.no_grad():
        memory, permuted = model.encode(src), model.encode(src[:, perm])
    torch.testing.assert_close(permuted, memory[:, perm], **F64)


@pytest.mark.parametrize("pos_encoding", ["sinusoidal", "learned"])
def test_encoder_with_positions_is_not_permutation_equivariant(pos_encoding, small_model, tokens):
    model = small_model("transformer", pos_encoding=pos_encoding)
    src = tokens(2, 9)
    perm = torch.roll(torch.arange(9), 1)  # moves every token
    with torch.no_grad():
        memory, permuted = model.encode(src), model.encode(src[:, perm])
    assert (permuted - memory[:, perm]).abs().max() > 1e-3


@pytest.mark.parametrize("backend", ["math", "sdpa"])
def test_source_padding_is_invisible(backend, small_model, tokens, change_from):
    model = small_model("transformer", attn_backend=backend)
    src, tgt = tokens(2, 7), tokens(2, 5)
    pad = torch.arange(7)[None, :] >= torch.tensor([7, 4])[:, None]  # (B, S) True = padding
    other = torch.where(pad, change_from(src, 0), src)  # differs only at padded positions
    with torch.no_grad():
        masked = model(src, tgt, pad), model(other, tgt, pad)
        unmasked = model(src, tgt), model(other, tgt)
    torch.testing.assert_close(masked[1], masked[0], **F64)
    assert (unmasked[1][1] - unmasked[0][1]).abs().max() > 1e-3


def test_sinusoidal_model_runs_past_max_len_and_learned_refuses(small_model, tokens):
    x = tokens(1, 12)
    assert small_model("transformer-lm", max_len=8)(x).shape == (1, 12, 16)  # SMALL vocab_size
    with pytest.raises(ValueError, match="12.*max_len=8"):
        small_model("transformer-lm", max_len=8, pos_encoding="learned")(x)


@pytest.mark.parametrize("model", ["transformer", "transformer-lm"])
def test_xavier_init_is_joeynmts_and_normal_is_the_default(model):
    """init "xavier": every bias zero, the embedding and each of W^Q, W^K, W^V apart drawn
    within their own Xavier bounds (not the stacked in_proj's); "normal" keeps the N(0, 1/d)
    embedding and the stacked in_proj's Xavier bound."""
    import math

    import models
    from models.blocks import MultiHeadAttention

    V, d = 1000, 64
    torch.manual_seed(0)
    x = models.build(model, vocab_size=V, d_model=d, n_layers=1, n_heads=4, d_ff=128,
                     init="xavier")
    torch.manual_seed(0)
    n = models.build(model, vocab_size=V, d_model=d, n_layers=1, n_heads=4, d_ff=128)
    assert all(float(p.abs().max()) == 0 for k, p in x.named_parameters()
               if k.endswith(".bias") and "norm" not in k)
    assert float(x.embed.weight.abs().max()) <= math.sqrt(6 / (V + d))
    assert float(x.embed.weight.std()) == pytest.approx(math.sqrt(2 / (V + d)), rel=0.05)
    assert float(n.embed.weight.std()) == pytest.approx(d ** -0.5, rel=0.05)
    for mx, mn in zip(*(
            [m for m in net.modules() if isinstance(m, MultiHeadAttention)] for net in (x, n)),
            strict=True):
        block = math.sqrt(6 / (2 * d))
        for w in mx.in_proj.weight.split(d):  # W^Q, W^K, W^V: each in its own bound
            assert block >= float(w.abs().max()) > 0.9 * block
        assert float(mn.in_proj.weight.abs().max()) <= math.sqrt(6 / (4 * d))
    with pytest.raises(ValueError, match="init"):
        models.build(model, vocab_size=V, d_model=d, init="kaiming")
