"""PyTorch's own layer for one of our mixers, with our weights copied in.

What a user would pick instead of our code: nn.TransformerEncoderLayer for "transformer-layer",
nn.LSTM / nn.GRU for "lstm" / "gru". Benchmarks time both on the same input; tests check the
outputs agree, so any time difference is implementation, not arithmetic.
"""

from __future__ import annotations

import torch
from torch import nn

from models.blocks import EncoderLayer
from models.mixers import RecurrentMixer

REFERENCE_KINDS = ("transformer-layer", "lstm", "gru")


class FirstOutput(nn.Module):
    """nn.LSTM / nn.GRU return (output, state); a mixer returns the output only."""

    def __init__(self, rnn: nn.Module) -> None:
        super().__init__()
        self.rnn = rnn

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, n, d) -> (B, n, d)
        return self.rnn(x)[0]


def _encoder_reference(ours: EncoderLayer) -> nn.Module:
    attn = ours.self_attn
    if ours.causal or not attn.attn_scale:
        raise ValueError("nn.TransformerEncoderLayer has no causal flag or unscaled attention; "
                         "no reference for this config")
    ref = nn.TransformerEncoderLayer(
        attn.d_model, attn.n_heads, ours.ffn.linear1.out_features, dropout=attn.dropout,
        activation="relu", batch_first=True, norm_first=ours.pre,
        layer_norm_eps=ours.norm1.eps)
    # Our attribute names are nn.TransformerEncoderLayer's but for the fused in-projection
    # (a Linear here, two bare Parameters there) and the FFN living in its own module.
    renamed = {k.replace("in_proj.", "in_proj_").replace("ffn.", ""): v
               for k, v in ours.state_dict().items()}
    ref.load_state_dict(renamed)
    return ref


def torch_reference(kind: str, ours: nn.Module) -> nn.Module:
    """A module computing what mixer `ours` (built by models.mixer(kind, ...)) computes,
    made of PyTorch's layers, on the same device and dtype, in the same train/eval mode."""
    if kind == "transformer-layer" and isinstance(ours, EncoderLayer):
        ref = _encoder_reference(ours)
    elif kind in ("lstm", "gru") and isinstance(ours, RecurrentMixer):
        rnn = ours.rnn.rnn  # the nn.LSTM / nn.GRU whose parameters both impls use
        fresh = type(rnn)(rnn.input_size, rnn.hidden_size, rnn.num_layers, batch_first=True)
        fresh.load_state_dict(rnn.state_dict())
        ref = FirstOutput(fresh)
    else:
        raise ValueError(f"no PyTorch reference for mixer {kind!r} ({type(ours).__name__}); "
                         f"valid: {', '.join(REFERENCE_KINDS)}")
    param = next(ours.parameters())
    return ref.to(device=param.device, dtype=param.dtype).train(ours.training)
