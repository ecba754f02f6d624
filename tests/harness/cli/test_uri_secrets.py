"""No fragment of a password in any output, whatever form the tracking URI takes: a scheme
without its colon, a password holding "/", "@", ":", "#", "?", percent escapes or non-ASCII
letters, given as --tracking-uri or as $MLFLOW_TRACKING_URI. And --min-run-time takes ASCII
digits only, as --max-memory and --set do."""

from __future__ import annotations

import urllib.parse
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import cli
from harness.results import append_row, results_path

# Pieces of passwords: each distinctive enough that finding one in the output means a leak
PIECES = ["Qx7Zk", "W9vJq", "пароль", "密码密码", "Ünï9", "zz%41zz", "K3yPa55"]
SEPARATORS = ["/", "@", ":", "#", "?", "%2F", "%40", "%", " ", "", "//", ":@"]
SCHEMES = ["http://", "https://", "postgresql://", "postgresql//", "mysql+pymysql://",
           "postgresql+psycopg://", "mssql://", "http:/", "http:", "//", "", "ftp://",
           "databricks://"]
HOSTS = ["127.0.0.1:1", "127.0.0.1", "127.0.0.1:abc", "[::1:5000", "", "127.0.0.1:1/db"]


@st.composite
def uris(draw: st.DrawFn) -> tuple[str, list[str]]:
    """(a URI with a password, the password's pieces)."""
    pieces = draw(st.lists(st.sampled_from(PIECES), min_size=1, max_size=3))
    seps = draw(st.lists(st.sampled_from(SEPARATORS), min_size=len(pieces),
                         max_size=len(pieces)))
    password = "".join(p + s for p, s in zip(pieces, seps, strict=True))
    if draw(st.booleans()):
        password = urllib.parse.quote(password, safe=draw(st.sampled_from(["", "/:", "@"])))
    user = draw(st.sampled_from(["u", "alice", ""]))
    uri = f"{draw(st.sampled_from(SCHEMES))}{user}:{password}@{draw(st.sampled_from(HOSTS))}"
    return uri, pieces


def _leaks(output: str, pieces: list[str]) -> list[str]:
    forms = {f for p in pieces for f in (p, urllib.parse.quote(p, safe=""),
                                         urllib.parse.quote(p), p.lower())}
    return [f for f in forms if f in output]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("secrets")
    append_row(results_path(folder, "smoke"), {"suite": "smoke", "point_id": "p", "status": "ok",
                                               "device": "cpu", "machine": "m"})
    return folder


@pytest.mark.slow
@settings(max_examples=150, deadline=timedelta(seconds=30), derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=uris(), via_env=st.booleans(), command=st.sampled_from(["sync", "doctor"]))
def test_no_fragment_of_a_password_in_any_output(case: tuple[str, list[str]], via_env: bool,
                                                 command: str, out: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    uri, pieces = case
    args = [command, *(["smoke"] if command == "sync" else []), "--out", str(out)]
    if via_env:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    else:
        monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
        args += ["--tracking-uri", uri]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code in (0, 1, 2), (uri, result.output, result.exception)  # doctor: 1
    assert not _leaks(result.output, pieces), (uri, result.output)
    assert "Traceback" not in result.output


@pytest.mark.parametrize("uri", ["postgresql//u:Qx7Zk@127.0.0.1:1/db",
                                 "http://u:Qx7Zk/W9vJq@127.0.0.1:9"])
@pytest.mark.parametrize("via_env", [False, True])
def test_the_probes_uri_forms_show_no_password(uri: str, via_env: bool, out: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["sync", "smoke", "--out", str(out)]
    if via_env:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    else:
        args += ["--tracking-uri", uri]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and not _leaks(result.output, ["Qx7Zk", "W9vJq"]), \
        result.output


@pytest.mark.parametrize("value", ["٣", "۱", "0.٥", "١e-1", "1_0"])
def test_min_run_time_takes_ascii_digits_only(value: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["run", "smoke", "--dry-run", "--out", str(tmp_path),
                                      "--min-run-time", value])
    assert result.exit_code == 2 and "is not a number of seconds" in result.output
    for option in ("--max-memory",):  # refused alike
        other = CliRunner().invoke(cli, ["run", "smoke", "--dry-run", "--out", str(tmp_path),
                                         option, value])
        assert other.exit_code == 2
