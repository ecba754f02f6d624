"""Components from other packages: a registered or entry-point mixer gets the built-ins'
contract (unknown knobs refused naming the valid ones), a broken plugin is one warning line,
and mixer-lm builds a causal LM around any mixer kind."""

from pathlib import Path

import pytest
import torch
from torch import nn

import models
from models import catalog, plugins


class Scale(nn.Module):
    """Multiplies by a constant: the smallest mixer with a knob."""

    def __init__(self, d_model: int, factor: float = 2.0, causal: bool = False) -> None:
        super().__init__()
        if factor <= 0:
            raise ValueError(f"invalid factor {factor!r}; must be positive")
        self.factor = factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.factor


@pytest.fixture
def clean(monkeypatch):
    """Empty plugin tables for one test (entry points re-read, registrations dropped, the
    catalog back to its built-ins)."""
    monkeypatch.setattr(plugins, "_LOADED", {})
    monkeypatch.setattr(plugins, "_REGISTERED", {})
    monkeypatch.setattr(catalog, "_ADDED", {catalog.Mixer: {}, catalog.Model: {}})


def test_registered_mixer_takes_part_with_its_knobs(clean):
    models.register_mixer("scale", Scale)
    assert "scale" in models.mixer_kinds() and "factor" in models.config_keys()
    assert models.provider("scale", "mixer") == f"module {__name__}"
    x = torch.ones(1, 3, 4)
    torch.testing.assert_close(models.mixer("scale", 4, factor=3.0)(x), 3 * x)
    with pytest.raises(ValueError, match="unknown config key 'fctor'.*valid: causal, factor"):
        models.mixer("scale", 4, fctor=3.0)
    with pytest.raises(ValueError, match="invalid factor"):
        models.mixer("scale", 4, factor=-1.0)


def test_plugin_cannot_replace_a_builtin(clean, capsys):
    models.register_mixer("lstm", Scale)
    assert models.provider("lstm", "mixer") == plugins.BUILTIN
    assert "already has a built-in 'lstm'" in capsys.readouterr().err


def write_dist(root: Path, name: str, entry_points: str) -> None:
    info = root / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_broken_entry_point_is_one_warning_line_and_the_rest_works(clean, tmp_path,
                                                                   monkeypatch, capsys):
    write_dist(tmp_path, "broken_pkg", "[tvr.mixers]\nbroken = no_such_module_xyz:Mixer\n")
    (tmp_path / "good_mixer_mod.py").write_text(
        "from torch import nn\n\ndef make(d_model, bias=True):\n"
        "    \"\"\"A linear map.\"\"\"\n    return nn.Linear(d_model, d_model, bias=bias)\n")
    write_dist(tmp_path, "good_pkg", "[tvr.mixers]\ngood = good_mixer_mod:make\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    kinds = models.mixer_kinds()
    assert "good" in kinds and "broken" not in kinds and "lstm" in kinds
    assert models.provider("good", "mixer") == "good_pkg"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'broken'" in err[0] and "broken_pkg" in err[0]
    models.mixer_kinds()  # read once: no second warning
    assert capsys.readouterr().err == ""
    assert models.mixer("good", 4, bias=False).bias is None


def test_registered_model_is_built_with_presets_and_checked_knobs(clean):
    def tiny_lm(vocab_size: int = 10, d_model: int = 8) -> nn.Module:
        """Embedding then head."""
        return nn.Sequential(nn.Embedding(vocab_size, d_model), nn.Linear(d_model, vocab_size))

    models.register_model("tiny-lm", tiny_lm)
    assert models.describe("tiny-lm") == "Embedding then head."
    model = models.build("tiny-lm", preset="tiny")  # the preset's vocab_size and d_model
    assert model[0].weight.shape == (64, 64)
    with pytest.raises(ValueError, match="unknown config key 'n_heads'"):
        models.build("tiny-lm", n_heads=2)


@pytest.mark.parametrize("kind", ["self-attention", "lstm", "convolutional", "scale-causal"])
def test_mixer_lm_is_causal_for_any_mixer(clean, kind):
    models.register_mixer("scale-causal", Scale)
    lm = models.build("mixer-lm", preset="tiny", mixer_kind=kind, n_heads=2).eval()
    tokens = torch.randint(0, 64, (2, 12))
    changed = tokens.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 64
    torch.testing.assert_close(lm(tokens)[:, :6], lm(changed)[:, :6], rtol=1e-5, atol=1e-5)


def test_mixer_lm_refuses_unknown_and_non_causal_mixers(clean):
    models.register_mixer("no-causal", lambda d_model: nn.Identity())
    with pytest.raises(ValueError, match="invalid mixer kind 'nope'"):
        models.model_config("mixer-lm", mixer_kind="nope")
    with pytest.raises(ValueError, match="no causal knob"):
        models.build("mixer-lm", preset="tiny", mixer_kind="no-causal")
