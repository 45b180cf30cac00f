"""The resident tasks' side: what one task holds, and how it serves the driver.

Each task of the resident job (:mod:`.resident`) runs :func:`task_fn`'s function over its
partition of encoded chunks: it reads the chunks into its Python worker, connects to the
driver and presents the run's secret (a hello, :mod:`.resident_protocol`), then answers
the driver's requests from what it holds (:class:`Task`) until it is told to stop. The
per-row state of the steps (the pairwise running sums, the naive posterior) stays in the
task, up to a budget; a chunk past it has its state rebuilt from its codes every step.
"""

from __future__ import annotations

import socket
import time

import numpy as np
import pyarrow as pa

from ...core import wide
from ...core.bound import (
    ChunkState,
    NaiveState,
    StepOps,
    feature_counts,
    naive_partials,
    pair_counts_many,
    pairwise_partials,
)
from ...core.chunkstore import ChunkStore
from ...core.stability import HalfSample
from ..chunks.codes import decode_chunks
from . import wire
from .resident_protocol import (
    MAX_REQUEST_BYTES,
    MAX_REQUEST_HEADER,
    add_split,
    hello,
    read_step,
)

#: seconds a task keeps trying to connect to the driver
CONNECT_SECONDS = 120.0


class Task:
    """What one resident task holds and computes: its chunks, tables and per-row state.

    ``chunks`` is ``[(chunk id, codes (D, n) uint8, y (n,) intp, w (n,) int64 or None)]``
    (``w``: a weighted table's weight units); ``state_budget`` the bytes of per-row state
    kept from step to step. A request with a ``mask`` (a stability run's
    :class:`~vmi_spark.core.stability.HalfSample`) is answered over the rows it keeps: the
    task keeps those rows of its chunks while the mask stays the same, and starts the
    per-row state afresh when it changes.
    """

    def __init__(self, chunks: list, num_features: int, arity: int, num_classes: int,
                 state_budget: int):
        self.all_chunks = chunks
        self.chunks = chunks
        self.mask: dict | None = None
        self.num_features = num_features
        self.arity = arity
        self.num_classes = num_classes
        self.state_budget = state_budget
        self.prior: np.ndarray | None = None
        self.cond: np.ndarray | None = None
        self.tables: dict[int, np.ndarray] = {}
        # per-row states by (kind, chunk id): the first that fit the budget stay; a chunk
        # beyond it rebuilds its state every step (from its codes: the same integers)
        self.states = ChunkStore(state_budget, evict=False)

    def _view(self, mask: dict | None) -> None:
        """Hold the rows of ``mask`` (None: all of them); a new mask drops the states."""
        if mask == self.mask:
            return
        keep = None if mask is None else HalfSample.from_dict(mask)
        self.states.reset()
        self.prior = self.cond = None  # tables of other rows: the driver sends them again
        self.tables = {}
        self.chunks = []  # the old view goes before the new one is made
        self.mask = mask
        if keep is None:
            self.chunks = self.all_chunks
            return
        for bid, codes, y, w in self.all_chunks:
            m = keep(codes, y)
            self.chunks.append((bid, np.ascontiguousarray(codes[:, m]), y[m],
                                None if w is None else w[m]))

    def handle(self, header: dict, arrays: list[np.ndarray]) -> tuple[dict, list[np.ndarray]]:
        """The reply (header, arrays) to a request (``ValueError`` for an unknown one)."""
        op = header.get("op")
        if op in ("counts", "pairs", "step"):
            self._view(header.get("mask"))
        if op == "counts":
            total = np.zeros((self.num_features, self.arity, self.num_classes), dtype=np.int64)
            for _, codes, y, w in self.chunks:
                total += feature_counts(codes, y, self.arity, self.num_classes, w)
            return {}, [total]
        if op == "pairs":
            fs = [int(f) for f in header["fs"]]
            total = np.zeros((len(fs), self.num_features, self.arity, self.arity,
                              self.num_classes), dtype=np.int64)
            for _, codes, y, w in self.chunks:
                total += pair_counts_many(codes, y, fs, self.arity, self.num_classes, w)
            return {}, [total]
        if op == "step":
            return {}, list(self._step(header, arrays))
        raise ValueError(f"unknown request {op!r}")

    def _step(self, header: dict, arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        step = read_step(header, arrays)
        if step.prior is not None:
            self.prior, self.cond = step.prior, step.cond
        self.tables = {f: t for f, t in self.tables.items() if f in step.block}
        self.tables.update(step.tables)
        if self.prior is None or self.cond is None:
            raise ValueError("a step request before the tables")
        ops = StepOps(method=step.method, prior=self.prior, cond=self.cond,
                      candidates=step.candidates, block=step.block, pair_log_tables=self.tables)
        hi = np.zeros(self.num_features, dtype=np.int64)
        lo = np.zeros(self.num_features, dtype=np.int64)
        try:
            for bid, codes, y, w in self.chunks:
                if ops.pairwise:
                    p = pairwise_partials(codes, y, self._state(bid, codes.shape[1]), ops, w)
                else:
                    p = naive_partials(codes, ops, self._naive_state(bid, codes.shape[1]), w)
                if wide.is_wide(p):  # weighted rows: the halves already
                    hi += p[0]
                    lo += p[1]
                else:
                    add_split(hi, lo, p)
        except BaseException:
            self.states.reset()  # a half-updated state must not be reused
            raise
        return hi, lo

    def _state(self, bid: int, n: int) -> ChunkState:
        state = self.states.get(("pairwise", bid))
        if state is None:
            assert self.prior is not None
            state = ChunkState.initial(self.prior, n, self.num_features)
            self.states.put(("pairwise", bid), state, state.nbytes)  # or used once
        return state

    def _naive_state(self, bid: int, n: int) -> NaiveState | None:
        """The chunk's naive posterior state, or None (rebuilt) when the budget is spent."""
        state = self.states.get(("naive", bid))
        if state is None:
            state = NaiveState()  # empty until the step fills it: counted at its full size
            self.states.put(("naive", bid), state, 8 * n * self.num_classes)
            if ("naive", bid) not in self.states:
                return None
        return state


def connect(address: tuple[str, int], deadline: float) -> socket.socket:
    """A TCP connection to the driver, tried again until ``deadline`` (monotonic)."""
    while True:
        try:
            sock = socket.create_connection(address, timeout=30)
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def greet(address: tuple[str, int], header: dict, chunks: np.ndarray,
          deadline: float) -> tuple[socket.socket, dict, list[np.ndarray]]:
    """Connect, present the hello ``header`` and wait for the first request:
    ``(sock, header, arrays)``.

    A connection closed before the first request (the driver's acceptor drops
    connections when other processes crowd it) is made again until ``deadline``."""
    while True:
        sock = connect(address, deadline)
        try:
            wire.send(sock, header, [chunks])
            header_in, arrays = wire.recv(sock, MAX_REQUEST_BYTES, MAX_REQUEST_HEADER)
            return sock, header_in, arrays
        except OSError:  # WireError too: refused or dropped before being served
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def serve(sock: socket.socket, task: Task, header: dict, arrays: list[np.ndarray]) -> int:
    """Answer requests, the first one ``(header, arrays)``, until the driver says stop;
    the number served. A request that fails is answered with its error (one line)."""
    served = 0
    while header.get("op") != "stop":
        t0 = time.perf_counter()
        try:
            out_header, out = task.handle(header, arrays)
        except Exception as exc:  # report it; the driver decides what happens
            wire.send(sock, {"error": f"{type(exc).__name__}: {exc}"[:2000]})
        else:
            served += 1
            wire.send(sock, {**out_header, "seconds": time.perf_counter() - t0}, out)
        header, arrays = wire.recv(sock, MAX_REQUEST_BYTES, MAX_REQUEST_HEADER)
    return served


def task_fn(address: tuple[str, int], secret: str, num_features: int, arity: int,
            num_classes: int, state_budget: int):
    """The barrier task's function (``mapInArrow``): read the partition's chunks, connect,
    serve until told to stop, then yield one row of :data:`.resident_protocol.TASK_SCHEMA`."""
    def fn(batches):
        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        held = []
        for rb in batches:
            for bid, _, codes, y, w in decode_chunks(rb, num_features):
                held.append((int(bid), np.array(codes, copy=True), y, w))
        held.sort(key=lambda b: b[0])
        task = Task(held, num_features, arity, num_classes, state_budget)
        rows = int(sum(b[1].shape[1] for b in held))
        sock, header, arrays = greet(
            address, hello(secret, ctx.partitionId(), len(ctx.getTaskInfos()),
                           ctx.taskAttemptId(), rows),
            np.array([b[0] for b in held], np.int64), time.monotonic() + CONNECT_SECONDS)
        try:
            served = serve(sock, task, header, arrays)
        finally:
            sock.close()
        yield pa.RecordBatch.from_pydict({
            "partition": pa.array([ctx.partitionId()], pa.int32()),
            "chunks": pa.array([len(held)], pa.int32()),
            "rows": pa.array([rows], pa.int64()),
            "requests": pa.array([served], pa.int64())})
    return fn
