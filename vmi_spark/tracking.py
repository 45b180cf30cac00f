"""Log a selection to MLflow: parameters, the bound and gain per step, and the report files.

MLflow is an optional extra (``pip install 'vmi_spark[mlflow]'``; Databricks runtimes
have it). :func:`log_selection` logs a selection report (the job's ``selection.json``,
``VMISelectorModel.report``, ``VMIFeatureSelector.report()``) to the active MLflow run,
or to a new run if none is active. The job calls it with ``--mlflow``, or by itself when
the process already has an active run; :class:`~vmi_spark.ml.VMISelector` calls
:func:`log_if_active` after every fit, so a fit inside ``with mlflow.start_run():`` is
logged with no extra code.

What is logged:

* parameters: the report's ``parameters`` (method, K, tolerance, binning, ...) and the
  label, input and format when known;
* metrics with ``step`` = the selection step (1, 2, ...): ``bound`` and ``gain`` for the
  VMI methods (``score`` and ``gain`` for the comparison criteria), and ``block``; and
  without step: ``num_selected``, ``restarts``, ``total_seconds``;
* artifacts under ``vmi_spark/``: ``selection.json``, ``report.md``, ``steps.csv`` and
  ``bounds.png`` (when matplotlib is installed);
* tag ``vmi_spark.selected``: the selected features, comma-separated (shortened if long).

Logging is bounded: it runs in a worker thread that the caller waits for at most
:data:`DEADLINE_SECONDS`; an unreachable or silent tracking server ends in a
``TimeoutError`` (a log line in the job and after a fit), never a hang. The job also lets
MLflow's HTTP client try each request once, with a 10 s timeout, unless
``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` / ``MLFLOW_HTTP_REQUEST_TIMEOUT`` say otherwise.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .core import limits
from .core.limits import DEFAULT
from .core.report_schema import SelectionReport

__all__ = ["log_selection", "log_if_active", "active_run", "check_tracking_uri", "MLFLOW_HINT"]

log = logging.getLogger("vmi_spark")

MLFLOW_HINT = "pip install 'vmi_spark[mlflow]'"
#: the artifact directory of a run that holds the report files
ARTIFACT_PATH = "vmi_spark"
#: longest parameter and tag value sent (MLflow stores at most 6000 and 8000 characters)
_MAX_VALUE = 5000
_REPORT_FILES = ("selection.json", "report.md", "steps.csv", "bounds.png")
#: the longest a call of :func:`log_selection` waits for MLflow (seconds)
#: (the default: the code reads ``limits.current().deadline_seconds``)
DEADLINE_SECONDS = DEFAULT.deadline_seconds
#: MLflow's HTTP client settings the job uses unless the environment sets them: one try
#: per request, 10 s each (MLflow's own: 7 retries with exponential backoff, 120 s)
JOB_HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}


@contextmanager
def bounded_http() -> Iterator[None]:
    """Run the block with :data:`JOB_HTTP_DEFAULTS` in the environment where it sets none
    (restored after)."""
    added = [k for k in JOB_HTTP_DEFAULTS if k not in os.environ]
    for k in added:
        os.environ[k] = JOB_HTTP_DEFAULTS[k]
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


def _mlflow():
    try:
        import mlflow
    except ImportError as exc:
        raise ImportError(f"MLflow tracking needs mlflow: {MLFLOW_HINT}") from exc
    return mlflow


def check_tracking_uri() -> str | None:
    """Why MLflow cannot log to its tracking URI as this process is set up, or None.

    What can be told without writing anything or asking a server (the job calls it with
    ``--mlflow`` before Spark starts): mlflow installed; a file store (``file:``, a plain
    path, or ``./mlruns`` holding earlier runs) refused by MLflow 3 unless
    ``MLFLOW_ALLOW_FILE_STORE=true`` (maintenance mode); a ``sqlite:`` store without
    sqlalchemy and alembic (mlflow-skinny leaves them out; the ``[mlflow]`` extra has them)
    or whose database path is a directory; a scheme no tracking store is registered for.
    An ``http(s)``/``databricks`` URI is not contacted here: a failure to log to it is the
    job's error after the selection.
    """
    import importlib.util
    from urllib.parse import urlparse

    if importlib.util.find_spec("mlflow") is None:
        return f"--mlflow needs MLflow: {MLFLOW_HINT}"
    mlflow = _mlflow()
    uri = mlflow.get_tracking_uri()  # MLFLOW_TRACKING_URI, or MLflow's default
    scheme = urlparse(uri).scheme
    where = f"--mlflow: tracking URI '{uri}'"
    if scheme in ("", "file"):
        major = int(mlflow.__version__.split(".")[0])
        allowed = os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").strip().lower() in ("true", "1")
        if major >= 3 and not allowed:
            return (f"{where} is a file store, which MLflow {mlflow.__version__} refuses "
                    "(maintenance mode): set MLFLOW_TRACKING_URI=sqlite:///PATH/mlflow.db "
                    "(docs/usage.md, MLflow), or MLFLOW_ALLOW_FILE_STORE=true to use it anyway")
        return None
    if scheme == "sqlite":
        missing = [m for m in ("sqlalchemy", "alembic") if importlib.util.find_spec(m) is None]
        if missing:
            return (f"{where} needs {' and '.join(missing)} (not in mlflow-skinny): "
                    f"{MLFLOW_HINT}")
        path = uri[len("sqlite:///"):] if uri.startswith("sqlite:///") else ""
        if path and path != ":memory:" and os.path.isdir(path):
            return f"{where}: '{path}' is a directory, not a database file"
        return None
    try:  # the schemes MLflow (or a plugin) has a tracking store for
        from mlflow.tracking._tracking_service.utils import _tracking_store_registry

        known = set(_tracking_store_registry._registry)
    except Exception:  # noqa: BLE001 - another MLflow: leave it to the logging
        return None
    if scheme not in known and uri not in known:
        return f"{where}: MLflow has no tracking store for scheme '{scheme}'"
    return None


def active_run():
    """The active MLflow run of this process, or None (also when mlflow was never imported:
    it is not imported here just to ask)."""
    mlflow = sys.modules.get("mlflow")
    if mlflow is None:
        return None
    try:
        return mlflow.active_run()
    except Exception:  # noqa: BLE001 - a broken tracking setup is "no run"
        return None


def _value(v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v, default=str)
    return text if len(text) <= _MAX_VALUE else text[:_MAX_VALUE - 1] + "\u2026"


def selection_params(report: SelectionReport) -> dict[str, str]:
    """The run parameters of a report: its ``parameters``, and label, input and format."""
    params = {str(k): _value(v) for k, v in (report.get("parameters") or {}).items()}
    for key in ("method", "label", "input", "format", "reader", "execution"):
        if report.get(key) is not None and key not in params:
            params[key] = _value(report[key])
    return params


def step_metrics(report: SelectionReport) -> list[tuple[str, float, int]]:
    """``(key, value, step)`` per selection step: bound (or score), gain and block."""
    from .params import is_vmi
    from .report import step_rows

    score_key = "bound" if is_vmi(report.get("method", "")) else "score"
    out: list[tuple[str, float, int]] = []
    for step, _name, _index, score, gain, block in step_rows(report):
        out += [(score_key, score, step), ("gain", gain, step), ("block", float(block), step)]
    return out


def summary_metrics(report: SelectionReport) -> list[tuple[str, float]]:
    """``(key, value)`` of the stability runs (their index and its 95% interval) and of the
    comparison with ``--previous`` (the Jaccard index, 1 when the selection changed)."""
    out: list[tuple[str, float]] = []
    st = report.get("stability")
    if isinstance(st, dict) and isinstance(st.get("index"), float):
        ci = st.get("ci") or [st["index"], st["index"]]
        out += [("stability_index", st["index"]), ("stability_ci_low", float(ci[0])),
                ("stability_ci_high", float(ci[1]))]
    ch = report.get("changes")
    if isinstance(ch, dict) and ch.get("compared"):
        out += [("changes_jaccard", float(ch["jaccard"])),
                ("selection_changed", 1.0 if ch.get("selected_changed") else 0.0)]
    return out


def write_report_files(report: SelectionReport, directory: str) -> list[str]:
    """Write the job's report files for ``report`` into ``directory``; returns their paths."""
    from .report import plot_bounds, plot_stability, render_markdown, write_steps_csv

    paths = [os.path.join(directory, n) for n in _REPORT_FILES]
    with open(paths[0], "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=2, ensure_ascii=False, allow_nan=False, default=str)
        fh.write("\n")
    with open(paths[1], "w", encoding="utf-8") as fh:
        fh.write(render_markdown(report))
    write_steps_csv(report, paths[2])
    try:
        plot_bounds(report, paths[3])
        if plot_stability(report, os.path.join(directory, "stability.png")) is not None:
            paths.append(os.path.join(directory, "stability.png"))
    except ImportError:
        paths.pop()
    return paths


def log_selection(report: SelectionReport, report_dir: str | None = None,
                  run_name: str | None = None,
                  timeout: float | None = None) -> str:
    """Log a selection report to the active MLflow run (or to a new one); returns its id.

    Parameters
    ----------
    report : dict
        A selection report (``selection.json``; ``VMISelectorModel.report``).
    report_dir : str, optional
        A directory holding the report files already (the job's ``--output``); its
        ``selection.json``, ``report.md``, ``steps.csv`` and ``bounds.png`` are logged.
        Without it the files are written from ``report`` to a temporary directory.
    run_name : str, optional
        Name of the run started when none is active (default ``vmi_spark <method>``).
    timeout : float, optional
        The most seconds to wait for MLflow (default :data:`DEADLINE_SECONDS`). The
        logging runs in a worker thread; past the deadline it is left to finish or fail
        on its own (a daemon thread) and this call raises ``TimeoutError``.

    Returns
    -------
    str
        The run id.

    Raises
    ------
    ImportError
        If mlflow is not installed.
    TimeoutError
        If MLflow did not answer within ``timeout`` seconds.

    Examples
    --------
    >>> import mlflow                                     # doctest: +SKIP
    >>> with mlflow.start_run():                          # doctest: +SKIP
    ...     model = VMISelector(inputCols=cols, labelCol="y").fit(df)  # logged by fit
    >>> log_selection(model.report)                       # doctest: +SKIP
    """
    mlflow = _mlflow()
    active = mlflow.active_run()  # the caller's (MLflow keeps one per thread)
    active_id = active.info.run_id if active is not None else None
    done: dict[str, Any] = {}

    def work() -> None:
        try:
            done["id"] = _log(mlflow, report, report_dir, run_name, active_id)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            done["error"] = exc

    worker = threading.Thread(target=work, name="vmi_spark-mlflow", daemon=True)
    worker.start()
    limit = limits.current().deadline_seconds if timeout is None else timeout
    worker.join(limit)
    if worker.is_alive():
        raise TimeoutError(f"MLflow did not answer within {limit:g} s (tracking URI "
                           f"{mlflow.get_tracking_uri()}); the selection was not logged")
    if "error" in done:
        raise done["error"]
    return done["id"]


def _log(mlflow, report: SelectionReport, report_dir: str | None, run_name: str | None,
         active_id: str | None) -> str:
    """What :func:`log_selection` does, in its worker thread: to run ``active_id``, or to a
    run started (and ended) here."""
    from mlflow.entities import Metric, Param

    own = active_id is None
    run_id: str = mlflow.start_run(run_name=run_name or f"vmi_spark {report.get('method', '')}"
                                   .strip()).info.run_id if active_id is None else active_id
    try:
        client = mlflow.MlflowClient()
        now = int(time.time() * 1000)
        metrics = [Metric(k, float(v), now, s) for k, v, s in step_metrics(report)]
        for key in ("restarts", "total_seconds"):
            if isinstance(report.get(key), (int, float)):
                metrics.append(Metric(key, float(report[key]), now, 0))
        metrics.append(Metric("num_selected", float(len(report.get("selected") or [])), now, 0))
        metrics += [Metric(k, v, now, 0) for k, v in summary_metrics(report)]
        params = [Param(k, v) for k, v in selection_params(report).items()]
        for i in range(0, len(params), 100):  # MLflow takes at most 100 params per batch
            client.log_batch(run_id, params=params[i:i + 100])
        for i in range(0, len(metrics), 1000):  # and 1000 metrics
            client.log_batch(run_id, metrics=metrics[i:i + 1000])
        client.set_tag(run_id, "vmi_spark.selected",
                       _value(",".join(map(str, report.get("selected") or []))))
        if report_dir is not None:
            for name in (*_REPORT_FILES, "stability.png"):
                path = os.path.join(report_dir, name)
                if os.path.isfile(path):
                    client.log_artifact(run_id, path, ARTIFACT_PATH)
        else:
            with tempfile.TemporaryDirectory(prefix="vmi-mlflow-") as tmp:
                for path in write_report_files(report, tmp):
                    client.log_artifact(run_id, path, ARTIFACT_PATH)
        log.info("logged the selection to MLflow run %s", run_id)
        return run_id
    finally:
        if own:
            mlflow.end_run()


def log_if_active(report: SelectionReport, report_dir: str | None = None) -> str | None:
    """:func:`log_selection` when this process has an active MLflow run; never raises
    (a tracking failure is a warning, not a failed selection). Returns the run id."""
    if active_run() is None:
        return None
    try:
        return log_selection(report, report_dir)
    except Exception as exc:  # noqa: BLE001 - tracking is a side channel
        log.warning("could not log the selection to MLflow: %s", exc)
        return None
