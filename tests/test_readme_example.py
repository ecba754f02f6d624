"""The README's Python example runs as written (extracted from README.md, executed)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_python_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README.md has no ```python block"
    scope: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), scope)  # noqa: S102 -- the README's own code
    assert tuple(scope["logits"].shape) == (2, 7, 64)
    assert tuple(scope["next_token"].shape) == (2, 7, 64)
    assert tuple(scope["y"].shape) == (2, 16, 256)


def test_extending_lists_every_built_in_mixer_and_model() -> None:
    import models
    from models.plugins import BUILTIN

    text = (README.parent / "docs" / "extending.md").read_text()
    names = [*((n, "mixer") for n in models.mixer_kinds()),
             *((n, "model") for n in models.names())]
    missing = [n for n, kind in names
               if models.provider(n, kind) == BUILTIN and f"`{n}`" not in text]
    assert not missing, f"docs/extending.md does not list {missing}"
