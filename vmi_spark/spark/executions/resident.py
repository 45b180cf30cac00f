"""Resident execution: the cached chunks stay in long-running tasks for the whole selection.

One Spark job runs for the whole selection: a *barrier* ``mapInArrow`` stage over the
cached chunks, one task per partition, all scheduled at once. Each task reads its
partition's chunks into its Python worker, connects back to the driver over TCP and
then serves the greedy loop's requests (count tables, one step's partial sums) from
the chunks it holds, until the driver says stop. A greedy step therefore costs one
round trip (well under a millisecond on loopback) instead of one Spark job (about
0.2 s of scheduling even for a tiny input), and the per-row state (the pairwise sums,
the naive posterior) simply stays in the task that owns the rows.

The driver runs the greedy loop exactly as with :class:`.backend.SparkBackend`: it
sends each task what the step needs (the tables once, then per step the block, the
candidates and the pair tables of the newly chosen feature), adds the tasks' exact
fixed-point partial sums, and decides. Nothing in the answer depends on which task
holds which chunk, so results are bit-identical to the pass-based backend and to the
in-memory core.

Failures: if a task or its executor dies, Spark retries the whole barrier stage; the
new tasks re-read their partitions (recomputed from the cache's lineage if lost) and
connect again, and the driver re-sends the request that was in flight, with the
tables the new tasks have not seen. The per-row state of a new task is rebuilt from
its codes on the first step it serves.

Messages are JSON headers and raw arrays (:mod:`.wire`); nothing is unpickled, and a
connection must present the run's random secret before it is served. Connections are
accepted and authenticated off the greedy loop, by a thread with a short deadline per
connection, size limits checked before anything is parsed or allocated and a cap on
connections waiting (:class:`.resident_server.Acceptor`): another local process cannot
change, crash, stall or slow a selection.

The parts: this module is the :class:`~vmi_spark.core.greedy.Backend` (and the hand-over
to passes); :mod:`.resident_protocol` the messages; :mod:`.resident_server` the driver's
side (the job, the connections, the requests); :mod:`.resident_client` the tasks' side.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from pyspark.sql import DataFrame

from ...core.bound import StepOps
from ...core.stability import HalfSample
from ..chunks.codes import WORKER_STATE_BYTES, ChunkStage, pair_count_chunks
from .resident_client import task_fn
from .resident_protocol import joined, step_request
from .resident_server import (
    START_TIMEOUT,
    Peer,
    ResidentLost,
    ResidentTasks,
    ResidentUnavailable,
)

__all__ = ["ResidentBackend", "ResidentUnavailable", "ResidentLost", "START_TIMEOUT"]

log = logging.getLogger("vmi_spark")

_T = TypeVar("_T")


def _to_all(header: dict) -> Callable[[Peer], tuple[dict, list[np.ndarray]]]:
    """The same request, ``header`` without arrays, for every task (over the rows of its
    ``mask``, if any: recorded, :meth:`~.resident_protocol.Held.view`)."""
    def make(peer: Peer) -> tuple[dict, list[np.ndarray]]:
        peer.held.view(header.get("mask"))
        return header, []
    return make


class ResidentBackend:
    """Greedy-loop backend served by resident barrier tasks (see the module docstring);
    a :class:`vmi_spark.spark.routes.Execution`.

    ``chunks`` is the cached DataFrame of encoded chunks; it must have at most
    :func:`~.session.task_slots` partitions. Raises :class:`ResidentUnavailable` if the
    tasks do not all connect within ``start_timeout`` seconds or the job cannot start.
    ``method`` names the job in the Spark UI.

    ``fallback`` (optional) makes a backend to continue with if the tasks are lost for
    good later (the job failed, fewer task slots are left than tasks, or the retried
    tasks did not come back within :data:`~.resident_server.RECOVERY_TIMEOUT`); the
    greedy loop's state lives on the driver, so the selection simply goes on there
    (``lost`` says why). ``tasks`` is the job's driver side
    (:class:`~.resident_server.ResidentTasks`).
    """

    #: test hook: called with the address once the driver listens (before tasks start)
    listen_hook: Callable[[tuple[str, int]], None] | None = None
    #: what each task runs (:func:`.resident_client.task_fn`; a test may replace it)
    task_fn = staticmethod(task_fn)

    #: the execution's name in the report
    execution = "resident"

    def __init__(self, chunks: DataFrame | ChunkStage, num_features: int, arity: int,
                 num_classes: int, method: str, start_timeout: float = START_TIMEOUT,
                 state_budget: int = WORKER_STATE_BYTES,
                 fallback: Callable[[], Any] | None = None):
        self.num_features = num_features
        self.arity = arity
        self.num_classes = num_classes
        self.lost: str | None = None  # why the selection went on with ``fallback``
        self.fallback: Any = None
        self._make_fallback = fallback
        self._feature_counts: np.ndarray | None = None
        self._prior: np.ndarray | None = None  # the (prior, cond) tables of the last step
        self._cond: np.ndarray | None = None
        self._cond_version = 0
        self.tasks = ResidentTasks(
            chunks, num_features, arity, num_classes,
            f"vmi_spark {method}: resident tasks (the whole selection)", self.task_fn,
            start_timeout, state_budget, self.listen_hook)

    def _either(self, resident: Callable[[], _T], passes: Callable[[Any], _T]) -> _T:
        """``resident()`` from the resident tasks, or ``passes(fallback)`` once they are
        lost (from then on)."""
        if self.fallback is None:
            try:
                return resident()
            except ResidentLost as exc:
                if self._make_fallback is None:
                    raise
                self.lost = str(exc)
                log.warning("%s; going on with one Spark job per pass", exc)
                self.tasks.close(wait=0.0)
                self.fallback = self._make_fallback()
        return passes(self.fallback)

    # ------------------------------------------------------------------ Backend protocol

    def feature_counts(self) -> np.ndarray:
        return self._either(self._counts, lambda b: b.feature_counts())

    def pair_counts(self, f: int) -> np.ndarray:
        return self.pair_counts_many([f])[0]

    def pair_counts_many(self, fs: list[int]) -> np.ndarray:
        """(len(fs), D, A, A, L) counts, asked for in chunks of
        :data:`~.chunks.COUNT_PASS_BYTES` per task reply."""
        fs = [int(f) for f in fs]
        return self._either(lambda: self._pairs(fs), lambda b: b.pair_counts_many(fs))

    def run(self, ops: StepOps) -> np.ndarray:
        return self._either(lambda: self._step(ops), lambda b: b.run(ops))

    def masked(self, keep: HalfSample) -> _MaskedResident:
        """The same tasks answering over the rows ``keep`` keeps (a stability run): every
        request carries the mask, and the tasks hold those rows of their chunks while it
        stays the same (:class:`.resident_client.Task`). One view at a time."""
        return _MaskedResident(self, keep)

    def _counts(self, mask: dict | None = None) -> np.ndarray:
        if mask is not None or self._feature_counts is None:
            replies = self.tasks.request(_to_all(_masked({"op": "counts"}, mask)))
            counts = np.sum([r[0] for r in replies], axis=0)
            if mask is not None:
                return counts
            self._feature_counts = counts
        return self._feature_counts.copy()

    def _pairs(self, fs: list[int], mask: dict | None = None) -> np.ndarray:
        out = []
        for chunk in pair_count_chunks(fs, self.num_features, self.arity, self.num_classes):
            replies = self.tasks.request(_to_all(_masked({"op": "pairs", "fs": chunk}, mask)))
            out.append(np.sum([r[0] for r in replies], axis=0))
        return np.concatenate(out) if len(out) > 1 else out[0]

    def _step(self, ops: StepOps, mask: dict | None = None) -> np.ndarray:
        prior = np.asarray(ops.prior, dtype=np.float64)
        cond = np.asarray(ops.cond, dtype=np.float64)
        same = (self._prior is not None and self._cond is not None
                and np.array_equal(prior, self._prior) and np.array_equal(cond, self._cond))
        if not same:
            self._prior, self._cond = prior, cond  # new tables: every task gets them again
            self._cond_version += 1
        def make(peer: Peer) -> tuple[dict, list[np.ndarray]]:
            peer.held.view(mask)  # other rows: the task holds no tables of these
            header, arrays = step_request(ops, peer.held, self._cond_version, prior, cond)
            return _masked(header, mask), arrays

        return joined(self.tasks.request(make), self.num_features)

    def notes(self) -> list[str]:
        """Lost tasks and a hand-over to passes, for the run's warnings."""
        out = []
        if self.tasks.recoveries:
            out.append(f"resident tasks were lost {self.tasks.recoveries} time(s); Spark "
                       "restarted them and the request in flight was sent again")
        if self.lost:
            out.append(f"{self.lost}; the selection went on with one Spark job per pass")
        return out

    def close(self) -> None:
        self.tasks.close()
        if self.fallback is not None:
            self.fallback.close()


def _masked(header: dict, mask: dict | None) -> dict:
    """``header`` with the stability run's ``mask`` (none: every row)."""
    return header if mask is None else {**header, "mask": mask}


class _MaskedResident:
    """:meth:`ResidentBackend.masked`: a :class:`~vmi_spark.core.greedy.Backend` over the
    rows of a half-sample, served by the same tasks (or, once they are lost, by the pass
    backend's own masked view)."""

    def __init__(self, parent: ResidentBackend, keep: HalfSample):
        self.parent, self.keep, self.mask = parent, keep, keep.to_dict()
        self._counts: np.ndarray | None = None
        self._fallback: Any = None

    def _either(self, resident: Callable[[], _T], passes: Callable[[Any], _T]) -> _T:
        def on_passes(fallback: Any) -> _T:
            if self._fallback is None:
                self._fallback = fallback.masked(self.keep)
            return passes(self._fallback)
        return self.parent._either(resident, on_passes)

    def feature_counts(self) -> np.ndarray:
        if self._counts is None:
            self._counts = self._either(lambda: self.parent._counts(self.mask),
                                        lambda b: b.feature_counts())
        return self._counts.copy()

    def pair_counts(self, f: int) -> np.ndarray:
        return self.pair_counts_many([f])[0]

    def pair_counts_many(self, fs: list[int]) -> np.ndarray:
        fs = [int(f) for f in fs]
        return self._either(lambda: self.parent._pairs(fs, self.mask),
                            lambda b: b.pair_counts_many(fs))

    def run(self, ops: StepOps) -> np.ndarray:
        return self._either(lambda: self.parent._step(ops, self.mask), lambda b: b.run(ops))

    def close(self) -> None:
        """Nothing to release: the tasks go back to every row at the next unmasked request."""
        if self._fallback is not None:
            self._fallback.close()
