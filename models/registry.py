"""Names -> frozen configs -> modules, for every entry of models.catalog (plugins' included).
A whole model takes its config (TransformerConfig, RNNConfig, defined next to the model); a
mixer is a block and takes flat arguments, which its factory, beside it (models.mixers,
models.local, models.minrnn), unpacks its config into."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from torch import nn

from models import catalog
from models.catalog import BUILTIN
from models.checks import check_choice
from models.mixer_lm import MixerLM, MixerLMConfig
from models.plugins import Plugin, entries, register, warn

# Presets apply the keys their config has: an RNN ignores n_heads and d_ff.
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(vocab_size=64, d_model=64, n_layers=2, n_heads=4, d_ff=256, dropout=0.0,
                 max_len=256),  # tests and CPU smoke runs
    "small": dict(vocab_size=256, d_model=256, n_layers=4, n_heads=4, d_ff=1024, max_len=512),
    "base": {},  # the dataclass defaults: the paper's base model
    "big": dict(d_model=1024, n_heads=16, d_ff=4096, dropout=0.3),  # the paper's big model
}


def mixer_lm(c: MixerLMConfig) -> nn.Module:
    return MixerLM(c, partial(_causal_mixer, c))


@dataclass(frozen=True)
class _Entry:
    """A catalog entry made buildable: its config class and make(d_model, config) for a
    mixer, make(config) for a model."""

    config: type
    make: Callable[..., nn.Module]
    doc: str = field(default="")
    provider: str = BUILTIN  # the package (or --plugin module) it comes from


# A point's identifying columns (experiments.spec.Point.fields): no knob may take their names.
_ROW_COLUMNS = {"suite", "runner", "mixer", "model", "seq_len", "batch_size", "dtype", "seed",
                "compile", "fit", "study", "status"}
_GROUPS = {"tvr.mixers": catalog.Mixer, "tvr.models": catalog.Model}
# id of a catalog entry -> (the entry, kept alive so the id stays its own; what it builds)
_RESOLVED: dict[int, tuple[Any, _Entry]] = {}
# (group, name, provider, id of the loaded object) -> catalog entry: converted once, warned once
_PLUGIN_ENTRIES: dict[tuple[str, str, str, int], Any] = {}


def _load(ref: Any) -> Any:
    """"module:name" imported, or the object itself."""
    if not isinstance(ref, str):
        return ref
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def _keywords_config(name: str, factory: Callable[..., Any], mixer: bool) -> type:
    """A factory's keyword parameters (after d_model for a mixer) as a frozen config dataclass,
    so unknown knobs are refused like a built-in's; ValueError if it has none to read."""
    try:
        params = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not a callable with a signature ({exc})") from None
    knobs = [p for p in params[1 if mixer else 0:]
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    taken = sorted({p.name for p in knobs} & _ROW_COLUMNS)
    if taken:  # a knob is a results column too: it would overwrite the row's own
        raise ValueError(f"its knob {taken[0]!r} has the name of a results column "
                         f"({', '.join(sorted(_ROW_COLUMNS))})")
    knobs.sort(key=lambda p: p.default is not p.empty)  # dataclasses: defaults come last
    return dataclasses.make_dataclass(
        f"{name.title().replace('-', '')}Config",
        [(p.name, Any) if p.default is p.empty else (p.name, Any, field(default=p.default))
         for p in knobs], frozen=True)


def _resolve(entry: catalog.Mixer | catalog.Model) -> _Entry:
    """What a catalog entry builds with: its factory and config imported (once); a factory
    declared without a config gets one from its keywords, and is called with them."""
    if id(entry) in _RESOLVED and _RESOLVED[id(entry)][0] is entry:
        return _RESOLVED[id(entry)][1]
    factory = _load(entry.make)
    if entry.config is not None:
        config, make = _load(entry.config), partial(factory, *entry.args)
    else:
        config = _keywords_config(entry.name, factory, isinstance(entry, catalog.Mixer))

        def make(*args: Any) -> nn.Module:  # (d_model, config) or (config)
            *d, cfg = args
            return factory(*entry.args, *d,
                           **{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)})
    doc = entry.doc or (inspect.getdoc(factory) or "").split("\n")[0]
    _RESOLVED[id(entry)] = (entry, _Entry(config, make, doc, entry.provider))
    return _RESOLVED[id(entry)][1]


def _plugin_entry(group: str, plugin: Plugin) -> Any:
    """A plugin as a catalog entry: the entry it declares (a `catalog.Mixer` or `Model`), or a
    bare factory as one of kind "other"; None, with one warning line, if it cannot be one."""
    kind = _GROUPS[group]
    known = catalog.mixers() if kind is catalog.Mixer else catalog.models()
    if plugin.name in known and known[plugin.name].provider == BUILTIN:
        warn(f"plugin {plugin.name!r} from {plugin.provider} is skipped: {group} already has "
             f"a built-in {plugin.name!r}")
        return None
    if isinstance(plugin.obj, kind):
        entry = dataclasses.replace(plugin.obj, name=plugin.name, provider=plugin.provider)
    else:
        entry = (kind(plugin.name, "other", plugin.obj, provider=plugin.provider)
                 if kind is catalog.Mixer else kind(plugin.name, plugin.obj,
                                                    provider=plugin.provider))
    try:
        _resolve(entry)
    except ValueError as exc:
        warn(f"plugin {plugin.name!r} from {plugin.provider} is skipped: {exc}")
        return None
    return entry


def _add(group: str, plugin: Plugin) -> None:
    key = (group, plugin.name, plugin.provider, id(plugin.obj))  # obj may not hash
    if key not in _PLUGIN_ENTRIES:
        _PLUGIN_ENTRIES[key] = (plugin.obj, _plugin_entry(group, plugin))
    entry = _PLUGIN_ENTRIES[key][1]
    if entry is not None:
        catalog.add(entry)


def _table(group: str) -> dict[str, _Entry]:
    """Every catalog entry of the group, its plugins read first (on first use)."""
    for plugin in entries(group).values():
        _add(group, plugin)
    return {name: _resolve(e) for name, e in
            (catalog.mixers() if group == "tvr.mixers" else catalog.models()).items()}


def _models() -> dict[str, _Entry]:
    return _table("tvr.models")


def _mixers() -> dict[str, _Entry]:
    return _table("tvr.mixers")


def register_mixer(name: str | catalog.Mixer, factory: Callable[..., nn.Module] | None = None,
                   provider: str | None = None) -> None:
    """Add a mixer kind from Python (a `tvr --plugin MODULE` module calls this): a catalog
    entry (`models.catalog.Mixer`: its kind, Table 1 row, colour...), or a name and a
    factory(d_model, **knobs) -> module mapping (B, n, d) -> (B, n, d)."""
    _register("tvr.mixers", name, factory, provider)


def register_model(name: str | catalog.Model, factory: Callable[..., nn.Module] | None = None,
                   provider: str | None = None) -> None:
    """Add a model name from Python: a catalog entry (`models.catalog.Model`), or a name and
    a factory(**config) -> nn.Module."""
    _register("tvr.models", name, factory, provider)


def _register(group: str, name: Any, factory: Any, provider: str | None) -> None:
    obj = name if factory is None else factory
    name = obj.name if factory is None else name
    make = obj.make if factory is None else obj
    register(group, name, obj, provider or f"module {getattr(make, '__module__', '?')}")
    _add(group, entries(group)[name])


def _causal_mixer(c: MixerLMConfig) -> nn.Module:
    """A fresh mixer of kind c.mixer_kind for mixer-lm, causal, with the model's heads and
    dropout where the mixer takes them."""
    check_choice("mixer kind", c.mixer_kind, tuple(_mixers()))
    keys = {f.name for f in dataclasses.fields(_mixers()[c.mixer_kind].config)}
    declared = catalog.mixers()[c.mixer_kind].causal
    knobs = dict(declared or {})
    if declared is None:
        if "causal" not in keys:
            fixed = [name for name, m in catalog.mixers().items() if m.causal is not None]
            raise ValueError(f"invalid mixer {c.mixer_kind!r} for 'mixer-lm': it has no causal "
                             f"knob; valid: mixers with one, or {', '.join(fixed)}")
        knobs["causal"] = True
    if c.n_heads is not None and "n_heads" in keys:
        knobs["n_heads"] = c.n_heads
    if "dropout" in keys and c.mixer_kind != "attention-core":
        knobs["dropout"] = c.dropout
    return mixer(c.mixer_kind, c.d_model, **knobs)


def _config(entry: _Entry, what: str, values: dict[str, Any]) -> Any:
    known = {f.name for f in dataclasses.fields(entry.config)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(
            f"unknown config key {unknown[0]!r} for {what}; valid: {', '.join(sorted(known))}"
        )
    missing = [f.name for f in dataclasses.fields(entry.config) if f.name not in values
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:  # a plugin knob without a default
        raise ValueError(f"missing config key {missing[0]!r} for {what}; it has no default")
    return entry.config(**values)


def names() -> list[str]:
    """Every model name that build() accepts, plugins' included."""
    return list(_models())


def mixer_kinds() -> list[str]:
    return list(_mixers())


def config_keys() -> set[str]:
    """Every config key some model or mixer takes (what is config, not a measurement)."""
    every = [*_models().values(), *_mixers().values()]
    return {f.name for e in every for f in dataclasses.fields(e.config)}


def config_class(name: str, kind: str = "model") -> type | None:
    """The config dataclass of a model (kind="model") or mixer (kind="mixer"); None for a
    name that is neither (a baseline's name)."""
    entry = (_models() if kind == "model" else _mixers()).get(name)
    return entry.config if entry is not None else None


def declared(name: str, kind: str = "mixer") -> catalog.Mixer | catalog.Model:
    """A mixer's (kind="mixer") or model's (kind="model") catalog entry, plugins' read."""
    table = _mixers() if kind == "mixer" else _models()
    check_choice(f"{kind} name", name, tuple(table))
    return (catalog.mixers() if kind == "mixer" else catalog.models())[name]


def describe(name: str) -> str:
    check_choice("model name", name, tuple(_models()))
    return _models()[name].doc


def provider(name: str, kind: str = "model") -> str:
    """The package a model (kind="model") or mixer (kind="mixer") comes from."""
    table = _models() if kind == "model" else _mixers()
    check_choice(f"{kind} name", name, tuple(table))
    return table[name].provider


def mixer_config(kind: str, **config: Any) -> Any:
    """The frozen config models.mixer(kind, d, **config) would use; ValueError naming the
    valid keys or values if one is bad. Builds nothing."""
    check_choice("mixer kind", kind, tuple(_mixers()))
    return _config(_mixers()[kind], f"mixer {kind!r}", config)


def model_config(name: str, preset: str | None = None, **config: Any) -> Any:
    """The frozen config build() would use: preset values first, then explicit overrides."""
    table = _models()
    check_choice("model name", name, tuple(table))
    entry = table[name]
    values: dict[str, Any] = {}
    if preset is not None:
        check_choice("preset", preset, tuple(PRESETS))
        known = {f.name for f in dataclasses.fields(entry.config)}
        values = {k: v for k, v in PRESETS[preset].items() if k in known}
    cfg = _config(entry, f"model {name!r}", values | config)
    if isinstance(cfg, MixerLMConfig):
        check_choice("mixer kind", cfg.mixer_kind, tuple(_mixers()))
    return cfg


def build(name: str, preset: str | None = None, **config: Any) -> nn.Module:
    """models.build("transformer", preset="tiny", norm="pre") -> nn.Module."""
    cfg = model_config(name, preset, **config)  # validates name first: ValueError, not KeyError
    return _models()[name].make(cfg)


def mixer(kind: str, d_model: int, **config: Any) -> nn.Module:
    """models.mixer("lstm", 256, rnn_impl="cell") -> module mapping (B, n, d) -> (B, n, d)."""
    cfg = mixer_config(kind, **config)
    if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model <= 0:
        raise ValueError(f"invalid d_model {d_model!r}; must be a positive integer")
    return _mixers()[kind].make(d_model, cfg)
