"""models/registry.py: every name builds and trains, presets, errors, and `tvr models`."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import pytest
import torch
from click.testing import CliRunner

import models
from harness.cli import cli


def n_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_names_include_the_contract() -> None:
    expected = {"transformer", "lstm", "gru", "transformer-lm", "lstm-lm", "gru-lm"}
    assert expected <= set(models.names())


@pytest.mark.parametrize("name", models.names())
def test_every_model_builds_runs_and_backpropagates(name: str, model_inputs) -> None:
    model = models.build(name, preset="tiny")
    vocab_size = models.model_config(name, "tiny").vocab_size
    inputs = model_inputs(name, vocab_size)
    logits = model(*inputs)
    assert logits.shape == (*inputs[-1].shape, vocab_size)
    logits.logsumexp(-1).mean().backward()
    assert n_params(model) > 0
    for pname, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), pname


@pytest.mark.parametrize("kind", models.mixer_kinds())
def test_every_mixer_maps_bnd_to_bnd(kind: str) -> None:
    mixer = models.mixer(kind, 16)
    x = torch.randn(2, 8, 16, requires_grad=True)
    y = mixer(x)
    assert y.shape == x.shape
    y.square().mean().backward()
    parameter_free = kind == "attention-core"  # attention without its projections
    assert (n_params(mixer) == 0) == parameter_free and torch.isfinite(x.grad).all()


def test_tiny_transformer_has_the_papers_parameter_count() -> None:
    """Counted from the architecture: tied embedding, N encoder and N decoder layers."""
    cfg = models.model_config("transformer", "tiny")
    d, f, n, v = cfg.d_model, cfg.d_ff, cfg.n_layers, cfg.vocab_size
    attn = 4 * d * d + 4 * d  # W^Q, W^K, W^V, W^O and biases
    ffn = 2 * d * f + f + d
    norm = 2 * d
    expected = v * d + n * (attn + ffn + 2 * norm) + n * (2 * attn + ffn + 3 * norm)
    assert n_params(models.build("transformer", "tiny")) == expected


def test_base_preset_is_the_papers_base_model() -> None:
    cfg = models.model_config("transformer", "base")
    assert (cfg.n_layers, cfg.d_model, cfg.d_ff, cfg.n_heads) == (6, 512, 2048, 8)
    assert (cfg.dropout, cfg.norm, cfg.pos_encoding) == (0.1, "post", "sinusoidal")
    big = models.model_config("transformer", "big")
    assert (big.n_layers, big.d_model, big.d_ff, big.n_heads) == (6, 1024, 4096, 16)


def test_presets_then_overrides() -> None:
    tiny = models.model_config("transformer", "tiny")
    assert (tiny.d_model, tiny.n_layers, tiny.n_heads) == (64, 2, 4)
    assert models.model_config("transformer", "tiny", d_model=32).d_model == 32
    lstm = models.model_config("lstm", "tiny")  # n_heads and d_ff do not apply to an RNN
    assert (lstm.d_model, lstm.n_layers) == (64, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        tiny.d_model = 8  # type: ignore[misc]


def test_build_passes_knobs_through() -> None:
    model = models.build("transformer-lm", preset="tiny", norm="pre", n_layers=3)
    assert len(model.layers) == 3 and all(layer.pre for layer in model.layers)
    assert models.build("gru-lm", preset="tiny", rnn_impl="cell").rnn.impl == "cell"


def build(name: str, **config: object) -> Callable[[], object]:
    return lambda: models.build(name, preset="tiny", **config)


def mixer(kind: str, d_model: int = 16, **config: object) -> Callable[[], object]:
    return lambda: models.mixer(kind, d_model, **config)


BAD_INPUTS = {  # id: (call, the bad value as the message shows it, fragments naming valid ones)
    "unknown name": (build("transformr"), "'transformr'", ["'transformer'", "'gru-lm'"]),
    "unknown preset": (lambda: models.build("gru", preset="huge"), "'huge'", ["'tiny'", "'base'"]),
    "unknown key": (build("transformer", d_modle=8), "'d_modle'", ["d_model", "n_heads"]),
    "rnn has no heads": (build("lstm", n_heads=4), "'n_heads'", ["d_model", "rnn_impl"]),
    "norm": (build("transformer", norm="mid"), "'mid'", ["'post'", "'pre'"]),
    "attn_backend": (build("transformer-lm", attn_backend="x"), "'x'", ["'math'", "'sdpa'"]),
    "pos_encoding": (build("transformer", pos_encoding="rope"), "'rope'", ["'sinusoidal'"]),
    "rnn_impl": (build("lstm", rnn_impl="y"), "'y'", ["'fused'", "'cell'"]),
    "rnn_impl lm": (build("gru-lm", rnn_impl="y"), "'y'", ["'fused'", "'cell'"]),
    "dropout": (build("transformer", dropout=1.5), "1.5", ["[0, 1)"]),
    "rnn dropout": (build("lstm", dropout=-0.1), "-0.1", ["[0, 1)"]),
    "heads": (build("transformer", n_heads=3), "3", ["d_model=64", "1, 2, 4, 8, 16, 32, 64"]),
    "d_model": (build("transformer", d_model=-8), "-8", ["positive integer"]),
    "n_layers": (build("gru", n_layers=0), "0", ["positive integer"]),
    "vocab_size": (build("lstm-lm", vocab_size=-1), "-1", ["positive integer"]),
    "d_ff": (build("transformer", d_ff=-2), "-2", ["positive integer"]),
    "attn_scale": (build("transformer", attn_scale="yes"), "'yes'", ["True", "False"]),
    "unknown mixer": (mixer("conv"), "'conv'", ["'self-attention'", "'lstm'"]),
    "mixer key": (mixer("gru", n_heads=2), "'n_heads'", ["rnn_impl"]),
    "mixer heads": (mixer("self-attention", n_heads=3), "3", ["d_model=16", "1, 2, 4, 8, 16"]),
    "mixer rnn_impl": (mixer("lstm", rnn_impl="y"), "'y'", ["'fused'", "'cell'"]),
    "mixer norm": (mixer("transformer-layer", norm="mid"), "'mid'", ["'post'", "'pre'"]),
    "mixer d_model": (mixer("self-attention", -4), "-4", ["positive integer"]),
    "mixer dropout": (mixer("transformer-layer", dropout=1.5), "1.5", ["[0, 1)"]),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_raises_value_error_naming_value_and_valid_ones(case: str) -> None:
    call, bad, valid = BAD_INPUTS[case]
    with pytest.raises(ValueError) as err:
        call()
    message = str(err.value)
    assert re.search(rf"(?<![\w.-]){re.escape(bad)}(?![\w.])", message), message
    for fragment in valid:
        assert fragment in message, message


def test_tvr_models_lists_every_name_and_mixer_with_counts() -> None:
    result = CliRunner().invoke(cli, ["models"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    for name in models.names():
        count = f"{n_params(models.build(name, 'tiny')):,d}"
        assert any(line.split()[:2] == [name, count] for line in lines if line.strip()), name
    d = models.model_config("transformer", "tiny").d_model
    for kind in models.mixer_kinds():
        count = f"{n_params(models.mixer(kind, d)):,d}"
        assert any(line.split()[:2] == [kind, count] for line in lines if line.strip()), kind


def test_tvr_models_rejects_unknown_preset() -> None:
    result = CliRunner().invoke(cli, ["models", "--preset", "huge"])
    assert result.exit_code == 2
    assert "'huge'" in result.output and "tiny" in result.output
