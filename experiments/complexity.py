"""Per-layer cost of self-attention, LSTM and GRU over grids of sequence length n and width d.

Every point measures one mixer on x[B, n, d]: forward and forward+backward time, counted
FLOPs, activation bytes. Dropout is 0 (dropout > 0 moves attention to a slower kernel).
"""

from __future__ import annotations

from experiments.spec import Point, batch_for, powers_of_two, product

MIXERS = ("self-attention", "lstm", "gru")


def _grid(suite: str, ns: list[int], ds: list[int], tokens: int,
          mixers: tuple[str, ...] = MIXERS) -> list[Point]:
    return [
        Point(suite, "layer", p["mixer"], p["n"], p["d"], batch_for(p["n"], tokens))
        for p in product(d=ds, mixer=mixers, n=ns)
    ]


def smoke() -> list[Point]:
    """A handful of tiny points: the tests' end-to-end run (well under a minute on 2 cores)."""
    return _grid("smoke", [16, 64], [32], tokens=256)


def quick() -> list[Point]:
    """What `make run` runs: the complexity grid trimmed to a few minutes on 2 cores, wide
    enough in n to cross the closed-form crossovers (n* = 2d for the whole attention layer
    against an LSTM, 4d for the attention core alone) for each d; minGRU (log-space scan,
    later work) is there for its crossover against attention."""
    return _grid("quick", powers_of_two(32, 1024), [64, 128, 256], tokens=4096,
                 mixers=(*MIXERS, "attention-core", "min-gru"))


def complexity() -> list[Point]:
    """The full grid: n = 32..4096 and d = 32..1024, powers of two (an hour or more on CPU)."""
    return _grid("complexity", powers_of_two(32, 4096), powers_of_two(32, 1024), tokens=8192,
                 mixers=(*MIXERS, "attention-core"))
