"""Where a suite's variants live. A run of a suite with overrides that change what is
measured (`tvr run SUITE --set KEY=VALUE`, --dtype, --compile, --corpus, --bitext,
--reverse; experiments.overrides) is a variant of that suite: its rows live under the suite,
in `<out>/<suite>/variants/<variant>/`, beside the configuration it resolved (config.json),
never among the suite's own rows nor in a folder of their own beside the suites. Every
command that names a stored suite (`--suite`, `tvr sync`) takes a variant's stored name,
`<suite>/variants/<variant>`, which is also its MLflow experiment's name.

Names only: no pandas here, so the CLI's option callbacks and completion stay light.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from harness.files import write_atomic
from harness.inputs import folder_name

VARIANTS = "variants"  # <out>/<suite>/variants/
CONFIG_FILE = "config.json"  # a variant's resolved configuration, beside its rows


def variant_name(suite: str, variant: str) -> str:
    """The stored name of `suite` run with the overrides named `variant`
    (experiments.overrides.apply): `<suite>/variants/<variant>`, its folder under --out; the
    suite's own name for no variant."""
    return f"{suite}/{VARIANTS}/{variant}" if variant else suite


def split_name(name: str) -> tuple[str, str]:
    """(suite, variant) of a stored name; variant "" for a suite's own folder."""
    suite, sep, variant = name.partition(f"/{VARIANTS}/")
    return (suite, variant) if sep else (name, "")


def checked_name(name: str, what: str = "suite") -> str:
    """A stored name given on the command line: one folder right under --out, or a variant
    of one (`SUITE/variants/VARIANT`); BadInput for any other path (`../x`, `/a`, `a/b`)."""
    suite, variant = split_name(name)
    folder_name(suite if variant else name, what)  # "smoke/variants/" is no folder name
    if variant:
        folder_name(variant, f"{what} {suite}: variant")
    return name


def source_text(name: str) -> str:
    """The command that measures stored name `name`, in words without a '/' (MLflow's UI
    shows a source's last '/'-separated part): `tvr run SUITE`, `tvr run SUITE (variant
    VARIANT)`."""
    suite, variant = split_name(name)
    return f"tvr run {suite}" + (f" (variant {variant})" if variant else "")


def stored_names(out_dir: Path, results_file: str = "results.csv") -> list[str]:
    """The stored names with a results file under `out_dir`: each suite, then its variants
    (`<suite>/variants/<variant>`), in that order."""
    out_dir = Path(out_dir)
    names = [p.parent.name for p in out_dir.glob(f"*/{results_file}")]
    names += [variant_name(p.parents[2].name, p.parent.name)
              for p in out_dir.glob(f"*/{VARIANTS}/*/{results_file}")]
    return sorted(names, key=split_name)


def save_config(folder: Path, suite: str, variant: str, command: list[str],
                points: list[dict[str, Any]]) -> Path:
    """Write a variant's resolved configuration to `<folder>/config.json`: its suite and
    name, each command that ran into the folder as one line (the overrides as given;
    `command` is its words), and each point's fields as its row names them (point id,
    sizes, config, options), the points of earlier runs kept (`--only lstm`, then `--only
    gru`); returns the path."""
    path = Path(folder) / CONFIG_FILE
    old = read_config(path.parent) or {}
    line = shlex.join(command)
    commands = [c for c in old.get("commands", []) if c != line] + [line]
    merged = {p["point_id"]: p for p in old.get("points", [])} | \
        {p["point_id"]: p for p in points}
    text = json.dumps({"suite": suite, "variant": variant, "commands": commands,
                       "points": list(merged.values())}, indent=1, default=str)
    write_atomic(path, text + "\n")
    return path


def read_config(folder: Path) -> dict[str, Any] | None:
    """A variant folder's config.json as written by save_config; None where there is none
    or it is not such a file (a variant moved here from before configurations were saved)."""
    path = Path(folder) / CONFIG_FILE
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return config if isinstance(config, dict) and isinstance(config.get("commands"), list) \
        else None


def last_command(out_dir: Path, name: str) -> str | None:
    """The command that measures variant `name`'s points again, from its config.json: the
    last one that ran into its folder, its `--only` widened to every run's (none if a run
    had none); None where none was saved."""
    config = read_config(Path(out_dir) / name)
    runs = [shlex.split(c) for c in config["commands"] if isinstance(c, str) and c.strip()] \
        if config else []
    if not runs:
        return None
    only = [[w for w, before in zip(r[1:], r, strict=False) if before == "--only"]
            for r in runs]
    subjects = list(dict.fromkeys(s for o in only for s in o)) if all(only) else []
    last = [w for i, w in enumerate(runs[-1])
            if w != "--only" and (i == 0 or runs[-1][i - 1] != "--only")]
    at = 3 if last[2:3] and last[2] != "--suite-file" else 4  # after the suite
    return shlex.join([*last[:at], *(w for s in subjects for w in ("--only", s)), *last[at:]])


def run_command(out_dir: Path, name: str) -> str:
    """How to measure stored name `name` again, as Markdown: "`tvr run SUITE`", a variant's
    last command from its config.json, or, for a variant without one, the suite's run with
    the overrides its name spells."""
    suite, variant = split_name(name)
    if not variant:
        return f"`tvr run {suite}`"
    saved = last_command(out_dir, name)
    if saved:
        return f"`{saved}`"
    return f"`tvr run {suite}` with the overrides that name variant `{variant}`"
