"""The convolutional and restricted-attention mixers against reference implementations."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

import models
from models.blocks import attention
from models.local import band_blocks

D = 8


def conv_reference(x: torch.Tensor, mixer: nn.Module, padding: str) -> torch.Tensor:
    """The mixer's layers re-run through nn.Conv1d with its own padding, weights copied."""
    h = x.transpose(1, 2)  # (B, d, n)
    for i, conv in enumerate(mixer.convs):
        k, dil = conv.kernel_size[0], conv.dilation[0]
        pad = "same" if padding == "centred" else (k - 1) * dil
        ref = nn.Conv1d(D, D, k, dilation=dil, padding=pad).double()
        ref.load_state_dict(conv.state_dict())
        h = ref(F.relu(h) if i > 0 else h)[..., : x.size(1)]  # causal: keep the first n outputs
    return h.transpose(1, 2)


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")
@pytest.mark.parametrize("padding", ["causal", "centred"])
@pytest.mark.parametrize("kernel_size,dilation,n_layers,dilated",
                         [(3, 1, 1, False), (2, 3, 1, False), (4, 2, 1, False), (3, 1, 3, True),
                          (2, 1, 4, True)])
def test_conv_matches_nn_conv1d(padding, kernel_size, dilation, n_layers, dilated):
    mixer = models.mixer("convolutional", D, kernel_size=kernel_size, dilation=dilation,
                         n_layers=n_layers, dilated=dilated, padding=padding).double()
    x = torch.randn(2, 11, D, dtype=torch.float64)
    torch.testing.assert_close(mixer(x), conv_reference(x, mixer, padding), rtol=1e-12, atol=1e-12)
    assert [c.dilation[0] for c in mixer.convs] == [
        dilation * 2**i if dilated else dilation for i in range(n_layers)
    ]


def test_conv_single_layer_is_one_plain_convolution():
    """A one-layer mixer is exactly F.conv1d on the left-padded sequence: no activation."""
    mixer = models.mixer("convolutional", D, kernel_size=3, padding="causal").double()
    x = torch.randn(1, 6, D, dtype=torch.float64)
    conv = mixer.convs[0]
    want = F.conv1d(F.pad(x.transpose(1, 2), (2, 0)), conv.weight, conv.bias).transpose(1, 2)
    torch.testing.assert_close(mixer(x), want, rtol=1e-12, atol=1e-12)


def band_mask(n: int, left: int, right: int) -> torch.Tensor:
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    return (j >= i - left) & (j <= i + right)  # (n, n)


def restricted_reference(x: torch.Tensor, mixer: nn.Module, left: int, right: int,
                         sdpa: bool) -> torch.Tensor:
    """Full n x n attention with the same weights and an explicit band mask."""
    mha = mixer.attn
    q, k, v = (mha._heads(t) for t in mha.in_proj(x).chunk(3, dim=-1))  # 3 x (B, h, n, d_k)
    mask = band_mask(x.size(1), left, right)
    if sdpa:
        z = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    else:
        z = attention(q, k, v, mask=mask)
    return mha.out_proj(z.transpose(1, 2).flatten(2))


# (n, window, causal): n below, equal to and not a multiple of the chunk; odd and even r;
# r = 1 (only itself) and r larger than n
CASES = [(13, 4, True), (13, 5, False), (16, 4, False), (7, 2, True), (9, 1, False),
         (6, 11, False), (10, 3, True), (17, 6, False)]


@pytest.mark.parametrize("n,window,causal", CASES)
@pytest.mark.parametrize("sdpa", [False, True])
def test_restricted_attention_equals_banded_full_attention(n, window, causal, sdpa):
    mixer = models.mixer("restricted-attention", D, n_heads=2, window=window, causal=causal,
                         attn_backend="sdpa" if sdpa else "math").double()
    left, right = (window - 1, 0) if causal else (window // 2, window - 1 - window // 2)
    assert left + right + 1 == window  # each query sees r positions (where they exist)
    x = torch.randn(2, n, D, dtype=torch.float64, requires_grad=True)
    y = mixer(x)
    want = restricted_reference(x, mixer, left, right, sdpa)
    torch.testing.assert_close(y, want, rtol=1e-10, atol=1e-12)

    g = torch.randn_like(y)
    got = torch.autograd.grad(y, [x, *mixer.parameters()], g)
    ref = torch.autograd.grad(want, [x, *mixer.parameters()], g)
    for a, b in zip(got, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n,window,causal", CASES)
def test_band_blocks_hold_the_band_and_no_empty_row(n, window, causal):
    """Scattered back to (n, n), the blocked mask is the band; padding rows see a key too."""
    mixer = models.mixer("restricted-attention", D, n_heads=2, window=window, causal=causal)
    c, offsets = mixer.chunk, mixer.offsets
    mask = band_blocks(n, c, offsets, mixer.left, mixer.right)  # (nb, c, m c)
    assert mask.any(dim=-1).all()
    nb = mask.size(0)
    full = torch.zeros(nb * c, (nb + 2) * c, dtype=torch.bool)  # keys shifted by one chunk
    for b in range(nb):
        for m, o in enumerate(offsets):
            full[b * c:(b + 1) * c, (b + 1 + o) * c:(b + 2 + o) * c] = mask[b, :, m * c:(m + 1) * c]
    assert torch.equal(full[:n, c:c + n], band_mask(n, mixer.left, mixer.right))
    assert not full[:n, :c].any() and not full[:n, c + n:].any()  # no padding key for real rows


def test_restricted_attention_with_full_window_is_self_attention():
    """With r >= 2n - 1 the centred window covers every key: plain self-attention."""
    n = 9
    restricted = models.mixer("restricted-attention", D, n_heads=2, window=2 * n - 1,
                              attn_backend="math").double()
    full = models.mixer("self-attention", D, n_heads=2, attn_backend="math").double()
    full.load_state_dict(restricted.state_dict())
    x = torch.randn(2, n, D, dtype=torch.float64)
    torch.testing.assert_close(restricted(x), full(x), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind,config", [
    ("convolutional", dict(kernel_size=3, padding="causal")),
    ("convolutional", dict(kernel_size=2, padding="causal", n_layers=3, dilated=True)),
    ("restricted-attention", dict(n_heads=2, window=3, causal=True)),
    ("restricted-attention", dict(n_heads=2, window=4, causal=True, attn_backend="math")),
])
def test_causal_mixers_do_not_see_the_future(kind, config):
    n, t = 12, 7
    mixer = models.mixer(kind, D, **config).double()
    x = torch.randn(1, n, D, dtype=torch.float64, requires_grad=True)
    later = x.detach().clone()
    later[:, t:] += torch.randn(1, n - t, D, dtype=torch.float64)
    y = mixer(x)
    torch.testing.assert_close(mixer(later)[:, :t], y[:, :t], rtol=0, atol=1e-14)
    assert not torch.allclose(mixer(later)[:, t:], y[:, t:])  # the change does arrive
    (grad,) = torch.autograd.grad(y[:, :t], x, torch.randn(1, t, D, dtype=torch.float64))
    assert torch.all(grad[:, t:] == 0)  # exact: no path at all from the future
    assert torch.all(grad[:, :t].abs().sum(-1) > 0)


def test_centred_mixers_do_see_the_future():
    """The non-causal variants differ from the causal ones where it matters."""
    for kind, config in [("convolutional", dict(kernel_size=3)),
                         ("restricted-attention", dict(n_heads=2, window=3))]:
        mixer = models.mixer(kind, D, **config).double()
        x = torch.randn(1, 6, D, dtype=torch.float64, requires_grad=True)
        (grad,) = torch.autograd.grad(mixer(x)[0, 2].sum(), x)
        assert grad[0, 3].abs().sum() > 0 and torch.all(grad[0, 4:] == 0)


def flops(mixer: nn.Module, n: int) -> int:
    with FlopCounterMode(display=False) as counter:
        mixer(torch.randn(1, n, 16))
    return counter.get_total_flops()


def test_restricted_attention_flops_grow_linearly_in_n():
    """Doubling n doubles restricted attention's counted FLOPs; full attention's nearly
    quadruple (its 8 n d^2 projections keep the ratio just under 4). The math backend,
    because the FLOP counter does not see inside CPU's fused SDPA kernel."""
    restricted = models.mixer("restricted-attention", 16, n_heads=2, window=8,
                              attn_backend="math")
    full = models.mixer("self-attention", 16, n_heads=2, attn_backend="math")
    r1, r2, r4 = (flops(restricted, n) for n in (256, 512, 1024))
    assert r2 / r1 == pytest.approx(2.0, rel=1e-9) and r4 / r2 == pytest.approx(2.0, rel=1e-9)
    f1, f2 = flops(full, 256), flops(full, 512)
    assert 3.7 < f2 / f1 < 4.0
    assert r2 < f2 / 10  # r = 8 against n = 512 keys per query


class LargestTensor(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.numel = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor):
            self.numel = max(self.numel, out.numel())
        return out


@pytest.mark.parametrize("backend", ["math", "sdpa"])
def test_restricted_attention_never_builds_an_n_by_n_matrix(backend):
    n = 512
    mixer = models.mixer("restricted-attention", 16, n_heads=2, window=8, attn_backend=backend)
    x = torch.randn(1, n, 16, requires_grad=True)
    with LargestTensor() as largest:
        mixer(x).sum().backward()
    assert largest.numel < n * n / 8  # scores are (h, n/c, c, 3c) = 2 * 512 * 12 elements


@pytest.mark.parametrize("kind,config,match", [
    ("convolutional", dict(padding="same"), "'same'"),
    ("convolutional", dict(kernel_size=0), "kernel_size 0"),
    ("convolutional", dict(dilation=-1), "dilation -1"),
    ("convolutional", dict(n_layers=2.0), "n_layers 2.0"),
    ("convolutional", dict(dilated="yes"), "dilated 'yes'"),
    ("convolutional", dict(window=3), "unknown config key 'window'"),
    ("restricted-attention", dict(window=0), "window 0"),
    ("restricted-attention", dict(n_heads=3), "n_heads 3"),
    ("restricted-attention", dict(attn_backend="flash"), "'flash'"),
])
def test_bad_config_names_the_value(kind, config, match):
    with pytest.raises(ValueError, match=match):
        models.mixer(kind, D, **config)


def test_registered_kinds():
    assert {"convolutional", "restricted-attention"} <= set(models.mixer_kinds())
