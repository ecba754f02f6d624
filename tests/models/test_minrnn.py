"""minGRU and minLSTM: every form (sequential loop, level-by-level scan, log-space scan) equals
a loop written here from the paper's equations, in outputs and gradients (float64); the
mixers are causal; the level-by-level scan's graph depth grows as log n."""

from __future__ import annotations

import copy

import pytest
import torch

import models
from harness.measure.structure import sequential_ops
from models.minrnn import SCANS, MinRNN

F64 = dict(atol=1e-10, rtol=1e-10)
KINDS = ("min-gru", "min-lstm")


def equations(layer: MinRNN, x: torch.Tensor) -> torch.Tensor:
    """h_t from the paper's equations, step by step (h_0 = 0, candidate through g)."""

    def lin(name: str, xt: torch.Tensor) -> torch.Tensor:
        m = layer.linear_h if name == "h" else layer.gates[name]
        return xt @ m.weight.T + m.bias

    def g(v: torch.Tensor) -> torch.Tensor:
        return torch.where(v >= 0, v + 0.5, 1 / (1 + torch.exp(-v)))

    h, out = torch.zeros(x.size(0), x.size(2), dtype=x.dtype), []
    for t in range(x.size(1)):
        xt = x[:, t]
        h_tilde = g(lin("h", xt))
        if layer.kind == "min-gru":
            z = 1 / (1 + torch.exp(-lin("z", xt)))
            h = (1 - z) * h + z * h_tilde
        else:
            f, i = (1 / (1 + torch.exp(-lin(k, xt))) for k in ("f", "i"))
            h = f / (f + i) * h + i / (f + i) * h_tilde
        out.append(h)
    return torch.stack(out, dim=1)


def _grads(fn, layer: MinRNN, x: torch.Tensor, cot: torch.Tensor) -> list[torch.Tensor]:
    x = x.detach().requires_grad_(True)
    y = fn(layer, x)
    return [y, *torch.autograd.grad(y, [x, *layer.parameters()], cot)]


@pytest.mark.parametrize("n", [1, 2, 5, 8, 13])
@pytest.mark.parametrize("scan", SCANS)
@pytest.mark.parametrize("kind", KINDS)
def test_every_form_is_the_equations(kind: str, scan: str, n: int) -> None:
    torch.manual_seed(n)
    layer = models.mixer(kind, 6, scan=scan).double()
    x = 2 * torch.randn(3, n, 6, dtype=torch.float64)  # both branches of g are taken
    cot = torch.randn(3, n, 6, dtype=torch.float64)
    ours = _grads(lambda m, v: m(v), layer, x, cot)
    ref = _grads(equations, layer, x, cot)
    for a, b in zip(ours, ref, strict=True):
        torch.testing.assert_close(a, b, **F64)


@pytest.mark.parametrize("kind", KINDS)
def test_forms_agree_with_one_another_at_length(kind: str) -> None:
    """The three forms share parameters and agree at n = 300 (odd lengths on every level)."""
    torch.manual_seed(0)
    layers = [models.mixer(kind, 4, scan=s).double() for s in SCANS]
    for other in layers[1:]:
        other.load_state_dict(layers[0].state_dict())
    x = torch.randn(2, 300, 4, dtype=torch.float64)
    first, *rest = (m(x) for m in layers)
    for y in rest:
        torch.testing.assert_close(y, first, **F64)


@pytest.mark.parametrize("scan", SCANS)
@pytest.mark.parametrize("kind", KINDS)
def test_mixer_is_causal(kind: str, scan: str) -> None:
    torch.manual_seed(1)
    layer = models.mixer(kind, 4, scan=scan).double()
    x = torch.randn(1, 9, 4, dtype=torch.float64)
    moved = x.clone()
    moved[:, 5:] += 1
    y, z = layer(x), layer(moved)
    torch.testing.assert_close(z[:, :5], y[:, :5], **F64)
    assert (z[:, 5] - y[:, 5]).abs().max() > 1e-3


def test_log_scan_is_finite_in_float32_over_long_sequences() -> None:
    """Saturated gates over 4096 steps: the log-space form stays finite and within 0.5% of the
    loop. Not closer: A = cumsum(log a) reaches the thousands, and log b - A then keeps
    fewer of float32's digits (about 1e-3 relative here, measured)."""
    torch.manual_seed(2)
    layer = models.mixer("min-gru", 8, scan="log")
    x = 4 * torch.randn(1, 4096, 8)
    y = layer(x)
    assert torch.isfinite(y).all()
    exact = equations(copy.deepcopy(layer).double(), x.double())
    torch.testing.assert_close(y, exact.float(), atol=5e-3, rtol=5e-3)


def test_level_scan_depth_grows_as_log_n() -> None:
    """Graph depth: the levels form adds a constant per doubling of n; the loop doubles."""
    layer = models.mixer("min-gru", 4, scan="levels")
    loop = models.mixer("min-gru", 4, scan="sequential")
    depths = {n: sequential_ops(layer, n, 4) for n in (16, 32, 64, 128)}
    steps = {depths[2 * n] - depths[n] for n in (16, 32, 64)}
    assert len(steps) == 1 and 0 < steps.pop() < 16
    looped = {n: sequential_ops(loop, n, 4) for n in (64, 128)}
    assert looped[128] - looped[64] >= 64  # at least one op per step
    assert depths[128] < looped[128] / 2


def test_unknown_scan_is_refused() -> None:
    with pytest.raises(ValueError, match="invalid scan 'tree'"):
        models.mixer("min-gru", 4, scan="tree")
    with pytest.raises(ValueError, match="invalid scan"):
        models.build("min-lstm-lm", scan="tree")
