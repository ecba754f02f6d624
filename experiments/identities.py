"""Two identities the paper states, measured exactly: self-attention without positions is
permutation-equivariant (an LSTM beside it is the control the check must catch), and
PE[pos + k] is a linear function of PE[pos] for the sinusoidal table."""

from __future__ import annotations

from experiments.spec import Point, config


def identities() -> list[Point]:
    """Permutation equivariance of self-attention (an LSTM beside it, which is not) and the
    linear shift of sinusoidal positions, at n = 64, d = 64, 3 seeds (seconds)."""
    return [Point("identities", "identities", mixer, 64, 64, 1, seed=s,
                  config=config({"n_heads": 4} if mixer == "self-attention" else {}))
            for mixer in ("self-attention", "lstm") for s in range(3)]
