"""Init-time (and after-training) statistics the ablations need, and their runners.

- "attn-init": the seed's argument for 1/sqrt(d_k): for q, k with independent unit-variance
  components, Var(q.k) = d_k, so unscaled scores grow with d_k and push softmax into
  saturation (low entropy, vanishing Jacobian). Measured on the first attention layer of an
  initialised model and, as a reference, on i.i.d. N(0, 1) vectors.
- "layer-grads": the gradient norm of each layer's parameters at initialisation (Xiong et al.
  2020: Post-LN's grows toward the output, Pre-LN's does not), the token diversity each
  layer's output keeps of the stack's input and the gradient the stack passes back to it
  (what residual branches preserve through depth).
- "grad-distance": ||dL_t / dx_{t-k}|| against k, the gradient of the loss at the last
  position with respect to the embedding output k positions earlier, at initialisation and
  after training (the vanishing-gradient claim about recurrence).

These read the attention inputs and layer boundaries through the shared block types of
models.blocks (found by isinstance, never by attribute path), so every model built from those
blocks can be probed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from experiments.spec import Point
from harness.runner import Context, Result
from harness.train import checkpoint
from harness.train.batch import Batch
from harness.train.loop import masked_loss, train
from harness.train.train_runner import (
    build_model,
    history_series,
    result_metrics,
    tiny_threads,
    train_spec,
)
from harness.train.trainer import Saving
from models.blocks import DecoderLayer, EncoderLayer, MultiHeadAttention, TokenEmbedding

# ---------------------------------------------------------------- attention statistics


def attention_stats(q: torch.Tensor, k: torch.Tensor, scale: bool,
                    causal: bool) -> dict[str, float]:
    """Statistics of self-attention over q, k (B, h, n, d_k): Var(q.k) over the (causal)
    pairs, the mean per-component variances of q and k, and of softmax(q.k [/ sqrt(d_k)]):
    row entropy (nats), its maximum log(#keys), the top weight, and the Frobenius norm of the
    softmax Jacobian diag(p) - p p^T, which goes to 0 as a row saturates."""
    n, d_k = q.size(-2), q.size(-1)
    q, k = q.double(), k.double()
    dots = q @ k.transpose(-2, -1)  # (B, h, n, n)
    visible = torch.ones(n, n, dtype=torch.bool, device=q.device)
    if causal:
        visible = visible.tril()
    scores = (dots / math.sqrt(d_k) if scale else dots).masked_fill(~visible, -math.inf)
    p = scores.softmax(-1)
    plogp = torch.where(p > 0, p * p.clamp_min(1e-300).log(), torch.zeros_like(p))
    s2, s3 = (p**2).sum(-1), (p**3).sum(-1)
    jac = (s2 - 2 * s3 + s2**2).clamp_min(0).sqrt()  # ||diag(p) - p p^T||_F per row
    keys = visible.sum(-1).double()  # (n,) keys each query sees
    q_var = float(q.flatten(0, 2).var(0).mean())  # per component, over tokens
    k_var = float(k.flatten(0, 2).var(0).mean())
    qk_var = float(dots[..., visible].var())
    return {"d_k": d_k, "qk_var": qk_var, "q_var": q_var, "k_var": k_var,
            "qk_var_normalised": qk_var / (q_var * k_var),
            "attn_entropy": float(-plogp.sum(-1).mean()),
            "attn_entropy_max": float(keys.log().mean()),
            "attn_max_weight": float(p.max(-1).values.mean()),
            "softmax_jacobian_norm": float(jac.mean())}


def attention_qk(model: nn.Module, batch: Batch, layer: int = 0
                 ) -> tuple[torch.Tensor, torch.Tensor, MultiHeadAttention]:
    """q, k (B, h, n, d_k) that self-attention layer `layer` computes on `batch`, recomputed
    from the input its forward received (after any Pre-LN norm) and its own projections."""
    attns = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    if not attns:
        raise ValueError(f"{type(model).__name__} has no attention layer to probe")
    attn = attns[layer]
    seen: list[torch.Tensor] = []
    handle = attn.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
    try:
        with torch.no_grad():
            batch.logits(model)
    finally:
        handle.remove()
    x = seen[0]  # the first call is self-attention over the layer's input
    with torch.no_grad():
        q, k, _ = attn.project_qkv(x)
    return q, k, attn


def run_attn_init(point: Point, ctx: Context) -> Result:
    """q.k variance, entropy and softmax Jacobian of the first attention layer at init, with
    the point's attn_scale; plus Var(q.k) of i.i.d. N(0, 1) q, k of the same shape."""
    device = ctx.device
    spec = train_spec(point, str(device))
    model = build_model(point, spec, device).eval()
    batch = spec.task.eval_batches(point.batch_size, 1)[0].to(device)
    with tiny_threads(model, device):
        q, k, attn = attention_qk(model, batch)
        causal = batch.framing == "lm"
        stats = attention_stats(q, k, attn.attn_scale, causal)
        gen = torch.Generator(device=device).manual_seed(point.seed)
        unit = [torch.randn(q.shape, generator=gen, device=device, dtype=torch.float64)
                for _ in range(2)]
        ref = attention_stats(*unit, attn.attn_scale, causal)
    return Result(stats | {"qk_var_unit": ref["qk_var"], "attn_entropy_unit": ref["attn_entropy"],
                           "softmax_jacobian_norm_unit": ref["softmax_jacobian_norm"]})


# ---------------------------------------------------------------- per-layer gradients


@dataclass(frozen=True)
class DepthProbe:
    """What one backward pass at initialisation shows of a stack of Transformer layers."""

    grad_norms: list[float]  # ||grad|| of each layer's parameters, input side first
    signal: list[float]  # each layer's output token diversity over the stack input's
    grad_in_over_out: float  # ||dL/d(stack input)|| over ||dL/d(last layer's output)||
    first: int = 1  # the layer number (1 = nearest the input) of the signal's first layer


def diversity(x: torch.Tensor) -> float:
    """How far a sequence's positions are from all being one vector: ||x - its mean over
    positions|| / ||x|| over the batch (B, n, d); 0 where every position is the same (the
    rank collapse of a deep stack without residual branches, Dong et al. 2021)."""
    x = x.detach().double()
    return float((x - x.mean(dim=1, keepdim=True)).norm() / x.norm())


def depth_probe(model: nn.Module, batch: Batch) -> DepthProbe:
    """The task loss on one batch, backward: each Transformer layer's parameter gradient
    norm (every layer, forward order), and for the stack that feeds the output (an
    encoder-decoder's decoder: the signal of one stream, never the encoder's input against
    the decoder's output) the token diversity of each layer's output relative to the stack's
    input (the signal it keeps) and the gradient reaching that input relative to the one
    leaving its last layer (what it passes back)."""
    layers = [m for m in model.modules() if isinstance(m, (EncoderLayer, DecoderLayer))]
    if not layers:
        raise ValueError(f"{type(model).__name__} has no Transformer layers to probe")
    stack = [m for m in layers if type(m) is type(layers[-1])]
    seen: list[torch.Tensor] = []  # the stack's first input, then each of its layers' outputs

    def keep(x: torch.Tensor) -> None:
        if x.requires_grad:
            x.retain_grad()  # a non-leaf: autograd drops its grad unless asked
        seen.append(x)

    hooks = [stack[0].register_forward_pre_hook(lambda _m, args: keep(args[0])),
             *(layer.register_forward_hook(lambda _m, _a, out: keep(out)) for layer in stack)]
    try:
        model.zero_grad(set_to_none=True)
        masked_loss(batch.logits(model), batch).backward()
    finally:
        for hook in hooks:
            hook.remove()
    norms = []
    for layer in layers:
        sq = sum(float(p.grad.double().pow(2).sum()) for p in layer.parameters()
                 if p.grad is not None)
        norms.append(math.sqrt(sq))
    model.zero_grad(set_to_none=True)
    first, outputs = seen[0], seen[1:len(stack) + 1]
    grads = [first.grad, outputs[-1].grad]
    passed = float(grads[0].double().norm() / grads[1].double().norm()) \
        if all(g is not None for g in grads) else math.nan
    return DepthProbe(norms, [diversity(o) / diversity(first) for o in outputs], passed,
                      len(layers) - len(stack) + 1)


def run_layer_grads(point: Point, ctx: Context) -> Result:
    """At initialisation (depth_probe): the gradient norm of every layer, series
    "layer_grad_norm", and the signal each layer of the output's stack keeps, series
    "layer_signal" (step = layer number, 1 = nearest the input, in both)."""
    device = ctx.device
    spec = train_spec(point, str(device))
    model = build_model(point, spec, device).train()
    batch = spec.task.train_batch(0, point.batch_size).to(device)
    with tiny_threads(model, device):
        probe = depth_probe(model, batch)
    norms = probe.grad_norms
    return Result({"n_layers_probed": len(norms), "grad_norm_first": norms[0],
                   "grad_norm_last": norms[-1], "grad_norm_last_over_first": norms[-1] / norms[0],
                   "signal_last_over_input": probe.signal[-1],
                   "grad_input_over_output": probe.grad_in_over_out},
                  {"layer_grad_norm": list(enumerate(norms, start=1)),
                   "layer_signal": list(enumerate(probe.signal, start=probe.first))})


# ---------------------------------------------------------------- gradient vs distance


def distance_grad_norms(model: nn.Module, batch: Batch) -> list[float]:
    """[||dL_t / dx_{t-k}|| for k = 0 .. n-1], L_t the loss at the last position t and x the
    output of the token embedding, averaged over the batch (LM framing only)."""
    if batch.framing != "lm" or not bool(batch.mask[:, -1].all()):
        raise ValueError("grad-distance needs an LM task scored at its last position")
    embeds = [m for m in model.modules() if isinstance(m, TokenEmbedding)]
    captured: list[torch.Tensor] = []

    def keep(_m: nn.Module, _args: tuple, out: torch.Tensor) -> None:
        out.retain_grad()  # a non-leaf: autograd drops its grad unless asked
        captured.append(out)

    handle = embeds[0].register_forward_hook(keep)
    try:
        model.zero_grad(set_to_none=True)
        logits = batch.logits(model)
        F.cross_entropy(logits[:, -1].float(), batch.targets[:, -1]).backward()
    finally:
        handle.remove()
    grad = captured[0].grad  # (B, n, d)
    model.zero_grad(set_to_none=True)
    per_pos = grad.double().norm(dim=-1).mean(0)  # (n,)
    return per_pos.flip(0).tolist()  # index k = distance back from the last position


def _decay(norms: list[float]) -> float:
    """log10 of the gradient at the farthest position over the one at distance 1."""
    return math.log10(norms[-1] / norms[1]) if norms[-1] > 0 and norms[1] > 0 else -math.inf


def run_grad_distance(point: Point, ctx: Context) -> Result:
    """||dL_t/dx_{t-k}|| vs k at init and after training on the point's task; series
    "grad_norm_init" / "grad_norm_trained" with step = k, and the training curves."""
    device = ctx.device
    spec = train_spec(point, str(device))
    model = build_model(point, spec, device)
    probe = spec.task.eval_batches(point.batch_size, 1)[0].to(device)
    path = checkpoint.point_path(point, ctx)
    with tiny_threads(model, device) as threads:
        model.eval()  # no dropout in the probe; train() switches back
        init = distance_grad_norms(model, probe)
        result = train(model, spec.task, spec.train, d_model=spec.model["d_model"],
                       saving=Saving(path, point.config_key, resume=ctx.resume))
        checkpoint.finished(path, ctx)
        model.eval()
        trained = distance_grad_norms(model, probe) if result.status == "ok" else []
    metrics: dict[str, Any] = result_metrics(result) | {
        "grad_decay_init": _decay(init), "threads_used": threads,
        "d_model": spec.model["d_model"]}  # the row's d_model: the width trained (match)
    series = history_series(result.history) | {"grad_norm_init": list(enumerate(init))}
    if not trained:
        return Result(metrics, series, result.status,
                      f"training diverged at step {result.diverged_at}")
    metrics["grad_decay_trained"] = _decay(trained)
    series["grad_norm_trained"] = list(enumerate(trained))
    return Result(metrics, series)
