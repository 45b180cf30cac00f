"""Run a whole selection on Spark: resolve columns, plan, encode, cache, select."""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame

from ..checkpoint import held
from ..core.encoding import EncodingPlan
from ..core.greedy import Selection
from ..core.kde import kde_conditional
from ..core.planning import AUTO_ROWS_PER_VALUE, Planned, check_fits, thin_classes
from ..core.report_schema import SelectionReport
from ..core.summary import selection_report
from ..core.units import count_text
from ..errors import literal, phrase, phrased
from ..params import Settings, as_given
from ..run import run_planned
from .chunks.storage import check_checkpoint_dir, check_staging
from .columns import resolve
from .grid import grid_plan
from .plan import RowSource, plan_from_schema
from .routes import (
    RowRoute,
    check_execution,
    choose_execution,
    choose_rows,
    start_execution,
)
from .sources.arrow_source import (
    ParquetSource,
)
from .sources.vector_source import vector_lengths_checked

log = logging.getLogger("vmi_spark")


@dataclass
class Phases(dict):
    """Seconds per phase of a run, in the order they happened (``phase_seconds``)."""

    def __init__(self) -> None:
        super().__init__()
        self._t = time.perf_counter()

    def lap(self, name: str) -> None:
        """Close phase ``name``: the seconds since the previous lap."""
        now = time.perf_counter()
        self[name] = self.get(name, 0.0) + (now - self._t)
        self._t = now


class _TimedSource:
    """The planner's passes of a :class:`RowSource`, each a lap of ``phases`` (planning's
    breakdown)."""

    def __init__(self, source: RowSource, phases: Phases):
        self._source, self._phases = source, phases

    def column_stats(self, *a: Any, **k: Any) -> dict[str, Any]:
        self._phases.lap("setup")
        out = self._source.column_stats(*a, **k)
        self._phases.lap("statistics")
        return out

    def quantile_splits(self, *a: Any, **k: Any) -> dict[str, tuple[list[float], list[float]]]:
        self._phases.lap("plan")
        out = self._source.quantile_splits(*a, **k)
        self._phases.lap("bin_edges")
        return out

    def top_values(self, *a: Any, **k: Any) -> dict[str, Any]:
        self._phases.lap("plan")
        out = self._source.top_values(*a, **k)
        self._phases.lap("categories")
        return out


@dataclass
class SelectionRun:
    """A finished selection with everything the report needs."""

    plan: EncodingPlan
    selection: Selection
    params: dict[str, Any]
    total_seconds: float = 0.0
    prepare_seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    execution: str = "passes"
    storage: str = "cache"
    phases: dict[str, float] = field(default_factory=dict)
    reader: str = "spark"
    label_reason: str = ""
    #: the stability runs' summary (:func:`vmi_spark.core.stability.summarize`), or None
    stability: dict[str, Any] | None = None

    def report(self) -> SelectionReport:
        """The run's ``selection.json`` (:func:`vmi_spark.core.summary.selection_report`
        and how the selection ran)."""
        out = selection_report(self.plan, self.selection, self.params, self.label_reason)
        out.update({"execution": self.execution, "storage": self.storage,
                    "reader": self.reader, "prepare_seconds": self.prepare_seconds,
                    "phase_seconds": dict(self.phases), "total_seconds": self.total_seconds,
                    "warnings": list(self.warnings)})
        if self.stability is not None:
            out["stability"] = self.stability
        return out


_STORAGE_WORDS = {"staging": "a Parquet copy in the staging directory",
                  "recompute": "recomputing them from the input in every pass"}


def run_selection(df: DataFrame, label: str, settings: Settings | None = None, *,
                  features: list[str] | None = None, exclude: list[str] | None = None,
                  features_col: str | None = None, weight_col: str | None = None,
                  on_step: Callable[[Selection], None] | None = None,
                  storage_level: StorageLevel = StorageLevel.MEMORY_AND_DISK,
                  source: ParquetSource | None = None, **values: Any) -> SelectionRun:
    """Select features of ``df`` for ``label`` on Spark (see :class:`vmi_spark.VMISelector`).

    ``weight_col`` names a numeric column of row weights (:mod:`vmi_spark.core.weights`:
    a row of weight w counts as w rows, 0 as none); it is never a feature. With
    ``stability`` B > 0 the selection is also run on B half-samples of the encoded rows
    (:mod:`vmi_spark.core.stability`), reported as ``report()["stability"]``.

    With ``checkpoint_dir`` the state of the selection is saved there after every
    completed step (:mod:`vmi_spark.checkpoint`), and a run that finds a checkpoint of
    the same input and parameters continues after its last step.

    ``source`` (from :func:`vmi_spark.spark.sources.arrow_source.parquet_source`) names the
    Parquet files ``df`` is a plain scan of: the passes that read every row then read
    the files with pyarrow in the Python workers, which is several times faster for
    wide tables and gives the same result. Without it, ``reader="auto"`` finds them
    itself when ``df`` is ``spark.read.parquet(...)`` or a projection of its columns
    (:func:`vmi_spark.spark.sources.arrow_source.plain_parquet_scan`), also for a vector
    ``features_col`` (its stored struct is cut in the workers:
    :class:`vmi_spark.spark.sources.vector_source.ParquetVectorReader`); ``reader="spark"``
    reads with Spark, a ``source`` given included. ``source`` is ignored with
    ``features_col``, and both with the ``kde`` estimator. ``report()["reader"]`` says
    which read the rows: ``"pyarrow"`` or ``"spark"``.

    ``execution`` says how the greedy steps run: ``"resident"`` keeps the chunks in
    long-running barrier tasks that the driver talks to directly (one round trip per
    step, :mod:`vmi_spark.spark.executions.resident`); ``"passes"`` runs one Spark job per pass
    (:class:`vmi_spark.spark.executions.passes.SparkBackend`); ``"auto"`` (the default) is
    resident where the session allows it (a classic session without dynamic
    allocation) and falls back to passes, with a warning, if the tasks cannot start.
    The answer is the same either way.

    ``selection_mode`` says how many features are selected, as in Spark's
    ``UnivariateFeatureSelector``: ``"numTopFeatures"`` (``num_features``), ``"gain"``
    (until the best candidate gains less than ``selection_threshold`` nats, default
    0.01, and no restart would help) or ``"fraction"`` (``selection_threshold`` of
    the candidates, default 0.1). ``report()["stop_reason"]`` says why it ended.

    ``chunk_storage`` (earlier name ``block_storage``, still accepted) says where the
    encoded rows live between passes
    (:mod:`vmi_spark.spark.chunks.storage`): ``"auto"`` caches them, or, where the session
    refuses caching (Databricks serverless), writes them once under ``staging_dir``
    (a directory Spark can write and read, e.g. a Unity Catalog volume) and removes
    that copy afterwards, or without ``staging_dir`` recomputes them in every pass.
    """
    t0 = time.perf_counter()
    phases = Phases()
    settings = _settings(settings, values)
    # a vector of another length, met by any read of the rows, is the one-line InputError
    # of vector_names' full check
    vectors = features_col if settings.estimator != "kde" else None
    with phrased(settings.style), vector_lengths_checked(df, vectors, label):
        if settings.staging_dir is not None:  # before anything is read, as the job checks
            check_staging(df, settings.staging_dir)
        if settings.checkpoint_dir is not None:
            check_checkpoint_dir(df, settings.checkpoint_dir)
        check_execution(df.sparkSession, settings)
        columns = resolve(df, label, features, exclude, features_col, weight_col,
                          settings.estimator)
        route = choose_rows(columns, source, settings)
        check_fits(settings.method, len(columns.features))  # before the rows are read
        planned = _plan(route, settings, phases)
    plan = planned.plan
    notes = route.notes + planned.notes + _plan_notes(plan, settings.style)
    log.info("label '%s': %s (%s)", label, plan.label_type, planned.label.reason)
    for n in notes:
        warnings.warn(n, UserWarning, stacklevel=2)
    execution = choose_execution(plan, route, settings)
    with ExitStack() as steps:  # what the steps run under (Arrow batches sized for the heap)
        backend, kept = start_execution(execution, route, plan, planned.skip_cols, settings,
                                        storage_level, notes, phases.lap, steps)
        phases.lap("start_execution")
        t_prep = time.perf_counter() - t0
        try:
            keeper = (steps.enter_context(held(settings, plan.to_json(), len(plan.columns),
                                               backend.feature_counts, notes))
                      if settings.checkpoint_dir is not None else None)
            ran = run_planned(backend, planned, settings, notes, on_step=on_step,
                              keeper=keeper, conditional_fn=_smoothing(plan, settings),
                              lap=phases.lap)
        finally:
            backend.close()
            if kept is not None:
                kept.release()
    phases.lap("release")
    notes += backend.notes()
    how = kept.how if kept is not None else "driver"
    if how in _STORAGE_WORDS:  # not cached though the session was asked to
        notes.append(f"the encoded rows were kept by {_STORAGE_WORDS[how]} (the session "
                     "cannot cache DataFrames)")
    return SelectionRun(plan=plan, selection=ran.selection, params=settings.result(),
                        total_seconds=time.perf_counter() - t0, prepare_seconds=t_prep,
                        warnings=notes, execution=backend.execution, storage=how,
                        phases=dict(phases), reader=route.read_by,
                        label_reason=planned.label.reason, stability=ran.stability)


def _settings(settings: Settings | None, values: dict[str, Any]) -> Settings:
    """``settings`` with the keyword ``values`` applied (spec keys or their earlier names),
    checked once."""
    with as_given(values, "python") as values:
        if settings is None:
            return Settings.of(values, "python")
        return settings.replace(**values) if values else settings


def _plan(route: RowRoute, settings: Settings, phases: Phases) -> Planned:
    """The encoding plan of the rows of ``route`` (:func:`.plan.plan_from_schema`, its passes
    timed as phases; with the ``kde`` estimator its grid columns)."""
    cols = route.columns
    with route.source.reading():
        planned = plan_from_schema(cols.schema, cols.label, cols.features, settings,
                                   _TimedSource(route.source, phases), cols.weight_col)
    if settings.estimator == "kde":
        planned.plan = grid_plan(cols.df, planned.plan, skip_cols=planned.skip_cols,
                                 weight_col=cols.weight_col)
    return planned


def _plan_notes(plan: EncodingPlan, style: str) -> list[str]:
    """What the run's warnings say about the rows: dropped and skipped rows, classes too
    thin to estimate (a label asked to be categorical)."""
    notes: list[str] = []
    if plan.rows_dropped:
        notes.append(f"dropped {plan.rows_dropped} rows with a null label")
    if plan.rows_skipped:
        notes.append(f"skipped {plan.rows_skipped} rows with missing feature values")
    if plan.label_type == "categorical" and plan.label_dtype != "string" and \
            thin_classes(len(plan.classes), plan.weight_rows):
        notes.append(phrase(f"label '{literal(plan.label)}' has {len(plan.classes)} classes "
                            f"in {count_text(plan.weight_rows, plan.weights is not None)}, "
                            f"fewer than {AUTO_ROWS_PER_VALUE} rows a class: it looks like a "
                            "regression target; set {label_type} to continuous or auto to bin "
                            "it", style))
    return notes


def _smoothing(plan: EncodingPlan, settings: Settings) -> Callable | None:
    """The ``kde`` estimator's p(x_i | y) of the plan's grid columns, else None."""
    if settings.estimator != "kde":
        return None
    grid = [j for j, c in enumerate(plan.columns) if c.kind == "grid"]
    cells = [len(c.splits or []) + 1 for c in plan.columns]
    missing = [c.missing for c in plan.columns]
    return partial(kde_conditional, grid_columns=grid, grid_cells=cells, missing=missing)
