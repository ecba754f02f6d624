"""docs/cli.md and docs/suites.md are written from the commands and the suites themselves."""

from __future__ import annotations

import click

from harness.cli.docs import cli_page, suite_rows, suites_page


def test_cli_page_renders_help_options_and_examples_as_markdown():
    @click.group(context_settings={"help_option_names": ["-h", "--help"]})
    def group() -> None:
        """The group."""

    @group.command("go", epilog="\b\nExamples:\n  tvr go --mode a|b")
    @click.argument("suite")
    @click.option("--mode", type=click.Choice(["a", "b"]), default="a", show_default=True,
                  envvar="TVR_GO_MODE", show_envvar=True, help="Writes <out>/x at B*n.")
    def go(suite: str, mode: str) -> None:
        """Go   somewhere,
        wrapped.

        \b
        kept  as is
        """

    page = cli_page(group)(None)
    assert page.startswith("Commands: [`tvr go`](#tvr-go).\n\n## `tvr` (every command)")
    assert "## `tvr go`" in page
    assert "Go somewhere, wrapped.\n\n```text\nkept  as is\n```" in page
    assert "```text\ntvr go [OPTIONS] SUITE\n```" in page
    assert "| `SUITE` | (argument) |" in page
    assert ("| `--mode [a\\|b]` | Writes &lt;out>/x at B\\*n. [env var: TVR_GO_MODE; "
            "default: a] |") in page
    assert "| `-h, --help` | Show this message and exit. |" in page  # the group's settings
    assert "```text\nExamples:\n  tvr go --mode a|b\n```" in page


def test_suites_page_lists_every_builtin_suite_without_machine_dependent_counts():
    names = [r["name"] for r in suite_rows(builtin_only=True, count=False)]
    page = suites_page()
    assert "smoke" in names and "quick" in names
    assert [line.split("`")[1] for line in page.splitlines()[2:]] == names
    assert all("points" not in r for r in suite_rows(builtin_only=True, count=False))
