"""What every model in models.names() must do: decode causally (an encoder-decoder also reads
its source), give the same model under each kernel choice, and tie weights on request."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch

import models

F64 = dict(atol=1e-10, rtol=1e-10)  # float64 parity: rounding only
# Values each model is tested under, for the keys its config has: both kernels (which must
# give the same numbers) and both norm placements.
AXES = {"norm": ("post", "pre"), "attn_backend": ("math", "sdpa"), "rnn_impl": ("fused", "cell"),
        "scan": ("log", "levels", "sequential")}
KERNELS = ("attn_backend", "rnn_impl", "scan")


def config_keys(name: str) -> set[str]:
    return {f.name for f in dataclasses.fields(models.model_config(name))}


def variants(name: str) -> list[dict[str, str]]:
    axes = {k: values for k, values in AXES.items() if k in config_keys(name)}
    return [dict(zip(axes, chosen, strict=True)) for chosen in itertools.product(*axes.values())]


CASES = [pytest.param(name, v, id="-".join([name, *v.values()]))
         for name in models.names() for v in variants(name)]


@pytest.mark.parametrize("t", [1, 4, 7])
@pytest.mark.parametrize(("name", "config"), CASES)
def test_decoder_is_causal(name, config, t, small_model, tokens, change_from, model_inputs):
    """Changing the target from position t on leaves the logits before t as they were and
    changes those at t; an encoder-decoder's first step reads the source."""
    model = small_model(name, **config)
    *src, _ = model_inputs(name)  # [] for a decoder-only model, [src] for an encoder-decoder
    tgt = tokens(2, 8)
    with torch.no_grad():
        before, after = model(*src, tgt), model(*src, change_from(tgt, t))
        other_src = model(change_from(src[0], 0), tgt) if src else None
    torch.testing.assert_close(after[:, :t], before[:, :t], **F64)
    assert (after[:, t] - before[:, t]).abs().max() > 1e-3  # the change did reach position t
    if other_src is not None:
        assert (other_src[:, 0] - before[:, 0]).abs().max() > 1e-3


@pytest.mark.parametrize("name", [n for n in models.names()  # mixer-lm's kernel is its mixer's
                                  if any(k in config_keys(n) for k in KERNELS)])
def test_kernel_choices_give_the_same_model(name, small_model, model_inputs):
    (key,) = (k for k in KERNELS if k in config_keys(name))
    first, *others = (small_model(name, **{key: value}) for value in AXES[key])
    inputs = model_inputs(name)
    for other in others:
        other.load_state_dict(first.state_dict())
        with torch.no_grad():
            torch.testing.assert_close(other(*inputs), first(*inputs), **F64)


@pytest.mark.parametrize("tie", [True, False])
@pytest.mark.parametrize("name", models.names())
def test_weight_tying(name: str, tie: bool, small_model) -> None:
    model = small_model(name, tie_weights=tie)
    assert (model.head.proj.weight is model.embed.weight) == tie
