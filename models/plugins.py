"""Components from other packages: entry points read lazily, and modules imported by name.

A package adds a mixer, model or suite by declaring an entry point (pyproject.toml):

    [project.entry-points."tvr.mixers"]
    linear-attention = "my_package:LinearAttention"   # (d_model, **knobs) -> nn.Module

Groups are read on first use (never at import), each entry is loaded once, and one that
fails to load costs a single warning line on stderr naming it; the rest works.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from models.catalog import BUILTIN  # noqa: F401 - the provider named for built-in components

PLUGIN_HINT = ("a plugin's? install its package (`pip install -e PACKAGE_DIR`) or load its "
               "module first: `tvr --plugin path/to/module.py run ...`")


@dataclass(frozen=True)
class Plugin:
    name: str
    obj: Any
    provider: str  # the distribution it came from, or "module X" for --plugin X


_LOADED: dict[str, dict[str, Plugin]] = {}  # group -> name -> plugin (entry points, once)
_REGISTERED: dict[str, dict[str, Plugin]] = {}  # group -> name -> plugin (register())


def warn(message: str) -> None:
    print(f"tvr: warning: {message}", file=sys.stderr)


def _read(group: str) -> dict[str, Plugin]:
    found: dict[str, Plugin] = {}
    for ep in entry_points(group=group):
        dist = ep.dist.name if ep.dist is not None else "unknown package"
        try:
            found[ep.name] = Plugin(ep.name, ep.load(), dist)
        except Exception as exc:  # noqa: BLE001 - any failure of foreign code: warn, go on
            warn(f"plugin {ep.name!r} ({group} = {ep.value!r}, from {dist}) failed to "
                 f"load and is skipped: {type(exc).__name__}: {exc}")
    return found


def entries(group: str) -> dict[str, Plugin]:
    """Every plugin of `group`: registered by a --plugin module first, then entry points."""
    if group not in _LOADED:
        _LOADED[group] = _read(group)
    return _LOADED[group] | _REGISTERED.get(group, {})


def register(group: str, name: str, obj: Any, provider: str) -> None:
    _REGISTERED.setdefault(group, {})[name] = Plugin(name, obj, provider)


def import_module(module: str) -> None:
    """`tvr --plugin MODULE`: import a module (from sys.path or the working directory), or a
    file or package folder by its path (`path/to/module.py`: its folder goes on sys.path),
    that registers components with models.register_mixer / register_model / experiments.
    register_suite. ValueError if it cannot be imported."""
    name = module
    if module.endswith(".py") or os.sep in module:  # a path, not a module name
        path = Path(module)
        if path.name == "__init__.py":
            path = path.parent  # a package: imported by its folder's name
        if not path.exists():
            raise ValueError(f"--plugin {module}: no such file or folder")
        sys.path.insert(0, str(path.resolve().parent))
        name = path.stem if path.is_file() else path.name
    elif "" not in sys.path:
        sys.path.insert(0, "")  # a module next to the user, as `python -m` would find it
    try:
        importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - the module's own error, reported in one line
        raise ValueError(f"--plugin {module}: cannot import it: {type(exc).__name__}: "
                         f"{exc}") from None
