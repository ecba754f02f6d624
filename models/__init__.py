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
    once the registry has imported it."""
    registry = importlib.import_module("models.registry")
    if name in __all__:
        return getattr(registry, name)
    if name in globals():  # a submodule the registry imported
        return globals()[name]
    raise AttributeError(f"module 'models' has no attribute {name!r}")
