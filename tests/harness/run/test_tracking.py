"""The Tracker against a real MLflow SQLite store, read back with MlflowClient."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
import torch
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

import experiments
from experiments.spec import Point
from harness.machines import this_machine
from harness.results import read_config, read_results
from harness.run import point, sweep
from harness.runner import Result
from harness.track.tracker import Tracker


def _uri(out_dir: Path) -> str:
    return f"sqlite:///{out_dir.resolve()}/mlflow.db"


def _children(client: MlflowClient, tracker: Tracker) -> dict[str, object]:
    runs = client.search_runs(
        [tracker.experiment_id], f"tags.`mlflow.parentRunId` = '{tracker.parent_run_id}'")
    return {r.data.tags["point_id"]: r for r in runs}


def test_parent_and_nested_runs(out_dir: Path) -> None:
    uri = _uri(out_dir)
    csv = out_dir / "smoke" / "results.csv"
    csv.parent.mkdir(parents=True, exist_ok=True)
    csv.write_text("suite,point_id\nsmoke,a\n")
    with Tracker(uri, "smoke", out_dir, {"device": "cpu", "resume": True}) as tracker:
        tracker.log_point("a", {"mixer": "lstm", "cfg": {"d_model": 32, "n": {"x": 1}}},
                          {"fwd_ms": 1.25, "flops": 4e9, "bad": float("nan"), "none": None,
                           "inf": math.inf},
                          "ok", series={"loss": [(0, 2.0), (1, 1.5), (2, math.nan), (3, 1.0)]})
        tracker.log_point("b", {"mixer": "gru"}, {}, "error", message="RuntimeError: boom")
        tracker.log_artifact(csv)

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("smoke")
    assert exp is not None and exp.experiment_id == tracker.experiment_id
    assert exp.artifact_location == (out_dir / "mlartifacts" / "smoke").resolve().as_uri()
    # the UI opens a training experiment on its runs table, not on the GenAI overview
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    parent = client.get_run(tracker.parent_run_id)
    assert parent.info.status == "FINISHED"
    assert parent.info.run_name.startswith("smoke 20")
    assert {"suite", "host", "torch_version", "mlflow.source.name", "mlflow.user",
            "mlflow.source.type"} <= set(parent.data.tags)
    # no stray empty "Default" experiment in the list the UI shows
    assert [e.name for e in client.search_experiments()] == ["smoke"]
    assert parent.data.params == {"device": "cpu", "resume": "True"}
    assert [a.path for a in client.list_artifacts(tracker.parent_run_id)] == ["results.csv"]

    kids = _children(client, tracker)
    assert set(kids) == {"a", "b"}
    ok, bad = kids["a"], kids["b"]
    assert ok.info.status == "FINISHED" and ok.data.tags["status"] == "ok"
    assert "message" not in ok.data.tags
    assert ok.data.params == {"mixer": "lstm", "cfg.d_model": "32", "cfg.n.x": "1"}
    assert ok.data.metrics == {"fwd_ms": 1.25, "flops": 4e9, "loss": 1.0}
    history = client.get_metric_history(ok.info.run_id, "loss")
    assert sorted((m.step, m.value) for m in history) == [(0, 2.0), (1, 1.5), (3, 1.0)]
    assert bad.info.status == "FAILED" and bad.data.tags["status"] == "error"
    assert bad.data.tags["message"] == "RuntimeError: boom"


def test_point_runs_are_named_timed_and_tagged(out_dir: Path) -> None:
    """A point's run is named by what tells it apart, lasts as long as the point, carries
    the machine summary and the source; the parent holds summary metrics and a note."""
    uri = _uri(out_dir)
    params = {"suite": "s", "runner": "train", "mixer": "", "model": "lstm-lm", "seq_len": 64,
              "d_model": 32, "batch_size": 8, "dtype": "float32", "seed": 2, "study": "heads",
              "n_heads": 4, "steps": 300}
    facts = {"cpu": "Some CPU", "threads": 2, "blas": "mkl"}
    with Tracker(uri, "named", out_dir, {}, description="what the suite is", facts=facts) \
            as tracker:
        run_id = tracker.start_point("p1", params, "m1", "cpu")
        time.sleep(1.0)  # the point's work
        tracker.log_point("p1", params, {"loss": 1.0}, "ok", machine="m1", device="cpu",
                          run_id=run_id)
        tracker.log_summary({"points_ok": 1, "wall_s": 1.0})
    client = MlflowClient(uri)
    run = client.get_run(run_id)
    assert run.info.run_name == "lstm-lm seq_len=64 d_model=32 n_heads=4 seed=2 [heads]"
    assert run.info.end_time - run.info.start_time >= 1000
    assert run.data.tags["cpu"] == "Some CPU" and run.data.tags["blas"] == "mkl"
    assert run.data.tags["mlflow.parentRunId"] == tracker.parent_run_id
    assert "mlflow.source.name" in run.data.tags
    assert client.get_run(tracker.parent_run_id).data.metrics == {"points_ok": 1.0,
                                                                  "wall_s": 1.0}
    exp = client.get_experiment(tracker.experiment_id)
    assert exp.tags["mlflow.note.content"] == "what the suite is"


def test_a_point_cut_short_is_dropped_and_its_parent_killed(out_dir: Path) -> None:
    """The point in flight when a signal came holds no data: its run is deleted (it is
    measured again on resume); the parent says KILLED."""
    uri = _uri(out_dir)
    with pytest.raises(KeyboardInterrupt), Tracker(uri, "cut", out_dir, {}) as tracker:
        run_id = tracker.start_point("p", {"mixer": "gru", "seq_len": 8, "d_model": 4})
        raise KeyboardInterrupt
    client = MlflowClient(uri)
    assert client.get_run(run_id).info.lifecycle_stage == "deleted"
    assert client.get_run(tracker.parent_run_id).info.status == "KILLED"
    assert tracker.logged() == set()  # nothing for `tvr sync` to mistake for logged


def test_a_stop_mid_write_waits_for_the_point_to_be_logged_whole(
        out_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM arriving inside a point's store writes (here: while its point id is tagged)
    is raised once log_point has ended: the point's run is whole and FINISHED, the parent
    KILLED, and the store unlocked (a Stopped cut inside SQLAlchemy's commit or close could
    keep SQLite's write lock, and every later write would wait 20 s and fail)."""
    import signal

    from harness import signals

    uri = _uri(out_dir)
    with signals.stop_on_signals(), pytest.raises(signals.Stopped), \
            Tracker(uri, "stopped", out_dir, {}) as tracker:
        tag = tracker._client.set_tag

        def tag_then_stop(*args: object, **kwargs: object) -> None:
            signal.raise_signal(signal.SIGTERM)  # its handler runs before the write below
            tag(*args, **kwargs)

        monkeypatch.setattr(tracker._client, "set_tag", tag_then_stop)
        tracker.log_point("p", {"mixer": "gru"}, {"loss": 1.0}, "ok")
        pytest.fail("the stop was not raised when log_point ended")
    client = MlflowClient(uri)
    (point,) = _children(client, tracker).values()
    assert point.info.status == "FINISHED" and point.data.metrics == {"loss": 1.0}
    assert client.get_run(tracker.parent_run_id).info.status == "KILLED"
    assert tracker.error is None


def test_a_stop_while_the_store_opens_still_kills_the_parent(
        out_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM after the parent run is created, while its params are logged: the stop is
    raised once opening ends, out of `with Tracker(...)` itself, where no __exit__ runs; the
    parent must still end KILLED, not stay RUNNING."""
    import signal

    from harness import signals

    batch = Tracker._log_batch

    def stop_then_log(self: Tracker, *args: object, **kwargs: object) -> None:
        signal.raise_signal(signal.SIGTERM)
        batch(self, *args, **kwargs)

    monkeypatch.setattr(Tracker, "_log_batch", stop_then_log)
    tracker = Tracker(_uri(out_dir), "opening", out_dir, {"steps": 2})
    with signals.stop_on_signals(), pytest.raises(signals.Stopped), tracker:
        pytest.fail("the stop was not raised when the store had opened")
    run = MlflowClient(_uri(out_dir)).get_run(tracker.parent_run_id)
    assert run.info.status == "KILLED" and run.data.params == {"steps": "2"}


def test_second_invocation_reuses_experiment(out_dir: Path) -> None:
    uri = _uri(out_dir)
    ids = set()
    for _ in range(2):
        with Tracker(uri, "again", out_dir, {}) as tracker:
            ids.add(tracker.experiment_id)
    client = MlflowClient(tracking_uri=uri)
    assert len(ids) == 1
    assert len(client.search_runs(list(ids))) == 2


@pytest.mark.parametrize(("error", "status"), [(RuntimeError, "FAILED"),
                                               (KeyboardInterrupt, "KILLED")])
def test_parent_status_on_exception(out_dir: Path, error: type[BaseException],
                                    status: str) -> None:
    with pytest.raises(error), Tracker(_uri(out_dir), "crash", out_dir, {}) as tracker:
        raise error()
    run = MlflowClient(tracking_uri=_uri(out_dir)).get_run(tracker.parent_run_id)
    assert run.info.status == status


def test_large_point_is_split_within_mlflow_limits(out_dir: Path) -> None:
    params = {f"p{i}": i for i in range(150)}  # > 100 params per request
    series = {"loss": [(s, 1.0 / (s + 1)) for s in range(1500)]}  # > 1000 metrics per request
    with Tracker(_uri(out_dir), "big", out_dir, {}) as tracker:
        tracker.log_point("big", params, {"m": 1.0}, "ok", series=series)
    client = MlflowClient(tracking_uri=_uri(out_dir))
    (child,) = _children(client, tracker).values()
    assert len(child.data.params) == 150
    assert len(client.get_metric_history(child.info.run_id, "loss")) == 1500


def test_non_numeric_metric_is_a_bug(out_dir: Path) -> None:
    with Tracker(_uri(out_dir), "typo", out_dir, {}) as tracker, \
            pytest.raises(TypeError, match="'fwd_ms'"):
        tracker.log_point("a", {}, {"fwd_ms": "fast"}, "ok")


def test_non_numeric_metric_leaves_no_run_and_tracking_on(out_dir: Path) -> None:
    with Tracker(_uri(out_dir), "typo-series", out_dir, {}) as tracker:
        with pytest.raises(TypeError, match="'loss'"):
            tracker.log_point("a", {}, {}, "ok", series={"loss": [(0, "x")]})
        assert tracker.error is None
        tracker.log_point("b", {}, {"m": 1.0}, "ok")
    client = MlflowClient(tracking_uri=_uri(out_dir))
    assert set(_children(client, tracker)) == {"b"}
    assert client.get_run(tracker.parent_run_id).info.status == "FINISHED"


def _locked(calls: list[str], fail_from: int):
    """A MlflowClient.log_batch that fails like a locked SQLite store from call `fail_from` on
    (call 1 is the parent's params)."""
    real = MlflowClient.log_batch

    def log_batch(self: MlflowClient, run_id: str, *args: object, **kwargs: object) -> None:
        calls.append(run_id)
        if len(calls) >= fail_from:
            raise MlflowException("(sqlite3.OperationalError) database is locked\n"
                                  "[SQL: INSERT INTO metrics ...]")
        real(self, run_id, *args, **kwargs)

    return log_batch


def test_store_failure_turns_tracking_off(out_dir: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[str] = []
    monkeypatch.setattr(MlflowClient, "log_batch", _locked(calls, fail_from=3))
    csv = tmp_path / "results.csv"
    csv.write_text("x\n")
    with Tracker(_uri(out_dir), "locked", out_dir, {}) as tracker:
        tracker.log_point("a", {"p": 1}, {"m": 1.0}, "ok")
        tracker.log_point("b", {"p": 2}, {"m": 2.0}, "ok")  # the store fails here
        assert tracker.error is not None
        tracker.log_point("c", {"p": 3}, {"m": 3.0}, "ok")  # no-ops from here on
        tracker.log_artifact(csv)
        # Bugs in the caller stay loud after the store failed.
        with pytest.raises(TypeError, match="'m'"):
            tracker.log_point("d", {}, {"m": "fast"}, "ok")
        with pytest.raises(FileNotFoundError):
            tracker.log_artifact(tmp_path / "missing.csv")
    assert len(calls) == 3
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if "tracking off for this run" in line]
    assert len(warnings) == 1, err
    assert "MlflowException" in warnings[0] and "database is locked" in warnings[0]
    assert "results go to" in warnings[0]
    client = MlflowClient(tracking_uri=_uri(out_dir))
    kids = client.search_runs(
        [tracker.experiment_id], f"tags.`mlflow.parentRunId` = '{tracker.parent_run_id}'")
    by_status = sorted((r.info.status, r.data.tags.get("point_id")) for r in kids)
    # b's run never got its data: deleted, so `tvr sync` logs b again from the CSV
    assert by_status == [("FINISHED", "a")]
    assert tracker.logged() == {("a", "", "")}
    assert client.get_run(tracker.parent_run_id).info.status == "FAILED"
    assert client.list_artifacts(tracker.parent_run_id) == []


def test_store_failure_mid_sweep_keeps_the_sweep(out_dir: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The sweep logs outside its per-point try: the Tracker must absorb the failure."""
    points = experiments.points("smoke")
    assert len(points) >= 3
    monkeypatch.setattr(point, "run_point",
                        lambda point, *args, **kwargs: (Result({"fwd_ms": 1.0}), None))
    calls: list[str] = []
    monkeypatch.setattr(MlflowClient, "log_batch", _locked(calls, fail_from=3))
    summary = sweep.run_suite("sweep-locked", points, torch.device("cpu"), out_dir,
                              _uri(out_dir), resume=False, progress=False)
    assert summary.statuses["ok"] == len(points)
    assert len(calls) == 3
    rows = (out_dir / "sweep-locked" / "results.csv").read_text().splitlines()
    assert len(rows) == len(points) + 1
    err = capsys.readouterr().err
    assert err.count("tracking off for this run") == 1, err
    client = MlflowClient(tracking_uri=_uri(out_dir))
    (parent,) = client.search_runs(
        [client.get_experiment_by_name("sweep-locked").experiment_id],
        "attributes.run_name LIKE 'sweep-locked 20%'")
    assert parent.info.status == "FAILED"


def test_null_tracker_does_nothing(tmp_path: Path) -> None:
    (tmp_path / "r.csv").write_text("x\n")
    with Tracker(None, "smoke", tmp_path, {"a": 1}) as tracker:
        assert not tracker.enabled
        tracker.log_point("a", {"p": 1}, {"m": 1.0}, "ok", series={"s": [(0, 1.0)]})
        tracker.log_artifact(tmp_path / "r.csv")
    assert tracker.parent_run_id is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv"]


def test_sync_logs_each_point_machine_and_device_once(out_dir: Path) -> None:
    """A row is in the store when a run carries its point, machine and device; runs from
    before runs named their machine count for every machine; numbers that describe the
    point (config) stay params, measurements become metrics."""
    import pandas as pd

    uri = _uri(out_dir)
    rows = pd.DataFrame([
        {"point_id": "p", "machine": "m1", "device": "cpu", "status": "ok", "n_heads": 4,
         "fwd_ms": 1.5, "message": ""},
        {"point_id": "p", "machine": "m1", "device": "cuda", "status": "ok", "n_heads": 4,
         "fwd_ms": 0.5, "message": ""},
        {"point_id": "old", "machine": "m1", "device": "cpu", "status": "ok", "n_heads": 4,
         "fwd_ms": 2.0, "message": ""}])
    with Tracker(uri, "sync-keys", out_dir) as tracker:  # a run from before machine tags
        assert tracker._client is not None
        run = tracker._client.create_run(tracker.experiment_id, tags={
            "mlflow.parentRunId": tracker.parent_run_id, "point_id": "old"})
        tracker._client.set_terminated(run.info.run_id)
    with Tracker(uri, "sync-keys", out_dir) as tracker:
        assert tracker.sync(rows) == 2  # p on cpu and on cuda; "old" is there
    with Tracker(uri, "sync-keys", out_dir) as tracker:
        assert tracker.sync(rows) == 0
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("sync-keys")
    synced = client.search_runs([exp.experiment_id], "tags.point_id = 'p'")
    assert sorted(r.data.tags["device"] for r in synced) == ["cpu", "cuda"]
    assert synced[0].data.params["n_heads"] == "4" and "n_heads" not in synced[0].data.metrics
    assert "fwd_ms" in synced[0].data.metrics


def test_each_point_keeps_its_configuration_beside_its_row_and_in_its_run(
        out_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """configs/<point_id>.json, written before the row, rebuilds the point; its run holds
    the same as config.json; a sync of the row logs it too."""
    points = experiments.points("smoke")[:2]
    monkeypatch.setattr(point, "run_point",
                        lambda point, *args, **kwargs: (Result({"fwd_ms": 1.0}), None))
    sweep.run_suite("sweep-configs", points, torch.device("cpu"), out_dir, _uri(out_dir),
                    progress=False)
    csv = out_dir / "sweep-configs" / "results.csv"
    rows = read_results(csv)
    assert list(rows["config_key"]) == [p.config_key for p in points]
    client = MlflowClient(tracking_uri=_uri(out_dir))
    experiment = client.get_experiment_by_name("sweep-configs").experiment_id
    for p in points:
        saved = read_config(csv, p.point_id)
        assert Point.from_config(saved) == p
        assert (saved["config_key"], saved["machine"], saved["device"]) == \
            (p.config_key, this_machine(), "cpu")
        (run,) = client.search_runs([experiment], f"tags.point_id = '{p.point_id}'")
        logged = Path(client.download_artifacts(run.info.run_id, "config.json", str(out_dir)))
        assert json.loads(logged.read_text()) == saved
    with Tracker(_uri(out_dir), "sweep-configs", out_dir) as tracker:  # another machine's
        assert tracker.sync(rows.assign(machine="elsewhere")) == 2
    runs = client.search_runs([experiment], "tags.machine = 'elsewhere'")
    assert [a.path for r in runs for a in client.list_artifacts(r.info.run_id)] == \
        ["config.json"] * 2


def test_a_run_of_older_code_counts_for_its_migrated_row(out_dir: Path) -> None:
    """Older code tagged a point's run with its long id, which a migrated row keeps as its
    config_key: a sync does not log the row again."""
    import pandas as pd

    p = experiments.points("smoke")[0]
    with Tracker(_uri(out_dir), "sync-old-ids", out_dir) as tracker:
        tracker.log_point(p.config_key, {"mixer": p.subject}, {"fwd_ms": 1.0}, "ok",
                          machine="m1", device="cpu")
    rows = pd.DataFrame([{"point_id": p.point_id, "config_key": p.config_key, "machine": "m1",
                          "device": "cpu", "status": "ok", "fwd_ms": 1.0, "message": ""}])
    with Tracker(_uri(out_dir), "sync-old-ids", out_dir) as tracker:
        assert tracker.sync(rows) == 0
        assert tracker.sync(rows.assign(machine="m2")) == 1


def test_a_late_row_keeps_when_its_point_ran(out_dir: Path) -> None:
    """Synced later, a row's run still starts and ends when the point did (measured_at is
    its end, wall_s its length), and is named like a live one."""
    import pandas as pd

    uri = _uri(out_dir)
    rows = pd.DataFrame([{"point_id": "p", "machine": "m1", "device": "cpu", "status": "ok",
                          "mixer": "gru", "seq_len": 16, "d_model": 8, "fwd_ms": 1.0,
                          "wall_s": 30.0, "measured_at": "2026-01-02T03:04:05+00:00"}])
    with Tracker(uri, "late", out_dir) as tracker:
        assert tracker.sync(rows) == 1
    client = MlflowClient(uri)
    (run,) = client.search_runs([tracker.experiment_id], "tags.point_id = 'p'")
    assert run.info.run_name == "gru seq_len=16 d_model=8"
    assert run.info.end_time == 1767323045000
    assert run.info.end_time - run.info.start_time == 30_000


def test_a_long_run_name_fits_postgresql_and_stays_distinct() -> None:
    from harness.track.names import RUN_NAME_LIMIT, run_name

    params = {"model": "mixer-lm", "seq_len": 64, "d_model": 32, "study": "x" * 300}
    a, b = run_name(params, "point-a"), run_name(params, "point-b")
    assert len(a) == len(b) == RUN_NAME_LIMIT
    assert a.startswith("mixer-lm seq_len=64 d_model=32") and a != b
    assert run_name({"model": "gru"}, "p") == "gru"  # no sizes known: none named


def test_a_sweep_that_loses_the_race_to_tag_the_experiment_sets_it_again(tmp_path):
    """Two sweeps starting at once may both insert the experiment's tags; the store answers
    the later one with a UNIQUE constraint error, and its sweep must not turn tracking off
    for that (a run of three sweeps lost one's MLflow runs so)."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    real, lost = client.set_experiment_tag, []

    def racing(experiment_id, key, value):
        if not lost:  # the other sweep's insert lands first: this one's fails as it would
            real(experiment_id, key, value)
            lost.append(key)
            raise MlflowException("(sqlite3.IntegrityError) UNIQUE constraint failed: "
                                  "experiment_tags.key, experiment_tags.experiment_id")
        real(experiment_id, key, value)

    with Tracker(uri, "raced", tmp_path, {}, description="a note") as tracker:
        tracker._client.set_experiment_tag = racing
        experiment_id = tracker._experiment()
        assert tracker.error is None and lost
    assert client.get_experiment(experiment_id).tags["mlflow.note.content"] == "a note"
