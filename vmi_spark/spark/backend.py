"""The Spark backend of the greedy loop: cached blocks, one pass per step.

Count tables are aggregated over the cached blocks (each block emits its integer
counts; the driver adds them), and each greedy step is one ``mapInArrow`` pass
that folds the feature chosen last into every block's per-row state, sums each
candidate's log-ratio contributions, and emits the new state together with the
block's partial sums. The driver adds the partial sums exactly (fixed-point
integers), so the result is the same for every partitioning. The tables travel
inside the pass's function, which Spark ships to the executors once per pass.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame

from ..core.bound import BlockState, StepOps, feature_counts, pair_counts, pair_counts_many, run_block

STATE_SCHEMA = "block_id long, n int, codes binary, y binary, post binary, pair binary, partial binary"


def _exact_sum(partials: list[bytes], num_features: int) -> np.ndarray:
    """Exact sum of int64 partial vectors (Python integers, then an object array)."""
    total = np.zeros(num_features, dtype=object)
    for p in partials:
        total += np.frombuffer(p, dtype=np.int64).astype(object)
    return total


def _count_fn(num_features: int, arity: int, num_classes: int, pair_with):
    def fn(batches):
        for rb in batches:
            ns = rb.column("n").to_pylist()
            codes_col = rb.column("codes")
            y_col = rb.column("y")
            outs = []
            for k, n in enumerate(ns):
                codes = np.frombuffer(codes_col[k].as_py(), dtype=np.uint8).reshape(num_features, n)
                y = np.frombuffer(y_col[k].as_py(), dtype=np.uint16)
                if pair_with is None:
                    c = feature_counts(codes, y, arity, num_classes)
                elif isinstance(pair_with, list):
                    c = pair_counts_many(codes, y, pair_with, arity, num_classes)
                else:
                    c = pair_counts(codes, y, pair_with, arity, num_classes)
                outs.append(c.astype(np.int64).tobytes())
            yield pa.RecordBatch.from_pydict({"counts": pa.array(outs, pa.binary())})
    return fn


def _step_fn(ops: StepOps, num_features: int, num_classes: int, method: str):
    def fn(batches):
        for rb in batches:
            cols = {name: rb.column(name) for name in rb.schema.names}
            has_state = "post" in cols
            posts, pairs, partials = [], [], []
            for k, n in enumerate(cols["n"].to_pylist()):
                codes = np.frombuffer(cols["codes"][k].as_py(), dtype=np.uint8).reshape(num_features, n)
                y = np.frombuffer(cols["y"][k].as_py(), dtype=np.uint16).astype(np.intp)
                if has_state:
                    post = np.frombuffer(cols["post"][k].as_py(), dtype=np.float64).reshape(n, num_classes).copy()
                    raw = cols["pair"][k].as_py()
                    pair = (np.frombuffer(raw, dtype=np.float64).reshape(num_features, n, num_classes).copy()
                            if raw else None)
                    m = int(np.frombuffer(cols["partial"][k].as_py()[-8:], dtype=np.int64)[0])
                    state = BlockState(post, pair, m)
                else:
                    state = BlockState.initial(ops.prior, n, num_features, method)
                part = run_block(codes, y, state, ops)
                posts.append(state.posterior.tobytes())
                pairs.append(state.pair_log.tobytes() if state.pair_log is not None else b"")
                # the partial sums, then the block size of the state as a trailer
                tail = np.array([state.block_size], dtype=np.int64).tobytes()
                partials.append((part if part is not None else np.zeros(0, np.int64)).tobytes() + tail)
            yield pa.RecordBatch.from_pydict({
                "block_id": cols["block_id"], "n": cols["n"], "codes": cols["codes"], "y": cols["y"],
                "post": pa.array(posts, pa.binary()), "pair": pa.array(pairs, pa.binary()),
                "partial": pa.array(partials, pa.binary()),
            })
    return fn


class SparkBackend:
    """Greedy-loop backend over a cached DataFrame of encoded blocks."""

    def __init__(self, blocks: DataFrame, num_features: int, arity: int, num_classes: int,
                 method: str, storage_level: StorageLevel = StorageLevel.MEMORY_AND_DISK,
                 describe=None):
        self.blocks = blocks
        self.num_features = num_features
        self.arity = arity
        self.num_classes = num_classes
        self.method = method
        self.storage_level = storage_level
        self.state: DataFrame | None = None
        self.describe = describe or (lambda text: None)

    def _counts(self, pair_with) -> np.ndarray:
        shape: tuple[int, ...] = (self.num_features, self.arity, self.num_classes)
        if pair_with is not None:
            shape = (self.num_features, self.arity, self.arity, self.num_classes)
            if isinstance(pair_with, list):
                shape = (len(pair_with), *shape)
        fn = _count_fn(self.num_features, self.arity, self.num_classes, pair_with)
        rows = self.blocks.mapInArrow(fn, "counts binary").collect()
        total = np.zeros(int(np.prod(shape)), dtype=np.int64)
        for r in rows:
            total += np.frombuffer(r[0], dtype=np.int64)
        return total.reshape(shape)

    def feature_counts(self) -> np.ndarray:
        return self._counts(None)

    def pair_counts(self, f: int) -> np.ndarray:
        return self._counts(f)

    def pair_counts_many(self, fs: list[int]) -> np.ndarray:
        """Counts against every f in ``fs`` in one pass: (len(fs), D, A, A, L)."""
        return self._counts([int(f) for f in fs])

    def run(self, ops: StepOps) -> np.ndarray:
        source = self.state if self.state is not None else self.blocks
        fn = _step_fn(ops, self.num_features, self.num_classes, self.method)
        new_state = source.mapInArrow(fn, STATE_SCHEMA).persist(self.storage_level)
        rows = new_state.select("partial").collect()
        partials = [r[0][:-8] for r in rows]
        if self.state is not None:
            self.state.unpersist()
        self.state = new_state
        return _exact_sum(partials, self.num_features)

    def close(self) -> None:
        if self.state is not None:
            self.state.unpersist()
            self.state = None
