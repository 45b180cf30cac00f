"""Run a whole selection on Spark: resolve columns, plan, encode, cache, select."""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..checkpoint import Checkpoint, fingerprint
from ..core.bound import MAX_BLOCK_ROWS, whole_strides
from ..core.criteria import criterion
from ..core.encoding import SAMPLE_ROWS, EncodingPlan
from ..core.greedy import Backend, Selection, select
from ..core.kde import kde_conditional
from ..core.planning import AUTO_ROWS_PER_VALUE, thin_classes
from ..core.stability import HalfSample, run_stability, summarize
from ..core.summary import selection_report
from ..errors import InputError, literal, phrase, phrased
from ..params import METHOD_NAMES, Settings, parameter, plan_size
from .arrow_source import (
    BatchReader,
    ParquetReader,
    ParquetSource,
    parquet_source,
    plain_parquet_scan,
)
from .backend import SparkBackend
from .compat import arrow_reader_note
from .driver import (
    DRIVER_CELLS,
    DRIVER_PAIR_BYTES,
    PROBE_CELLS,
    DriverBackend,
    DriverRows,
    parquet_rows,
    probed_rows,
)
from .grid import grid_plan
from .plan import RowSource, build_plan, check_weight_col, is_numeric, quote, resolve_columns
from .resident import ResidentBackend, ResidentUnavailable
from .session import is_local, parallelism, storage_memory, task_slots, unavailable_reason
from .spark_source import SparkSource
from .storage import Kept, batch_rows, cache_batch_rows, keep
from .vector_source import (
    LENGTH_MARK,
    ParquetVectorReader,
    VectorReader,
    vector_array,
    vector_batches,
)

log = logging.getLogger("vmi_spark")

#: every selection method (the registry's names, kept here for existing imports)
ALL_METHODS = METHOD_NAMES
#: how p(x_i | y) of continuous features is estimated: quantile bins, or a binned KDE
ESTIMATORS = parameter("estimator").choices
#: smallest block (rows) when the rows are spread over the task slots
MIN_BLOCK_ROWS = 4096
#: most of a block manager's cache memory the encoded rows may take before they go to disk
CACHE_SHARE = 0.5
#: most bytes of one encoded block (its codes and classes)
BLOCK_BYTES = 8 << 20
#: bytes of per-row pairwise state a block may hold
_PAIR_BLOCK_BYTES = 32 << 20
#: how the greedy steps run: resident tasks if the session allows, else one Spark job a pass
EXECUTIONS = parameter("execution").choices


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
    """A :class:`RowSource` whose passes are laps of ``phases`` (planning's breakdown)."""

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

    def encode_blocks(self, *a: Any, **k: Any) -> DataFrame:
        return self._source.encode_blocks(*a, **k)


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

    def report(self) -> dict[str, Any]:
        """The run's ``selection.json`` (:func:`vmi_spark.core.summary.selection_report`
        and how the selection ran)."""
        out = selection_report(self.plan, self.selection, self.params, self.label_reason)
        out.update(execution=self.execution, storage=self.storage, reader=self.reader,
                   prepare_seconds=self.prepare_seconds, phase_seconds=dict(self.phases),
                   total_seconds=self.total_seconds, warnings=list(self.warnings))
        if self.stability is not None:
            out["stability"] = self.stability
        return out


def vector_names(df: DataFrame, features_col: str, label: str, *,
                 check: bool = True) -> list[str]:
    """The element names of vector column ``features_col`` (from ML metadata, else
    ``features[i]``), after checking it is a vector column whose vectors all have that
    many elements (one aggregate over the vectors; a null vector is missing values) and
    that the label exists with a usable type and is not one of the names.

    With ``check`` False and names in the ML metadata (what ``VectorAssembler`` writes)
    the aggregate is left out: the passes check the lengths as they read the rows
    (:class:`.vector_source.VectorLengthError`, :func:`vector_lengths_checked`). It cost
    a read of every vector, 3 s of a 20k x 2,000 selection's 9 s.
    """
    fields = {f.name: f for f in df.schema.fields}
    if features_col not in fields:
        raise InputError(f"features column '{features_col}' not found in the input")
    if label not in fields:
        raise InputError(f"label column '{label}' not found in the input")
    dtype = fields[features_col].dataType
    if type(dtype).__name__ != "VectorUDT":
        raise InputError(f"featuresCol '{features_col}' must be a vector column "
                         f"(pyspark.ml.linalg.Vector), not {dtype.simpleString()}")
    ldt = fields[label].dataType
    if not (is_numeric(ldt) or isinstance(ldt, (T.StringType, T.BooleanType))):
        raise InputError(f"label column '{label}' has unsupported type {ldt.simpleString()}")
    names = vector_attribute_names(fields[features_col].metadata)
    if names is None:
        shortest, longest, rows = _vector_lengths(df, features_col, None)
        if not rows:
            raise InputError("the input has no rows")
        names = [f"{features_col}[{i}]" for i in range(int(longest or 0))]
    elif check:
        shortest, longest, _ = _vector_lengths(df, features_col, len(names))
    else:
        shortest = None  # the passes check the lengths
    if shortest is not None and not shortest == longest == len(names):
        raise InputError(f"featuresCol '{features_col}' holds vectors of {shortest} to {longest} "
                         f"elements; every row must have the same length ({len(names)})")
    if label in names:
        raise InputError(f"label column '{label}' is also an element of featuresCol")
    if not names:
        raise InputError(f"featuresCol '{features_col}' holds empty vectors")
    return names


def _vector_lengths(df: DataFrame, features_col: str,
                    width: int | None) -> tuple[int | None, int | None, int]:
    """The shortest and longest vectors of ``features_col`` (None without a non-null
    vector) and the rows: one aggregate, in batches sized for ``width`` elements."""
    arr = vector_array(features_col)
    size = F.when(arr.isNotNull(), F.size(arr))
    with vector_batches(df.sparkSession, width):
        row = df.select(F.min(size), F.max(size), F.count(F.lit(1))).first()
    return (row[0], row[1], row[2]) if row is not None else (None, None, 0)


@contextmanager
def vector_lengths_checked(df: DataFrame, features_col: str | None,
                           label: str) -> Iterator[None]:
    """Run the block; a vector of another length met by it (:class:`.vector_source.
    VectorLengthError`, raised in the driver or in a Python worker and carried in the
    failed job's text) becomes the one-line :class:`InputError` of :func:`vector_names`'s
    full check, which names the shortest and longest vectors."""
    try:
        yield
    except Exception as exc:
        if features_col is None or LENGTH_MARK not in str(exc):
            raise
        vector_names(df, features_col, label)  # raises the InputError
        raise


def expand_vector(df: DataFrame, features_col: str, label: str,
                  weight_col: str | None = None) -> tuple[DataFrame, list[str]]:
    """Replace a vector column by one double column per element (names from ML metadata),
    in one projection (:func:`vector_names` checks it first); the weight column is kept."""
    names = vector_names(df, features_col, label)
    weight = [] if weight_col is None else [F.col(quote(weight_col)).alias("_vmi_w")]
    arr = df.select(F.col(quote(label)).alias("_vmi_label"),
                    vector_array(features_col).alias("_vmi_v"), *weight)
    out = arr.selectExpr(f"_vmi_label AS {quote(label)}",
                         *[f"_vmi_v[{i}] AS {quote(n)}" for i, n in enumerate(names)],
                         *([f"_vmi_w AS {quote(weight_col)}"] if weight_col else []))
    return out, names


def vector_schema(df: DataFrame, label: str, names: list[str]) -> T.StructType:
    """The schema of :func:`expand_vector`'s frame, without building it."""
    label_field = next(f for f in df.schema.fields if f.name == label)
    return T.StructType([label_field, *[T.StructField(n, T.DoubleType()) for n in names]])


def vector_attribute_names(meta: dict | None) -> list[str] | None:
    """Element names of a vector column from its ML metadata; None unless complete and unique."""
    attrs = (meta or {}).get("ml_attr", {})
    if "attrs" not in attrs or "num_attrs" not in attrs:
        return None
    names: list[str | None] = [None] * int(attrs["num_attrs"])
    for group in attrs["attrs"].values():
        for a in group:
            names[a["idx"]] = a.get("name")
    found = [n for n in names if n is not None]
    if len(found) != len(names) or len(set(found)) != len(found):
        return None
    return found


class Execution(Backend, Protocol):
    """How the greedy steps run over the cached blocks: a
    :class:`~vmi_spark.core.greedy.Backend` that also says which execution it is and what
    the run should report (:class:`.backend.SparkBackend`, one Spark job a pass;
    :class:`.resident.ResidentBackend`, long-running tasks)."""

    #: the execution's name in the report ("passes", "resident")
    execution: str

    def notes(self) -> list[str]:
        """What happened that the run's warnings should say (lost tasks, a fallback)."""
        ...

    def masked(self, keep: HalfSample) -> Backend:
        """A view of the same blocks with only the rows ``keep`` keeps (a stability run,
        :mod:`vmi_spark.core.stability`): no second read of the input."""
        ...


class StartExecution(Protocol):
    """Makes an :class:`Execution` over the cached blocks (the class itself, usually)."""

    def __call__(self, blocks: DataFrame, num_features: int, arity: int,
                 num_classes: int) -> Execution:
        ...


def _backend(blocks: DataFrame, d: int, arity: int, num_classes: int, method: str,
             execution: str, why_not: str | None, notes: list[str]) -> Execution:
    """The resident backend where it can run (see ``execution``), else the pass backend."""
    passes: StartExecution = SparkBackend
    if why_not is None:
        try:
            return ResidentBackend(blocks, d, arity, num_classes, method, fallback=partial(
                passes, blocks, d, arity, num_classes))
        except ResidentUnavailable as exc:
            if execution == "resident":
                raise InputError(f"resident execution failed to start: {exc}") from None
            notes.append(f"resident tasks could not start ({exc}); running one Spark job "
                         "per pass instead")
            warnings.warn(notes[-1], UserWarning, stacklevel=4)  # run_selection's caller
    return passes(blocks, d, arity, num_classes)


_STORAGE_WORDS = {"staging": "a Parquet copy in the staging directory",
                  "recompute": "recomputing them from the input in every pass"}


def _keep_blocks(encoded: DataFrame, parts: int, storage_level: StorageLevel, mode: str,
                 staging_dir: str | None) -> Kept:
    """The encoded blocks, spread over ``parts`` partitions and kept for the passes.

    Cached (the default), the rows are encoded once: the encoded blocks are kept for
    the range partitioner's sampling job and the shuffle. Staged or recomputed, the
    blocks are used in the partitioning they come in (every execution accepts any).
    """
    first = keep(encoded, storage_level, mode, staging_dir, materialize=False)
    if first.how != "cache":
        return first
    try:
        return keep(first.df.repartitionByRange(parts, "block_id"), storage_level, "cache")
    finally:
        first.release()


def _driver_rows(df: DataFrame, label: str, features: list[str],
                 source: ParquetSource | None, execution: str, estimator: str,
                 vector: VectorReader | None = None,
                 weight_col: str | None = None) -> DriverRows | None:
    """The rows in the driver when the selection runs there (:mod:`.driver`): asked for
    (``execution="driver"``) or, with ``auto``, for a small table; else None."""
    if execution not in ("auto", "driver"):
        return None
    if estimator != "histogram":
        if execution == "driver":
            raise InputError("execution 'driver' needs estimator 'histogram'")
        return None
    if source is not None:
        rows = parquet_rows(df.sparkSession, source, label, features, weight_col)
    else:
        rows = probed_rows(df, label, features, vector, weight_col)
    if rows is None and execution == "driver":
        raise InputError(f"execution 'driver' takes tables of at most {SAMPLE_ROWS:,} rows and "
                         f"{DRIVER_CELLS if source is not None else PROBE_CELLS:,} cells "
                         "(rows x columns); use auto, resident or passes")
    return rows


def _storage_level(spark, level: StorageLevel, encoded_bytes: int, parts: int,
                   notes: list[str]) -> StorageLevel:
    """``level``, or disk only when the encoded rows would fill more than half of a block
    manager's cache memory (:data:`CACHE_SHARE`): the memory store builds each cached
    batch in the heap before it can spill, so a cache near its limit ends in "Java heap
    space" instead of spilling (a 5M x 100 table under the default 1g driver). Resident
    tasks keep their blocks in the Python workers; the disk copy is read once."""
    if level != StorageLevel.MEMORY_AND_DISK:
        return level
    memory = storage_memory(spark)
    share = encoded_bytes / max(1, parts) * (parts if is_local(spark) else 1)
    if memory is None or share <= CACHE_SHARE * memory:
        return level
    notes.append(f"the encoded rows ({encoded_bytes >> 20} MiB) are cached on disk: more than "
                 f"half of the {memory >> 20} MiB a block manager may cache")
    return StorageLevel.DISK_ONLY


def _saving(ckpt: Checkpoint, on_step: Callable[[Selection], None] | None):
    """An ``on_step`` that saves the checkpoint first, then calls ``on_step``."""
    def save_then_call(sel: Selection) -> None:
        ckpt.save(sel)
        if on_step is not None:
            on_step(sel)
    return save_then_call


def _row_source(df: DataFrame, label: str, features: list[str], vector: VectorReader | None,
                source: ParquetSource | None, slots: int, presample: tuple[int, str] | None,
                auto: bool, histogram: bool, weight_col: str | None = None) -> RowSource:
    """What the passes on the executors read the rows with: the vectors' Parquet struct
    read by pyarrow (with ``auto``, if ``df`` is a plain Parquet scan) or by Spark
    (``vector``); the Parquet ``source``'s columns read by pyarrow (the statistics pass
    samples the rows for the bin edges too, where it can: ``presample``); or Spark's rows
    of ``df``. Each reads the weight column last, if any."""
    weight = [] if weight_col is None else [weight_col]
    if vector is not None:
        files = parquet_source(df, [label, vector.features_col, *weight]) if auto else None
        if files is None:
            return vector
        return ParquetVectorReader(df, label, vector.features_col, features, slots, files,
                                   presample=presample, weight_col=weight_col)
    if source is not None and histogram:
        return ParquetReader(df.sparkSession, source, slots, presample=presample, df=df,
                             weight_col=weight_col)
    return SparkSource(df, weight_col)


def block_rows_for(num_rows: int, parts: int, num_features: int, method: str,
                   num_classes: int) -> int:
    """Rows of an encoded block on the executors.

    About four blocks per task slot (``parts``), so that every core has work in every
    pass; at most :data:`BLOCK_BYTES` a block, because the JVM copies each block whole
    (Arrow, cache) and large byte arrays crowd a small heap (a 5M x 100 table under the
    default 1g driver); for ``vmi_pairwise`` at most :data:`_PAIR_BLOCK_BYTES` of per-row
    state; a multiple of :data:`~vmi_spark.core.bound.BLOCK_ROW_STEP` (at least 256).
    """
    rows = min(MAX_BLOCK_ROWS, max(MIN_BLOCK_ROWS, whole_strides(-(-num_rows // (4 * parts)),
                                                                 up=True)))
    most = BLOCK_BYTES // (num_features + 2)
    state = criterion(method).row_state_bytes(num_features, num_classes)
    if state:
        most = min(most, _PAIR_BLOCK_BYTES // state)
    return max(256, min(rows, whole_strides(most)))


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

    ``source`` (from :func:`vmi_spark.spark.arrow_source.parquet_source`) names the
    Parquet files ``df`` is a plain scan of: the passes that read every row then read
    the files with pyarrow in the Python workers, which is several times faster for
    wide tables and gives the same result. Without it, ``reader="auto"`` finds them
    itself when ``df`` is ``spark.read.parquet(...)`` or a projection of its columns
    (:func:`vmi_spark.spark.arrow_source.plain_parquet_scan`), also for a vector
    ``features_col`` (its stored struct is cut in the workers:
    :class:`vmi_spark.spark.vector_source.ParquetVectorReader`); ``reader="spark"``
    reads with Spark. ``source`` is ignored with ``features_col``, and both with the
    ``kde`` estimator. ``report()["reader"]`` says which read the rows: ``"pyarrow"``
    or ``"spark"``.

    ``execution`` says how the greedy steps run: ``"resident"`` keeps the blocks in
    long-running barrier tasks that the driver talks to directly (one round trip per
    step, :mod:`vmi_spark.spark.resident`); ``"passes"`` runs one Spark job per pass
    (:class:`vmi_spark.spark.backend.SparkBackend`); ``"auto"`` (the default) is
    resident where the session allows it (a classic session without dynamic
    allocation) and falls back to passes, with a warning, if the tasks cannot start.
    The answer is the same either way.

    ``selection_mode`` says how many features are selected, as in Spark's
    ``UnivariateFeatureSelector``: ``"numTopFeatures"`` (``num_features``), ``"gain"``
    (until the best candidate gains less than ``selection_threshold`` nats, default
    0.01, and no restart would help) or ``"fraction"`` (``selection_threshold`` of
    the candidates, default 0.1). ``report()["stop_reason"]`` says why it ended.

    ``block_storage`` says where the encoded rows live between passes
    (:mod:`vmi_spark.spark.storage`): ``"auto"`` caches them, or, where the session
    refuses caching (Databricks serverless), writes them once under ``staging_dir``
    (a directory Spark can write and read, e.g. a Unity Catalog volume) and removes
    that copy afterwards, or without ``staging_dir`` recomputes them in every pass.
    """
    t0 = time.perf_counter()
    phases = Phases()
    settings = _settings(settings, values)
    with phrased(settings.style):
        inp = _plan_rows(df, label, features, exclude, features_col, source, settings, phases,
                         weight_col)
    plan, d = inp.plan, len(inp.features)
    notes = inp.notes + _plan_notes(plan, settings.style)
    log.info("label '%s': %s (%s)", label, plan.label_type, inp.label_reason)
    old_pyarrow = (arrow_reader_note() if settings.reader == "auto" and inp.read_by == "spark"
                   else None)
    if old_pyarrow is not None and plain_parquet_scan(inp.df):
        notes.append(old_pyarrow)  # the pyarrow reader would have read this input
    k, min_gain, capped = plan_size(settings, d)
    for n in notes:
        warnings.warn(n, UserWarning, stacklevel=2)
    if capped is not None:
        notes.append(str(capped))
        warnings.warn(capped, stacklevel=2)
    backend, kept = _start(inp, settings, storage_level, notes, phases)
    phases.lap("start_execution")
    t_prep = time.perf_counter() - t0
    stability = None
    try:
        selection = _select(backend, inp, settings, k, min_gain, on_step, notes)
        phases.lap("steps")
        if settings.stability:
            runs = run_stability(backend, partial(_select_view, inp=inp, settings=settings,
                                                  k=k, min_gain=min_gain),
                                 settings.stability, settings.stability_seed,
                                 settings.stability_fraction, on_run=_log_run)
            stability = summarize(runs, inp.features, selection.selected)
            phases.lap("stability")
    finally:
        backend.close()
        if kept is not None:
            kept.release()
    phases.lap("release")
    notes += backend.notes()
    if selection.stopped_early and selection.stop_reason != "threshold":
        notes.append(f"stopped early: {selection.stopped_early}")
    how = kept.how if kept is not None else "driver"
    if how not in ("cache", "driver"):
        notes.append(f"the encoded rows were kept by {_STORAGE_WORDS[how]} (the session "
                     "cannot cache DataFrames)")
    return SelectionRun(plan, selection, settings.result(), time.perf_counter() - t0, t_prep,
                        notes, backend.execution, how, dict(phases), inp.read_by,
                        inp.label_reason, stability)


def _select_view(view: Backend, inp: _Rows, settings: Settings, k: int,
                 min_gain: float | None) -> Selection:
    """A stability run's selection over ``view``: the main selection's method, K and
    thresholds, no checkpoint."""
    return select(view, settings.method, k, restart_tolerance=settings.restart_tolerance,
                  conditional_fn=_smoothing(inp.plan, settings), min_gain=min_gain)


def _log_run(b: int, sel: Selection) -> None:
    log.info("stability run %d: %d features on %d rows", b + 1, len(sel.selected),
             sel.num_rows)


def _settings(settings: Settings | None, values: dict[str, Any]) -> Settings:
    """``settings`` with the keyword ``values`` applied (spec keys), checked once."""
    if settings is None:
        return Settings.of(values, "python")
    return settings.replace(**values) if values else settings


@dataclass
class _Rows:
    """The input of a run as planned (:func:`_plan_rows`).

    ``df`` is the input (with the ``kde`` estimator, its vector expanded into columns);
    ``rows`` what the passes read the rows with, or ``driver`` the rows held in the driver
    (then ``rows`` is ``driver``); ``why_not`` why resident tasks cannot run (None if they
    can); ``parts`` the partitions the encoded blocks are spread over; ``slots`` the
    session's parallelism; ``reading`` the session settings of the jobs that read the rows;
    ``read_by`` ``"pyarrow"`` or ``"spark"`` (the report's ``reader``); ``notes`` what the
    planner and the column choice said; ``label_reason`` why the label is what it is.
    """

    df: DataFrame
    features: list[str]
    plan: EncodingPlan
    skip_cols: list[str]
    rows: RowSource
    driver: DriverRows | None
    why_not: str | None
    parts: int
    slots: int
    read_by: str
    reading: Callable[[], AbstractContextManager[Any]]
    notes: list[str]
    label_reason: str


def _plan_rows(df: DataFrame, label: str, features: list[str] | None,
               exclude: list[str] | None, features_col: str | None,
               source: ParquetSource | None, settings: Settings, phases: Phases,
               weight_col: str | None = None) -> _Rows:
    """Resolve the columns, choose what reads the rows (the driver for a small table,
    pyarrow for Parquet files, else Spark) and compute the encoding plan with its passes."""
    estimator, execution = settings.estimator, settings.execution
    slots = parallelism(df.sparkSession)
    vector: VectorReader | None = None
    schema: DataFrame | T.StructType = df
    notes: list[str] = []
    if weight_col is not None:
        check_weight_col(df, weight_col, label, features, features_col)
        if features is None and features_col is None:  # never a feature
            exclude = [*(exclude or []), weight_col]
    if features_col is not None:
        if estimator == "kde":  # the KDE grid is computed over the expanded columns
            df, features = expand_vector(df, features_col, label, weight_col)
        else:  # the workers cut the vectors (vector_source): no projection of D columns
            features = vector_names(df, features_col, label, check=False)
            vector = VectorReader(df, label, features_col, features, slots, weight_col)
            schema = vector_schema(df, label, features)
        features = [f for f in features if f not in (exclude or [])]
    if vector is None:
        names, notes = resolve_columns(df, label, features, exclude)
    else:
        names = list(features or [])
    auto = settings.reader == "auto" and estimator == "histogram"
    if source is None and auto and features_col is None:
        source = parquet_source(df, [label, *names, *([weight_col] if weight_col else [])])
    vector_col = features_col if vector is not None else None
    # a vector of another length, met by any read of the rows, is the one-line InputError
    with vector_lengths_checked(df, vector_col, label):
        driver = _driver_rows(df, label, names, source if features_col is None else None,
                              execution, estimator, vector, weight_col)
        # resident tasks all run at once: at most one partition per task slot
        why_not = ("not asked for" if execution == "passes" or driver is not None
                   else unavailable_reason(df.sparkSession))
        if execution == "resident" and why_not is not None:
            raise InputError(f"resident execution is not available: {why_not}")
        parts = slots if why_not is not None else task_slots(df.sparkSession)
        continuous = settings.label_type == "continuous"
        rows: RowSource = driver if driver is not None else _row_source(
            df, label, names, vector, source, slots,
            presample=None if continuous else (settings.num_bins, settings.binning),
            auto=auto, histogram=estimator == "histogram", weight_col=weight_col)
        # the driver reads a Parquet source with pyarrow too (parquet_rows), a vector with Spark
        read_by = ("pyarrow" if isinstance(rows, (ParquetReader, ParquetVectorReader))
                   or (driver is not None and source is not None and features_col is None)
                   else "spark")
        # the passes over the rows type the values in the Python workers (spark_source.packed)
        reading = rows.reading if isinstance(rows, BatchReader) else nullcontext
        with reading():
            planned = build_plan(schema, label, names, settings, _TimedSource(rows, phases),
                                 weight_col)
    plan, skip_cols = planned.plan, planned.skip_cols
    if estimator == "kde":
        plan = grid_plan(SparkSource(df, weight_col).kept(label, skip_cols), plan)
    return _Rows(df, names, plan, skip_cols, rows, driver, why_not, parts, slots, read_by,
                 reading, notes + planned.notes, planned.label.reason)


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
                            f"in {plan.weight_rows} rows, fewer than {AUTO_ROWS_PER_VALUE} rows a "
                            "class: it looks like a regression target; set {label_type} to "
                            "continuous or auto to bin it", style))
    return notes


def _start(inp: _Rows, settings: Settings, storage_level: StorageLevel, notes: list[str],
           phases: Phases) -> tuple[Execution, Kept | None]:
    """Encode the rows and start the execution of the steps over them: in the driver
    (:class:`.driver.DriverBackend`), or the blocks kept on the executors (``Kept``) and
    resident tasks or one Spark job a pass over them (:func:`_backend`)."""
    method, execution = settings.method, settings.execution
    block_storage, staging_dir = settings.block_storage, settings.staging_dir
    plan, d, num_classes = inp.plan, len(inp.features), len(inp.plan.classes)
    spark = inp.df.sparkSession
    driver, why_not, parts = inp.driver, inp.why_not, inp.parts
    state = plan.num_rows * criterion(method).row_state_bytes(d, num_classes)
    if driver is not None and state > DRIVER_PAIR_BYTES:
        if execution == "driver":
            raise InputError("execution 'driver': the pairwise state of this table "
                             f"({state >> 20} MiB) is more than "
                             f"the driver keeps ({DRIVER_PAIR_BYTES >> 20} MiB); use auto")
        driver = None  # planned in the driver, selected on the executors
        why_not = unavailable_reason(spark)
        parts = inp.slots if why_not is not None else task_slots(spark)
    if driver is not None:
        codes, y, w = driver.codes(plan, inp.skip_cols)
        phases.lap("encode")
        return DriverBackend(codes, y, plan.arity, num_classes, w=w), None
    block_rows = block_rows_for(plan.num_rows, parts, d, method, num_classes)
    rows = inp.rows
    level = _storage_level(spark, storage_level, plan.num_rows * (d + 2), parts, notes)
    # one shuffle of the one-byte blocks spreads them evenly over the slots (by range of
    # block id, so a partition's blocks stay together), whatever the input's partitioning.
    # The range partitioner samples its input in a job of its own: the encoded blocks are
    # kept for the shuffle to read, so that every row is read and encoded once, not twice.
    # A cached batch holds a few blocks, not a whole partition (see cache_batch_rows).
    with batch_rows(spark, cache_batch_rows(block_rows * (d + 2))), inp.reading():
        even = rows.evened(parts) if isinstance(rows, BatchReader) else None
        if even is not None:
            # row groups (and pieces of them) split evenly over the task slots: encoded
            # straight into the cache, no range shuffle (one job instead of three)
            encoded = even.encode_blocks(plan, block_rows, inp.skip_cols, partitions=parts)
            phases.lap("plan")
            kept = keep(encoded, level, block_storage, staging_dir)
        else:
            encoded = rows.encode_blocks(plan, block_rows, inp.skip_cols)  # (driver: codes)
            phases.lap("plan")
            kept = _keep_blocks(encoded, parts, level, block_storage, staging_dir)
    phases.lap("encode")
    try:
        return _backend(kept.df, d, plan.arity, num_classes, method, execution, why_not,
                        notes), kept
    except BaseException:
        kept.release()
        raise


def _select(backend: Execution, inp: _Rows, settings: Settings, k: int,
            min_gain: float | None, on_step: Callable[[Selection], None] | None,
            notes: list[str]) -> Selection:
    """The greedy selection of ``k`` features over ``backend``, continued from the
    checkpoint in ``settings.checkpoint_dir`` (if it has one of this input and these
    parameters) and saved there after every step."""
    plan, method = inp.plan, settings.method
    checkpoint_dir, report_candidates = settings.checkpoint_dir, settings.report_candidates
    resume = None
    if checkpoint_dir is not None:
        ckpt = Checkpoint(checkpoint_dir, fingerprint(
            plan.to_json(), backend.feature_counts(),
            {**settings.result(), "report_candidates": report_candidates}),
            num_features=len(inp.features), method=method,
            report_candidates=report_candidates)
        resume = ckpt.load()
        if resume is not None:
            if len(resume.selected) > k:
                raise InputError(f"the checkpoint in {checkpoint_dir} has more steps than "
                                 "this run selects")
            notes.append(f"resumed from the checkpoint after step {len(resume.selected)}")
        on_step = _saving(ckpt, on_step)
    return select(backend, method, k, restart_tolerance=settings.restart_tolerance,
                  report_candidates=report_candidates, on_step=on_step, resume=resume,
                  conditional_fn=_smoothing(plan, settings), min_gain=min_gain)


def _smoothing(plan: EncodingPlan, settings: Settings) -> Callable | None:
    """The ``kde`` estimator's p(x_i | y) of the plan's grid columns, else None."""
    if settings.estimator != "kde":
        return None
    grid = [j for j, c in enumerate(plan.columns) if c.kind == "grid"]
    cells = [len(c.splits or []) + 1 for c in plan.columns]
    missing = [c.missing for c in plan.columns]
    return partial(kde_conditional, grid_columns=grid, grid_cells=cells, missing=missing)
