"""Translation on a real parallel corpus: the corpus and its splits (bitext.py), the shared
BPE vocabulary (bpe.py), batches (data.py), BLEU/chrF scoring (scoring.py) and the
"translate" runner that trains, decodes and scores one model (translate_runner.py)."""
