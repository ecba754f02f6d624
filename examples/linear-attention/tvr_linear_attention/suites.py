"""A suite shipped by the plugin (entry point group tvr.suites): a few seconds' check that the
plugin's mixers run in the harness, in both forms, beside self-attention and the LSTM."""

from __future__ import annotations

from experiments.spec import Point, config, product

MIXERS = {"linear-attention": {"n_heads": 2}, "linear-attention-rnn": {"n_heads": 2},
          "self-attention": {"n_heads": 2}, "lstm": {}}


def smoke() -> list[Point]:
    """Linear attention (parallel and recurrent forms), self-attention and the LSTM at toy
    sizes: the harness end to end through the plugin's entry points."""
    return [Point("linear-attention-smoke", "layer", p["mixer"], p["n"], 16, 2,
                  config=config(MIXERS[p["mixer"]]))
            for p in product(mixer=list(MIXERS), n=[16, 32])]
