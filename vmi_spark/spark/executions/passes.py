"""The Spark backend of the greedy loop: cached chunks, one pass per step.

Count tables are aggregated over the cached chunks (each chunk emits its integer
counts; the driver adds them). A greedy step is one ``mapInArrow`` pass whose
chunks emit the exact fixed-point partial sums of every candidate; the driver adds
them, so the result is the same for every partitioning.

* A step is two passes at most. The first runs one task per task slot and shows every
  task *every* chunk id: a Python worker scores the chunks it owns (it scored them in the
  previous step, or read them first in the count pass), from the codes it keeps between
  passes, wherever Spark put the chunk's partition. The second pass reads only the chunks
  nobody scored from the cached DataFrame (the truth) and scores them there. The worker
  caches only save transfers and never change a result.
* ``vmi_naive`` passes are stateless: each chunk rebuilds the posterior of its rows from
  the features of the current selection block (m gathers per row, m << D) and emits only
  its (D,) partial sums.
* ``vmi_pairwise`` keeps per-row state (D x (L-1) running log-ratio sums). The Python
  workers hold it next to their chunks' codes and update it in place; a chunk whose state
  a worker cannot bring to the current block is rebuilt in the second pass from the cached
  codes and the tables the driver keeps (same integers).
* A weighted table's chunks carry their rows' weight units; the counts are sums of them
  and a chunk's partial sums are wide (:mod:`vmi_spark.core.wide`: two int64 halves).
* :meth:`SparkBackend.masked` is the same chunks with some rows left out (a stability
  run's half-sample, :mod:`vmi_spark.core.stability`): a backend of its own (its own
  worker caches), whose tasks drop the rows as they decode each chunk.

The tables travel inside the pass's function, which Spark ships once per pass.
"""

from __future__ import annotations

import uuid

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ...core import wide
from ...core.bound import (
    ChunkState,
    StepOps,
    feature_counts,
    naive_partials,
    pair_counts,
    pair_counts_many,
    pairwise_partials,
)
from ...core.chunkstore import ChunkStore
from .. import session
from ..chunks.codes import WORKER_STATE_BYTES, decode_chunks, pair_count_chunks

# output schemas as StructTypes: a DDL string costs a JVM round trip to parse in every pass
PARTIALS_SCHEMA = T.StructType([T.StructField("chunk_id", T.LongType()),
                                T.StructField("partial", T.BinaryType())])
COUNTS_SCHEMA = T.StructType([T.StructField("chunk_ids", T.ArrayType(T.LongType())),
                              T.StructField("counts", T.BinaryType())])
#: bytes of decoded chunks one Python worker process keeps between passes
WORKER_CACHE_BYTES = 1 << 30

class WorkerCache:
    """What one Python worker keeps between passes: chunks it has seen, their pairwise
    states, which chunks it owns and which it scored in the current pass.

    Keys are (run token, chunk id). Spark reuses its Python workers between tasks, so a
    pass can score the chunks a worker already holds without moving their codes from the
    JVM again. ``owned``: chunk -> serial of the step pass in which this worker last scored
    it (0: read first in a count pass); the first pass of step ``s`` scores only the chunks
    owned at ``s - 1``. Every step scores every chunk once (here or in the second pass), so
    after a chunk's partition moved to another worker the old copy is recognised as stale
    and dropped instead of being scored twice. A pass takes a state out while it updates it
    and puts it back only when the update is complete, so a failed task leaves no
    half-updated state behind; the next pass rebuilds that chunk instead.
    """

    def __init__(self, budget: int = WORKER_CACHE_BYTES):
        self.chunks = ChunkStore(budget)
        self.states = ChunkStore(0)  # its budget is the pass's (:meth:`budget_states`)
        self.owned: dict = {}
        self.scored: dict = {}  # (run token, pass serial) -> the chunk ids scored in it

    def reset(self) -> None:
        """Forget everything (tests; a worker never needs to)."""
        self.chunks.reset()
        self.states.reset()
        self.owned.clear()
        self.scored.clear()

    def put(self, key, codes: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> None:
        """Keep copies of a chunk's arrays (a chunk already kept stays as it is)."""
        if key in self.chunks:
            return
        item = (np.array(codes, copy=True), np.array(y, copy=True),
                None if w is None else np.array(w, copy=True))
        for gone in self.chunks.put(key, item, _nbytes(item)):
            self.owned.pop(gone, None)  # evicted: no longer owned

    def get(self, key):
        """The chunk's ``(codes, y, w)``, or None."""
        return self.chunks.get(key)

    def drop(self, key) -> None:
        """Forget a chunk: its codes, its state and its ownership."""
        self.chunks.take(key)
        self.owned.pop(key, None)
        self.states.take(key)

    def own(self, key, serial: int, first_read: bool = False) -> None:
        """Record that this worker scored the chunk in pass ``serial`` (or, ``first_read``,
        read it in a count pass: serial 0 unless it already owns it)."""
        if key not in self.chunks:
            return
        if first_read:
            self.owned.setdefault(key, 0)
        else:
            self.owned[key] = serial

    def owns(self, key, serial: int) -> bool:
        """Whether this worker owns the chunk at pass ``serial``; a stale copy is dropped."""
        owned = self.owned.get(key)
        if owned is None:
            return False
        if owned != serial:
            self.drop(key)
            return False
        return True

    def budget_states(self, budget: int) -> None:
        """Keep at most ``budget`` bytes of states from now on (set by each pass: the
        budget is its backend's, :attr:`SparkBackend.state_budget`)."""
        self.states.budget = budget

    def put_state(self, key, state: ChunkState) -> None:
        """Keep a chunk's state within the states' budget (oldest out first)."""
        self.states.put(key, state, state.nbytes)

    def scored_in(self, token: str, serial: int) -> set:
        """The chunk ids scored in pass ``serial`` of run ``token`` (older passes forgotten)."""
        for old in [k for k in self.scored if k[0] == token and k[1] != serial]:
            del self.scored[old]
        return self.scored.setdefault((token, serial), set())


_WORKER = WorkerCache()


def worker_cache() -> WorkerCache:
    """This process's :class:`WorkerCache`. The passes' functions reach it only through this
    module function: a closure naming the object would ship a copy of the driver's instead
    of using the worker's own."""
    return _WORKER


def _nbytes(item) -> int:
    return sum(0 if a is None else a.nbytes for a in item)


def _chunks(rb: pa.RecordBatch, num_features: int, token: str, keep=None):
    """:func:`.chunks.codes.decode_chunks`, each chunk also kept in this worker's cache
    (:meth:`WorkerCache.put`); with ``keep`` (a masked backend's row mask) only the rows
    ``keep(codes, y)`` keeps."""
    for bid, n, c, y, w in decode_chunks(rb, num_features):
        if keep is not None:
            m = keep(c, y)
            c, y, w = np.ascontiguousarray(c[:, m]), y[m], None if w is None else w[m]
            n = c.shape[1]
        worker_cache().put((token, bid), c, y, w)
        yield bid, n, c, y, w


def _exact_sum(partials: list[bytes], num_features: int) -> np.ndarray:
    """Exact sum of int64 partial vectors, or of wide ones (weighted rows: two int64 halves,
    :mod:`vmi_spark.core.wide`): Python integers, an object array."""
    total = np.zeros(num_features, dtype=object)
    for p in partials:
        part = np.frombuffer(p, dtype=np.int64)
        total += wide.exact(part if len(part) == num_features else part.reshape(2, -1))
    return total


def _count_fn(num_features: int, arity: int, num_classes: int, pair_with, token: str,
              grant: bool = False, keep=None):
    """Counts of a task's chunks, summed in the task: one row (its chunk ids, the counts).

    ``grant``: the first pass over the chunks, which gives each worker ownership of the
    chunks it reads (serial 0; a later count pass reads chunks wherever Spark runs its
    tasks, and must not make a second owner).
    """
    def fn(batches):
        total, ids = None, []
        for rb in batches:
            for bid, _, codes, y, w in _chunks(rb, num_features, token, keep):
                if grant:
                    worker_cache().own((token, bid), 0, first_read=True)
                if pair_with is None:
                    c = feature_counts(codes, y, arity, num_classes, w)
                elif isinstance(pair_with, list):
                    c = pair_counts_many(codes, y, pair_with, arity, num_classes, w)
                else:
                    c = pair_counts(codes, y, pair_with, arity, num_classes, w)
                c = c.astype(np.int64, copy=False)
                total = c.copy() if total is None else np.add(total, c, out=total)
                ids.append(bid)
        if total is not None:
            yield pa.RecordBatch.from_pydict({"chunk_ids": pa.array([ids], pa.list_(pa.int64())),
                                              "counts": pa.array([total.tobytes()], pa.binary())})
    return fn


def _naive_scorers(ops: StepOps):
    """(score a chunk this worker holds by key, score codes read from the JVM)."""
    def held(key):
        item = worker_cache().get(key)
        return naive_partials(item[0], ops, None, item[2]) if item is not None else None

    def read(key, n, codes, y, w):
        return naive_partials(codes, ops, None, w)
    return held, read


def _pairwise_scorers(ops: StepOps, shipped: StepOps, num_features: int):
    """Pairwise scorers: ``held`` brings the state this worker keeps for a chunk to
    ``ops.block`` with the tables ``shipped`` (those of the features the states of the
    previous step still have to fold in), or starts it from nothing if every table of the
    chunk was shipped; otherwise it is a miss. ``read`` builds a state from nothing with
    all tables. A state is put back only once its update is complete."""
    tables = shipped.pair_log_tables

    def held(key):
        item = worker_cache().get(key)
        if item is None:
            return None
        state = worker_cache().states.peek(key)
        start = 0
        if state is not None and ops.block[:len(state.block)] == state.block:
            start = len(state.block)
        if not all(f in tables for f in ops.block[start:]):
            return None
        state = worker_cache().states.take(key)
        if state is None:
            state = ChunkState.initial(ops.prior, item[0].shape[1], num_features)
        out = pairwise_partials(item[0], item[1], state, shipped, item[2])
        worker_cache().put_state(key, state)
        return out

    def read(key, n, codes, y, w):
        state = ChunkState.initial(ops.prior, n, num_features)
        out = pairwise_partials(codes, y, state, ops, w)
        worker_cache().put_state(key, state)
        return out
    return held, read


def _first_pass_fn(held, token: str, ids: list[int], serial: int, state_budget: int):
    """Pass 1 of a step: one task per task slot, each over *every* chunk id.

    Which Python worker runs which partition's task is Spark's choice and changes from pass
    to pass, so a pass over each partition's own ids would find about half of the chunks
    in another worker whenever two tasks swap. Here every worker that runs a task looks at
    every id and scores, with ``held(key)``, the chunks it owns at ``serial - 1`` (see
    :meth:`WorkerCache.owns`), wherever their partition is. A chunk is scored at most once per worker
    and pass (two tasks can run in one worker one after the other); ``held`` returning None
    is a miss, and the driver reads the chunks nobody scored in a second pass. The
    worker keeps at most ``state_budget`` bytes of states.
    """
    def fn(batches):
        for _ in batches:  # one row per task, nothing to read
            pass
        # module state only through module functions: a closure would ship copies of the
        # driver's (empty) dictionaries instead of using this worker's
        cache = worker_cache()
        cache.budget_states(state_budget)
        done = cache.scored_in(token, serial)
        out_ids, outs = [], []
        for bid in ids:
            key = (token, bid)
            if bid in done or not cache.owns(key, serial - 1):
                continue
            out = held(key)
            if out is None:
                continue
            cache.own(key, serial)
            done.add(bid)
            outs.append(out.tobytes())
            out_ids.append(bid)
        yield pa.RecordBatch.from_pydict({"chunk_id": pa.array(out_ids, pa.int64()),
                                          "partial": pa.array(outs, pa.binary())})
    return fn


def _second_pass_fn(read, num_features: int, token: str, serial: int, state_budget: int,
                    keep=None):
    """Pass 2 of a step, over cached chunk rows: ``read(key, n, codes, y, w)`` scores each
    one; the worker keeps the chunk and owns it, and at most ``state_budget`` bytes of
    states."""
    def fn(batches):
        worker_cache().budget_states(state_budget)
        for rb in batches:
            ids, outs = [], []
            for bid, n, codes, y, w in _chunks(rb, num_features, token, keep):
                key = (token, bid)
                outs.append(read(key, n, codes, y, w).tobytes())
                ids.append(bid)
                worker_cache().own(key, serial)
            yield pa.RecordBatch.from_pydict({"chunk_id": pa.array(ids, pa.int64()),
                                              "partial": pa.array(outs, pa.binary())})
    return fn


class SparkBackend:
    """Greedy-loop backend over a cached DataFrame of encoded chunks (one Spark job a pass).

    Implements :class:`vmi_spark.core.greedy.Backend` and
    :class:`vmi_spark.spark.routes.Execution`.
    """

    #: the execution's name in the report
    execution = "passes"

    def __init__(self, chunks: DataFrame, num_features: int, arity: int, num_classes: int,
                 describe=None, keep=None, state_budget: int = WORKER_STATE_BYTES):
        self.chunks = chunks
        #: the row mask of a masked backend (:meth:`masked`), or None: every row
        self.keep = keep
        self.num_features = num_features
        self.arity = arity
        self.num_classes = num_classes
        self.state_block: tuple[int, ...] = ()  # the block the workers' states were left at
        self._feature_counts: np.ndarray | None = None
        # identifies this run's chunks in the Python workers' caches
        self.token = uuid.uuid4().hex
        self.cache_hits: list[int] = []  # per pass: chunks scored from worker caches
        #: bytes of pairwise state each Python worker keeps between passes
        self.state_budget = state_budget
        self._serial = 0  # step passes run: the version of the ownership they leave
        self._chunk_ids: list[int] = []
        self._slots: int | None = None
        self.describe = describe or (
            lambda text: session.describe_jobs(chunks.sparkSession, text or None))

    def _counts(self, pair_with) -> np.ndarray:
        shape: tuple[int, ...] = (self.num_features, self.arity, self.num_classes)
        if pair_with is not None:
            shape = (self.num_features, self.arity, self.arity, self.num_classes)
            if isinstance(pair_with, list):
                shape = (len(pair_with), *shape)
        first = not self._chunk_ids
        fn = _count_fn(self.num_features, self.arity, self.num_classes, pair_with, self.token,
                       grant=first, keep=self.keep)
        rows = self.chunks.mapInArrow(fn, COUNTS_SCHEMA).collect()
        total = np.zeros(int(np.prod(shape)), dtype=np.int64)
        for r in rows:
            total += np.frombuffer(r[1], dtype=np.int64)
        if first:
            self._chunk_ids = sorted(int(b) for r in rows for b in r[0])
        return total.reshape(shape)

    def feature_counts(self) -> np.ndarray:
        if self._feature_counts is None:
            self._feature_counts = self._counts(None)
        return self._feature_counts.copy()

    def pair_counts(self, f: int) -> np.ndarray:
        return self._counts(f)

    def pair_counts_many(self, fs: list[int]) -> np.ndarray:
        """Counts against every f in ``fs``: (len(fs), D, A, A, L), in as few passes as
        :data:`~.chunks.COUNT_PASS_BYTES` allows (each task sends one such array through
        the JVM)."""
        chunks = pair_count_chunks([int(f) for f in fs], self.num_features, self.arity,
                                   self.num_classes)
        if len(chunks) == 1:
            return self._counts(chunks[0])
        return np.concatenate([self._counts(c) for c in chunks])

    def run(self, ops: StepOps) -> np.ndarray:
        self.describe(ops.label)
        try:
            if ops.pairwise:
                return self._run_pairwise(ops)
            return self._run_naive(ops)
        finally:
            self.describe("")

    def _step(self, held, read) -> np.ndarray:
        """Sum of every chunk's partials: the first pass scores, with ``held``, what the
        workers own (:func:`_first_pass_fn`); the second reads the chunks it missed (all of
        them before the chunk ids are known) and scores them with ``read``."""
        self._serial += 1
        partials: dict[int, bytes] = {}
        if self._chunk_ids:
            if self._slots is None:
                self._slots = session.parallelism(self.chunks.sparkSession)
            first = _first_pass_fn(held, self.token, self._chunk_ids, self._serial,
                                   self.state_budget)
            rows = (self.chunks.sparkSession.range(0, self._slots, 1, self._slots)
                    .mapInArrow(first, PARTIALS_SCHEMA).collect())
            for r in rows:
                partials.setdefault(int(r[0]), r[1])  # equal integers if scored twice
            self.cache_hits.append(len(partials))
        missed = [b for b in self._chunk_ids if b not in partials]
        if missed or not self._chunk_ids:
            source = self.chunks
            if partials:
                source = self.chunks.where(F.col("chunk_id").isin(missed))
            second = _second_pass_fn(read, self.num_features, self.token, self._serial,
                                     self.state_budget, self.keep)
            for r in source.mapInArrow(second, PARTIALS_SCHEMA).collect():
                partials[int(r[0])] = r[1]
            if not self._chunk_ids:
                self._chunk_ids = sorted(partials)
        return _exact_sum(list(partials.values()), self.num_features)

    def _run_naive(self, ops: StepOps) -> np.ndarray:
        return self._step(*_naive_scorers(ops))

    def _run_pairwise(self, ops: StepOps) -> np.ndarray:
        """Workers update the state they hold in place; missing chunks are rebuilt."""
        held = self.state_block
        common = 0
        while common < min(len(held), len(ops.block)) and held[common] == ops.block[common]:
            common += 1
        # ship the tables of the features the workers' states still have to fold in
        need = ops.block[common:]
        shipped = StepOps(ops.method, ops.prior, ops.cond, ops.candidates, ops.block,
                          {f: ops.pair_log_tables[f] for f in need}, ops.label)
        out = self._step(*_pairwise_scorers(ops, shipped, self.num_features))
        self.state_block = tuple(ops.block)
        return out

    def masked(self, keep) -> SparkBackend:
        """A backend over the same cached chunks with only the rows ``keep(codes, y)``
        keeps (a picklable mask: :class:`vmi_spark.core.stability.HalfSample`), its own
        token, so its tasks keep the masked chunks apart from these."""
        return SparkBackend(self.chunks, self.num_features, self.arity, self.num_classes,
                            self.describe, keep, self.state_budget)

    def notes(self) -> list[str]:
        """Nothing to report: a lost executor's chunks are re-read from the cache."""
        return []

    def close(self) -> None:
        """Nothing to release: the workers' caches age out by their byte budgets."""
