"""JoeyNMT's weights in our Transformer (harness.crosscheck.anchor_weights): on a tiny
random JoeyNMT-shaped state dict, our model with the mapped weights computes JoeyNMT's
equations written out here by hand (separate q/k/v layers, its own ids, source EOS); with
.venv-joeynmt and the anchor's checkpoint present, it agrees with JoeyNMT's own forward."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from harness.crosscheck import anchor
from harness.crosscheck.anchor_weights import (
    from_joeynmt,
    joeynmt_logprobs,
    load,
    our_logprobs,
    with_eos,
)
from harness.files import read_lines

REPO = Path(__file__).resolve().parents[3]
JOEY = REPO / anchor.VENV
JOEY_OK = anchor.installed(JOEY)
CKPTS = sorted((REPO / "results/translation-anchor/checkpoints")
               .glob("joeynmt-transformer-searched-*/model-*/latest.ckpt"))

D, H, FF, L = 8, 2, 16, 2
JOEY_VOCAB = ["<unk>", "<pad>", "<s>", "</s>", "a", "b", "c", "d"]
OUR_VOCAB = ["<pad>", "<unk>", "<s>", "</s>", "d", "c", "a", "b"]


def _random_state(seed: int = 0) -> dict[str, torch.Tensor]:
    """A JoeyNMT 2.3 post-LN Transformer's state dict (its names), random values."""
    g = torch.Generator().manual_seed(seed)

    def r(*shape: int, mean: float = 0.0) -> torch.Tensor:
        return mean + 0.5 * torch.randn(*shape, generator=g)

    lut = r(len(JOEY_VOCAB), D)
    st = {"src_embed.lut.weight": lut, "trg_embed.lut.weight": lut,
          "decoder.output_layer.weight": lut}

    def linear(p: str, n_out: int, n_in: int) -> None:
        st[f"{p}.weight"], st[f"{p}.bias"] = r(n_out, n_in), r(n_out)

    def norm(p: str) -> None:
        st[f"{p}.weight"], st[f"{p}.bias"] = r(D, mean=1.0), r(D)

    for side, attns, norms in (("encoder", ["src_src_att"], ["layer_norm"]),
                               ("decoder", ["trg_trg_att", "src_trg_att"],
                                ["x_layer_norm", "dec_layer_norm"])):
        for i in range(L):
            p = f"{side}.layers.{i}"
            for a in attns:
                for proj in ("k_layer", "v_layer", "q_layer", "output_layer"):
                    linear(f"{p}.{a}.{proj}", D, D)
            for n in norms + ["feed_forward.layer_norm"]:
                norm(f"{p}.{n}")
            linear(f"{p}.feed_forward.pwff_layer.0", FF, D)
            linear(f"{p}.feed_forward.pwff_layer.3", D, FF)
    return st


def _mha(st, p: str, x: torch.Tensor, mem: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """JoeyNMT's MultiHeadedAttention by hand: separate q, k, v layers; mask (B, 1|n, S)."""
    def proj(n: str, t: torch.Tensor) -> torch.Tensor:
        y = t @ st[f"{p}.{n}_layer.weight"].T + st[f"{p}.{n}_layer.bias"]
        return y.view(t.size(0), -1, H, D // H).transpose(1, 2)

    q, k, v = proj("q", x) / math.sqrt(D // H), proj("k", mem), proj("v", mem)
    scores = (q @ k.transpose(2, 3)).masked_fill(~mask[:, None], float("-inf"))
    ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(x.size(0), -1, D)
    return ctx @ st[f"{p}.output_layer.weight"].T + st[f"{p}.output_layer.bias"]


def _ln(st, p: str, x: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (D,), st[f"{p}.weight"], st[f"{p}.bias"], eps=1e-6)


def _ffn(st, p: str, x: torch.Tensor) -> torch.Tensor:
    w = f"{p}.feed_forward.pwff_layer"
    h = F.relu(x @ st[f"{w}.0.weight"].T + st[f"{w}.0.bias"])
    return _ln(st, f"{p}.feed_forward.layer_norm", h @ st[f"{w}.3.weight"].T
               + st[f"{w}.3.bias"] + x)


def _embed(st, ids: torch.Tensor) -> torch.Tensor:
    """sqrt(d)-scaled embedding + JoeyNMT's sinusoids (sin on even, cos on odd dims)."""
    pos = torch.arange(ids.size(1)).float()[:, None]
    div = torch.exp(torch.arange(0, D, 2).float() * -(math.log(10000.0) / D))
    pe = torch.zeros(ids.size(1), D)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
    return st["src_embed.lut.weight"][ids] * math.sqrt(D) + pe


def _joey_logprobs(st, src: torch.Tensor, trg: torch.Tensor, pad: int) -> torch.Tensor:
    """JoeyNMT's post-LN forward written from its code, on its ids (src with its EOS)."""
    src_mask = (src != pad)[:, None]  # (B, 1, S)
    x = _embed(st, src)
    for i in range(L):
        p = f"encoder.layers.{i}"
        x = _ln(st, f"{p}.layer_norm", _mha(st, f"{p}.src_src_att", x, x, src_mask) + x)
        x = _ffn(st, p, x)
    T = trg.size(1)
    trg_mask = (trg != pad)[:, None] & torch.ones(T, T, dtype=torch.bool).tril()
    y = _embed(st, trg)
    for i in range(L):
        p = f"decoder.layers.{i}"
        h1 = _ln(st, f"{p}.x_layer_norm", _mha(st, f"{p}.trg_trg_att", y, y, trg_mask) + y)
        h2 = _ln(st, f"{p}.dec_layer_norm",
                 _mha(st, f"{p}.src_trg_att", h1, x, src_mask) + h1)
        y = _ffn(st, p, h2)
    return (y @ st["decoder.output_layer.weight"].T).log_softmax(-1)


def _ids(vocab: list[str], sents: list[list[str]]) -> list[list[int]]:
    return [[vocab.index(p) for p in s] for s in sents]


SRC = [["a", "b", "c", "d", "a"], ["d", "d"], ["c"]]
TRG = [["b", "a"], ["c", "d", "a", "b"], ["a"]]


def test_mapped_attention_equals_separate_qkv_by_hand() -> None:
    st = _random_state()
    model = from_joeynmt(st, JOEY_VOCAB, OUR_VOCAB, n_heads=H)
    x, mem = torch.randn(2, 5, D), torch.randn(2, 3, D)
    mask = torch.tensor([[True, True, True], [True, True, False]])
    with torch.no_grad():
        enc = model.encoder[1].self_attn(x)
        cross = model.decoder[0].multihead_attn(x, mem, ~mask)
    full = torch.ones(2, 1, 5, dtype=torch.bool)
    torch.testing.assert_close(enc, _mha(st, "encoder.layers.1.src_src_att", x, x, full))
    torch.testing.assert_close(cross, _mha(st, "decoder.layers.0.src_trg_att", x, mem,
                                           mask[:, None]))
    # each piece's embedding row (= output projection row) moved to our id
    for i, piece in enumerate(OUR_VOCAB):
        row = st["src_embed.lut.weight"][JOEY_VOCAB.index(piece)]
        assert torch.equal(model.embed.weight[i], row)
        assert torch.equal(model.head.proj.weight[i], row)


def test_mapped_model_computes_joeynmt_equations_on_our_ids() -> None:
    st = _random_state(1)
    model = from_joeynmt(st, JOEY_VOCAB, OUR_VOCAB, n_heads=H)
    pad_j, pad_o = JOEY_VOCAB.index("<pad>"), OUR_VOCAB.index("<pad>")
    src_j = with_eos(_ids(JOEY_VOCAB, SRC), JOEY_VOCAB.index("</s>"))
    trg_j = [[JOEY_VOCAB.index("<s>"), *t] for t in _ids(JOEY_VOCAB, TRG)]
    S, T = max(map(len, src_j)), max(map(len, trg_j))
    src_t = torch.tensor([s + [pad_j] * (S - len(s)) for s in src_j])
    trg_t = torch.tensor([t + [pad_j] * (T - len(t)) for t in trg_j])
    want = _joey_logprobs(st, src_t, trg_t, pad_j)[..., [JOEY_VOCAB.index(p) for p in OUR_VOCAB]]
    got = our_logprobs(model, with_eos(_ids(OUR_VOCAB, SRC), OUR_VOCAB.index("</s>")),
                       _ids(OUR_VOCAB, TRG), pad_o, OUR_VOCAB.index("<s>"))
    valid = torch.tensor([[j <= len(t) for j in range(T)] for t in TRG])
    torch.testing.assert_close(got[valid], want[valid])


def test_untied_or_mismatched_vocabularies_are_refused() -> None:
    st = _random_state()
    with pytest.raises(ValueError, match="vocabularies"):
        from_joeynmt(st, JOEY_VOCAB, OUR_VOCAB[:-1] + ["e"], n_heads=H)
    st["decoder.output_layer.weight"] = st["decoder.output_layer.weight"] + 1
    with pytest.raises(ValueError, match="untied"):
        from_joeynmt(st, JOEY_VOCAB, OUR_VOCAB, n_heads=H)


@pytest.mark.slow
@pytest.mark.skipif(not JOEY_OK or not CKPTS,
                    reason="needs .venv-joeynmt and a JoeyNMT anchor checkpoint under "
                           "results/translation-anchor/checkpoints/joeynmt-transformer-"
                           "searched-*/ (scripts/anchor --recipe)")
def test_teacher_forced_logprobs_agree_with_joeynmt() -> None:
    ckpt = CKPTS[-1].resolve()
    data = ckpt.parent.parent / "data"
    vocab = read_lines(data / "vocab.txt")
    ids = {p: i for i, p in enumerate(vocab)}
    src = [line.split(" ") for line in read_lines(data / "dev.src")[:3]]
    trg = [line.split(" ") for line in read_lines(data / "dev.trg")[:3]]
    model, _ = load(ckpt, vocab)
    want = joeynmt_logprobs(ckpt, src, trg, vocab)
    got = our_logprobs(model, with_eos(_ids(vocab, src), ids["</s>"]), _ids(vocab, trg),
                       ids["<pad>"], ids["<s>"])
    valid = torch.tensor([[j <= len(t) for j in range(want.size(1))] for t in trg])
    torch.testing.assert_close(got[valid], want[valid])


def test_cli_on_a_folder_that_is_no_anchor_run_is_one_line_exit_2(tmp_path, monkeypatch, capsys,
                                                                   one_thread) -> None:
    """In this process (the module's __main__ is `raise SystemExit(main())`): a cold one spent
    its time importing torch. one_thread: main() sets one thread, the fixture restores them."""
    import sys

    from harness.crosscheck import anchor_weights

    assert "raise SystemExit(main())" in Path(anchor_weights.__file__).read_text()
    monkeypatch.setattr(sys, "argv", ["anchor_weights", str(tmp_path)])
    monkeypatch.chdir(REPO)
    assert anchor_weights.main() == 2  # returned, not raised: no traceback
    err = capsys.readouterr().err
    assert "not an anchor work folder" in err and len(err.strip().splitlines()) == 1


def test_one_beam_search_is_read_at_its_alpha_and_at_every_alpha_of_our_rule(tmp_path):
    """The toolkit's weights under both length-penalty rules from one search: `beam4` is
    what beam 4 at alpha 0.6 gives on its own, `beam4_our_rule` the best dev BLEU of our
    grid, with its alpha."""
    from experiments.translation import ALPHAS
    from harness.crosscheck.anchor_weights import under_each_alpha
    from harness.train.translation.bpe import shared_bpe
    from harness.train.translation.scoring import score
    from harness.train.translation.translate_runner import translate
    from models.transformer import Transformer, TransformerConfig
    from tests.harness.crosscheck.test_anchor import CORPUS

    tok = shared_bpe(CORPUS, 64, tmp_path)
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=tok.get_vocab_size(), d_model=16,
                                          n_layers=1, n_heads=2, d_ff=32, dropout=0.0)).eval()
    src = [tok.encode(s).ids for s, _ in CORPUS.dev]
    refs = [t for _, t in CORPUS.dev]
    got = under_each_alpha(model, tok, src, refs)
    alone = score(translate(model, tok, src, torch.device("cpu"), 4, 0.6), refs)
    assert got["beam4"]["bleu"] == alone["bleu"] and got["beam4"]["alpha"] == 0.6
    assert set(got["beam4_bleu_by_alpha"]) == {f"{a:g}" for a in ALPHAS}
    assert got["beam4_our_rule"]["alpha"] in ALPHAS
    assert got["beam4_our_rule"]["bleu"] == max(got["beam4_bleu_by_alpha"].values())
