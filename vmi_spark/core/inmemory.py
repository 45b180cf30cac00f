"""An in-memory backend: the whole encoded table as one set of numpy arrays.

Used by the scikit-learn style selector and by tests; it runs exactly the same
chunk kernels as the Spark executors, chunk by chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from . import wide
from .bound import (
    MAX_CHUNK_ROWS,
    ChunkState,
    NaiveState,
    StepOps,
    feature_counts,
    pair_counts,
    pair_counts_many,
    run_chunk,
    whole_strides,
)
from .chunkstore import ChunkStore
from .resources import process_cores

_in_turn = map

#: most threads a :class:`ThreadedBackend` uses
MAX_THREADS = 8


class InMemoryBackend:
    """Rows held as (D, N) uint8 codes and (N,) class codes, split into chunks.

    Implements :class:`vmi_spark.core.greedy.Backend`. Each chunk keeps its per-row state
    from step to step: the pairwise running sums, or the naive posterior (8 bytes per row
    and class, :class:`.bound.NaiveState`). ``map`` runs a step's per-chunk
    function over the chunks (default: the built-in ``map``, one chunk after the other;
    a thread pool's ``map`` spreads them over cores, the kernels release the GIL). The
    chunks' sums are exact integers, so the order they are computed in does not matter.

    ``w`` (optional) are the rows' integer weights (:mod:`.weights`: positive int64
    units): every count is then a sum of weights and a step's sums are exact Python ints
    (wide sums, :mod:`.wide`). Without it every row weighs 1 and nothing else changes.
    """

    def __init__(self, codes: np.ndarray, y: np.ndarray,
                 arity: int | None = None, num_classes: int | None = None,
                 chunk_rows: int = MAX_CHUNK_ROWS,
                 map: Callable[[Callable[[Any], np.ndarray], Iterable[Any]],
                               Iterator[np.ndarray]] | None = None,
                 w: np.ndarray | None = None):
        codes = np.ascontiguousarray(codes, dtype=np.uint8)
        y = np.ascontiguousarray(y, dtype=np.int64)
        self.arity = int(arity if arity is not None else int(codes.max(initial=0)) + 1)
        self.num_classes = int(num_classes if num_classes is not None else int(y.max()) + 1)
        self.num_features = codes.shape[0]
        self.chunk_rows = chunk_rows
        self.weighted = w is not None
        if w is not None:
            w = np.ascontiguousarray(w, dtype=np.int64)
            if w.shape != y.shape:
                raise ValueError(f"{len(y)} rows but {len(w)} weights")
        starts = range(0, codes.shape[1], chunk_rows)
        self.chunks = [(np.ascontiguousarray(codes[:, s:s + chunk_rows]), y[s:s + chunk_rows],
                        None if w is None else w[s:s + chunk_rows]) for s in starts]
        #: every chunk's per-row state by (kind, chunk index), made at its first step
        self.states = ChunkStore()
        self._map = map if map is not None else _in_turn
        #: :meth:`feature_counts`, counted at its first call (the rows never change)
        self._feature_counts: np.ndarray | None = None

    def _summed(self, count: Callable[..., np.ndarray]) -> np.ndarray:
        """The sum over the chunks of ``count(codes, y, w)`` (integer counts), the chunks
        mapped like the steps' (on the driver execution's threads, the count passes too)."""
        chunks = self.chunks or [(np.zeros((self.num_features, 0), np.uint8),
                                  np.zeros(0, np.int64), None)]
        total: np.ndarray | None = None
        for part in self._map(lambda b: count(*b), chunks):
            if total is None:
                total = part.copy()
            else:
                total += part
        assert total is not None
        return total

    def feature_counts(self) -> np.ndarray:
        """(D, A, L) counts n(x_i = a, y), counted once: the screen, the scorer and the
        stop rule each ask for them before the steps (a copy each time)."""
        if self._feature_counts is None:
            self._feature_counts = self._summed(
                lambda c, y, w: feature_counts(c, y, self.arity, self.num_classes, w))
        return self._feature_counts.copy()

    def pair_counts(self, f: int) -> np.ndarray:
        return self._summed(lambda c, y, w: pair_counts(c, y, f, self.arity, self.num_classes,
                                                         w))

    def run(self, ops: StepOps) -> np.ndarray:
        states = [self._state(i, ops) for i in range(len(self.chunks))]
        total = np.zeros(self.num_features, dtype=np.int64)
        if self.weighted:  # wide sums: hi and lo added apart, exact as Python ints at the end
            wide_total = wide.zeros(self.num_features)
            for part in self._map(lambda b: run_chunk(b[0][0], b[0][1], b[1], ops, b[0][2]),
                                  zip(self.chunks, states)):
                wide_total += part
            return wide.exact(wide_total)
        for part in self._map(lambda b: run_chunk(b[0][0], b[0][1], b[1], ops),
                              zip(self.chunks, states)):
            total += part
        return total

    def _state(self, i: int, ops: StepOps) -> ChunkState | NaiveState:
        """Chunk ``i``'s state for ``ops`` (pairwise running sums or naive posterior)."""
        key = ("pairwise" if ops.pairwise else "naive", i)
        state = self.states.get(key)
        if state is None:
            codes = self.chunks[i][0]
            state = (ChunkState.initial(ops.prior, codes.shape[1], codes.shape[0])
                     if ops.pairwise else NaiveState())
            self.states.put(key, state, 0)
        return state

    def kept_states(self, kind: str) -> list:
        """The states of ``kind`` ("naive" or "pairwise") kept so far, in chunk order."""
        return [self.states.peek((kind, i)) for i in range(len(self.chunks))
                if (kind, i) in self.states]

    def pair_counts_many(self, fs: list[int]) -> np.ndarray:
        """(len(fs), D, A, A, L) int64 counts n(x_i = a, x_f = b, y) for every f in ``fs``."""
        return self._summed(lambda c, y, w: pair_counts_many(c, y, fs, self.arity,
                                                              self.num_classes, w))

    def rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """All rows as ``(codes, y, w)`` (``w`` None when unweighted), in chunk order."""
        if not self.chunks:
            return (np.zeros((self.num_features, 0), np.uint8), np.zeros(0, np.int64),
                    np.zeros(0, np.int64) if self.weighted else None)
        codes = np.concatenate([b[0] for b in self.chunks], axis=1)
        y = np.concatenate([b[1] for b in self.chunks])
        w = np.concatenate([b[2] for b in self.chunks]) if self.weighted else None
        return codes, y, w

    def masked(self, keep: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> InMemoryBackend:
        """A backend over the rows ``keep(codes, y)`` (a (n,) bool mask of a chunk) keeps:
        a stability run's half-sample (:mod:`.stability`), weights kept with their rows."""
        parts = [(c[:, m], y[m], None if w is None else w[m])
                 for c, y, w in self.chunks for m in [keep(c, y)]]
        codes = (np.concatenate([p[0] for p in parts], axis=1) if parts
                 else np.zeros((self.num_features, 0), np.uint8))
        y = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
        w = (np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, np.int64)) \
            if self.weighted else None
        return InMemoryBackend(codes, y, self.arity, self.num_classes, self.chunk_rows,
                               map=self._map, w=w)

    def close(self) -> None:
        """Forget the per-row states (the codes stay: nothing else is held)."""
        self.states.reset()


class ThreadedBackend(InMemoryBackend):
    """:class:`InMemoryBackend` whose chunks run on a pool of threads (the kernels release
    the GIL). A step's sums are exact integers, so the result is the one-thread result bit
    for bit, whatever the number of threads.

    ``threads`` defaults to the process's cores (:func:`process_cores`, at most
    :data:`MAX_THREADS`). The rows are cut into about two chunks per thread, so that every
    thread has work in every pass; a table of at most 4096 rows runs on the calling thread.
    """

    def __init__(self, codes: np.ndarray, y: np.ndarray, arity: int | None = None,
                 num_classes: int | None = None, threads: int | None = None,
                 w: np.ndarray | None = None):
        threads = threads or min(MAX_THREADS, process_cores())
        n = np.shape(codes)[1]
        chunk_rows = max(4096, whole_strides(-(-n // (2 * threads)), up=True)) if n else 4096
        pool = ThreadPoolExecutor(threads) if threads > 1 and n > 4096 else None
        super().__init__(codes, y, arity=arity, num_classes=num_classes,
                         chunk_rows=min(chunk_rows, MAX_CHUNK_ROWS),
                         map=pool.map if pool is not None else None, w=w)
        self._pool = pool

    def close(self) -> None:
        super().close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
