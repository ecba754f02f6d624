"""Errors the user can fix; the CLI prints them as one line and exits 2."""

from __future__ import annotations


class BadInput(Exception):
    """Bad user input: an unknown name, an unreachable URI, a missing result.

    The message must name the bad value and what is allowed or what to run instead; the CLI
    shows it without a traceback.
    """
