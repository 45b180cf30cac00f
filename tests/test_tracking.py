"""MLflow tracking (issue 20, item 7) against a local file store, read back with the client:
parameters, the bound and gain per step, and the report files as artifacts."""

from __future__ import annotations

import json
import math

import pytest

from helpers import random_discrete
from vmi_spark.job import main

mlflow = pytest.importorskip("mlflow")

REPORT = {
    "method": "vmi_naive", "label": "y", "input": "db.t",
    "features": ["a", "b", "c", "d"], "selected": ["c", "a", "d"],
    "selected_indices": [2, 0, 3], "scores": [0.5, 0.625, 0.125],
    "gains": [0.5, 0.125, 0.125], "blocks": [0, 0, 1], "restarts": 1,
    "parameters": {"method": "vmi_naive", "num_features": 3, "restart_tolerance": 0.2,
                   "num_bins": 10},
    "total_seconds": 1.5,
}


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A fresh file store as the tracking URI (and no run left active)."""
    uri = f"file:{tmp_path / 'mlruns'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # mlflow 3 wants an opt-in
    mlflow.set_tracking_uri(uri)
    yield mlflow.MlflowClient(tracking_uri=uri)
    while mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.set_tracking_uri(None)


def _history(client, run_id, key):
    return [(m.step, m.value) for m in
            sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)]


def _artifacts(client, run_id):
    return sorted(a.path for a in client.list_artifacts(run_id, "vmi_spark"))


def test_log_selection_new_run_and_active_run(store, tmp_path):
    from vmi_spark.tracking import log_selection

    run_id = log_selection(REPORT)
    assert mlflow.active_run() is None  # the run it started is ended
    run = store.get_run(run_id)
    assert run.info.run_name == "vmi_spark vmi_naive"
    assert run.data.params == {"method": "vmi_naive", "num_features": "3",
                               "restart_tolerance": "0.2", "num_bins": "10", "label": "y",
                               "input": "db.t"}
    assert _history(store, run_id, "bound") == [(1, 0.5), (2, 0.625), (3, 0.125)]
    assert _history(store, run_id, "gain") == [(1, 0.5), (2, 0.125), (3, 0.125)]
    assert _history(store, run_id, "block") == [(1, 0.0), (2, 0.0), (3, 1.0)]
    assert run.data.metrics["num_selected"] == 3 and run.data.metrics["restarts"] == 1
    assert run.data.tags["vmi_spark.selected"] == "c,a,d"
    names = {"vmi_spark/selection.json", "vmi_spark/report.md", "vmi_spark/steps.csv"}
    assert names <= set(_artifacts(store, run_id))
    got = json.loads(open(store.download_artifacts(run_id, "vmi_spark/selection.json",
                                                   str(tmp_path))).read())
    assert got == REPORT
    steps = open(store.download_artifacts(run_id, "vmi_spark/steps.csv", str(tmp_path))).read()
    assert steps.splitlines()[1:] == ["1,c,2,0.5,0.5,0", "2,a,0,0.625,0.125,0",
                                      "3,d,3,0.125,0.125,1"]
    # inside an active run: logged there, and the run stays open
    with mlflow.start_run() as active:
        assert log_selection({**REPORT, "method": "mrmr"}) == active.info.run_id
        assert mlflow.active_run().info.run_id == active.info.run_id
    # the comparison criteria log a score, not a bound
    assert _history(store, active.info.run_id, "score")[0] == (1, 0.5)
    assert not store.get_metric_history(active.info.run_id, "bound")


def test_log_if_active_only_in_a_run(store):
    from vmi_spark.tracking import log_if_active

    assert log_if_active(REPORT) is None
    assert not store.search_runs([e.experiment_id for e in store.search_experiments()])
    with mlflow.start_run() as run:
        assert log_if_active(REPORT) == run.info.run_id


def test_job_mlflow_flag_logs_the_written_files(spark, store, tmp_path, capsys):
    pdf = random_discrete(5, n=200, d=5)
    src = tmp_path / "t.parquet"
    spark.createDataFrame(pdf).write.parquet(str(src))
    out = tmp_path / "out"
    rc = main(["--input", str(src), "--label", "y", "--num-features", "3", "--output", str(out),
               "--mlflow", "--quiet"], spark=spark)
    assert rc == 0, capsys.readouterr().err
    rep = json.loads((out / "selection.json").read_text())
    runs = store.search_runs([e.experiment_id for e in store.search_experiments()])
    assert len(runs) == 1
    run_id = runs[0].info.run_id
    assert [v for _, v in _history(store, run_id, "bound")] == rep["scores"]
    assert [v for _, v in _history(store, run_id, "gain")] == rep["gains"]
    assert runs[0].data.params["num_features"] == "3"
    assert set(_artifacts(store, run_id)) >= {"vmi_spark/selection.json", "vmi_spark/report.md",
                                              "vmi_spark/steps.csv"}
    for name in ("selection.json", "report.md", "steps.csv"):
        got = store.download_artifacts(run_id, f"vmi_spark/{name}", str(tmp_path / "dl"))
        assert open(got, "rb").read() == (out / name).read_bytes()


def test_estimator_fit_in_an_active_run_is_logged(spark, store):
    from vmi_spark import VMISelector

    pdf = random_discrete(6, n=200, d=5)
    cols = [c for c in pdf.columns if c != "y"]
    with mlflow.start_run() as run:
        model = VMISelector(inputCols=cols, labelCol="y", numTopFeatures=2,
                            method="vmi_pairwise").fit(spark.createDataFrame(pdf))
    hist = _history(store, run.info.run_id, "bound")
    assert [s for s, _ in hist] == [1, 2]
    assert all(math.isclose(a, b, rel_tol=0, abs_tol=0) for (_, a), b in zip(hist, model.scores))
    assert store.get_run(run.info.run_id).data.params["method"] == "vmi_pairwise"


def test_mlflow_flag_without_mlflow_is_one_line_before_spark(monkeypatch, capsys, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "mlflow" else real(name, *a))
    (tmp_path / "in").mkdir()
    rc = main(["--input", str(tmp_path / "in"), "--label", "y", "--output", str(tmp_path / "o"),
               "--mlflow"], spark=object())  # a session it must not touch
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert err[0] == "select_features: error: --mlflow needs MLflow: pip install " \
                     "'vmi_spark[mlflow]'"
    assert not (tmp_path / "o").exists()


# ----------------------------------------------------------------- issue 33 item 3: bounded


def _free_port() -> int:
    """A local port nobody listens on (bound, then closed)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def silent_server():
    """A tracking URI whose server accepts connections and never answers."""
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        srv.close()


def _finishes(fn, guard: float = 150.0):
    """``fn()`` in a thread; the test fails instead of hanging when it is still running after
    ``guard`` seconds (a liveness guard far above the bound under test, not a timing)."""
    import threading

    out: dict = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - raised in the test's thread below
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(guard)
    assert not t.is_alive(), "MLflow logging hung"
    if "error" in out:
        raise out["error"]
    return out["value"]


def _job_with_tracking(spark, tmp_path, uri, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow.set_tracking_uri(uri)
    pdf = random_discrete(5, n=200, d=5)
    src = tmp_path / "t.parquet"
    pdf.to_parquet(src)
    out = tmp_path / "out"
    try:
        rc = _finishes(lambda: main(["--input", str(src), "--label", "y", "--num-features",
                                     "2", "--output", str(out), "--mlflow", "--quiet"],
                                    spark=spark))
    finally:
        mlflow.set_tracking_uri(None)
    err = capsys.readouterr().err
    assert rc == 4, err  # written, not logged: not a success with --mlflow (issue 44 item 6)
    assert json.loads((out / "selection.json").read_text())["selected"]
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("select_features: error: --mlflow: the selection was written "
                               "but not logged to MLflow (exit status 4): "), err
    assert "Traceback" not in err
    return lines[0]


def test_an_unreachable_tracking_server_is_one_error_line(spark, tmp_path, monkeypatch, capsys):
    """MLFLOW_TRACKING_URI=http://127.0.0.1:<closed port> --mlflow hung the job for more
    than 200 s after its outputs were written (MLflow's retries): one try per request,
    then the job's one error line and exit status 4."""
    line = _job_with_tracking(spark, tmp_path, f"http://127.0.0.1:{_free_port()}",
                              monkeypatch, capsys)
    assert "127.0.0.1" in line
    import os

    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ  # restored after the call


def test_a_silent_tracking_server_is_abandoned_at_the_deadline(spark, tmp_path, monkeypatch,
                                                               set_limits, capsys, silent_server):
    """A server that never answers: the job waits DEADLINE_SECONDS at most, then prints one
    error line and exits 4 (the worker thread is left to time out on its own)."""

    set_limits(deadline_seconds=1.0)
    line = _job_with_tracking(spark, tmp_path, silent_server, monkeypatch, capsys)
    assert "MLflow did not answer within 1 s" in line


def test_log_selection_is_bounded_where_it_is_called(silent_server, monkeypatch):
    """The library call (also what a fit inside an active run makes) raises TimeoutError
    at its deadline instead of waiting for MLflow's 7 retries of 120 s."""
    from vmi_spark.tracking import log_selection

    monkeypatch.setenv("MLFLOW_TRACKING_URI", silent_server)
    mlflow.set_tracking_uri(silent_server)
    try:
        with pytest.raises(TimeoutError, match=f"within 0.5 s \\(tracking URI {silent_server}"):
            _finishes(lambda: log_selection(REPORT, timeout=0.5))
    finally:
        mlflow.set_tracking_uri(None)
    assert mlflow.active_run() is None


# ------------------------------------- issue 44 item 6: a local store that works, or exit 2


@pytest.fixture
def sqlite_store(tmp_path, monkeypatch):
    """docs/usage.md's local store: sqlite:/// (what the [mlflow] extra can use under MLflow
    3), an experiment whose artifacts go to a directory of its own; run from tmp_path so
    that a default ./mlruns would land there, not in the repository."""
    pytest.importorskip("sqlalchemy")
    pytest.importorskip("alembic")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    uri = f"sqlite:///{tmp_path / 'tracking' / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow.set_tracking_uri(uri)
    client = mlflow.MlflowClient(tracking_uri=uri)
    client.create_experiment("vmi", artifact_location=str(tmp_path / "artifacts"))
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "vmi")
    yield client
    while mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.set_tracking_uri(None)


def test_job_logs_to_a_local_sqlite_store(spark, sqlite_store, tmp_path, capsys):
    """--mlflow against sqlite:///PATH/mlflow.db (no MLFLOW_ALLOW_FILE_STORE): the run is
    there with the parameters, the bound and gain of every step and the report files,
    byte for byte those in --output, stored under the experiment's artifact location."""
    pdf = random_discrete(7, n=200, d=5)
    src = tmp_path / "t.parquet"
    pdf.to_parquet(src)
    out = tmp_path / "out"
    rc = main(["--input", str(src), "--label", "y", "--num-features", "3", "--output", str(out),
               "--mlflow", "--quiet"], spark=spark)
    err = capsys.readouterr().err
    assert rc == 0 and not err.strip(), err  # --quiet: MLflow's INFO lines too
    rep = json.loads((out / "selection.json").read_text())
    exp = sqlite_store.get_experiment_by_name("vmi")
    runs = sqlite_store.search_runs([exp.experiment_id])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    run_id = runs[0].info.run_id
    assert runs[0].data.params["num_features"] == "3"
    assert runs[0].data.params["label"] == "y" and runs[0].data.params["input"] == str(src)
    assert _history(sqlite_store, run_id, "bound") == list(enumerate(rep["scores"], 1))
    assert _history(sqlite_store, run_id, "gain") == list(enumerate(rep["gains"], 1))
    assert runs[0].data.metrics["num_selected"] == 3
    assert runs[0].data.tags["vmi_spark.selected"] == ",".join(rep["selected"])
    for name in ("selection.json", "report.md", "steps.csv"):
        stored = tmp_path / "artifacts" / run_id / "artifacts" / "vmi_spark" / name
        assert stored.read_bytes() == (out / name).read_bytes()
    assert not (tmp_path / "mlruns").exists()


def _refused_before_spark(tmp_path, capsys) -> str:
    """The job with --mlflow and a session it must not touch: exit 2, one line, nothing
    written (no --output, no store); returns the line."""
    (tmp_path / "in").mkdir(exist_ok=True)
    before = sorted(p.name for p in tmp_path.iterdir())
    rc = main(["--input", str(tmp_path / "in"), "--label", "y", "--output", str(tmp_path / "o"),
               "--mlflow"], spark=object())
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert err[0].startswith("select_features: error: --mlflow: tracking URI ")
    return err[0]


def test_a_file_store_mlflow_refuses_is_exit_2_before_spark(tmp_path, monkeypatch, capsys):
    """MLflow 3 refuses its file store unless MLFLOW_ALLOW_FILE_STORE=true: the job logged
    nothing and exited 0; now it says so before Spark starts (MLflow 2 takes it)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    uri = f"file:{tmp_path / 'mlruns'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    major = int(mlflow.__version__.split(".")[0])
    if major < 3:
        pytest.skip("MLflow 2 uses its file store")
    with pytest.raises(Exception, match="maintenance mode"):  # what MLflow itself does
        mlflow.MlflowClient(tracking_uri=uri).search_experiments()
    line = _refused_before_spark(tmp_path, capsys)
    assert line == (f"select_features: error: --mlflow: tracking URI '{uri}' is a file "
                    f"store, which MLflow {mlflow.__version__} refuses (maintenance mode): set "
                    "MLFLOW_TRACKING_URI=sqlite:///PATH/mlflow.db (docs/usage.md, MLflow), or "
                    "MLFLOW_ALLOW_FILE_STORE=true to use it anyway")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # the opt-out is honoured
    from vmi_spark.tracking import check_tracking_uri

    assert check_tracking_uri() is None


def test_sqlite_without_sqlalchemy_is_exit_2_before_spark(tmp_path, monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "alembic" else real(name, *a))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    line = _refused_before_spark(tmp_path, capsys)
    assert line == (f"select_features: error: --mlflow: tracking URI '{uri}' needs alembic "
                    "(not in mlflow-skinny): pip install 'vmi_spark[mlflow]'")


def test_an_unusable_tracking_uri_is_exit_2_before_spark(tmp_path, monkeypatch, capsys):
    (tmp_path / "db").mkdir()
    uri = f"sqlite:///{tmp_path / 'db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    assert _refused_before_spark(tmp_path, capsys) == (
        f"select_features: error: --mlflow: tracking URI '{uri}': '{tmp_path / 'db'}' is a "
        "directory, not a database file")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "htp://typo:5000")
    assert _refused_before_spark(tmp_path, capsys) == (
        "select_features: error: --mlflow: tracking URI 'htp://typo:5000': MLflow has no "
        "tracking store for scheme 'htp'")
