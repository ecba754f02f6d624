"""The networks: the paper's Transformer and LSTM/GRU behind one interface."""

from models.registry import (
    PRESETS,
    build,
    config_keys,
    describe,
    mixer,
    mixer_config,
    mixer_kinds,
    model_config,
    names,
    provider,
    register_mixer,
    register_model,
)

__all__ = ["PRESETS", "build", "config_keys", "describe", "mixer", "mixer_config",
           "mixer_kinds", "model_config", "names", "provider", "register_mixer",
           "register_model"]
