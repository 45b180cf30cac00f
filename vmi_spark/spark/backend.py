"""The Spark backend of the greedy loop: cached blocks, one pass per step.

Count tables are aggregated over the cached blocks (each block emits its integer
counts; the driver adds them). A greedy step is one ``mapInArrow`` pass whose
blocks emit the exact fixed-point partial sums of every candidate; the driver adds
them, so the result is the same for every partitioning.

* ``vmi_naive`` passes are stateless: each block rebuilds the posterior of its rows
  from the features of the current selection block (m gathers per row, m << D) and
  emits only its (D,) partial sums. Nothing is persisted per step, the lineage of a
  step is the cached blocks, and a lost executor costs only a recomputation of its
  blocks.
* ``vmi_pairwise`` keeps per-row state (D x L running log sums). By default the Python
  workers hold it next to their cached blocks and update it in place: a pass over block
  ids scores the blocks whose state a worker can bring to the current block, and a
  second pass rebuilds the missing ones from the cached codes and the tables the driver
  keeps (same integers). Without the worker cache the state is a persisted DataFrame
  that each pass maps into the next one; its lineage is cut with a local checkpoint
  every :data:`CHECKPOINT_EVERY` passes, and if a pass fails because state blocks were
  lost (an executor died), the state is rebuilt and the pass retried.

The tables travel inside the pass's function, which Spark ships once per pass.
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict

import numpy as np
import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..core.bound import (
    PAIRWISE,
    BlockState,
    StepOps,
    feature_counts,
    naive_partials,
    pair_counts,
    pair_counts_many,
    pairwise_partials,
)

log = logging.getLogger("vmi_spark")

#: bytes of pairwise state one Python worker process keeps between passes
WORKER_STATE_BYTES = 2 << 30
#: keep the pairwise state in the Python workers (False: the persisted state chain)
PAIRWISE_RESIDENT = True

STATE_SCHEMA = ("block_id long, n int, codes binary, y binary, post binary, pair binary, "
                "held binary, partial binary")
#: passes of the pairwise state chain between two local checkpoints (bounds the lineage)
CHECKPOINT_EVERY = 8
#: bytes of decoded blocks one Python worker process keeps between passes
WORKER_CACHE_BYTES = 1 << 30

# Blocks a Python worker has seen, keyed by (run token, block id): Spark reuses its Python
# workers between tasks, so a naive pass can score the blocks a worker already holds without
# moving their codes from the JVM again. A miss (another worker, an evicted or lost block)
# is answered by a pass over the cached DataFrame, which is the truth; the cache only saves
# transfers and never changes a result.
_WORKER_BLOCKS: OrderedDict = OrderedDict()
_worker_bytes = 0


def _cache_put(key, codes: np.ndarray, y: np.ndarray) -> None:
    global _worker_bytes
    if key in _WORKER_BLOCKS or codes.nbytes + y.nbytes > WORKER_CACHE_BYTES:
        return
    item = (np.array(codes, copy=True), np.array(y, copy=True))
    _WORKER_BLOCKS[key] = item
    _worker_bytes += item[0].nbytes + item[1].nbytes
    while _worker_bytes > WORKER_CACHE_BYTES:
        _, (c, yy) = _WORKER_BLOCKS.popitem(last=False)
        _worker_bytes -= c.nbytes + yy.nbytes


def _cache_get(key):
    item = _WORKER_BLOCKS.get(key)
    if item is not None:
        _WORKER_BLOCKS.move_to_end(key)
    return item


# Pairwise state a Python worker holds, keyed like the blocks: the posterior and the running
# log sums of the block's rows after the features in ``state.block``. A pass takes a state
# out while it updates it and puts it back only when the update is complete, so a failed
# task leaves no half-updated state behind; the next pass rebuilds that block instead.
# Each state carries the serial of the pass that last updated it: the driver knows which
# pass last scored every block, so a stale copy (the block was rebuilt in another worker
# since) is recognised and dropped instead of being scored twice.
_WORKER_STATES: OrderedDict = OrderedDict()
_STATE_SERIALS: dict = {}
_state_bytes = 0
# (run token, pass serial) -> the block ids this worker has scored in that pass
_SCORED: dict = {}


def _state_nbytes(state: BlockState) -> int:
    return state.posterior.nbytes + state.pair_log.nbytes


def _state_put(key, state: BlockState, budget: int, serial: int = 0) -> None:
    global _state_bytes
    _state_take(key)  # an older copy of the same block
    if _state_nbytes(state) > budget:
        return
    _WORKER_STATES[key] = state
    _STATE_SERIALS[key] = serial
    _state_bytes += _state_nbytes(state)
    while _state_bytes > budget:
        old_key, old = _WORKER_STATES.popitem(last=False)
        _STATE_SERIALS.pop(old_key, None)
        _state_bytes -= _state_nbytes(old)


def _state_peek(key) -> tuple[BlockState | None, int | None]:
    """The state kept for ``key`` and its pass serial, left in place."""
    return _WORKER_STATES.get(key), _STATE_SERIALS.get(key)


def _scored_in(token: str, serial: int) -> set:
    """The block ids this worker has scored in pass ``serial`` (older passes forgotten)."""
    for old in [k for k in _SCORED if k[0] == token and k[1] != serial]:
        del _SCORED[old]
    return _SCORED.setdefault((token, serial), set())


def _state_take(key) -> BlockState | None:
    global _state_bytes
    state = _WORKER_STATES.pop(key, None)
    _STATE_SERIALS.pop(key, None)
    if state is not None:
        _state_bytes -= _state_nbytes(state)
    return state


def binary_values(arr: pa.Array) -> list[memoryview]:
    """Zero-copy views of the values of an Arrow binary array."""
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32)[arr.offset:arr.offset + len(arr) + 1]
    data = memoryview(bufs[2]) if bufs[2] is not None else memoryview(b"")
    return [data[offsets[k]:offsets[k + 1]] for k in range(len(arr))]


def _blocks(rb: pa.RecordBatch, num_features: int, token: str | None = None):
    """(n, codes (D, n) uint8, y (n,) intp) of every block row of a record batch.

    With a ``token``, the blocks are also kept in this worker's cache (:func:`_cache_put`).
    """
    ns = rb.column("n").to_pylist()
    ids = rb.column("block_id").to_pylist() if token is not None else None
    codes = binary_values(rb.column("codes"))
    ys = binary_values(rb.column("y"))
    for k, n in enumerate(ns):
        c = np.frombuffer(codes[k], dtype=np.uint8).reshape(num_features, n)
        y = np.frombuffer(ys[k], dtype=np.uint16).astype(np.intp)
        if ids is not None:
            _cache_put((token, ids[k]), c, y)
        yield k, n, c, y


def _exact_sum(partials: list[bytes], num_features: int) -> np.ndarray:
    """Exact sum of int64 partial vectors (Python integers, then an object array)."""
    total = np.zeros(num_features, dtype=object)
    for p in partials:
        total += np.frombuffer(p, dtype=np.int64).astype(object)
    return total


def _count_fn(num_features: int, arity: int, num_classes: int, pair_with, token=None):
    def fn(batches):
        for rb in batches:
            outs = []
            for _, _, codes, y in _blocks(rb, num_features, token):
                if pair_with is None:
                    c = feature_counts(codes, y, arity, num_classes)
                elif isinstance(pair_with, list):
                    c = pair_counts_many(codes, y, pair_with, arity, num_classes)
                else:
                    c = pair_counts(codes, y, pair_with, arity, num_classes)
                outs.append(c.astype(np.int64).tobytes())
            yield pa.RecordBatch.from_pydict({"counts": pa.array(outs, pa.binary())})
    return fn


def _naive_fn(ops: StepOps, num_features: int, token: str | None = None):
    def fn(batches):
        for rb in batches:
            outs = [naive_partials(codes, ops).tobytes()
                    for _, _, codes, y in _blocks(rb, num_features, token)]
            yield pa.RecordBatch.from_pydict({"partial": pa.array(outs, pa.binary())})
    return fn


def _by_ids_fn(score):
    """A pass over block ids only: ``score(block_id)`` gives the partial sums of a block
    this worker can score from what it holds, or None (a miss, flagged for a second pass)."""
    def fn(batches):
        for rb in batches:
            ids = rb.column("block_id").to_pylist()
            outs, hits = [], []
            for bid in ids:
                out = score(bid)
                hits.append(out is not None)
                outs.append(out if out is not None else b"")
            yield pa.RecordBatch.from_pydict({"block_id": pa.array(ids, pa.int64()),
                                              "partial": pa.array(outs, pa.binary()),
                                              "hit": pa.array(hits, pa.bool_())})
    return fn


def _naive_cached_fn(ops: StepOps, token: str):
    """A naive pass over block ids: scores the blocks this worker holds."""
    def score(bid):
        item = _cache_get((token, bid))
        return naive_partials(item[0], ops).tobytes() if item is not None else None
    return _by_ids_fn(score)


def _pairwise_everywhere_fn(ops: StepOps, token: str, budget: int, ids: list[int], serial: int):
    """Pass 1 of a pairwise step: one task per task slot, each over *every* block id.

    Which Python worker runs which partition's task is Spark's choice and changes from pass
    to pass, so a pass over each partition's own ids finds the state of about half of the
    blocks in another worker. Here every worker that runs a task looks at every id and
    scores the blocks whose codes and state it holds, wherever their partition is: a state
    from the previous pass (every pass scores every block, so serial ``serial - 1``) is
    brought to ``ops.block`` if what it holds is a prefix of it and the tables of the
    features still to fold in were shipped. A block is scored at most once per worker and
    pass (two tasks can run in one worker one after the other); the driver keeps one
    result per block (equal integers) and rebuilds the blocks nobody scored.
    """
    def fn(batches):
        for _ in batches:  # one row per task, nothing to read
            pass
        # module state only through module functions: a closure would ship copies of the
        # driver's (empty) dictionaries instead of using this worker's
        done = _scored_in(token, serial)
        out_ids, outs = [], []
        for bid in ids:
            key = (token, bid)
            kept, kept_serial = _state_peek(key)
            if bid in done or kept is None:
                continue
            if kept_serial != serial - 1:
                _state_take(key)  # stale: the block was scored from a newer state elsewhere
                continue
            item = _cache_get(key)
            held = kept.block
            if (item is None or ops.block[:len(held)] != held
                    or not all(f in ops.pair_log_tables for f in ops.block[len(held):])):
                continue
            state = _state_take(key)
            assert state is not None
            outs.append(pairwise_partials(item[0], item[1], state, ops).tobytes())
            out_ids.append(bid)
            done.add(bid)
            _state_put(key, state, budget, serial)  # back only once complete
        yield pa.RecordBatch.from_pydict({"block_id": pa.array(out_ids, pa.int64()),
                                          "partial": pa.array(outs, pa.binary())})
    return fn


def _pairwise_rebuild_fn(ops: StepOps, num_features: int, token: str, budget: int, serial: int):
    """A pairwise pass over cached blocks that builds each block's state from nothing."""
    def fn(batches):
        for rb in batches:
            ids = rb.column("block_id").to_pylist()
            outs = []
            for k, n, codes, y in _blocks(rb, num_features, token):
                state = BlockState.initial(ops.prior, n, num_features)
                outs.append(pairwise_partials(codes, y, state, ops).tobytes())
                _state_put((token, ids[k]), state, budget, serial)
            yield pa.RecordBatch.from_pydict({"block_id": pa.array(ids, pa.int64()),
                                              "partial": pa.array(outs, pa.binary())})
    return fn


def _pairwise_fn(ops: StepOps, num_features: int, num_classes: int):
    def fn(batches):
        for rb in batches:
            has_state = "post" in rb.schema.names
            if has_state:
                posts_in = binary_values(rb.column("post"))
                pairs_in = binary_values(rb.column("pair"))
                held_in = binary_values(rb.column("held"))
            posts, pairs, helds, partials = [], [], [], []
            for k, n, codes, y in _blocks(rb, num_features):
                if has_state:
                    post = np.frombuffer(posts_in[k], dtype=np.float64).reshape(n, num_classes).copy()
                    pair = np.frombuffer(pairs_in[k], dtype=np.float64).reshape(
                        num_features, n, num_classes).copy()
                    held = tuple(int(f) for f in np.frombuffer(held_in[k], dtype=np.int64))
                    state = BlockState(post, pair, held)
                else:
                    state = BlockState.initial(ops.prior, n, num_features)
                partials.append(pairwise_partials(codes, y, state, ops).tobytes())
                posts.append(state.posterior.tobytes())
                pairs.append(state.pair_log.tobytes())
                helds.append(np.asarray(state.block, dtype=np.int64).tobytes())
            yield pa.RecordBatch.from_pydict({
                "block_id": rb.column("block_id"), "n": rb.column("n"),
                "codes": rb.column("codes"), "y": rb.column("y"),
                "post": pa.array(posts, pa.binary()), "pair": pa.array(pairs, pa.binary()),
                "held": pa.array(helds, pa.binary()), "partial": pa.array(partials, pa.binary()),
            })
    return fn


def _set_description(df: DataFrame, text: str) -> None:
    """Name the next Spark jobs (the Spark UI shows it; a job tag under Spark Connect)."""
    from .session import describe_jobs

    describe_jobs(df.sparkSession, text or None)


class SparkBackend:
    """Greedy-loop backend over a cached DataFrame of encoded blocks."""

    def __init__(self, blocks: DataFrame, num_features: int, arity: int, num_classes: int,
                 method: str, storage_level: StorageLevel = StorageLevel.MEMORY_AND_DISK,
                 describe=None, worker_cache: bool = True):
        self.blocks = blocks
        self.num_features = num_features
        self.arity = arity
        self.num_classes = num_classes
        self.method = method
        self.storage_level = storage_level
        self.state: DataFrame | None = None
        self.state_block: tuple[int, ...] = ()
        self.chain = 0
        self._feature_counts: np.ndarray | None = None
        # identifies this run's blocks in the Python workers' caches
        self.token = uuid.uuid4().hex if worker_cache else None
        self.cache_hits: list[int] = []  # per pass: blocks scored from worker caches
        self.state_budget = WORKER_STATE_BYTES
        self.resident = PAIRWISE_RESIDENT and self.token is not None
        self._serial = 0  # pairwise passes run: the version of the states they leave
        self._block_ids: list[int] = []
        self._slots: int | None = None
        self.describe = describe or (lambda text: _set_description(blocks, text))

    def _counts(self, pair_with) -> np.ndarray:
        shape: tuple[int, ...] = (self.num_features, self.arity, self.num_classes)
        if pair_with is not None:
            shape = (self.num_features, self.arity, self.arity, self.num_classes)
            if isinstance(pair_with, list):
                shape = (len(pair_with), *shape)
        fn = _count_fn(self.num_features, self.arity, self.num_classes, pair_with, self.token)
        rows = self.blocks.mapInArrow(fn, "counts binary").collect()
        total = np.zeros(int(np.prod(shape)), dtype=np.int64)
        for r in rows:
            total += np.frombuffer(r[0], dtype=np.int64)
        return total.reshape(shape)

    def feature_counts(self) -> np.ndarray:
        if self._feature_counts is None:
            self._feature_counts = self._counts(None)
        return self._feature_counts.copy()

    def pair_counts(self, f: int) -> np.ndarray:
        return self._counts(f)

    def pair_counts_many(self, fs: list[int]) -> np.ndarray:
        """Counts against every f in ``fs`` in one pass: (len(fs), D, A, A, L)."""
        return self._counts([int(f) for f in fs])

    def run(self, ops: StepOps) -> np.ndarray:
        self.describe(ops.label)
        try:
            if ops.method == PAIRWISE:
                if self.resident:
                    return self._run_pairwise_resident(ops)
                return self._run_pairwise(ops)
            return self._run_naive(ops)
        finally:
            self.describe("")

    def _two_passes(self, first, second) -> list[bytes]:
        """Partials of every block: ``first`` over block ids (what the workers hold), then
        ``second`` over the cached blocks it missed (all of them if ``first`` is None)."""
        partials: list[bytes] = []
        source = self.blocks
        if first is not None:
            rows = (self.blocks.select("block_id")
                    .mapInArrow(first, "block_id long, partial binary, hit boolean").collect())
            partials = [r[1] for r in rows if r[2]]
            missed = [int(r[0]) for r in rows if not r[2]]
            self.cache_hits.append(len(partials))
            if not missed:
                return partials
            if len(missed) < len(rows):
                source = self.blocks.where(F.col("block_id").isin(missed))
        return partials + [r[0] for r in source.mapInArrow(second, "partial binary").collect()]

    def _run_naive(self, ops: StepOps) -> np.ndarray:
        first = _naive_cached_fn(ops, self.token) if self.token is not None else None
        partials = self._two_passes(first, _naive_fn(ops, self.num_features, self.token))
        return _exact_sum(partials, self.num_features)

    def _run_pairwise_resident(self, ops: StepOps) -> np.ndarray:
        """Workers update the state they hold in place; missing blocks are rebuilt."""
        assert self.token is not None
        held = self.state_block
        common = 0
        while common < min(len(held), len(ops.block)) and held[common] == ops.block[common]:
            common += 1
        # ship the tables of the features the workers' states still have to fold in
        need = ops.block[common:]
        shipped = StepOps(ops.method, ops.prior, ops.cond, ops.candidates, ops.block,
                          {f: ops.pair_log_tables[f] for f in need}, ops.label)
        self._serial += 1
        partials: dict[int, bytes] = {}
        if self._block_ids:
            if self._slots is None:
                from .select import parallelism

                self._slots = parallelism(self.blocks.sparkSession)
            slots = self._slots
            first = _pairwise_everywhere_fn(shipped, self.token, self.state_budget,
                                            self._block_ids, self._serial)
            rows = (self.blocks.sparkSession.range(0, slots, 1, slots)
                    .mapInArrow(first, "block_id long, partial binary").collect())
            for r in rows:
                partials.setdefault(int(r[0]), r[1])
            self.cache_hits.append(len(partials))
        missed = [b for b in self._block_ids if b not in partials]
        if missed or not self._block_ids:
            source = self.blocks
            if partials:
                source = self.blocks.where(F.col("block_id").isin(missed))
            rebuild = _pairwise_rebuild_fn(ops, self.num_features, self.token, self.state_budget,
                                           self._serial)
            for r in source.mapInArrow(rebuild, "block_id long, partial binary").collect():
                partials[int(r[0])] = r[1]
            if not self._block_ids:
                self._block_ids = sorted(partials)
        self.state_block = tuple(ops.block)
        return _exact_sum(list(partials.values()), self.num_features)

    def _pairwise_pass(self, ops: StepOps, source: DataFrame, held: tuple[int, ...]):
        # ship only the tables of the features the state still has to fold in
        need = ops.block[len(held):]
        shipped = StepOps(ops.method, ops.prior, ops.cond, ops.candidates, ops.block,
                          {f: ops.pair_log_tables[f] for f in need}, ops.label)
        fn = _pairwise_fn(shipped, self.num_features, self.num_classes)
        new_state = source.mapInArrow(fn, STATE_SCHEMA)
        if self.chain + 1 >= CHECKPOINT_EVERY:
            new_state = new_state.localCheckpoint(eager=True)
            chain = 0
        else:
            new_state = new_state.persist(self.storage_level)
            chain = self.chain + 1
        try:
            rows = new_state.select("partial").collect()
        except BaseException:
            new_state.unpersist()
            raise
        return new_state, chain, [r[0] for r in rows]

    def _run_pairwise(self, ops: StepOps) -> np.ndarray:
        held = self.state_block
        resume = self.state is not None and ops.block[:len(held)] == held
        try:
            if resume:
                assert self.state is not None
                new_state, chain, partials = self._pairwise_pass(ops, self.state, held)
            else:
                self.chain = 0
                new_state, chain, partials = self._pairwise_pass(ops, self.blocks, ())
        except Exception as exc:  # lost state blocks: rebuild from the cached codes, retry once
            if not resume:
                raise
            log.warning("pairwise state lost (%s); rebuilding it from the cached blocks",
                        str(exc).splitlines()[0][:200])
            self.chain = 0
            new_state, chain, partials = self._pairwise_pass(ops, self.blocks, ())
        self._drop_state()
        self.state, self.state_block, self.chain = new_state, tuple(ops.block), chain
        return _exact_sum(partials, self.num_features)

    def _drop_state(self) -> None:
        if self.state is not None:
            self.state.unpersist()
            self.state = None
            self.state_block = ()

    def close(self) -> None:
        self._drop_state()
