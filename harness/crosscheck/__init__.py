"""The third-party cross-check: JoeyNMT, another toolkit's Transformer, trained and scored on
our split and subwords (anchor.py, `scripts/anchor`), our searched recipe in its terms
(anchor_recipe.py) and its trained weights run by our model and decoding (anchor_weights.py).
It uses harness.train.translation (corpus, BPE, scoring, decoding) and nothing in the harness
uses it: only scripts/anchor and `python -m harness.crosscheck.anchor_weights` run it."""
