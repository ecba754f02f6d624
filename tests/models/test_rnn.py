"""models/rnn.py: the explicit LSTM/GRU cells against nn.LSTM / nn.GRU (and every step-by-step
recurrence's backward, minRNN's scan too, free of per-step indexing). Whole RNN models are
tested with every other model in test_models.py (causality, fused = cell)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from models.minrnn import scan_sequential
from models.rnn import Recurrent, gru_layer, lstm_layer
from models.rnn_attention import cell_step

F64 = dict(atol=1e-10, rtol=1e-10)  # float64 parity: rounding only
B, N, D = 3, 6, 5


def rand(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float64, requires_grad=True)


def initial_state(kind: str, layers: int) -> tuple[torch.Tensor, ...]:
    n_states = 2 if kind == "lstm" else 1
    return tuple(rand(layers, B, D) for _ in range(n_states))


def as_state(kind: str, states: tuple[torch.Tensor, ...]) -> object:
    return states if kind == "lstm" else states[0]


def final_states(kind: str, state: object) -> tuple[torch.Tensor, ...]:
    return tuple(state) if kind == "lstm" else (state,)


def run(module: nn.Module, kind: str, x: torch.Tensor, states: tuple | None) -> tuple:
    """Outputs, final states, and the gradients of a fixed random loss."""
    y, state = module(x, as_state(kind, states) if states else None)
    outs = (y, *final_states(kind, state))
    g = torch.Generator().manual_seed(1)
    loss = sum((o * torch.randn(o.shape, generator=g, dtype=o.dtype)).sum() for o in outs)
    wrt = [x, *(states or ()), *module.parameters()]
    return outs, torch.autograd.grad(loss, wrt)


def recurrent_pair(kind: str, layers: int) -> tuple[Recurrent, Recurrent]:
    fused = Recurrent(kind, D, layers, impl="fused").double()
    cell = Recurrent(kind, D, layers, impl="cell").double()
    cell.load_state_dict(fused.state_dict())
    return fused, cell


@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("layers", [1, 3])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_cell_matches_fused(kind: str, layers: int, with_state: bool) -> None:
    fused, cell = recurrent_pair(kind, layers)
    x = rand(B, N, D)
    states = initial_state(kind, layers) if with_state else None
    (outs_f, grads_f), (outs_c, grads_c) = run(fused, kind, x, states), run(cell, kind, x, states)
    torch.testing.assert_close(outs_c, outs_f, **F64)
    torch.testing.assert_close(grads_c, grads_f, **F64)


@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("layers", [1, 3])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_cell_matches_fresh_torch_rnn(kind: str, layers: int, with_state: bool) -> None:
    cell = Recurrent(kind, D, layers, impl="cell").double()
    cls = nn.LSTM if kind == "lstm" else nn.GRU
    ref = cls(D, D, layers, batch_first=True).double()
    with torch.no_grad():
        for name, p in ref.named_parameters():
            p.copy_(getattr(cell.rnn, name))
    assert len(list(ref.parameters())) == len(list(cell.parameters())) == 4 * layers
    x = rand(B, N, D)
    states = initial_state(kind, layers) if with_state else None
    (outs_r, grads_r), (outs_c, grads_c) = run(ref, kind, x, states), run(cell, kind, x, states)
    torch.testing.assert_close(outs_c, outs_r, **F64)
    torch.testing.assert_close(grads_c, grads_r, **F64)


def test_lstm_layer_matches_lstm_cell() -> None:
    """One layer of the loop against nn.LSTMCell stepped by hand: a second reference."""
    ref = nn.LSTMCell(D, D).double()
    x, h, c = rand(B, N, D), rand(B, D), rand(B, D)
    ys, h_n, c_n = lstm_layer(x, h, c, ref.weight_ih, ref.weight_hh, ref.bias_ih, ref.bias_hh)
    for t in range(N):
        h, c = ref(x[:, t], (h, c))
        torch.testing.assert_close(ys[:, t], h, **F64)
    torch.testing.assert_close((h_n, c_n), (h, c), **F64)


def test_gru_layer_matches_gru_cell() -> None:
    ref = nn.GRUCell(D, D).double()
    x, h = rand(B, N, D), rand(B, D)
    ys, h_n = gru_layer(x, h, ref.weight_ih, ref.weight_hh, ref.bias_ih, ref.bias_hh)
    for t in range(N):
        h = ref(x[:, t], h)
        torch.testing.assert_close(ys[:, t], h, **F64)
    torch.testing.assert_close(h_n, h, **F64)


@pytest.mark.parametrize("layers", [1, 3])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_the_attentional_decoders_step_matches_torch_rnn_on_one_token(kind: str,
                                                                     layers: int) -> None:
    """cell_step, the attentional decoder's fused step, against nn.LSTM / nn.GRU run on a
    one-token sequence with the same parameters and state: outputs and gradients."""
    ref = (nn.LSTM if kind == "lstm" else nn.GRU)(D, D, layers, batch_first=True).double()
    x, states = rand(B, 1, D), initial_state(kind, layers)
    y, state = ref(x, as_state(kind, states))
    outs_r = (y, *final_states(kind, state))
    y, state = cell_step(ref, x[:, 0], as_state(kind, states))
    outs_c = (y[:, None], *final_states(kind, state))
    torch.testing.assert_close(outs_c, outs_r, **F64)
    g = torch.Generator().manual_seed(1)
    weights = [torch.randn(o.shape, generator=g, dtype=o.dtype) for o in outs_r]
    wrt = [x, *states, *ref.parameters()]
    grads = [torch.autograd.grad(sum((o * w).sum() for o, w in zip(outs, weights, strict=True)),
                                 wrt) for outs in (outs_c, outs_r)]
    torch.testing.assert_close(*grads, **F64)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_dropout_between_layers_is_off_in_eval(kind: str) -> None:
    fused = Recurrent(kind, D, 2, impl="fused", dropout=0.5).double().eval()
    cell = Recurrent(kind, D, 2, impl="cell", dropout=0.5).double().eval()
    cell.load_state_dict(fused.state_dict())
    x = rand(B, N, D)
    with torch.no_grad():
        torch.testing.assert_close(cell(x)[0], fused(x)[0], **F64)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_recurrent_rejects_unknown_impl(kind: str) -> None:
    with pytest.raises(ValueError, match=r"'y'.*'fused', 'cell'"):
        Recurrent(kind, D, impl="y")


def _backward_ops(y: torch.Tensor) -> list[str]:
    """The names of the autograd graph's nodes behind y."""
    seen, todo, names = set(), [y.grad_fn], []
    while todo:
        fn = todo.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        names.append(type(fn).__name__)
        todo += [f for f, _ in fn.next_functions]
    return names


def _stepped(kind: str) -> torch.Tensor:
    """The outputs of a step-by-step recurrence: an explicit LSTM or GRU cell, or minRNN's
    sequential scan."""
    if kind == "scan":
        return scan_sequential(rand(B, N, D), rand(B, N, D))
    layer, k = (lstm_layer, 4) if kind == "lstm" else (gru_layer, 3)
    states = [rand(B, D) for _ in range(2 if kind == "lstm" else 1)]
    return layer(rand(B, N, D), *states, rand(k * D, D), rand(k * D, D), rand(k * D),
                 rand(k * D))[0]


@pytest.mark.parametrize("kind", ["lstm", "gru", "scan"])
def test_steps_take_their_inputs_by_one_unbind(kind: str) -> None:
    """Not by x[:, t] at each step: each such index's backward writes a zero tensor of the
    whole sequence's size, O(n^2) memory work in the backward pass."""
    ops = _backward_ops(_stepped(kind))
    assert 1 <= ops.count("UnbindBackward0") <= 2 and "SelectBackward0" not in ops
