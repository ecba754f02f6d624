"""TF-IDF over character n-grams, for the retrieval baseline (nearest training source)."""

from __future__ import annotations

import numpy as np
from scipy import sparse

CHAR_NGRAMS = (1, 2, 3, 4)  # character n-gram sizes of the vectors


class TfIdf:
    """TF-IDF vectors of character n-grams (each text lowercased and padded with a space),
    sublinear term frequency 1 + log tf, smoothed idf log((1 + N) / (1 + df)) + 1, rows of
    unit length: scikit-learn's TfidfVectorizer(analyzer="char", sublinear_tf=True) on the
    padded texts (the tests compare the two). Not scikit-learn itself: it counts n-grams
    one by one in Python, 15 s for the 27,760 training verses; numpy counts them all at
    once, each n-gram a number (its characters' ranks in the alphabet, plus one, as digits
    in base `len(alphabet) + 1`)."""

    def __init__(self, documents: list[str]) -> None:
        codes, owner = self._codes(documents)
        self.alphabet = np.unique(codes)
        keys, rows = self._grams(codes, owner)
        self.vocab, cols = np.unique(keys, return_inverse=True)
        m = self._matrix(rows, cols, len(documents))
        df = np.bincount(m.indices, minlength=len(self.vocab))
        self.idf = np.log((1 + len(documents)) / (1 + df)) + 1.0
        self.docs = self._weigh(m)

    @staticmethod
    def _codes(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The padded, lowercased texts' characters as code points, one array, and the text
        each character belongs to."""
        padded = [f" {t.lower()} " for t in texts]
        codes = np.frombuffer("".join(padded).encode("utf-32-le"), dtype=np.uint32)
        owner = np.repeat(np.arange(len(padded)), [len(t) for t in padded])
        return codes, owner

    def _grams(self, codes: np.ndarray, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every n-gram of every text as one integer key, and the text it occurs in. Keys of
        different n never collide: a character's digit is 1 + its rank in the alphabet, so
        no key has a zero digit. N-grams with a character outside the alphabet (a query's)
        are left out: no vocabulary n-gram holds it."""
        base = len(self.alphabet) + 1
        if base ** max(CHAR_NGRAMS) >= 2 ** 63:
            raise ValueError(f"{base - 1} distinct characters: too many for int64 n-gram keys")
        rank, known = _lookup(self.alphabet, codes)
        digit = np.where(known, rank + 1, 0).astype(np.int64)
        unknown = np.concatenate([[0], np.cumsum(~known)])  # unknown characters before i
        keys, rows = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        for n in CHAR_NGRAMS:
            span = len(codes) - n + 1
            if span <= 0:
                continue
            whole = owner[:span] == owner[n - 1:]  # the n characters are of one text
            whole &= unknown[n: n + span] == unknown[:span]  # and all in the alphabet
            key = np.zeros(span, dtype=np.int64)
            for j in range(n):
                key = key * base + digit[j: j + span]
            keys.append(key[whole])
            rows.append(owner[:span][whole])
        return np.concatenate(keys), np.concatenate(rows)

    def _matrix(self, rows: np.ndarray, cols: np.ndarray, n_rows: int) -> sparse.csr_matrix:
        """Counts of each (text, vocabulary n-gram) pair."""
        m = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)),
                              shape=(n_rows, len(self.vocab)))
        m.sum_duplicates()
        return m

    def _weigh(self, m: sparse.csr_matrix) -> sparse.csr_matrix:
        m = m.copy()
        m.data = 1.0 + np.log(m.data)
        m = m @ sparse.diags(self.idf)
        norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1))).ravel()
        return sparse.diags(1.0 / np.maximum(norms, 1e-12)) @ m

    def vectors(self, texts: list[str]) -> sparse.csr_matrix:
        """The TF-IDF rows of `texts` (n-grams outside the vocabulary left out)."""
        keys, rows = self._grams(*self._codes(texts))
        cols, found = _lookup(self.vocab, keys)
        return self._weigh(self._matrix(rows[found], cols[found], len(texts))).tocsr()

    def nearest(self, queries: list[str], chunk: int = 512) -> list[int]:
        """The index of each query's most similar document (the first on a tie)."""
        return self.most_similar(queries, chunk)[0]

    def most_similar(self, queries: list[str], chunk: int = 512
                     ) -> tuple[list[int], list[float]]:
        """Each query's most similar document (the first on a tie) and their cosine."""
        q = self.vectors(queries)
        at: list[int] = []
        cos: list[float] = []
        for k in range(0, q.shape[0], chunk):
            sims = (q[k: k + chunk] @ self.docs.T).toarray()
            at += sims.argmax(axis=1).tolist()
            cos += sims.max(axis=1, initial=0.0).tolist()
        return at, cos


def _lookup(table: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each of `values` is in the sorted `table`, and whether it is there at all."""
    at = np.searchsorted(table, values)
    if not len(table):
        return at, np.zeros(len(values), dtype=bool)
    return at, (at < len(table)) & (table[np.minimum(at, len(table) - 1)] == values)
