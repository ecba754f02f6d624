"""The translation task: the Bible corpus and its splits, user corpora (good and bad files),
the shared BPE, and one run end to end whose saved hypotheses rescore to the reported BLEU."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu.metrics import BLEU

from experiments.spec import TranslateOptions
from harness.cli import cli
from harness.files import read_lines, write_lines
from harness.results import read_results, results_path
from harness.train.translation import bitext as C
from harness.train.translation.baselines import best_constant
from harness.train.translation.bpe import cache_path, shared_bpe
from harness.train.translation.data import tokenized
from harness.train.translation.scoring import repeats, score
from harness.train.translation.tfidf import TfIdf
from harness.train.translation.translate_runner import _held_out, subsample

PARALLEL_GROUPS = {9, 10, 11, 12, 13, 14, 15, 16, 40, 41, 42, 43, 49, 51, 61, 65}


def tvr(*args: str):
    return CliRunner().invoke(cli, list(args))


GENRES = {"history": range(6, 18), "poetry": range(18, 23), "prophets": range(23, 40),
          "letters": range(45, 66), "apocalyptic": range(66, 67)}


@pytest.mark.slow
def test_no_dev_or_test_target_verse_occurs_in_train() -> None:
    bible = C.bible()
    train_targets = {t for _, t in bible.train}
    assert not [t for _, t in bible.dev + bible.test if t in train_targets]
    assert len(bible.dev) > 1000 and len(bible.test) > 1400 and len(bible.train) > 28000
    # no parallel passage left for retrieval to find: no held-out target has half of its
    # word trigrams in one training target (an inverted index, apart from the corpus's own)
    where: dict[str, set[int]] = {}
    for i, (_, t) in enumerate(bible.train):
        for g in C.trigrams(t):
            where.setdefault(g, set()).add(i)
    for _, t in bible.dev + bible.test:
        grams = C.trigrams(t)
        counts = Counter(i for g in grams for i in where.get(g, ()))
        assert not counts or max(counts.values()) < C.NEAR_DUPLICATE * len(grams), t
    assert C.trigrams("And God said, Let there be light!") == {
        "and god said", "god said let", "said let there", "let there be", "there be light"}


@pytest.mark.slow
def test_split_is_by_whole_books_spanning_the_genres() -> None:
    held = set(C.DEV_BOOKS) | set(C.TEST_BOOKS)
    assert not held & PARALLEL_GROUPS and not set(C.DEV_BOOKS) & set(C.TEST_BOOKS)
    assert all(set(C.DEV_BOOKS) & set(books) or set(C.TEST_BOOKS) & set(books)
               for books in GENRES.values())
    ny, en = C.chichewa_verses(), C.kjv_verses()
    book_of = {t: k[0] for k, t in en.items()}
    for books, pairs in ((C.DEV_BOOKS, C.bible().dev), (C.TEST_BOOKS, C.bible().test)):
        counts = Counter(book_of[t] for _, t in pairs)
        assert set(counts) <= set(books)  # every held-out pair from a book of its set
        assert max(counts.values()) <= 0.3 * len(pairs)  # no book over 30% of its set
    assert {k[0] for k in ny} == set(range(1, 67))


@pytest.mark.slow
def test_every_verse_is_accounted_for() -> None:
    s = C.bible().stats
    assert s["verses_en"] == 31102  # grouped rows split into their verses
    union = len(set(C.chichewa_verses()) | set(C.kjv_verses()))
    kept = s["train"] + s["dev"] + s["test"] + sum(
        s[f"removed_{why}_{split}"] for why in ("leak", "near") for split in ("dev", "test"))
    assert kept + s["dropped_empty"] + s["dropped_ratio"] == union
    assert s["dropped_ratio"] > 0  # the ratio filter does find misaligned verses


@pytest.mark.slow
def test_chichewa_punctuation_is_split_from_the_next_word() -> None:
    assert C.normalise_chichewa("anga,ndi Yehova;ndipo 1:1 3,000.") == \
        "anga, ndi Yehova; ndipo 1:1 3,000."
    assert 4000 < C.bible().stats["ny_normalised"] < 6000  # verses the rule touched


@pytest.mark.slow
def test_reverse_swaps_source_and_target() -> None:
    assert C.bible(reverse=True).train[0] == C.bible().train[0][::-1]


def test_misaligned_and_empty_pairs_are_dropped_and_counted() -> None:
    stats: dict[str, int] = {}
    kept = C.filter_pairs([("a b", "c d"), ("", "x"), ("short", "x" * 40)], stats)
    assert kept == [("a b", "c d")]
    assert stats == {"dropped_empty": 1, "dropped_ratio": 1}


def _user_pairs(n: int) -> list[str]:
    return [f"mawu {i} ndi {i % 7}\tword {i} and {i % 7}" for i in range(n)]


def test_user_corpus_tsv_and_two_files_give_the_same_pairs(tmp_path) -> None:
    lines = _user_pairs(40)
    (tmp_path / "c.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "c.src").write_text("\n".join(x.split("\t")[0] for x in lines), encoding="utf-8")
    (tmp_path / "c.tgt").write_text("\n".join(x.split("\t")[1] for x in lines), encoding="utf-8")
    tsv = C.user_corpus((str(tmp_path / "c.tsv"),))
    two = C.user_corpus((str(tmp_path / "c.src"), str(tmp_path / "c.tgt")))
    assert tsv.train == two.train and (len(tsv.dev), len(tsv.test)) == (4, 4)
    assert tsv.train[0] == ("mawu 0 ndi 0", "word 0 and 0")


BAD = {
    "empty line": ("c.tsv", b"a\tb\n\nc\td\n", None, "c.tsv: line 2: empty line"),
    "non-UTF-8": ("c.tsv", b"a\tb\nc\xff\td\n", None, "c.tsv: line 2: not UTF-8"),
    "no tab": ("c.tsv", b"a\tb\nc d\n", None, "c.tsv: line 2: expected source<TAB>target"),
    "unequal lines": ("a.txt", b"a\nb\nc\n", b"x\ny\n", "b.txt: line 3: missing"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_corpus_files_exit_2_naming_file_and_line(case, tmp_path) -> None:
    name, first, second, message = BAD[case]
    (tmp_path / name).write_bytes(first)
    args = ["--bitext", str(tmp_path / name)]
    if second is not None:
        (tmp_path / "b.txt").write_bytes(second)
        args += ["--bitext", str(tmp_path / "b.txt")]
    result = tvr("run", "translation-tiny", "--out", str(tmp_path / "out"), "--dry-run", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1


def test_bpe_is_learned_on_train_only_and_cached_by_corpus_and_size(tmp_path) -> None:
    lines = _user_pairs(60)
    lines[-1] = "Ωmega\tΩmega"  # only in the test split
    (tmp_path / "c.tsv").write_text("\n".join(lines), encoding="utf-8")
    corpus = C.user_corpus((str(tmp_path / "c.tsv"),))
    tok = shared_bpe(corpus, 100, tmp_path)
    path = cache_path(tmp_path, corpus, 100)
    assert path.exists() and corpus.name in path.name and "100" in path.name
    assert "<unk>" in tok.encode("Ωmega").tokens  # never seen in train
    assert tok.decode(tok.encode("word 3 and 3").ids) == "word 3 and 3"
    mtime = path.stat().st_mtime_ns
    again = shared_bpe(corpus, 100, tmp_path)
    assert path.stat().st_mtime_ns == mtime and again.get_vocab() == tok.get_vocab()


def test_source_eos_ends_every_source_after_the_same_length_filter(tmp_path) -> None:
    """source_eos: each source ends in EOS (training batches and held-out sources alike);
    the length limit sees the sentence without it, so the same pairs are kept."""
    lines = [f"mawu {'ndi ' * (i % 9)}{i}\tword {'and ' * (i % 5)}{i}" for i in range(60)]
    (tmp_path / "c.tsv").write_text("\n".join(lines), encoding="utf-8")
    corpus = C.user_corpus((str(tmp_path / "c.tsv"),))
    tok = shared_bpe(corpus, 100, tmp_path)
    eos = tok.token_to_id("</s>")
    limit = sorted(len(e.ids) for e in tok.encode_batch([s for s, _ in corpus.train]))[-5] - 1
    plain = tokenized(tok, corpus.train, limit, source_eos=False)
    ended = tokenized(tok, corpus.train, limit, source_eos=True)
    assert 0 < plain[2] == ended[2] and ended[1] == plain[1]
    assert ended[0] == [s + [eos] for s in plain[0]]
    assert all(eos not in s for s in plain[0])
    opts = TranslateOptions(source_eos=True)
    src, _, refs = _held_out(tok, corpus.dev, opts, 3)
    assert len(src) == len(refs) == 3 and all(s[-1] == eos for s in src)


def test_hypotheses_round_trip_and_score_as_sacrebleu(tmp_path) -> None:
    hyps, refs = ["the cat sat", "a dog"], ["the cat sat down", "a dog ran"]
    write_lines(tmp_path / "h.txt", hyps)
    assert read_lines(tmp_path / "h.txt") == hyps
    assert score(hyps, refs)["bleu"] == BLEU().corpus_score(hyps, [refs]).score


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    result = tvr("run", "translation-tiny", "--out", str(out), "--device", "cpu",
                 "--tracking-uri", "none", "--only", "transformer", "--only", "source-copy",
                 "--only", "constant", "--only", "retrieval")
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.slow
def test_saved_hypotheses_rescore_to_the_reported_bleu_exactly(tiny_run) -> None:
    rows = read_results(results_path(tiny_run, "translation-tiny"))
    assert set(rows["status"]) == {"ok"}
    row = rows[rows["model"] == "transformer"].iloc[0]
    suite = tiny_run / "translation-tiny"
    copy = rows[rows["model"] == "source-copy"].iloc[0]
    for split, pairs in (("dev", C.bible().dev), ("test", C.bible().test)):
        hyps = read_lines(suite / row[f"{split}_hypotheses"])
        # the suite evaluates on 8 verses of at most 16 words a side, a seeded draw
        short = tuple((s, t) for s, t in pairs if len(s.split()) <= 16 and len(t.split()) <= 16)
        refs = [t for _, t in subsample(short, 8)]
        assert len(hyps) == row[f"{split}_sentences"] == copy[f"{split}_sentences"] == 8
        assert read_lines(suite / row[f"{split}_references"]) == refs
        bleu = BLEU()
        assert bleu.corpus_score(hyps, [refs]).score == row[f"{split}_bleu"]
        assert str(bleu.get_signature()) == row["bleu_signature"]
    assert row["train_flops"] > 0 and row["train_s"] > 0 and row["dev_ppl"] > 1
    assert row["cache_same_tokens"] == 1
    # the length penalty chosen on dev (the suite's grid), its dev BLEU the row's
    by_alpha = dict(kv.split(":") for kv in row["dev_bleu_by_alpha"].split(";"))
    assert set(by_alpha) == {"0.6", "1", "2"} and row["alpha_chosen"] in (0.6, 1.0, 2.0)
    assert float(by_alpha[f"{row['alpha_chosen']:g}"]) == round(row["dev_bleu"], 2)


@pytest.mark.slow
def test_gpu_check_headline_gives_each_trained_model_beside_the_checkouts_row(
        tiny_run, tmp_path, monkeypatch) -> None:
    import importlib.machinery
    import importlib.util

    script = Path(__file__).resolve().parents[3] / "scripts" / "gpu-check"
    loader = importlib.machinery.SourceFileLoader("gpu_check", str(script))
    check = importlib.util.module_from_spec(importlib.util.spec_from_loader("gpu_check", loader))
    loader.exec_module(check)
    rows = read_results(results_path(tiny_run, "translation-tiny"))
    ours = rows[rows["model"] == "transformer"].iloc[0]
    # the checkout's row of the same model and seed: another machine's, twice as slow
    other = rows.assign(train_s=rows["train_s"] * 2, machine="elsewhere")
    (tmp_path / "results" / "translation-tiny").mkdir(parents=True)
    other.to_csv(tmp_path / "results" / "translation-tiny" / "results.csv", index=False)
    monkeypatch.setattr(check, "REPO", tmp_path)
    table = dict(check.translation_rows(tiny_run, "translation-tiny"))
    assert table["translation-tiny points"] == "4 ok"
    assert list(table) == ["translation-tiny points", "translation-tiny: transformer seed 0"]
    line = table["translation-tiny: transformer seed 0"]
    assert line.startswith(f"dev BLEU {ours['dev_bleu']:.2f}, test BLEU {ours['test_bleu']:.2f}"
                           f", 12 updates in {ours['train_s']:.1f} s on cpu")
    assert line.endswith("(2.0x this one's time)") and "(cpu, elsewhere)" in line
    # a row of the same point on another split is not compared
    other.assign(corpus_split="0123456789").to_csv(
        tmp_path / "results" / "translation-tiny" / "results.csv", index=False)
    line = dict(check.translation_rows(tiny_run, "translation-tiny"))[
        "translation-tiny: transformer seed 0"]
    assert line.endswith("is of another split (corpus_split 0123456789): not compared")
    other.drop(columns="corpus_split").to_csv(
        tmp_path / "results" / "translation-tiny" / "results.csv", index=False)
    line = dict(check.translation_rows(tiny_run, "translation-tiny"))[
        "translation-tiny: transformer seed 0"]
    assert line.endswith("is of another split (none recorded): not compared")
    assert check.translation_rows(tmp_path / "none", "translation-tiny")[0][1].startswith("no ")


@pytest.mark.slow
def test_a_row_of_another_split_is_not_done_and_its_point_runs_again(tiny_run, tmp_path):
    import shutil

    from experiments import SUITES
    from harness.machines import this_machine
    from harness.results import finished_rows
    from harness.run.sweep import of_another_split

    shutil.copytree(tiny_run / "translation-tiny", tmp_path / "translation-tiny")
    path = results_path(tmp_path, "translation-tiny")
    rows = read_results(path)
    assert rows["corpus_split"].nunique() == 1 and rows["corpus_split"].notna().all()
    ids = dict(zip(rows["model"], rows["point_id"], strict=True))
    # the Transformer's row from an older split, the constant's from before rows named one
    rows.loc[rows["model"] == "transformer", "corpus_split"] = "0123456789"
    rows.loc[rows["model"] == "constant", "corpus_split"] = None
    rows.to_csv(path, index=False)
    points = [p for p in SUITES["translation-tiny"]() if p.point_id in set(ids.values())]
    assert len(points) == 4
    assert of_another_split(finished_rows(path, "cpu", this_machine()), points) == {
        ids["transformer"], ids["constant"]}
    dry = tvr("run", "translation-tiny", "--out", str(tmp_path), "--device", "cpu",
              "--dry-run")  # lists what the run below measures
    assert dry.exit_code == 0, dry.output
    assert {ids["transformer"], ids["constant"]} <= set(dry.output.splitlines())
    assert ids["source-copy"] not in dry.output.splitlines()
    result = tvr("run", "translation-tiny", "--out", str(tmp_path), "--device", "cpu",
                 "--tracking-uri", "none", "--only", "constant", "--only", "source-copy")
    assert result.exit_code == 0, result.output
    again = read_results(path).set_index("model")
    assert again.loc["constant", "corpus_split"] == again.loc["source-copy", "corpus_split"]
    assert again.loc["constant", "measured_at"] > rows.set_index("model").loc[
        "source-copy", "measured_at"]  # run again; the source copy was not
    assert again.loc["source-copy", "measured_at"] == rows.set_index("model").loc[
        "source-copy", "measured_at"]


def test_the_length_penalty_chosen_is_the_best_on_dev_and_the_first_on_a_tie() -> None:
    from harness.train.translation.translate_runner import choose_alpha

    refs = ["the lord spake unto moses saying", "and god saw the light"]
    hyps = {0.6: ["the lord spake", "and god"], 1.0: refs, 2.0: refs}
    assert choose_alpha(hyps, refs)[0] == 1.0  # the best; 2.0 ties it and comes later
    assert choose_alpha(hyps, refs)[1].startswith("0.6:") and ";1:100.00;2:100.00" in \
        choose_alpha(hyps, refs)[1]


@pytest.mark.slow
def test_source_copy_baseline_scores_near_zero(tiny_run) -> None:
    rows = read_results(results_path(tiny_run, "translation-tiny"))
    copy = rows[rows["model"] == "source-copy"].iloc[0]
    assert copy["test_bleu"] < 2.0 and copy["n_params"] == 0


@pytest.mark.slow
def test_baselines_are_rows_whose_hypotheses_rescore_exactly(tiny_run) -> None:
    rows = read_results(results_path(tiny_run, "translation-tiny")).set_index("model")
    suite = tiny_run / "translation-tiny"
    train_targets = {t for _, t in C.bible().train}
    for name in ("source-copy", "constant", "retrieval"):
        row = rows.loc[name]
        for split in ("dev", "test"):
            hyps = read_lines(suite / row[f"{split}_hypotheses"])
            refs = read_lines(suite / row[f"{split}_references"])
            assert refs == read_lines(suite / rows.loc["transformer", f"{split}_references"])
            assert BLEU().corpus_score(hyps, [refs]).score == row[f"{split}_bleu"]
            if name == "constant":
                assert set(hyps) == {row["constant_sentence"]}
            if name == "retrieval":
                assert set(hyps) <= train_targets


def test_the_constant_is_the_best_candidate_by_sacrebleu() -> None:
    refs = ["the cat sat on the mat", "a dog sat on the mat", "the mat was red"]
    candidates = ["the mat", "a dog sat on the mat today", "the cat sat on the mat", "red"]
    best = best_constant(candidates, refs)
    bleu = {c: BLEU().corpus_score([c] * 3, [refs]).score for c in candidates}
    assert bleu[best] == max(bleu.values())


def test_tfidf_nearest_is_the_highest_cosine() -> None:
    docs = ["mawu a Yehova", "ndipo anati", "Yehova anati kwa Mose", "mwana wamwamuna"]
    index = TfIdf(docs)
    dense = index.docs.toarray()
    q = index.vectors(["anati kwa Mose"]).toarray()[0]
    assert index.nearest(["anati kwa Mose"]) == [int(np.argmax(dense @ q))] == [2]
    np.testing.assert_allclose(np.linalg.norm(dense, axis=1), 1.0)


# cleaned sentences as the corpus has them: words of a few letters (some outside ASCII), one
# space between words
_WORDS = st.text(alphabet="abcAB.,'\u0175\u00e9\u4e2d", min_size=1, max_size=6)
_SENTENCES = st.lists(_WORDS, min_size=1, max_size=5).map(" ".join)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, derandomize=True)
@given(docs=st.lists(_SENTENCES, min_size=1, max_size=8),
       queries=st.lists(st.one_of(_SENTENCES, st.just("")), min_size=1, max_size=4))
def test_tfidf_is_scikit_learns_char_tfidf_of_the_padded_text(docs, queries) -> None:
    """The vectors are scikit-learn's TfidfVectorizer(analyzer="char", ngram_range=(1, 4),
    sublinear_tf=True) of " text ": the same cosines between documents and from queries
    (characters the documents lack included), hence the same nearest document."""
    text = pytest.importorskip("sklearn.feature_extraction.text", reason="scikit-learn "
                               "(MLflow's dependency) is not installed")
    reference = text.TfidfVectorizer(analyzer="char", ngram_range=(1, 4), sublinear_tf=True,
                                     preprocessor=lambda t: f" {t.lower()} ")
    theirs = reference.fit_transform(docs)
    index = TfIdf(docs)
    np.testing.assert_allclose((index.docs @ index.docs.T).toarray(),
                               (theirs @ theirs.T).toarray(), atol=1e-12)
    sims = (reference.transform(queries) @ theirs.T).toarray()
    np.testing.assert_allclose((index.vectors(queries) @ index.docs.T).toarray(), sims,
                               atol=1e-12)
    assert index.nearest(queries) == sims.argmax(axis=1).tolist()


def test_the_cpu_suite_takes_its_recipes_from_its_search() -> None:
    from experiments import RETIRED, SEARCHES
    from experiments.translation import CPU_MODELS, TABLE2_MODELS, translation_cpu_tuned

    search, final = SEARCHES["translation-cpu-tune"](), translation_cpu_tuned()
    trained = [p for p in final if p.runner == "translate"]
    assert {p.options.recipe for p in trained} == {"translation-cpu-tune"}
    assert {b.subject for b in search.base} == set(CPU_MODELS)
    assert {p.subject for p in trained} == set(TABLE2_MODELS) < set(CPU_MODELS)
    assert all(sum(p.subject == m for p in trained) == 3 for m in TABLE2_MODELS)
    assert {p.runner for p in final} - {"translate"} == {"source-copy", "constant", "retrieval"}
    # a trial is trained as a final run is: the same budget, evaluations and early stopping
    for b in (b for b in search.base if b.subject in TABLE2_MODELS):
        final_opts = next(p.options for p in trained if p.subject == b.subject)
        for key in ("budget_flops", "eval_flops", "patience", "steps", "bpe", "max_tokens"):
            assert getattr(b.options, key) == getattr(final_opts, key), key
    assert search.space["transformer"]["peak_lr"] == ("log", 1e-4, 1e-2)
    from harness.run.tune import distributions

    for model, known in search.known.items():  # a known recipe is a point of the space
        dists = distributions(search.space[model])
        for r in known:
            assert set(r) == set(dists)
            assert all(dists[k]._contains(dists[k].to_internal_repr(v)) for k, v in r.items())
    assert {"norm", "attn_dropout"} <= set(search.space["transformer"])
    r = CliRunner().invoke(cli, ["run", "translation-cpu", "--dry-run"])
    assert r.exit_code == 2 and "tvr tune translation-cpu-tune" in r.output
    assert set(RETIRED) == {"translation-cpu", "translation-cpu-recipes"}


@pytest.mark.slow
def test_report_has_table2_and_the_bleu_cost_figure(tiny_run) -> None:
    from harness.report.document import write_report

    text = write_report(tiny_run).read_text()
    assert "### Table 2: BLEU against training cost" in text and "bleu-vs-cost" in text
    table = (tiny_run / "translation-tiny" / "table2.csv").read_text()
    assert "transformer" in table and "source-copy" in table
    assert (tiny_run / "translation-tiny" / "bleu-vs-cost.png").stat().st_size > 0


def test_table3_lays_out_the_variations_like_the_paper() -> None:
    """Rows as the sweep would store them (point fields and columns, status ok): one table
    row per variation, the paper's columns in its order, d_v = d_model / h, and d_k too but
    in rows B, which set a smaller d_k at the base h."""
    import pandas as pd

    import experiments
    import models
    from harness.report.translation import TABLE3_COLUMNS, TABLE3_MEASURED, table3

    pts = experiments.points("translation-table3")
    assert {p.study for p in pts} == {"table3-base", "table3-A", "table3-B", "table3-C",
                                      "table3-D", "table3-E"}
    for p in pts:  # what the runner builds: each variation is a valid model config
        models.model_config(p.subject, **dict(p.config), d_model=p.d_model)
    df = pd.DataFrame([p.fields() | p.columns() | {"status": "ok", "point_id": p.point_id}
                       for p in pts])
    table = table3(df)
    assert len(table) == len(pts)
    # P_drop_attn only where rows record attn_dropout (these leave it at dropout's value)
    assert list(table.columns) == ["variation", *(c for c in TABLE3_COLUMNS.values() if c not in
                                                 ("P_drop_attn", "params", *TABLE3_MEASURED))]
    heads = table[table["variation"] == "A"]
    assert (heads["d_k"] * heads["h"] == heads["d_model"]).all()
    assert (heads["d_v"] == heads["d_k"]).all()
    assert set(heads["h"]) == {1, 2, 8, 16}
    base = table[table["variation"] == "base"].iloc[0]
    keys = table[table["variation"] == "B"]
    assert (base["h"], base["d_k"], base["d_v"]) == (4, 64, 64)
    assert sorted(keys["d_k"]) == [16, 32]
    assert (keys["h"] == base["h"]).all() and (keys["d_v"] == base["d_v"]).all()
    assert (keys["d_model"] == base["d_model"]).all()
    assert set(table.loc[table["variation"] == "D", "eps_ls"]) == {0.0, 0.1, 0.2}


def test_table2_puts_baselines_first_and_summarises_seeds() -> None:
    """Rows of translation-cpu as stored (made-up numbers): one table row per model, the
    three baselines first, means and the test BLEU's standard deviation over seeds, the
    seeds that reached the target and converged, throughput derived from the totals."""
    from experiments.translation import translation_cpu_tuned
    from harness.report.translation import table2

    rows = []
    for i, p in enumerate(translation_cpu_tuned()[::-1]):
        trained = p.runner == "translate"
        rows.append(p.fields() | p.columns() | {
            "status": "ok", "point_id": p.point_id, "device": "cpu", "test_bleu": 10.0 + i,
            "train_flops": 1e12 if trained else 0, "train_s": 100.0 if trained else 0.0,
            "train_tokens": 5e5 if trained else None, "converged": int(i % 2) if trained
            else None, "flops_to_bleu": 5e11 if trained and i % 3 else None})
    table = table2(pd.DataFrame(rows)).set_index("model")
    assert list(table.index[:3]) == ["source-copy", "constant", "retrieval"]
    assert len(table) == 6 and (table.loc["transformer", "seeds"] == 3)
    gru = [r for r in rows if r["model"] == "gru-attention"]
    bleu = pd.Series([r["test_bleu"] for r in gru])
    assert table.loc["gru-attention", "test_bleu"] == bleu.mean()
    assert table.loc["gru-attention", "test_bleu_sd"] == pytest.approx(bleu.std())
    assert table.loc["gru-attention", "converged"] == sum(r["converged"] for r in gru)
    assert table.loc["gru-attention", "reached"] == sum(r["flops_to_bleu"] is not None for r in gru)
    assert table.loc["gru-attention", "train_tokens_per_s"] == 5e3
    assert table.loc["gru-attention", "train_flops_per_s"] == 1e10
    assert pd.isna(table.loc["retrieval", "converged"])


def test_table2_adds_the_toolkits_rows_trained_on_the_same_data_only(tmp_path) -> None:
    """scripts/anchor's rows join Table 2 when their split digest, BPE size and length limit
    are those of the suite's rows (digests that look like numbers stay text), named with
    the toolkit and its version; a row on another split, another BPE or a failed one does
    not."""
    from harness.report.translation import table2

    ours = [{"suite": "s", "study": "table2", "runner": "translate", "model": "transformer",
             "status": "ok", "point_id": f"t{s}", "seed": s, "device": "cpu", "test_bleu": 20.0 + s,
             "corpus_split": "1234567890", "vocab": 4000, "max_tokens": 80} for s in range(3)]
    ours.append({"suite": "s", "study": "table2", "runner": "retrieval", "model": "retrieval",
                 "status": "ok", "point_id": "r", "seed": 0, "device": "cpu", "test_bleu": 9.0})
    theirs = [{"suite": "translation-anchor", "runner": "joeynmt", "model": "joeynmt-transformer",
               "status": status, "point_id": f"anchor-{split}-{bpe}-{status}", "seed": 42,
               "device": "cpu", "test_bleu": bleu,
               "split": split, "bpe": bpe, "max_tokens": 80, "toolkit": "joeynmt",
               "toolkit_version": "2.3.0"}
              for status, bleu, split, bpe in (("ok", 21.5, "1234567890", 4000),
                                               ("ok", 30.0, "abcdef0123", 4000),
                                               ("ok", 31.0, "1234567890", 2000),
                                               ("error", 32.0, "1234567890", 4000))]
    theirs.append(theirs[0] | {"point_id": "smoke", "test_bleu": 0.5, "train_budget_s": 600})
    theirs[0]["train_budget_s"] = 3900  # the longest run of a config and seed is its row
    theirs.append(theirs[0] | {"point_id": "seed-1", "seed": 1, "test_bleu": 22.5})
    for name, frame in (("ours", ours), ("anchor", theirs)):  # as read back from results.csv
        pd.DataFrame(frame).to_csv(tmp_path / f"{name}.csv", index=False)
    ours_read, toolkit = (read_results(tmp_path / f"{n}.csv") for n in ("ours", "anchor"))
    table = table2(ours_read, toolkit).set_index("model")
    assert list(table.index) == ["retrieval", "transformer",
                                 "joeynmt-transformer (joeynmt 2.3.0)"]
    assert table.loc["joeynmt-transformer (joeynmt 2.3.0)", "test_bleu"] == 22.0
    assert table.loc["joeynmt-transformer (joeynmt 2.3.0)", "seeds"] == 2
    assert table.loc["transformer", "seeds"] == 3
    assert table2(ours_read).equals(table2(ours_read, pd.DataFrame()))
    # a suite whose Table 2 rows are baselines only (Table 3's), its data columns left empty
    # by them and filled by its variations: no toolkit row matches, and nothing fails
    only = read_results(tmp_path / "ours.csv")
    only = only[only["runner"] == "retrieval"].assign(
        corpus_split=np.nan, vocab=np.nan, max_tokens=np.nan)
    assert list(table2(only, toolkit)["model"]) == ["retrieval"]


def test_table2_shows_a_models_last_recipe_only(tmp_path) -> None:
    """A suite run again after its search found a better recipe holds the old recipe's rows
    beside the new ones: Table 2 and the README's choice of suite read the last recipe's."""
    from harness.report.readme_translation import table2_suite
    from harness.report.translation import table2

    def row(model: str, seed: int, lr: float, day: int, bleu: float) -> dict:
        return {"suite": "translation-cpu-tuned", "study": "table2", "runner": "translate",
                "model": model, "status": "ok", "point_id": f"{model}-lr{lr}-s{seed}",
                "seed": seed, "device": "cpu", "peak_lr": lr, "dropout": 0.1,
                "test_bleu": bleu, "measured_at": f"2026-12-0{day}T00:00:00+00:00"}

    rows = [row("lstm", s, 3e-3, 1, 15.0) for s in range(3)]
    rows += [row("transformer", s, 1e-3, 2, 20.0 + s) for s in range(2)]  # the new recipe
    rows += [row("transformer", s, 5e-3, 1, 5.0) for s in range(3)]  # written first
    (tmp_path / "translation-cpu-tuned").mkdir()
    pd.DataFrame(rows).to_csv(tmp_path / "translation-cpu-tuned" / "results.csv", index=False)
    table = table2(read_results(tmp_path / "translation-cpu-tuned" / "results.csv"))
    table = table.set_index("model")
    assert table.loc["transformer", "seeds"] == 2
    assert table.loc["transformer", "test_bleu"] == 20.5 and table.loc["lstm", "seeds"] == 3
    (tmp_path / "translation-cpu").mkdir()  # every model with 3 seeds of one recipe
    pd.DataFrame([row(m, s, 3e-3, 1, 9.0) | {"suite": "translation-cpu"}
                  for m in ("lstm", "transformer") for s in range(3)]).to_csv(
        tmp_path / "translation-cpu" / "results.csv", index=False)
    assert table2_suite(tmp_path) == "translation-cpu"  # the new recipe has 2 seeds only
    from harness.report.translation import recipes

    tuned = read_results(tmp_path / "translation-cpu-tuned" / "results.csv")
    assert not recipes(tuned.assign(dev_ppl=9.0)).empty  # rows naming no search: a sweep
    assert recipes(tuned.assign(dev_ppl=9.0, recipe="translation-cpu-tune")).empty


def test_rows_of_other_options_are_another_recipe() -> None:
    """Points of one searched recipe run again with other options (a grid of length
    penalties: another point id, the same recipe columns) are not averaged with the old."""
    from harness.report.translation import last_recipe

    rows = pd.DataFrame([{"model": "transformer", "seed": s, "peak_lr": 1e-3,
                          "point_id": f"table2-translate-transformer{opts}-n0-d128-b64-s{s}",
                          "measured_at": f"2026-12-0{day}T00:00:00+00:00"}
                         for opts, day, seeds in (("", 1, 3), ("-alphas=0.0;0.2", 2, 2))
                         for s in range(seeds)])
    kept = last_recipe(rows)
    assert len(kept) == 2 and kept["point_id"].str.contains("alphas").all()


def test_the_recipe_table_marks_each_models_lowest_dev_perplexity() -> None:
    """The committed grid sweep's table (translation-cpu-recipes, retired): `chosen` marks
    the row of lowest dev perplexity per model, the recipe translation-cpu took."""
    from harness.report.translation import recipes

    rows = read_results(COMMITTED / "translation-cpu-recipes" / "results.csv")
    table = recipes(rows)
    assert len(table) == len(rows) and table["chosen"].sum() == rows["model"].nunique()
    for model, chosen in table[table["chosen"]].set_index("model").iterrows():
        assert chosen["dev_ppl"] == rows.loc[rows["model"] == model, "dev_ppl"].min()


COMMITTED = Path(__file__).resolve().parents[3] / "results"
# sacrebleu's metrics by kind and references: the suites' reference files hold the same few
# dev and test sets (8 distinct among 165 files), whose statistics are then extracted once
_METRICS: dict[tuple[str, tuple[str, ...]], Any] = {}


@pytest.mark.slow
@pytest.mark.parametrize("suite", sorted(p.parent.name for p in COMMITTED.glob(
    "translation*/results.csv")))
def test_committed_hypotheses_rescore_to_their_rows_exactly(suite: str) -> None:
    """Every committed translation row with saved hypotheses (models and baselines): sacrebleu
    on the files gives the row's BLEU (dev and test) and test chrF."""
    from sacrebleu.metrics import CHRF

    rows = read_results(COMMITTED / suite / "results.csv")

    def score(kind: type[BLEU] | type[CHRF], hyps: list[str], refs_file: str) -> float:
        """sacrebleu's score, the metric built once per set of references, in whichever
        suite's file (sacrebleu then extracts the references' statistics once, not once per
        row; the scores are the same)."""
        refs = tuple(read_lines(COMMITTED / suite / refs_file))
        assert len(hyps) == len(refs)
        if (kind.__name__, refs) not in _METRICS:
            _METRICS[kind.__name__, refs] = kind(references=[list(refs)])
        return _METRICS[kind.__name__, refs].corpus_score(hyps, None).score

    checked = 0
    for _, row in rows.iterrows():
        for split in ("dev", "test"):
            saved = row.get(f"{split}_hypotheses")
            if not isinstance(saved, str) or not saved:
                continue
            hyps = read_lines(COMMITTED / suite / saved)
            refs = row[f"{split}_references"]
            assert len(hyps) == row[f"{split}_sentences"]
            assert score(BLEU, hyps, refs) == pytest.approx(row[f"{split}_bleu"], abs=1e-9), \
                (saved, split)
            if split == "test" and pd.notna(row.get("test_chrf")):  # chrF: slow, test only
                assert score(CHRF, hyps, refs) == pytest.approx(row[f"{split}_chrf"],
                                                                abs=1e-9), saved
            checked += 1
    assert checked or "test_hypotheses" not in rows, suite


def test_degenerate_repetition_and_length_are_measured() -> None:
    looping = "The children of the children of the children of Israel"
    assert repeats(looping) and not repeats("The children of Israel went out of Egypt")
    s = score([looping, "And he said unto them"], ["The children of Israel", "And he said"])
    assert s["repeat_rate"] == 0.5
    assert s["len_ratio"] == pytest.approx((10 + 5) / (4 + 3))


def test_the_anchor_section_shows_the_crosscheck_when_measured(tmp_path) -> None:
    """REPORT's toolkit section adds the cross-check (the toolkit's weights decoded by our
    code) from crosscheck.json, and leaves it out where none was measured."""
    import json

    from harness.report.document import anchor_section

    rows = pd.DataFrame([{"model": "joeynmt-transformer", "dev_bleu": 13.6}])
    (tmp_path / "translation-anchor").mkdir()
    assert not any("our Transformer" in line
                   for line in anchor_section(tmp_path, "translation-anchor", rows))
    scores = {k: {"bleu": b, "chrf": 35.0, "len_ratio": 1.05, "repeat_rate": 0.08}
              for k, b in (("joeynmt_own_beam", 13.62), ("beam4", 13.61), ("greedy", 11.8))}
    folder = tmp_path / "translation-anchor" / "crosscheck"
    folder.mkdir()
    (folder / "run-a.json").write_text(json.dumps(
        {"checkpoint": "c/model-1/3497.ckpt", "step": 3497, "logprob_max_abs_diff": 1.4e-5,
         "check_positions": 335, "dev_ppl": 27.28, "dev_sentences": 1191, **scores}))
    (folder / "run-b.json").write_text(json.dumps(
        {"checkpoint": "d/model-0/3500.ckpt", "step": 3500, "logprob_max_abs_diff": 2e-5,
         "check_positions": 335, "dev_sentences": 1191,
         "beam4_our_rule": {"bleu": 14.2, "alpha": 1.2}}))
    text = "\n".join(anchor_section(tmp_path, "translation-anchor", rows))
    assert "within 1.4e-05" in text and "dev perplexity 27.28" in text
    assert "(update 3500)" in text and "greedy_no_src_eos" not in text
    assert re.search(r"\| run-a +\| beam4 ", text) and "13.61" in text
    assert re.search(r"\| run-b +\| beam4_our_rule +\| +1.2 +\| +14.2 ", text)
    assert (tmp_path / "translation-anchor" / "crosscheck.csv").is_file()
    for broken in ('{"checkpoint": "c", "st', '{"step": 1}', '[1, 2]',
                   '{"checkpoint": "c", "step": 1, "logprob_max_abs_diff": null}',
                   '{"step": 1, "beam4": {"bleu": 9.5, "alpha": 0.6}}'):
        (folder / "run-b.json").write_text(broken)
        lines = anchor_section(tmp_path, "translation-anchor", rows)
        assert any("run-b.json could not be read" in line for line in lines), broken
        assert not any(re.search(r"\| run-b ", line) for line in lines), broken  # nor shown
        assert any("13.6" in line for line in lines)  # the toolkit's own table stays
        assert any(re.search(r"\| run-a +\| beam4 ", line) for line in lines)  # still read
