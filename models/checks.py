"""Validation shared by the configs and the blocks: a bad value raises ValueError naming itself
and, where the valid values are few, listing them."""

from __future__ import annotations


def check_choice(what: str, value: object, allowed: tuple) -> None:
    """Raise ValueError naming the bad value and the valid ones."""
    if value not in allowed:
        raise ValueError(f"invalid {what} {value!r}; valid: {', '.join(map(repr, allowed))}")


def check_positive(cfg: object, *names: str) -> None:
    """Each named field of cfg is a positive int (bool, though an int, is refused)."""
    for name in names:
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"invalid {name} {value!r}; must be a positive integer")


def check_dropout(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"invalid dropout {value!r}; must be a number in [0, 1)")


def check_flag(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"invalid {name} {value!r}; must be True or False")


def check_heads(d_model: int, n_heads: int) -> None:
    """d_model splits evenly into n_heads heads; the message lists the head counts that do."""
    if d_model % n_heads:
        valid = ", ".join(str(h) for h in range(1, d_model + 1) if d_model % h == 0)
        raise ValueError(
            f"invalid n_heads {n_heads}: d_model={d_model} is not divisible by it; valid: {valid}"
        )
