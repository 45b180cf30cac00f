"""The two decisions of a run: what reads the rows, and how the steps run.

:func:`choose_rows` picks the row source from the input's kind and size: the driver for
a small table (:mod:`.driver`), pyarrow in the workers for Parquet files
(:mod:`.arrow_source`, :mod:`.vector_source`), else Spark's reader
(:mod:`.spark_source`). Every source carries its own capabilities (``read_by``,
``reading()``, ``evened(parts)``, :class:`.plan.RowSource`), so nothing downstream asks
what class it is.

:func:`choose_execution` picks the execution from the plan (rows x columns x classes),
the rows' route and the session: the driver (:class:`.driver.DriverBackend`), resident
tasks (:class:`.resident.ResidentBackend`) or one Spark job a pass
(:class:`.backend.SparkBackend`), with the partitions and the rows of a chunk. A
pairwise selection too large for the driver's state is planned in the driver and
selected on the executors: decided here, once. :func:`start_execution` encodes the rows
and starts what was chosen. How big a chunk, a batch and a cache may be on the heap is
asked of :mod:`.memory`.

Extension points: a new row source implements :class:`.plan.RowSource` and gets a
branch in :func:`choose_rows`; a new execution implements :class:`Execution` and gets a
kind in :func:`choose_execution` and :func:`start_execution`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Protocol

from pyspark import StorageLevel
from pyspark.sql import DataFrame

from ..core import limits
from ..core.criteria import criterion
from ..core.encoding import EncodingPlan
from ..core.greedy import Backend
from ..core.stability import HalfSample
from ..errors import InputError
from ..params import Settings
from .chunks.codes import ChunkStage
from .chunks.memory import (
    cache_level,
    chunk_batches,
    chunk_rows_for,
    disk_object_bytes,
)
from .chunks.storage import Kept, batch_rows, cache_batch_rows, keep
from .columns import Columns
from .compat import arrow_reader_note
from .executions.driver import (
    DriverBackend,
    DriverRows,
    parquet_rows,
    probed_rows,
)
from .executions.passes import SparkBackend
from .executions.resident import START_TIMEOUT, ResidentBackend, ResidentUnavailable
from .plan import RowSource
from .session import (
    parallelism,
    task_slots,
    unavailable_reason,
)
from .sources.arrow_source import ParquetReader, ParquetSource, parquet_source, plain_parquet_scan
from .sources.spark_source import SparkSource
from .sources.vector_source import ParquetVectorReader, VectorReader

# ---------------------------------------------------------------------------
# The rows
# ---------------------------------------------------------------------------

@dataclass
class RowRoute:
    """What reads the rows of a run (:func:`choose_rows`).

    ``columns`` are the run's columns (:class:`.columns.Columns`: the frame, the label,
    the features, the weights); ``source`` reads the rows for the planner's and the
    encoder's passes; ``driver`` holds every row in the driver when the table is small
    enough to select there (then ``source`` is ``driver``); ``notes`` says which columns
    were left out and, where it applies, why the pyarrow reader was not used.
    """

    columns: Columns
    source: RowSource
    driver: DriverRows | None
    notes: list[str] = field(default_factory=list)

    @property
    def df(self) -> DataFrame:
        """The frame the rows come from (:attr:`.columns.Columns.df`)."""
        return self.columns.df

    @property
    def features(self) -> list[str]:
        """The feature names (:attr:`.columns.Columns.features`)."""
        return self.columns.features

    @property
    def read_by(self) -> str:
        """``"pyarrow"`` or ``"spark"``: the report's ``reader``."""
        return self.source.read_by


def choose_rows(columns: Columns, source: ParquetSource | None,
                settings: Settings) -> RowRoute:
    """The row source of a run, from its columns (a frame's columns or a vector), the
    input's kind (a plain Parquet scan or any frame), its size (a small table is read into
    the driver when the steps may run there) and the settings (``reader``,
    ``estimator``, ``execution``). ``source`` (the Parquet files of a plain scan) is
    found here when not given, and ignored for a vector, the ``kde`` estimator and
    ``reader="spark"`` (Spark reads then, as asked)."""
    estimator, df = settings.estimator, columns.df
    auto = settings.reader == "auto" and estimator == "histogram"
    slots = parallelism(df.sparkSession)
    elements = columns.elements  # a vector is cut by all its elements' places
    vector = (VectorReader(df, columns.label, columns.features_col, elements, slots,
                           columns.weight_col)
              if columns.features_col is not None and elements is not None else None)
    if vector is not None or settings.reader == "spark":
        source = None  # a vector's files are found below, for its own reader
    elif source is None and auto:
        source = parquet_source(df, columns.read)
    driver = _driver_rows(columns, source, settings.execution, estimator, vector)
    if driver is not None:
        return RowRoute(columns, driver, driver, columns.notes)
    presample = None if settings.label_type == "continuous" else (settings.num_bins,
                                                                  settings.binning)
    if vector is not None:
        files = parquet_source(df, columns.read) if auto else None
        rows: RowSource = vector if files is None else ParquetVectorReader(
            df, columns.label, vector.features_col, vector.names, slots, files,
            presample=presample, weight_col=columns.weight_col)
    elif source is not None and estimator == "histogram":
        rows = ParquetReader(df.sparkSession, source, slots, presample=presample, df=df,
                             weight_col=columns.weight_col)
    else:
        rows = SparkSource(df, columns.weight_col)
    notes = columns.notes
    old_pyarrow = arrow_reader_note() if auto else None
    if old_pyarrow is not None and rows.read_by == "spark" and plain_parquet_scan(df):
        notes = [*notes, old_pyarrow]  # the pyarrow reader would have read this input
    return RowRoute(columns, rows, None, notes)


def _driver_rows(columns: Columns, source: ParquetSource | None, execution: str,
                 estimator: str, vector: VectorReader | None = None) -> DriverRows | None:
    """The rows in the driver when the selection may run there (:mod:`.driver`): asked
    for (``execution="driver"``) or, with ``auto``, for a small table; else None."""
    if execution not in ("auto", "driver"):
        return None
    if estimator != "histogram":
        if execution == "driver":
            raise InputError("execution 'driver' needs estimator 'histogram'")
        return None
    df, label, features, weight_col = (columns.df, columns.label, columns.features,
                                       columns.weight_col)
    if source is not None:
        rows = parquet_rows(df.sparkSession, source, label, features, weight_col)
    else:
        rows = probed_rows(df, label, features, vector, weight_col)
    if rows is None and execution == "driver":
        now = limits.current()
        raise InputError(f"execution 'driver' takes tables of at most {now.sample_rows:,} rows and "
                         f"{now.driver_cells if source is not None else now.probe_cells:,} cells "
                         "(rows x columns); use auto, resident or passes")
    return rows


# ---------------------------------------------------------------------------
# The execution
# ---------------------------------------------------------------------------

class Execution(Backend, Protocol):
    """How the greedy steps run: a :class:`~vmi_spark.core.greedy.Backend` that also says
    which execution it is and what the run should report
    (:class:`.driver.DriverBackend`, :class:`.resident.ResidentBackend`,
    :class:`.backend.SparkBackend`)."""

    #: the execution's name in the report ("driver", "resident", "passes")
    execution: str

    def notes(self) -> list[str]:
        """What happened that the run's warnings should say (lost tasks, a fallback)."""
        ...

    def masked(self, keep: HalfSample) -> Backend:
        """A view of the same chunks with only the rows ``keep`` keeps (a stability run,
        :mod:`vmi_spark.core.stability`): no second read of the input."""
        ...


class StartExecution(Protocol):
    """Makes an :class:`Execution` over the kept chunks (the class itself, usually)."""

    def __call__(self, chunks: DataFrame, num_features: int, arity: int,
                 num_classes: int) -> Execution:
        ...


@dataclass(frozen=True)
class ExecutionRoute:
    """How the steps of a run go (:func:`choose_execution`).

    ``kind`` is ``"driver"``, ``"resident"`` (where the session allows it; it may still
    fall back to passes when its tasks cannot start) or ``"passes"``; ``why_not`` why
    resident tasks cannot run (None if they can); ``parts`` the partitions the encoded
    chunks are spread over and ``chunk_rows`` the rows of a chunk (executors only);
    ``disk_cap`` the most bytes of a chunk and of a cached batch when the cache goes to
    disk (:func:`disk_object_bytes`; None: no bound).
    """

    kind: str
    why_not: str | None
    parts: int
    chunk_rows: int
    disk_cap: int | None = None


def check_execution(spark, settings: Settings) -> None:
    """Refuse ``execution="resident"`` where the session cannot run resident tasks, before
    anything is read (the arguments and the session tell)."""
    if settings.execution == "resident":
        why_not = unavailable_reason(spark)
        if why_not is not None:
            raise InputError(f"resident execution is not available: {why_not}")


def choose_execution(plan: EncodingPlan, rows: RowRoute, settings: Settings) -> ExecutionRoute:
    """The execution of a run from its plan (rows x columns x classes), the rows' route
    and the session: the driver where the rows are there and the method's per-row state
    fits it (:data:`~.driver.DRIVER_PAIR_BYTES`), else resident tasks where the session
    allows them (``execution`` ``auto`` or ``resident``), else passes."""
    spark = rows.df.sparkSession
    d, num_classes = len(rows.features), len(plan.classes)
    if rows.driver is not None:
        state = plan.num_rows * criterion(settings.method).row_state_bytes(d, num_classes)
        most = limits.current().driver_pair_bytes
        if state <= most:
            return ExecutionRoute("driver", "not asked for", 0, 0)
        if settings.execution == "driver":
            raise InputError("execution 'driver': the pairwise state of this table "
                             f"({state >> 20} MiB) is more than "
                             f"the driver keeps ({most >> 20} MiB); use auto")
    why_not = ("not asked for" if settings.execution == "passes"
               else unavailable_reason(spark))
    parts = parallelism(spark) if why_not is not None else task_slots(spark)
    cap = disk_object_bytes(spark, plan.num_rows * (d + 2), parts)
    chunk_rows = chunk_rows_for(plan.num_rows, parts, d, settings.method, num_classes, cap)
    return ExecutionRoute("passes" if why_not is not None else "resident", why_not, parts,
                          chunk_rows, cap)


def start_execution(route: ExecutionRoute, rows: RowRoute, plan: EncodingPlan,
                    skip_cols: list[str], settings: Settings, storage_level: StorageLevel,
                    notes: list[str], laps, steps: ExitStack | None = None
                    ) -> tuple[Execution, Kept | None]:
    """Encode the rows and start the chosen execution over them: in the driver, or the
    chunks kept on the executors (``Kept``) and resident tasks or one Spark job a pass
    over them. ``laps(name)`` closes a phase of the run's timings. ``steps`` holds what
    the steps run under until the caller closes it (the Arrow batches of chunks sized
    for the heap, :func:`chunk_batches`); without it that setting is left as it was
    when this returns.

    Resident tasks over Parquet row groups read by pyarrow with ``chunk_storage`` ``auto``
    encode the rows they hold themselves (:func:`_encoded_in_tasks`): nothing is cached
    unless the steps go on as passes."""
    d, num_classes = len(rows.features), len(plan.classes)
    if route.kind == "driver":
        assert rows.driver is not None
        codes, y, w = rows.driver.codes(plan, skip_cols)
        laps("encode")
        return DriverBackend(codes, y, plan.arity, num_classes, w=w), None
    stack = steps if steps is not None else ExitStack()
    try:
        kept: Kept | None = _encoded_in_tasks(rows, plan, skip_cols, route, settings,
                                              storage_level, notes, laps)
        if kept is None:
            kept = _encoded(rows, plan, skip_cols, route, settings, storage_level, notes, laps)
        laps("encode")
        try:
            if kept.how != "recompute" or rows.read_by == "pyarrow":
                # the steps' tasks read chunks: a few per Arrow batch, not the partition's
                # 10,000 (recomputed from Spark's reader, the stage reads rows: left alone)
                stack.enter_context(chunk_batches(rows.df.sparkSession,
                                                  route.chunk_rows * (d + 2)))
            return _backend(kept, d, plan.arity, num_classes, settings, route, notes), kept
        except BaseException:
            kept.release()
            raise
    finally:
        if steps is None:
            stack.close()


def _encoded(rows: RowRoute, plan: EncodingPlan, skip_cols: list[str], route: ExecutionRoute,
             settings: Settings, storage_level: StorageLevel, notes: list[str], laps) -> Kept:
    """The encoded chunks, kept for the passes (cached, staged or recomputed)."""
    source, parts, chunk_rows = rows.source, route.parts, route.chunk_rows
    with source.reading():
        even = source.evened(parts)
        if even is not None:
            # row groups (and pieces of them) split evenly over the task slots: encoded
            # straight into the cache, no range shuffle (one job instead of three)
            encoded = even.encode_chunks(plan, chunk_rows, skip_cols, partitions=parts)
            laps("plan")
            return _kept(encoded, rows, plan, route, settings, storage_level, notes)
        encoded = source.encode_chunks(plan, chunk_rows, skip_cols)
        laps("plan")
        return _kept(encoded, rows, plan, route, settings, storage_level, notes, spread=True)


def _kept(encoded: DataFrame, rows: RowRoute, plan: EncodingPlan, route: ExecutionRoute,
          settings: Settings, storage_level: StorageLevel, notes: list[str],
          spread: bool = False) -> Kept:
    """``encoded`` kept for the passes as ``chunk_storage`` says; with ``spread``, first
    spread evenly over the partitions (:func:`keep_chunks`)."""
    spark, d = rows.df.sparkSession, len(rows.features)
    level = cache_level(spark, storage_level, plan.num_rows * (d + 2), route.parts, notes)
    # one shuffle of the one-byte chunks spreads them evenly over the slots (by range of
    # chunk id, so a partition's chunks stay together), whatever the input's partitioning.
    # The range partitioner samples its input in a job of its own: the encoded chunks are
    # kept for the shuffle to read, so that every row is read and encoded once, not twice.
    # A cached batch holds a few chunks, not a whole partition (see cache_batch_rows).
    cap = route.disk_cap if level.useDisk else None
    with batch_rows(spark, cache_batch_rows(route.chunk_rows * (d + 2), cap)), \
            rows.source.reading():
        if spread:
            return keep_chunks(encoded, route.parts, level, settings.chunk_storage,
                               settings.staging_dir)
        return keep(encoded, level, settings.chunk_storage, settings.staging_dir)


class InTasks(Kept):
    """The encoded chunks of resident tasks that encode the rows they hold
    (:func:`_encoded_in_tasks`): nothing is kept (``how`` ``"in_tasks"``) unless the steps
    go on as passes (:meth:`for_passes`: then as ``chunk_storage`` says, ``how`` becomes
    that copy's, and :meth:`release` releases it)."""

    def __init__(self, stage: ChunkStage, num_rows: int,
                 keep_for_passes: Callable[[], Kept]) -> None:
        super().__init__(stage, "in_tasks")
        self.num_rows = num_rows
        self._keep_for_passes = keep_for_passes
        self._passes: Kept | None = None

    def for_passes(self) -> DataFrame:
        """The chunks for passes: kept once, the first time passes ask."""
        if self._passes is None:
            self._passes = self._keep_for_passes()
            self.how = self._passes.how
        return self._passes.df

    def release(self) -> None:
        """Release the copy kept for passes, if any."""
        if self._passes is not None:
            self._passes.release()


def _encoded_in_tasks(rows: RowRoute, plan: EncodingPlan, skip_cols: list[str],
                      route: ExecutionRoute, settings: Settings, storage_level: StorageLevel,
                      notes: list[str], laps) -> InTasks | None:
    """The chunks that resident tasks encode for themselves, or None where they do not.

    Where the steps run in resident tasks, ``chunk_storage`` is ``auto`` and pyarrow reads
    Parquet row groups that split evenly over the task slots (:meth:`evened`), each
    resident task reads and encodes its own run of rows in the stage that holds them
    (:meth:`.ChunkStage.then`: the encoder and the task in one Python worker): the
    encoded rows never go through the JVM, into Spark's cache and back (on a 1g driver
    the cache of a large table is on disk).
    The chunks and their order are those of the cached route: the same answer. If the
    tasks cannot start or are lost, the passes keep a copy as ``chunk_storage`` says."""
    if (route.kind != "resident" or settings.chunk_storage != "auto"
            or rows.read_by != "pyarrow"):
        return None
    with rows.source.reading():
        even = rows.source.evened(route.parts)
        if even is None:
            return None
        stage = even.chunk_stage(plan, route.chunk_rows, skip_cols, partitions=route.parts)
    laps("plan")
    return InTasks(stage, plan.num_rows, lambda: _kept(stage.df(), rows, plan, route, settings,
                                                       storage_level, notes))


def keep_chunks(encoded: DataFrame, parts: int, storage_level: StorageLevel, mode: str,
                staging_dir: str | None) -> Kept:
    """The encoded chunks, spread over ``parts`` partitions and kept for the passes.

    Cached (the default), the rows are encoded once: the encoded chunks are kept for
    the range partitioner's sampling job and the shuffle. Staged or recomputed, the
    chunks are used in the partitioning they come in (every execution accepts any).
    """
    first = keep(encoded, storage_level, mode, staging_dir, materialize=False)
    if first.how != "cache":
        return first
    try:
        return keep(first.df.repartitionByRange(parts, "chunk_id"), storage_level, "cache")
    finally:
        first.release()


#: the longest a resident task that encodes its own rows (:class:`InTasks`) may take a
#: cell of them (read and encoded) before it connects: 7x the 14 ns a cell that the
#: statistics pass's tasks took on a 2-core Xeon (docs/performance.md), added to
#: :data:`~.executions.resident_server.START_TIMEOUT`
ENCODE_CELL_SECONDS = 100e-9


def _start_timeout(kept: Kept, d: int, route: ExecutionRoute) -> float:
    """How long the resident tasks may take to connect: :data:`START_TIMEOUT`, and where
    they encode their rows first, :data:`ENCODE_CELL_SECONDS` a cell of a task's rows."""
    if not isinstance(kept, InTasks):
        return START_TIMEOUT
    return START_TIMEOUT + kept.num_rows * (d + 1) / max(1, route.parts) * ENCODE_CELL_SECONDS


def _backend(kept: Kept, d: int, arity: int, num_classes: int, settings: Settings,
             route: ExecutionRoute, notes: list[str]) -> Execution:
    """Resident tasks where they can run (a fallback to passes if they cannot start,
    unless ``execution`` is ``resident``), else the pass backend. Resident tasks read
    ``kept.df``; passes read ``kept.for_passes()`` where the tasks encode their own rows
    (:class:`InTasks`), else the same."""
    start_passes: StartExecution = SparkBackend

    def passes() -> Execution:
        chunks = kept.for_passes() if isinstance(kept, InTasks) else kept.df
        return start_passes(chunks, d, arity, num_classes)

    if route.why_not is None:
        try:
            return ResidentBackend(kept.df, d, arity, num_classes, settings.method,
                                   start_timeout=_start_timeout(kept, d, route),
                                   fallback=passes)
        except ResidentUnavailable as exc:
            if settings.execution == "resident":
                raise InputError(f"resident execution failed to start: {exc}") from None
            notes.append(f"resident tasks could not start ({exc}); running one Spark job "
                         "per pass instead")
            warnings.warn(notes[-1], UserWarning, stacklevel=5)  # run_selection's caller
    return passes()
