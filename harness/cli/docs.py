"""The generated pages of docs/: docs/cli.md from the click commands themselves, and
docs/suites.md from the rows `tvr suites --format json` prints. `tvr report --docs` writes
them as generated blocks (harness.report.readme), so they cannot drift from the code."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path

import click

# Help rendered at a fixed width: the terminal's would make the page depend on who wrote it.
WIDTH = 88


def suite_rows(builtin_only: bool = False, count: bool = True) -> list[dict]:
    """What `tvr suites --format json` prints: name, points, description and the package it
    comes from, per suite; `builtin_only` leaves out installed plugins' suites, and without
    `count` the points are not built (building all of them takes seconds)."""
    import experiments
    from models.plugins import BUILTIN

    names = [n for n in experiments.suite_names()
             if not builtin_only or experiments.provider(n) == BUILTIN]
    return [{"name": name} | ({"points": len(experiments.points(name))} if count else {})
            | {"description": experiments.describe(name), "from": experiments.provider(name)}
            for name in names]


def _cell(text: str) -> str:
    """Text for one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _prose(text: str) -> str:
    """Help text as Markdown prose: `<out>` would be an HTML tag, `B*n` emphasis."""
    return text.replace("<", "&lt;").replace("*", "\\*")


def suites_page(_out: Path | None = None) -> str:
    """The built-in suites as a Markdown table. Point counts are left out: the `threads`
    suite's depend on the machine's cores (`tvr suites` counts them on yours)."""
    lines = ["| suite | what it measures |", "|:--|:--|"]
    lines += [f"| `{r['name']}` | {_prose(_cell(r['description']))} |"
              for r in suite_rows(builtin_only=True, count=False)]
    return "\n".join(lines) + "\n"


def _text(help_text: str) -> str:
    """click help as Markdown: paragraphs kept, `\\b` (no-rewrap) paragraphs as code."""
    parts = []
    for para in inspect.cleandoc(help_text).split("\n\n"):
        if para.startswith("\b"):
            parts.append("```text\n" + para.removeprefix("\b").strip("\n") + "\n```")
        elif para.strip():
            parts.append(_prose(" ".join(para.split())))
    return "\n\n".join(parts)


def _context(command: click.Command, name: str, parent: click.Context | None) -> click.Context:
    """A context as `tvr` makes one (the command's settings: -h as --help), at WIDTH."""
    fixed = {"terminal_width": WIDTH, "max_content_width": WIDTH}
    return click.Context(command, info_name=name, parent=parent,
                         **(command.context_settings | fixed))


def _command(name: str, command: click.Command, parent: click.Context | None) -> str:
    ctx = _context(command, name, parent)
    usage = " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
    parts = [f"## `{ctx.command_path}`", _text(command.help or ""), f"```text\n{usage}\n```"]
    rows = [record for param in command.get_params(ctx)
            if (record := param.get_help_record(ctx)) is not None]
    if rows:
        parts.append("| option | what it does |\n|:--|:--|\n" + "\n".join(
            f"| `{_cell(opts)}` | {_prose(_cell(what)) or '(argument)'} |" for opts, what in rows))
    if command.epilog:
        parts.append(_text(command.epilog))
    return "\n\n".join(parts)


def cli_page(group: click.Group) -> Callable[[Path], str]:
    """The block writer of the CLI reference: the group's own help and options, then each
    command's description, usage, options (with their defaults and environment variables,
    as `--help` prints them) and examples."""
    def page(_out: Path) -> str:
        root = _context(group, "tvr", None)  # its commands inherit its settings
        head = _command("tvr", group, None).replace("## `tvr`", "## `tvr` (every command)", 1)
        index = "Commands: " + ", ".join(f"[`tvr {name}`](#tvr-{name})"
                                         for name in group.commands) + "."
        body = [_command(name, group.commands[name], root) for name in group.commands]
        return "\n\n".join([index, head, *body]) + "\n"
    return page


def doc_blocks(group: click.Group) -> dict[str, Callable[[Path], str]]:
    """The blocks of docs/cli.md and docs/suites.md, for harness.report.readme.rewrite."""
    return {"cli": cli_page(group), "suites": suites_page}


def documents(root: Path) -> list[Path]:
    """The files whose generated blocks `tvr report --docs` writes: README.md and docs/*.md."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def to_root(root: Path, path: Path) -> str:
    """The relative path from the folder of `path` to `root`: "" or "../" (docs/)."""
    return "../" * len(path.parent.relative_to(root).parts)


MAX_DOCUMENT_BYTES = 16 << 20  # README.md is ~40 kB; a bigger file is not one of ours


def ours(root: Path, group: click.Group) -> tuple[list[Path], list[str]]:
    """The documents under `root` whose generated blocks `tvr report --docs` writes, and one note
    for each it leaves as it is: a block it does not write (the README of another project
    beside --out), a file it cannot read as text. Decided before anything is written, so
    such a file never fails a report half done."""
    from harness.errors import BadInput
    from harness.inputs import read_bounded
    from harness.report.readme import BLOCKS, MARKER

    known = {*BLOCKS, *doc_blocks(group)}
    paths, notes = [], []
    for path in documents(root):
        if not path.is_file():
            continue
        try:
            text = read_bounded(path, MAX_DOCUMENT_BYTES, "document").decode("utf-8")
        except (BadInput, UnicodeDecodeError) as exc:
            why = exc.reason if isinstance(exc, UnicodeDecodeError) else str(exc)
            notes.append(f"note: {path} left as it is: not a document tvr writes ({why})")
            continue
        unknown = sorted({m["name"] for m in MARKER.finditer(text)} - known)
        if unknown:
            notes.append(f"note: {path} left as it is: its generated block {unknown[0]!r} is "
                         "not one tvr writes (another project's file?)")
            continue
        paths.append(path)
    return paths, notes


def update_documents(root: Path, out: Path, group: click.Group,
                     paths: list[Path] | None = None) -> list[Path]:
    """Rewrite the blocks of README.md and docs/*.md under `root` (or of `paths`, what `ours`
    chose) from the results under `out` and from `group`'s commands; the files that
    changed."""
    from harness.report.readme import update_readme

    extra = doc_blocks(group)
    chosen = paths if paths is not None else [p for p in documents(root) if p.is_file()]
    return [path for path in chosen if update_readme(path, out, extra, to_root(root, path))]
