"""Incremental decoding (cached keys/values, carried recurrent state) gives exactly the
tokens of recomputing the decoder over the whole prefix, greedy and beam, for every
encoder-decoder family; beam 1 is greedy; no output passes input length + 50."""

from __future__ import annotations

import pytest
import torch

import models
from models.decoding import MAX_EXTRA, beam_search, greedy, pick

BOS, EOS, PAD = 2, 3, 0
FAMILIES = [("transformer", {"norm": "post"}), ("transformer", {"norm": "pre"}),
            ("lstm", {}), ("gru", {}), ("lstm-attention", {}), ("gru-attention", {}),
            ("transformer", {"norm": "post", "d_k": 3})]  # cached keys (d_k 3) != values (8)
IDS = ["-".join([name, *(f"{k}{v}" if k == "d_k" else str(v) for k, v in cfg.items())])
       for name, cfg in FAMILIES]


def emitted_eos(model, src, pad) -> int:
    """A token the model does emit (at some row's 3rd step), used as EOS so that outputs of
    a random model end before the length limit: ending and its bookkeeping get exercised."""
    run = greedy(model, src, pad, BOS, PAD)
    return next(t[2] for t in run if len(t) > 2 and t[2] not in (BOS, PAD))


def source(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Three sources of lengths 7, 4, 2, right-padded; tokens avoid the special ids."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 16, (3, 7), generator=g)
    lengths = torch.tensor([7, 4, 2])
    pad = torch.arange(7)[None, :] >= lengths[:, None]
    return src.masked_fill(pad, PAD), pad


@pytest.mark.parametrize(("name", "config"), FAMILIES, ids=IDS)
def test_cached_greedy_equals_full_recomputation(name, config, small_model) -> None:
    torch.manual_seed(0)
    model = small_model(name, **config)
    src, pad = source()
    eos = emitted_eos(model, src, pad)
    cached = greedy(model, src, pad, BOS, eos, cache=True)
    full = greedy(model, src, pad, BOS, eos, cache=False)
    assert cached == full
    lengths = (~pad).sum(1).tolist()  # at most input length + 50 tokens, EOS included
    assert all(len(t) + 1 <= n + MAX_EXTRA for t, n in zip(cached, lengths, strict=True))
    assert any(len(t) + 1 < n + MAX_EXTRA for t, n in zip(cached, lengths, strict=True))


@pytest.mark.parametrize(("name", "config"), FAMILIES, ids=IDS)
def test_cached_beam_equals_full_recomputation(name, config, small_model) -> None:
    torch.manual_seed(1)
    model = small_model(name, **config)
    src, pad = source(1)
    eos = emitted_eos(model, src, pad)
    cached = beam_search(model, src, pad, BOS, eos, beam=4, alpha=0.6, cache=True)
    full = beam_search(model, src, pad, BOS, eos, beam=4, alpha=0.6, cache=False)
    assert cached == full


@pytest.mark.parametrize(("name", "config"), FAMILIES[::2], ids=IDS[::2])
def test_beam_of_one_is_greedy(name, config, small_model) -> None:
    torch.manual_seed(2)
    model = small_model(name, **config)
    src, pad = source(2)
    eos = emitted_eos(model, src, pad)
    assert beam_search(model, src, pad, BOS, eos, beam=1) == greedy(model, src, pad, BOS, eos)


def test_stepper_rejects_a_decoder_only_model() -> None:
    with pytest.raises(ValueError, match="no decoder stepper"):
        greedy(models.build("lstm-lm", "tiny"), torch.zeros(1, 3, dtype=torch.long), None,
               BOS, EOS)


@pytest.mark.parametrize("impl", ["fused", "cell"])
@pytest.mark.parametrize(("name", "config"), FAMILIES, ids=IDS)
def test_a_sentence_decodes_alike_alone_and_in_a_mixed_batch(name, config, impl,
                                                             small_model) -> None:
    """Padding is never read: a short sentence beside a long one (so padded by 10) gets the
    same first-step logits and the same greedy and beam tokens as alone."""
    if impl == "cell" and name == "transformer":
        pytest.skip("rnn_impl is a recurrent model's option")
    torch.manual_seed(2)
    model = small_model(name, **config, **({"rnn_impl": impl} if impl == "cell" else {}))
    g = torch.Generator().manual_seed(2)
    short, long_ = torch.randint(4, 16, (1, 5), generator=g), torch.randint(4, 16, (1, 15),
                                                                             generator=g)
    mixed = torch.cat([torch.cat([short, torch.full((1, 10), PAD)], 1), long_])
    pad = mixed == PAD
    eos = emitted_eos(model, mixed, pad)
    for search in (greedy, lambda *a: beam_search(*a, beam=4, alpha=0.6)):
        alone = search(model, short, torch.zeros_like(short, dtype=torch.bool), BOS, eos)
        assert search(model, mixed, pad, BOS, eos)[0] == alone[0]
    with torch.no_grad():
        bos = torch.full((2, 1), BOS)
        both = model(mixed, bos, src_key_padding_mask=pad)[0]
        one = model(short, bos[:1], src_key_padding_mask=torch.zeros_like(short, dtype=bool))[0]
    torch.testing.assert_close(both, one, atol=1e-5, rtol=1e-5)


def test_the_length_penalty_ranks_the_finished_hypotheses_only() -> None:
    """alpha 0 takes the most likely; a large alpha the longer one, whose log-probability
    per lp(length + EOS) is higher: -1.5 / ((5 + 7) / 6)^2 = -0.375 > -1.0 / (7 / 6)^2."""
    finished = [(-1.0, [7]), (-1.5, [7, 8, 9, 10, 11, 12])]
    assert pick(finished, 0.0) == [7] and pick(finished, 2.0) == [7, 8, 9, 10, 11, 12]
    assert pick([(-1.0, [1]), (-1.0, [2])], 0.6) == [1] and pick([], 0.6) == []

