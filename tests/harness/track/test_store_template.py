"""The empty store new stores copy ($TVR_STORE_TEMPLATE, else the cache's) is never a file
the harness did not make or check: whatever else the variable names stays untouched, said in
one line, and the template is kept in the cache instead; a template holding runs or an older
schema is never copied, the cache's own is rebuilt."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest

from harness.track import client
from harness.track.client import build_schema
from harness.track.sqlitefile import create_sqlite, sqlite_uri


def _store_works(db: Path) -> None:
    from mlflow import MlflowClient

    mlflow = MlflowClient(sqlite_uri(db))
    assert mlflow.search_experiments() == []  # empty: no one's runs copied in
    run = mlflow.create_run(mlflow.create_experiment("smoke")).info.run_id
    mlflow.log_metric(run, "ms", 1.5)
    assert mlflow.get_run(run).data.metrics == {"ms": 1.5}


@pytest.fixture(scope="module")
def sound(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sound empty template, built once by MLflow's migrations."""
    folder = tmp_path_factory.mktemp("sound")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(folder / "xdg"))
        patch.delenv(client.TEMPLATE_ENV, raising=False)
        create_sqlite(folder / "first" / "mlflow.db", build_schema)
        return client.schema_template()


@pytest.fixture
def cache(tmp_path: Path, sound: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of its own, holding a sound empty template."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(client.TEMPLATE_ENV, raising=False)
    monkeypatch.setattr(client, "_refused", set())
    client.schema_template().parent.mkdir(parents=True)
    shutil.copyfile(sound, client.schema_template())
    return client.schema_template()


def _with_runs(path: Path, cache: Path) -> None:
    shutil.copyfile(cache, path)
    from mlflow import MlflowClient

    mlflow = MlflowClient(sqlite_uri(path))
    mlflow.create_run(mlflow.create_experiment("someone's")).info.run_id  # noqa: B018


def _old_schema(path: Path, cache: Path) -> None:
    shutil.copyfile(cache, path)
    with sqlite3.connect(path) as con:
        con.execute("UPDATE alembic_version SET version_num = '0584bdc529eb'")
    con.close()


def _user_database(path: Path, cache: Path) -> None:
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE notes (text TEXT)")
        con.execute("INSERT INTO notes VALUES ('precious')")
    con.close()


KINDS = {
    "text": lambda p, c: p.write_text("precious\n"),
    "empty": lambda p, c: p.write_bytes(b""),
    "fifo": lambda p, c: os.mkfifo(p),
    "folder": lambda p, c: p.mkdir(),
    "symlink": lambda p, c: p.symlink_to(c),
    "user-database": _user_database,
    "with-runs": _with_runs,
    "old-schema": _old_schema,
}


def _snapshot(path: Path) -> tuple:
    st = os.lstat(path)
    body = path.read_bytes() if stat.S_ISREG(st.st_mode) else b""
    return stat.S_IFMT(st.st_mode), body


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_named_template_that_is_not_a_sound_empty_store_is_never_written(
        tmp_path: Path, cache: Path, kind: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    named = tmp_path / "named.db"
    KINDS[kind](named, cache)
    before = _snapshot(named)
    capsys.readouterr()
    monkeypatch.setenv(client.TEMPLATE_ENV, str(named))
    for store in ("a", "b"):
        db = tmp_path / store / "mlflow.db"
        create_sqlite(db, build_schema)
        assert db.read_bytes() == cache.read_bytes()  # the cache's template, copied
        _store_works(db)
    assert _snapshot(named) == before  # untouched
    said = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(said) == 1 and str(named) in said[0] and client.TEMPLATE_ENV in said[0], said


def test_dev_null_as_template_stays_a_device(tmp_path: Path, cache: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(client.TEMPLATE_ENV, "/dev/null")
    create_sqlite(tmp_path / "a" / "mlflow.db", build_schema)
    _store_works(tmp_path / "a" / "mlflow.db")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.slow
def test_a_named_sound_empty_store_is_copied_and_a_missing_one_built(
        tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    named = tmp_path / "mine" / "empty.db"
    monkeypatch.setenv(client.TEMPLATE_ENV, str(named))
    create_sqlite(tmp_path / "a" / "mlflow.db", build_schema)  # nothing there: built there
    assert named.is_file() and client._template_problem(named) is None
    before = named.read_bytes()
    create_sqlite(tmp_path / "b" / "mlflow.db", build_schema)
    assert (tmp_path / "b" / "mlflow.db").read_bytes() == before == named.read_bytes()
    assert "warning" not in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["with-runs", "old-schema", "text"])
def test_the_cache_template_is_rebuilt_when_it_is_not_sound_and_empty(
        tmp_path: Path, cache: Path, sound: Path, kind: str) -> None:
    cache.unlink()
    KINDS[kind](cache, sound)
    db = tmp_path / "a" / "mlflow.db"
    create_sqlite(db, build_schema)
    _store_works(db)
    assert client._template_problem(cache) is None and cache.read_bytes() != b""
    assert len(cache.read_bytes()) == len(sound.read_bytes())
