"""TF-IDF over character n-grams, for the retrieval baseline (nearest training source)."""

from __future__ import annotations

from collections import Counter

import numpy as np
from scipy import sparse

CHAR_NGRAMS = (1, 2, 3, 4)  # character n-gram sizes of the vectors


class TfIdf:
    """TF-IDF vectors of character n-grams (each text lowercased and padded with a space),
    sublinear term frequency 1 + log tf, smoothed idf log((1 + N) / (1 + df)) + 1, rows of
    unit length: scikit-learn's TfidfVectorizer(analyzer="char", sublinear_tf=True) in a
    few lines of scipy, so the harness needs no scikit-learn for one baseline."""

    def __init__(self, documents: list[str]) -> None:
        self.vocab: dict[str, int] = {}
        counts = [self._grams(d, grow=True) for d in documents]
        m = self._matrix(counts)
        df = np.bincount(m.indices, minlength=len(self.vocab))
        self.idf = np.log((1 + len(documents)) / (1 + df)) + 1.0
        self.docs = self._weigh(m)

    def _grams(self, text: str, grow: bool = False) -> Counter:
        text = f" {text.lower()} "
        grams = Counter(text[i: i + n] for n in CHAR_NGRAMS for i in range(len(text) - n + 1))
        if grow:
            for g in grams:
                self.vocab.setdefault(g, len(self.vocab))
        return Counter({self.vocab[g]: c for g, c in grams.items() if g in self.vocab})

    def _matrix(self, counts: list[Counter]) -> sparse.csr_matrix:
        rows = np.repeat(np.arange(len(counts)), [len(c) for c in counts])
        cols = np.fromiter((j for c in counts for j in c), dtype=np.int64, count=len(rows))
        vals = np.fromiter((v for c in counts for v in c.values()), dtype=np.float64,
                           count=len(rows))
        return sparse.csr_matrix((vals, (rows, cols)), shape=(len(counts), len(self.vocab)))

    def _weigh(self, m: sparse.csr_matrix) -> sparse.csr_matrix:
        m = m.copy()
        m.data = 1.0 + np.log(m.data)
        m = m @ sparse.diags(self.idf)
        norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1))).ravel()
        return sparse.diags(1.0 / np.maximum(norms, 1e-12)) @ m

    def nearest(self, queries: list[str], chunk: int = 512) -> list[int]:
        """The index of each query's most similar document (the first on a tie)."""
        q = self._weigh(self._matrix([self._grams(t) for t in queries])).tocsr()
        out: list[int] = []
        for k in range(0, q.shape[0], chunk):
            sims = (q[k: k + chunk] @ self.docs.T).toarray()
            out += sims.argmax(axis=1).tolist()
        return out
