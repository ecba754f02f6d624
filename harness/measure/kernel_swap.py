"""A built model's blocks put on the measured kernels, from outside models/.

models/ computes as the paper writes it: nn.Linear projections, F.relu between the FFN's two
maps, and attn_backend "auto" run as sdpa. use_kernels swaps the blocks that have swap points
(harness.measure.kernels) for subclasses that call the chosen candidates instead: the same
parameters under the same names (state_dicts and checkpoints are unchanged; a swapped model
loads an unswapped one's weights and back), the same numbers up to the candidates' rounding
(tests compare each with PyTorch's layers). The linear, QKV and FFN choices are read at every
call, as harness.measure.kernel_choice sets them for the machine; an "auto" attention takes
the attention point's choice when swapped (a run sets the choices before it builds).

Swapped: MultiHeadAttention's Q, K, V projections (the linear and QKV points) and its W^O
(linear), the FFN (its first map and ReLU: the FFN point; its second map: linear), the output
head's vocabulary projection (linear), and every layer whose attn_backend is "auto" (set to
the candidate the attention point chose). Subclasses of these blocks, as a plugin may define,
are left as they are.
"""

from __future__ import annotations

import torch
from torch import nn

from harness.measure import kernels
from models.blocks import MultiHeadAttention, OutputHead, PositionwiseFFN


class KernelAttention(MultiHeadAttention):
    """MultiHeadAttention with its projections on the linear and QKV swap points."""

    def project_q(self, x: torch.Tensor) -> torch.Tensor:  # (B, n, d) -> (B, h, n, d_k)
        r, w, b = self.qk_rows, self.in_proj.weight, self.in_proj.bias
        return self._heads(kernels.linear(x, w[:r], b[:r]))

    def project_kv(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r, w, b = self.qk_rows, self.in_proj.weight, self.in_proj.bias
        k, v = kernels.linear(memory, w[r:], b[r:]).split([r, self.d_model], dim=-1)
        return self._heads(k), self._heads(v)

    def project_qkv(self, x: torch.Tensor, memory: torch.Tensor | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if memory is not None:
            return self.project_q(x), *self.project_kv(memory)
        r = self.qk_rows
        q, k, v = kernels.qkv(x, self.in_proj.weight, self.in_proj.bias, [r, r, self.d_model])
        return self._heads(q), self._heads(k), self._heads(v)

    def output(self, z: torch.Tensor) -> torch.Tensor:  # (B, h, n, d_v) -> (B, n, d)
        o = self.out_proj
        return kernels.linear(z.transpose(1, 2).flatten(2), o.weight, o.bias)


class KernelFFN(PositionwiseFFN):
    """PositionwiseFFN with relu(x W1 + b1) on the FFN swap point, W2 on the linear one."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, n, d) -> (B, n, d)
        h = kernels.linear_relu(x, self.linear1.weight, self.linear1.bias)  # (B, n, d_ff)
        return kernels.linear(self.dropout(h), self.linear2.weight, self.linear2.bias)


class KernelHead(OutputHead):
    """OutputHead with the vocabulary projection on the linear swap point."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, n, d) -> (B, n, V)
        return kernels.linear(self.norm(x), self.proj.weight)


SWAPS: dict[type[nn.Module], type[nn.Module]] = {
    MultiHeadAttention: KernelAttention, PositionwiseFFN: KernelFFN, OutputHead: KernelHead}


def use_kernels(model: nn.Module) -> nn.Module:
    """`model` with its blocks swapped in place for their kernel subclasses (SWAPS) and its
    "auto" attention set to the measured candidate; returned for chaining."""
    for module in model.modules():
        swap = SWAPS.get(type(module))
        if swap is not None:
            module.__class__ = swap  # same instance: parameters, ties and hooks stay
        if getattr(module, "attn_backend", None) == "auto":
            module.attn_backend = kernels.backend(kernels.ATTENTION)
    return model
