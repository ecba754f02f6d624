"""One line on the terminal, whoever says it (the sweep, the tracker), never glued to a
running progress bar."""

from __future__ import annotations

import sys


def say(text: str) -> None:
    """One line on stderr, above a running progress bar (tqdm.write), never glued to it."""
    line = (str(text).strip().splitlines() or [""])[0]
    try:
        from tqdm import tqdm
    except ImportError:
        print(line, file=sys.stderr, flush=True)
        return
    tqdm.write(line, file=sys.stderr)
