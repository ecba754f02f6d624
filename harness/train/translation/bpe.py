"""The shared source/target BPE vocabulary (the paper's shared subword vocabulary), learned
with the `tokenizers` package on the training split only.

Words are split at spaces with the Metaspace pre-tokenizer (a space becomes part of the
following word, as in SentencePiece), so decoding the ids gives back the whitespace-
normalised text exactly: BLEU and chrF are computed on that detokenised text. The learned
file is cached under <out>/bpe/ keyed by corpus, training pairs and vocabulary size, written
atomically under a file lock, so concurrent points share one file and a killed run leaves none
half-written.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from filelock import FileLock
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from harness.train.translation.bitext import Corpus

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
SPECIALS = (PAD, UNK, BOS, EOS)  # ids 0..3


def _train(corpus: Corpus, vocab_size: int) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS),
                                  show_progress=False)
    texts = [s for pair in corpus.train for s in pair]  # train only: both sides, one vocab
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    return tok


def cache_path(out_dir: Path, corpus: Corpus, vocab_size: int) -> Path:
    """Keyed by corpus name, a digest of its training pairs (a changed split or
    normalisation learns a new file) and vocabulary size."""
    digest = hashlib.sha256("\n".join(f"{s}\t{t}" for s, t in corpus.train).encode())
    return out_dir / "bpe" / f"{corpus.name}-{digest.hexdigest()[:10]}-bpe{vocab_size}.json"


def shared_bpe(corpus: Corpus, vocab_size: int, out_dir: Path | None) -> Tokenizer:
    """The corpus's BPE tokenizer of `vocab_size`, from the cache or learned and cached."""
    if vocab_size < 64:
        raise ValueError(f"invalid bpe vocabulary size {vocab_size!r}; must be >= 64")
    if out_dir is None:
        return _train(corpus, vocab_size)
    path = cache_path(out_dir, corpus, vocab_size)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path.parent / f".{path.name}.lock")):
        if not path.exists():
            tok = _train(corpus, vocab_size)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            os.close(fd)
            try:
                tok.save(tmp)
                os.replace(tmp, path)
            finally:
                Path(tmp).unlink(missing_ok=True)
        return Tokenizer.from_file(str(path))


def special_ids(tok: Tokenizer) -> dict[str, int]:
    return {name: tok.token_to_id(name) for name in SPECIALS}
