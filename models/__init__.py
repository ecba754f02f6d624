"""The networks: the paper's Transformer and LSTM/GRU behind one interface.

The registry (and with it torch and every network) loads on first use of a name below, so
`models.catalog`, the declarations every stage reads, imports without them."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["PRESETS", "build", "config_keys", "declared", "describe", "mixer", "mixer_config",
           "mixer_kinds", "model_config", "names", "provider", "register_mixer",
           "register_model"]


def __getattr__(name: str) -> Any:
    """models.build, models.mixer, ... from models.registry; a submodule (models.blocks)
    imported on first use."""
    if name in __all__:
        return getattr(importlib.import_module("models.registry"), name)
    try:
        return importlib.import_module(f"models.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"models.{name}":
            raise
        raise AttributeError(f"module 'models' has no attribute {name!r}") from None
