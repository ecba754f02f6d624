"""The networks: the paper's Transformer and LSTM/GRU behind one interface."""

from models.registry import (
    PRESETS,
    build,
    config_keys,
    describe,
    mixer,
    mixer_kinds,
    model_config,
    names,
)

__all__ = ["PRESETS", "build", "config_keys", "describe", "mixer", "mixer_kinds",
           "model_config", "names"]
