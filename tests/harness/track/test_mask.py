"""No password shown, whatever the URI looks like: a property over generated URIs (well
formed, malformed, percent-encoded, with "@", "/" or ":" in the password) and over the
messages that quote them, the CLI's included."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.cli import cli
from harness.track.store import mask

# Passwords carry an upper-case letter and a digit: hosts, users and paths below never do,
# so finding the password (or a long piece of it) in the output can only mean a leak.
SECRET_CHARS = st.sampled_from("ABCDEFGHJKMNPQRSTUVWXYZ0123456789@/:%?#!$&'()*+,;=~.-_[] ")
PASSWORDS = st.builds(lambda a, b: "Q7" + a + b, st.text(SECRET_CHARS, min_size=1,
                                                           max_size=12),
                      st.text(SECRET_CHARS, max_size=4))
USERS = st.text(st.sampled_from("abcdefgh-_."), min_size=0, max_size=6)
HOSTS = st.sampled_from(["127.0.0.1", "db.example.org", "[::1]", "h", ""])
PORTS = st.sampled_from(["", ":5000", ":abc", ":99999999", ":"])
SCHEMES = st.sampled_from(["http", "https", "postgresql", "postgresql+psycopg", "mysql",
                           "mssql", "ftp", "HTTP", ""])
TAILS = st.sampled_from(["", "/", "/mlflow", "/db?sslmode=require", "/a@b", "?x=1#f", "/p:q"])


@st.composite
def uris(draw: st.DrawFn) -> tuple[str, str]:
    password = draw(PASSWORDS)
    shown = draw(st.sampled_from([password, urllib.parse.quote(password, safe=""),
                                  urllib.parse.quote(password, safe="@/:")]))
    scheme = draw(SCHEMES)
    head = f"{scheme}://" if scheme else ""
    uri = f"{head}{draw(USERS)}:{shown}@{draw(HOSTS)}{draw(PORTS)}{draw(TAILS)}"
    return uri, password


def leaks(text: str, password: str) -> bool:
    forms = {password, urllib.parse.quote(password, safe=""),
             urllib.parse.quote(password, safe="@/:")}
    # the password's own marker and the body after it, as far as it is 4 characters or more
    return any(f in text for f in forms) or ("Q7" + password[2:6]) in text


@settings(max_examples=400, deadline=None, derandomize=True)
@given(uris())
def test_mask_hides_every_password(case: tuple[str, str]) -> None:
    uri, password = case
    assert not leaks(mask(uri), password), mask(uri)
    message = f"warning: tracking off: cannot reach {uri!r} ({uri}): try again"
    assert not leaks(mask(message), password), mask(message)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(uris())
def test_no_command_shows_a_password(tmp_path_factory, case: tuple[str, str]) -> None:
    """`tvr run` and `tvr sync` with such a --tracking-uri: exit 0 or 2 (a server or
    database that does not answer is bad input or a warning line), the password nowhere."""
    uri, password = case
    out = tmp_path_factory.mktemp("mask")
    (out / "smoke").mkdir()
    (out / "smoke" / "results.csv").write_text("suite,point_id,status\n")
    for args in (["run", "smoke", "--dry-run"], ["sync", "smoke"]):
        result = CliRunner().invoke(cli, [*args, "--out", str(out), "--tracking-uri", uri])
        assert result.exit_code in (0, 1, 2), (uri, result.output, result.exception)
        assert "Traceback" not in result.output
        assert not leaks(result.output, password), (uri, result.output)
        assert not leaks(str(result.exception or ""), password), uri


def test_the_probes_cases(tmp_path: Path) -> None:
    assert mask("http://u:pa/ss@127.0.0.1:18811") == "http://u:***@127.0.0.1:18811"
    assert mask("http://alice:ss/w0rd@host@127.0.0.1:5") == "http://alice:***@127.0.0.1:5"
    assert mask("postgresql://a:p%40ss@h/db") == "postgresql://a:***@h/db"
    assert mask("sqlite:////tmp/mlflow.db") == "sqlite:////tmp/mlflow.db"
    assert mask("http://h:5000/x") == "http://h:5000/x"
