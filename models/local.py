"""Local sequence mixers, the paper's two other rows of Table 1: x (B, n, d) -> y (B, n, d).

ConvMixer: 1-D convolution over positions, kernel k, cost O(k n d^2) per layer.
RestrictedAttention: self-attention in which each query sees a window of r keys, cost O(r n d).

Both define their reach by how many positions to the left (`left`) and right (`right`) one
layer lets an output see; information from x[0] moves `left` positions per layer towards
y[n-1], which is what the path-length measurement in harness/structure.py observes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from models.blocks import MultiHeadAttention, attention
from models.checks import check_choice, check_flag, check_heads, check_positive
from models.mixers import AttentionMixerConfig

PADDINGS = ("causal", "centred")


def conv_reach(kernel_size: int, dilation: int, padding: str) -> tuple[int, int]:
    """(left, right): output i sees inputs i-left .. i+right (with gaps when dilated)."""
    check_choice("padding", padding, PADDINGS)
    span = (kernel_size - 1) * dilation
    if padding == "causal":
        return span, 0
    return span // 2, span - span // 2  # an even kernel leans one step to the right


def window_reach(window: int, causal: bool) -> tuple[int, int]:
    """(left, right) of a window of `window` keys: the r previous ones (itself included) when
    causal, else r keys centred on the query (an even r leans one step to the left)."""
    if causal:
        return window - 1, 0
    return window // 2, window - 1 - window // 2


class ConvMixer(nn.Module):
    """n_layers of Conv1d(d -> d, kernel k), padded so that output i is aligned with input i.

    dilated=True doubles the dilation per layer (WaveNet), so the receptive field grows as
    2^L and the path length as O(log n); otherwise every layer has `dilation`.
    A ReLU sits between layers, none after the last: without it a stack of convolutions
    collapses into one wider linear convolution, and with none at the end a one-layer mixer
    is exactly nn.Conv1d (as the attention mixer ends in its linear W^O).
    """

    def __init__(self, d_model: int, kernel_size: int, n_layers: int = 1, dilation: int = 1,
                 dilated: bool = False, padding: str = "centred") -> None:
        super().__init__()
        check_choice("padding", padding, PADDINGS)
        self.dilations = [dilation * 2**i if dilated else dilation for i in range(n_layers)]
        self.pads = [conv_reach(kernel_size, dil, padding) for dil in self.dilations]
        self.convs = nn.ModuleList(
            nn.Conv1d(d_model, d_model, kernel_size, dilation=dil) for dil in self.dilations
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, n, d) -> (B, n, d)
        h = x.transpose(1, 2)  # (B, d, n): Conv1d wants channels first
        for i, (conv, pad) in enumerate(zip(self.convs, self.pads, strict=True)):
            if i > 0:
                h = F.relu(h)
            h = conv(F.pad(h, pad))  # (B, d, n): padding keeps the length
        return h.transpose(1, 2)  # (B, n, d)


def band_blocks(n: int, chunk: int, offsets: tuple[int, ...], left: int, right: int,
                device: torch.device | None = None) -> torch.Tensor:
    """(n_blocks, chunk, len(offsets) * chunk) bool: may query block b's row qi attend to key
    row ki of the concatenated neighbour blocks b + offsets?

    True iff the key is in the band i-left <= j <= i+right and is a real position (0 <= j < n).
    No row is empty, not even a padding query's (n <= i <= n + chunk - 2): RestrictedAttention
    takes chunk = left (left >= right always; left = 0 means chunk 1 and no padding), so key
    i - left is real and in the left block. An empty row would be 0/0 in a plain softmax.
    """
    n_blocks = -(-n // chunk)
    b = torch.arange(n_blocks, device=device)[:, None, None]  # (nb, 1, 1)
    i = b * chunk + torch.arange(chunk, device=device)[None, :, None]  # (nb, c, 1)
    o = torch.tensor(offsets, device=device).repeat_interleave(chunk)  # (m c,)
    j = (b + o) * chunk + torch.arange(chunk, device=device).repeat(len(offsets))  # (nb, 1, m c)
    band = (j >= i - left) & (j <= i + right)
    return band & (j >= 0) & (j < n)  # (nb, c, m c)


class RestrictedAttention(nn.Module):
    """Multi-head self-attention with each query restricted to a window of r keys.

    The sequence is cut into chunks of c = max(left, right, 1) positions; a query's window then
    lies within its own chunk and the adjacent one on each side it reaches, so each chunk
    attends to at most 3 chunks (2 when causal), and the exact band mask is applied inside
    those blocks. Scores cost n * 3c * d_k per head, O(r n d) in all: no (n, n) matrix exists.
    The projections are MultiHeadAttention's (same parameter names as the self-attention
    mixer), so the two can share weights.
    """

    def __init__(self, d_model: int, n_heads: int, window: int, dropout: float = 0.0,
                 attn_scale: bool = True, attn_backend: str = "math",
                 causal: bool = False) -> None:
        super().__init__()
        self.attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, attn_scale=attn_scale,
                                       attn_backend=attn_backend)
        self.window, self.causal = window, causal
        self.left, self.right = window_reach(window, causal)
        self.chunk = max(self.left, self.right, 1)
        # neighbour blocks that hold some key of the window: left one, own, right one
        self.offsets = tuple(o for o, need in ((-1, self.left), (0, 1), (1, self.right)) if need)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, n, d) -> (B, n, d)
        a, (B, n, _), c = self.attn, x.shape, self.chunk
        nb = -(-n // c)
        q, k, v = a.project_qkv(x)  # 3 x (B, h, n, d_k)
        h, d_k = q.size(1), q.size(-1)
        q = F.pad(q, (0, 0, 0, nb * c - n))  # (B, h, nb c, d_k)
        # one zero chunk either side, so block b's neighbours b-1 and b+1 always exist
        k, v = (F.pad(t, (0, 0, c, nb * c - n + c)) for t in (k, v))  # (B, h, (nb+2) c, d_k)

        def neighbours(t: torch.Tensor) -> torch.Tensor:  # -> (B h, nb, m c, d_k)
            blocks = [t[:, :, (1 + o) * c:(1 + o + nb) * c] for o in self.offsets]
            return torch.cat([b.reshape(B * h, nb, c, d_k) for b in blocks], dim=-2)

        mask = band_blocks(n, c, self.offsets, self.left, self.right, x.device)  # (nb, c, m c)
        z = attention(
            q.reshape(B * h, nb, c, d_k),  # (B h, nb, c, d_k): blocks take the heads' place
            neighbours(k),
            neighbours(v),
            mask=mask,
            scale=a.attn_scale,
            dropout_p=a.dropout if self.training else 0.0,
            backend=a.attn_backend,
        )  # (B h, nb, c, d_k)
        z = z.reshape(B, h, nb * c, d_k)[:, :, :n]  # (B, h, n, d_k)
        return a.out_proj(z.transpose(1, 2).flatten(2))  # (B, n, d)


@dataclass(frozen=True)
class ConvMixerConfig:
    kernel_size: int = 3  # the paper's k; 3 is the smallest centred kernel
    n_layers: int = 1  # one convolution per mixer, as one attention per self-attention mixer
    dilation: int = 1  # contiguous kernel; with dilated=True, the first layer's dilation
    dilated: bool = False  # True doubles the dilation per layer (WaveNet): path O(log n)
    padding: str = "centred"  # non-causal like the self-attention mixer; "causal" pads left

    def __post_init__(self) -> None:
        check_positive(self, "kernel_size", "n_layers", "dilation")
        check_flag("dilated", self.dilated)
        check_choice("padding", self.padding, PADDINGS)


@dataclass(frozen=True)
class RestrictedAttentionConfig(AttentionMixerConfig):
    window: int = 16  # the paper's r: keys per query, r << n in the regime it speaks of

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self, "window")


def conv_mixer(d: int, c: ConvMixerConfig) -> nn.Module:
    return ConvMixer(d, **dataclasses.asdict(c))


def restricted_attention(d: int, c: RestrictedAttentionConfig) -> nn.Module:
    check_heads(d, c.n_heads)
    return RestrictedAttention(d, c.n_heads, c.window, c.dropout, c.attn_scale, c.attn_backend,
                               c.causal)
