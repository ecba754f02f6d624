"""harness.measure.kernel_swap: a built model put on the measured kernels keeps its parameters,
their names and its numbers, and runs the candidates the harness chose."""

import pytest
import torch

import models
from harness.measure import kernels
from harness.measure.flops import OpRecorder
from harness.measure.kernel_swap import (
    KernelAttention,
    KernelFFN,
    KernelHead,
    use_kernels,
)
from models.blocks import MultiHeadAttention, OutputHead, PositionwiseFFN
from models.decoding import stepper

needs_onednn = pytest.mark.skipif(kernels._ONEDNN is None, reason="build without oneDNN")
TOL = dict(atol=1e-5, rtol=1e-5)
SIZES = dict(vocab_size=13, d_model=16, n_layers=2, dropout=0.0)
CONFIG = SIZES | dict(n_heads=4, d_ff=32)  # a Transformer's


@pytest.fixture(autouse=True)
def _backend_restored():
    saved, choices = kernels._backend, dict(kernels._choice)
    yield
    kernels._backend = saved
    kernels._choice.update(choices)


def _pair(name: str = "transformer", **config) -> tuple[torch.nn.Module, torch.nn.Module]:
    """An unswapped model and a swapped copy of it, with the same weights."""
    torch.manual_seed(0)
    config = (CONFIG if name.startswith("transformer") else SIZES) | config
    plain = models.build(name, **config).eval()
    torch.manual_seed(0)
    swapped = use_kernels(models.build(name, **config)).eval()
    swapped.load_state_dict(plain.state_dict())
    return plain, swapped


def test_blocks_are_swapped_in_place_with_names_and_ties_kept():
    plain, swapped = _pair(tie_weights=True)
    kinds = {type(m) for m in swapped.modules()}
    assert {KernelAttention, KernelFFN, KernelHead} <= kinds
    assert not kinds & {MultiHeadAttention, PositionwiseFFN, OutputHead}
    assert list(swapped.state_dict()) == list(plain.state_dict())
    assert swapped.head.proj.weight is swapped.embed.weight
    plain.load_state_dict(swapped.state_dict())  # and back: checkpoints load either way
    assert use_kernels(swapped) is swapped  # swapping twice changes nothing


@pytest.mark.parametrize("qkv", [kernels.QKV_FUSED, kernels.QKV_SPLIT])
@pytest.mark.parametrize("name", ["transformer", "transformer-lm", "lstm-attention"])
def test_a_swapped_model_gives_the_plain_models_numbers(name, qkv):
    kernels.use_backend(kernels.QKV, qkv)
    plain, swapped = _pair(name)
    tokens = torch.randint(1, 13, (2, 7))
    inputs = (tokens,) if name.endswith("-lm") else (tokens[:, :5], tokens)
    with torch.no_grad():
        torch.testing.assert_close(swapped(*inputs), plain(*inputs), **TOL)


def test_cached_decoding_runs_the_swapped_projections():
    plain, swapped = _pair()
    src, prefix = torch.randint(4, 13, (2, 6)), torch.randint(4, 13, (2, 3))
    logits = []
    for model in (plain, swapped):
        st = stepper(model, cache=True)
        state = st.start(src, None)
        with torch.no_grad(), OpRecorder() as rec:
            for t in range(1, prefix.size(1) + 1):  # the cache filled step by step
                out, state = st.step(state, prefix[:, :t])
        logits.append(out)
    torch.testing.assert_close(logits[1], logits[0], **TOL)
    if kernels.backend(kernels.LINEAR) == kernels.ONEDNN:  # the last stepper's: the swapped
        assert "mkldnn._linear_pointwise" in rec.ops


@needs_onednn
def test_the_plain_model_runs_f_linear_and_the_swapped_one_the_choice():
    kernels.use_linear_backend(kernels.ONEDNN)
    plain, swapped = _pair("transformer-lm")
    tokens = torch.randint(1, 13, (2, 7))
    for model, onednn in ((plain, False), (swapped, True)):
        with OpRecorder() as rec:
            model(tokens)
        assert ("mkldnn._linear_pointwise" in rec.ops) == onednn, rec.ops


@pytest.mark.parametrize("choice", [kernels.ATTN_SDPA, kernels.ATTN_MATH])
def test_auto_attention_is_set_to_the_chosen_candidate(choice):
    kernels.use_backend(kernels.ATTENTION, choice)
    layer = use_kernels(models.mixer("transformer-layer", 16, n_heads=4, attn_backend="auto"))
    assert layer.self_attn.attn_backend == choice
    fixed = use_kernels(models.mixer("transformer-layer", 16, n_heads=4, attn_backend="math"))
    assert fixed.self_attn.attn_backend == "math"  # a named backend is left as named
