"""Resident execution: the cached blocks stay in long-running tasks for the whole selection.

One Spark job runs for the whole selection: a *barrier* ``mapInArrow`` stage over the
cached blocks, one task per partition, all scheduled at once. Each task reads its
partition's blocks into its Python worker, connects back to the driver over TCP and
then serves the greedy loop's requests (count tables, one step's partial sums) from
the blocks it holds, until the driver says stop. A greedy step therefore costs one
round trip (well under a millisecond on loopback) instead of one Spark job (about
0.2 s of scheduling even for a tiny input), and the per-row state (the pairwise sums,
the naive posterior) simply stays in the task that owns the rows.

The driver runs the greedy loop exactly as with :class:`.backend.SparkBackend`: it
sends each task what the step needs (the tables once, then per step the block, the
candidates and the pair tables of the newly chosen feature), adds the tasks' exact
fixed-point partial sums, and decides. Nothing in the answer depends on which task
holds which block, so results are bit-identical to the pass-based backend and to the
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
connections waiting (:class:`_Acceptor`): another local process cannot change, crash,
stall or slow a selection.
"""

from __future__ import annotations

import hmac
import logging
import queue
import re
import secrets
import selectors
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from ..core.bound import (
    BlockState,
    NaiveState,
    StepOps,
    feature_counts,
    naive_partials,
    pair_counts_many,
    pairwise_partials,
)
from . import wire
from .blocks import WORKER_STATE_BYTES, decode_blocks, pair_count_chunks
from .session import task_slots

log = logging.getLogger("vmi_spark")

#: seconds to wait for every task to connect when the selection starts
START_TIMEOUT = 300.0
#: seconds to wait for a retried stage's tasks to connect after a task was lost
RECOVERY_TIMEOUT = 600.0
#: seconds with fewer task slots than resident tasks before they count as lost
SLOTS_GRACE = 10.0
#: times a request is re-sent after losing tasks before the selection fails
MAX_RECOVERIES = 4
#: most array bytes a task accepts in one request (tables; generous)
MAX_REQUEST_BYTES = 4 << 30
#: most bytes of a request's header a task accepts (the fields are small; arrays follow)
MAX_REQUEST_HEADER = 1 << 20
#: seconds a new connection has to present the whole hello before it is closed
HELLO_TIMEOUT = 2.0
#: largest hello header (fixed small fields; the block ids follow as an array)
MAX_HELLO_HEADER = 1024
#: largest block id array in a hello (8 bytes a block), read only after the secret matched
MAX_HELLO_BLOCK_BYTES = 8 << 20
#: connections that have not yet presented the secret; a new one beyond closes the oldest
MAX_PENDING = 16

TASK_SCHEMA = T.StructType([T.StructField("partition", T.IntegerType()),
                            T.StructField("blocks", T.IntegerType()),
                            T.StructField("rows", T.LongType()),
                            T.StructField("requests", T.LongType())])


class ResidentUnavailable(RuntimeError):
    """The resident tasks could not be started here (the caller can fall back to passes)."""


class ResidentLost(RuntimeError):
    """The resident tasks are gone for good in the middle of a selection."""


class _Restart(Exception):
    """A newer attempt of a task connected while a request was in flight."""


def _split(total_hi: np.ndarray, total_lo: np.ndarray, p: np.ndarray) -> None:
    """Add int64 ``p`` to a (hi, lo) pair of int64 sums without overflow (exact)."""
    total_hi += p >> 32
    total_lo += p & 0xFFFFFFFF


# --------------------------------------------------------------------------- task side


class _TaskServer:
    """What one resident task holds and computes: its blocks, tables and per-row state."""

    def __init__(self, blocks: list, num_features: int, arity: int, num_classes: int,
                 state_budget: int):
        self.blocks = blocks  # [(block id, codes (D, n) uint8, y (n,) intp)]
        self.num_features = num_features
        self.arity = arity
        self.num_classes = num_classes
        self.state_budget = state_budget
        self.prior: np.ndarray | None = None
        self.cond: np.ndarray | None = None
        self.tables: dict[int, np.ndarray] = {}
        self.states: dict[int, BlockState] = {}
        self.naive_states: dict[int, NaiveState] = {}
        self.state_bytes = 0

    def handle(self, header: dict, arrays: list[np.ndarray]) -> tuple[dict, list[np.ndarray]]:
        op = header.get("op")
        if op == "counts":
            total = np.zeros((self.num_features, self.arity, self.num_classes), dtype=np.int64)
            for _, codes, y in self.blocks:
                total += feature_counts(codes, y, self.arity, self.num_classes)
            return {}, [total]
        if op == "pairs":
            fs = [int(f) for f in header["fs"]]
            total = np.zeros((len(fs), self.num_features, self.arity, self.arity,
                              self.num_classes), dtype=np.int64)
            for _, codes, y in self.blocks:
                total += pair_counts_many(codes, y, fs, self.arity, self.num_classes)
            return {}, [total]
        if op == "step":
            return {}, list(self._step(header, arrays))
        raise ValueError(f"unknown request {op!r}")

    def _step(self, header: dict, arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        it = iter(arrays)
        candidates = next(it).astype(bool)
        if header.get("cond"):
            self.prior, self.cond = next(it), next(it)
        block = tuple(int(f) for f in header["block"])
        self.tables = {f: t for f, t in self.tables.items() if f in block}
        for f in header.get("tables", []):
            self.tables[int(f)] = next(it)
        if self.prior is None or self.cond is None:
            raise ValueError("a step request before the tables")
        ops = StepOps(method=header["method"], prior=self.prior, cond=self.cond,
                      candidates=candidates, block=block, pair_log_tables=self.tables)
        hi = np.zeros(self.num_features, dtype=np.int64)
        lo = np.zeros(self.num_features, dtype=np.int64)
        try:
            for bid, codes, y in self.blocks:
                if ops.pairwise:
                    p = pairwise_partials(codes, y, self._state(bid, codes.shape[1]), ops)
                else:
                    p = naive_partials(codes, ops, self._naive_state(bid, codes.shape[1]))
                _split(hi, lo, p)
        except BaseException:
            self.states.clear()  # a half-updated state must not be reused
            self.naive_states.clear()
            self.state_bytes = 0
            raise
        return hi, lo

    def _state(self, bid: int, n: int) -> BlockState:
        state = self.states.get(bid)
        if state is None:
            assert self.prior is not None
            state = BlockState.initial(self.prior, n, self.num_features)
            size = state.nbytes
            if self.state_bytes + size <= self.state_budget:
                self.states[bid] = state
                self.state_bytes += size
            # else: a state used for this step only (rebuilt from the codes every step)
        return state

    def _naive_state(self, bid: int, n: int) -> NaiveState | None:
        """The block's naive posterior state, or None (rebuilt) when the budget is spent."""
        state = self.naive_states.get(bid)
        if state is None:
            size = 8 * n * self.num_classes
            if self.state_bytes + size > self.state_budget:
                return None
            state = self.naive_states[bid] = NaiveState()
            self.state_bytes += size
        return state


def _connect(address: tuple[str, int], deadline: float) -> socket.socket:
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


def _greet(address: tuple[str, int], hello: dict, blocks: np.ndarray,
           deadline: float) -> tuple[socket.socket, dict, list[np.ndarray]]:
    """Connect, present ``hello`` and wait for the first request: ``(sock, request)``.

    A connection closed before the first request (the driver's acceptor drops
    connections when other processes crowd it) is made again until ``deadline``."""
    while True:
        sock = _connect(address, deadline)
        try:
            wire.send(sock, hello, [blocks])
            header, arrays = wire.recv(sock, MAX_REQUEST_BYTES, MAX_REQUEST_HEADER)
            return sock, header, arrays
        except OSError:  # WireError too: refused or dropped before being served
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _task_fn(address: tuple[str, int], secret: str, num_features: int, arity: int,
             num_classes: int, state_budget: int):
    """The barrier task: read the partition's blocks, connect, serve until told to stop."""
    def fn(batches):
        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        held = []
        for rb in batches:
            for bid, _, codes, y in decode_blocks(rb, num_features):
                held.append((int(bid), np.array(codes, copy=True), y))
        held.sort(key=lambda b: b[0])
        server = _TaskServer(held, num_features, arity, num_classes, state_budget)
        hello = {"op": "hello", "secret": secret, "partition": ctx.partitionId(),
                 "tasks": len(ctx.getTaskInfos()), "attempt": ctx.taskAttemptId(),
                 "rows": int(sum(b[1].shape[1] for b in held))}
        sock, header, arrays = _greet(address, hello, np.array([b[0] for b in held], np.int64),
                                      time.monotonic() + 120)
        served = 0
        try:
            while True:
                if header.get("op") == "stop":
                    break
                t0 = time.perf_counter()
                try:
                    out_header, out = server.handle(header, arrays)
                except Exception as exc:  # report it; the driver decides what happens
                    wire.send(sock, {"error": f"{type(exc).__name__}: {exc}"[:2000]})
                    header, arrays = wire.recv(sock, MAX_REQUEST_BYTES, MAX_REQUEST_HEADER)
                    continue
                served += 1
                wire.send(sock, {**out_header, "seconds": time.perf_counter() - t0}, out)
                header, arrays = wire.recv(sock, MAX_REQUEST_BYTES, MAX_REQUEST_HEADER)
        finally:
            sock.close()
        yield pa.RecordBatch.from_pydict({
            "partition": pa.array([ctx.partitionId()], pa.int32()),
            "blocks": pa.array([len(held)], pa.int32()),
            "rows": pa.array([sum(b[1].shape[1] for b in held)], pa.int64()),
            "requests": pa.array([served], pa.int64())})
    return fn


# --------------------------------------------------------------------------- driver side


@dataclass
class _Peer:
    sock: socket.socket
    partition: int
    attempt: int
    blocks: list[int]
    rows: int
    cond_sent: int = -1  # version of (prior, cond) this task holds
    tables: set[int] = field(default_factory=set)


@dataclass
class _Pending:
    """A connection that has not yet presented a whole hello."""

    sock: socket.socket
    deadline: float
    buf: bytearray = field(default_factory=bytearray)
    need: int = 4  # bytes of the part being read
    part: int = 0  # which: 0 the header's length, 1 the header, 2 the block ids
    header: dict = field(default_factory=dict)
    shapes: list = field(default_factory=list)


class _Acceptor:
    """Accept connections and keep those that present the run's secret in a hello.

    Every connection is read without blocking, in parts whose sizes are checked before
    they are read: the header's length (at most :data:`MAX_HELLO_HEADER`), the header
    (parsed by :func:`.wire.parse_header`; the secret is compared with
    :func:`hmac.compare_digest`), then, only for the right secret, the block ids. A
    connection has :data:`HELLO_TIMEOUT` seconds for all of it; at most
    :data:`MAX_PENDING` connections wait (a new one closes the oldest). Anything else
    closes the connection without a word.
    """

    def __init__(self, server: socket.socket, secret: bytes, stop: threading.Event):
        self.server = server
        self.secret = secret
        self.stop = stop
        self.pending: dict[socket.socket, _Pending] = {}  # oldest first
        self.sel = selectors.DefaultSelector()

    def run(self):
        """Yield ``(peer, tasks)`` for every authenticated connection until ``stop``."""
        self.server.setblocking(False)
        self.sel.register(self.server, selectors.EVENT_READ, None)
        try:
            while not self.stop.is_set():
                try:
                    events = self.sel.select(timeout=0.2)
                except (OSError, ValueError):  # the server socket was closed
                    return
                accept = False
                for key, _ in events:  # first what the waiting connections sent
                    if key.data is None:
                        accept = True
                    else:
                        peer = self._read(key.data)
                        if peer is not None:
                            yield peer
                if accept:
                    self._accept()
                now = time.monotonic()
                for p in [p for p in self.pending.values() if p.deadline < now]:
                    self._close(p, "no hello in time")
        finally:
            for p in list(self.pending.values()):
                self._close(p, "the selection ended")
            self.sel.close()

    def _accept(self) -> None:
        for _ in range(64):
            try:
                conn, _ = self.server.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of file descriptors, the socket closed, ...
                log.debug("resident: accept failed (%s)", exc)
                return
            if len(self.pending) >= MAX_PENDING:
                self._close(next(iter(self.pending.values())), "too many waiting connections")
            conn.setblocking(False)
            p = _Pending(conn, time.monotonic() + HELLO_TIMEOUT)
            self.pending[conn] = p
            self.sel.register(conn, selectors.EVENT_READ, p)

    def _close(self, p: _Pending, why: str) -> None:
        log.debug("resident: refused a connection (%s)", why)
        self.pending.pop(p.sock, None)
        try:
            self.sel.unregister(p.sock)
        except (KeyError, ValueError):
            pass
        p.sock.close()

    def _read(self, p: _Pending) -> tuple[_Peer, int] | None:
        """Read what ``p`` sent; its peer once the whole hello is in and right."""
        try:
            chunk = p.sock.recv(p.need - len(p.buf))
        except (BlockingIOError, InterruptedError):
            return None
        except OSError as exc:
            self._close(p, str(exc))
            return None
        if not chunk:
            self._close(p, "closed")
            return None
        p.buf += chunk
        if len(p.buf) < p.need:
            return None
        try:
            return self._advance(p)
        except Exception as exc:  # whatever it sent: that connection ends, the others go on
            self._close(p, str(exc)[:200])
            return None

    def _advance(self, p: _Pending) -> tuple[_Peer, int] | None:
        """The next part of ``p``'s hello is in ``p.buf``: check it, set up the next."""
        if p.part == 0:  # the header's length
            (size,) = wire.LENGTH.unpack(p.buf)
            if not 0 < size <= MAX_HELLO_HEADER:
                raise ValueError(f"hello of {size} bytes")
            p.part, p.need, p.buf = 1, size, bytearray()
            return None
        if p.part == 1:  # the header: only the right secret goes on
            header, shapes, total = wire.parse_header(p.buf, MAX_HELLO_BLOCK_BYTES)
            secret = header.get("secret")
            if not (header.get("op") == "hello" and type(secret) is str
                    and hmac.compare_digest(secret.encode(), self.secret)):
                raise ValueError("not a resident task of this run")
            if [(d.str, len(s)) for d, s in shapes] != [("<i8", 1)]:
                raise ValueError("a hello without its block ids")
            p.header, p.shapes, p.part, p.need, p.buf = header, shapes, 2, total, bytearray()
            if total:
                return None
        (blocks,) = wire.arrays_from(p.shapes, p.buf)
        h = p.header
        fields = [h.get(k) for k in ("partition", "attempt", "rows", "tasks")]
        if not all(type(v) is int and v >= 0 for v in fields) or h["tasks"] < 1:
            raise ValueError("a hello with malformed fields")
        self.pending.pop(p.sock, None)
        self.sel.unregister(p.sock)
        p.sock.setblocking(True)
        p.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = _Peer(p.sock, h["partition"], h["attempt"], [int(b) for b in blocks], h["rows"])
        return peer, h["tasks"]


class ResidentBackend:
    """Greedy-loop backend served by resident barrier tasks (see the module docstring);
    a :class:`vmi_spark.spark.select.Execution`.

    Connections are accepted and authenticated by a thread of their own
    (:class:`_Acceptor`): the greedy loop sees only tasks that presented the run's
    secret, so another local process can neither stall nor change a selection.

    ``blocks`` is the cached DataFrame of encoded blocks; it must have at most
    :func:`task_slots` partitions. Raises :class:`ResidentUnavailable` if the tasks do
    not all connect within ``start_timeout`` seconds or the job cannot start.

    ``fallback`` (optional) makes a backend to continue with if the tasks are lost for
    good later (the job failed, fewer task slots are left than tasks, or the retried
    tasks did not come back within :data:`RECOVERY_TIMEOUT`); the greedy loop's state
    lives on the driver, so the selection simply goes on there (``lost`` says why).
    """

    #: test hook: called with :attr:`address` once the driver listens (before tasks start)
    listen_hook: Callable[[tuple[str, int]], None] | None = None

    #: the execution's name in the report
    execution = "resident"

    def __init__(self, blocks: DataFrame, num_features: int, arity: int, num_classes: int,
                 method: str, start_timeout: float = START_TIMEOUT,
                 state_budget: int = WORKER_STATE_BYTES,
                 fallback: Callable[[], Any] | None = None):
        self.num_features = num_features
        self.arity = arity
        self.num_classes = num_classes
        self.method = method
        self.requests = 0
        self.recoveries = 0
        self.task_rows: list = []  # one row per task when the job has ended
        self.task_seconds: list[list[float]] = []  # per request: each task's compute time
        self.lost: str | None = None  # why the selection went on with ``fallback``
        self.fallback: Any = None
        self._make_fallback = fallback
        self._feature_counts: np.ndarray | None = None
        self._prior: np.ndarray | None = None  # the (prior, cond) tables of the last step
        self._cond: np.ndarray | None = None
        self._cond_version = 0
        self._spark = blocks.sparkSession
        self._sc = self._spark.sparkContext
        conf = self._sc.getConf()
        host = conf.get("spark.driver.host", "127.0.0.1")
        bind = conf.get("spark.driver.bindAddress", host) or host
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            self._server.bind((bind, 0))
            self._server.listen(64)
        except OSError as exc:
            self._server.close()
            raise ResidentUnavailable(f"cannot listen on {bind} ({exc})") from None
        port = self._server.getsockname()[1]
        #: where the driver listens for the resident tasks
        self.address = (host, port)
        self._secret = secrets.token_hex(16)
        self._group = f"vmi_spark-resident-{uuid.uuid4().hex[:12]}"
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._peers: dict[int, _Peer] = {}
        self._num_tasks: int | None = None
        self._block_ids: list[int] | None = None
        self._num_rows: int | None = None
        self._closed = False
        self._arrived: queue.SimpleQueue[tuple[_Peer, int]] = queue.SimpleQueue()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_w.setblocking(False)
        self._stop_accepting = threading.Event()
        self._acceptor = threading.Thread(target=self._accept_loop, daemon=True,
                                          name="vmi_spark-resident-acceptor")
        self._acceptor.start()
        if self.listen_hook is not None:
            self.listen_hook(self.address)
        fn = _task_fn((host, port), self._secret, num_features, arity, num_classes, state_budget)
        text = f"vmi_spark {method}: resident tasks (the whole selection)"

        def run_job() -> None:
            try:
                self._sc.setJobGroup(self._group, text, interruptOnCancel=True)
                # a shuffle after the barrier stage makes it a map stage, which Spark
                # retries as a whole when a task is lost (a failed barrier result stage
                # fails the job)
                tasks = blocks.mapInArrow(fn, TASK_SCHEMA, barrier=True).repartition(1)
                self.task_rows = tasks.collect()
            except BaseException as exc:  # reported to the driver's loop
                self._error = exc
            finally:
                self._done.set()

        from pyspark import InheritableThread

        self._thread = InheritableThread(target=run_job)
        self._thread.daemon = True
        self._thread.start()
        try:
            self._regroup(start_timeout, starting=True)
        except BaseException:
            self._shutdown(wait=0.0)
            raise

    # ------------------------------------------------------------------ connections

    def _accept_loop(self) -> None:
        """The acceptor thread: authenticated peers go to ``_arrived`` (and wake the loop)."""
        acceptor = _Acceptor(self._server, self._secret.encode(), self._stop_accepting)
        for peer, tasks in acceptor.run():
            self._arrived.put((peer, tasks))
            try:
                self._wake_w.send(b"\0")
            except OSError:  # the loop has not read the earlier wake-ups yet, or is gone
                pass

    def _take(self, timeout: float) -> None:
        """Register the authenticated peers that arrived (waiting up to ``timeout`` s).

        Raises :class:`_Restart` if one replaces a connected task (a newer attempt)."""
        try:
            peer, tasks = (self._arrived.get(timeout=timeout) if timeout > 0
                           else self._arrived.get_nowait())
        except queue.Empty:
            return
        while True:
            self._register(peer, tasks)
            try:
                peer, tasks = self._arrived.get_nowait()
            except queue.Empty:
                return

    def _register(self, peer: _Peer, tasks: int) -> None:
        if self._closed:
            peer.sock.close()
            return
        if self._num_tasks is None:
            self._num_tasks = tasks
        old = self._peers.get(peer.partition)
        if old is not None and old.attempt >= peer.attempt:
            peer.sock.close()  # an older attempt connecting late
            return
        self._peers[peer.partition] = peer
        if old is not None:
            old.sock.close()
            raise _Restart()

    def _regroup(self, timeout: float, starting: bool = False) -> None:
        """Wait until every partition has a live task connected."""
        lost = ResidentUnavailable if starting else ResidentLost
        deadline = time.monotonic() + timeout
        short_since: float | None = None
        while self._num_tasks is None or len(self._peers) < self._num_tasks:
            if self._done.is_set():
                why = _first_line(self._error) if self._error else "the job ended"
                raise lost(f"the resident tasks failed: {why}") from self._error
            now = time.monotonic()
            if now > deadline:
                raise lost(f"the resident tasks did not all connect within {timeout:.0f} s "
                           f"({len(self._peers)} of {self._num_tasks or '?'})")
            if not starting and self._num_tasks is not None:
                # a barrier stage needs a slot for every task: after losing executors
                # the retried stage may never be scheduled
                if task_slots(self._spark) < self._num_tasks:
                    short_since = short_since if short_since is not None else now
                    if now - short_since > SLOTS_GRACE:
                        raise lost(f"only {task_slots(self._spark)} task slots left for "
                                   f"{self._num_tasks} resident tasks")
                else:
                    short_since = None
            try:
                self._take(0.5)
            except _Restart:
                pass
        self._check_blocks()

    def _check_blocks(self) -> None:
        """Every block is held by exactly one task, and it is the same set as before."""
        ids = sorted(b for p in self._peers.values() for b in p.blocks)
        rows = sum(p.rows for p in self._peers.values())
        if len(set(ids)) != len(ids):
            raise RuntimeError("resident tasks hold overlapping blocks")
        if self._block_ids is None:
            self._block_ids, self._num_rows = ids, rows
        elif ids != self._block_ids or rows != self._num_rows:
            raise RuntimeError("the resident tasks came back with different blocks")

    def _drop(self, peer: _Peer) -> None:
        if self._peers.get(peer.partition) is peer:
            del self._peers[peer.partition]
        peer.sock.close()

    def _gather(self, peers: list[_Peer]) -> list[tuple[dict, list[np.ndarray]]]:
        """The reply of every peer (in the order given); newly arrived tasks are registered."""
        replies: dict[int, tuple[dict, list[np.ndarray]]] = {}
        sel = selectors.DefaultSelector()
        try:
            sel.register(self._wake_r, selectors.EVENT_READ, None)
            for p in peers:
                sel.register(p.sock, selectors.EVENT_READ, p)
            while len(replies) < len(peers):
                for key, _ in sel.select(timeout=1.0):
                    if key.data is None:
                        self._wake_r.recv(4096)
                        self._take(0.0)  # raises _Restart if it replaces a peer
                        continue
                    p = key.data
                    replies[p.partition] = wire.recv(p.sock)
                    sel.unregister(p.sock)
                if self._done.is_set() and len(replies) < len(peers):
                    raise wire.WireError("the resident job ended")
        finally:
            sel.close()
        for header, _ in replies.values():
            if "error" in header:
                raise RuntimeError(f"a resident task failed: {header['error']}")
        self.task_seconds.append([float(replies[p.partition][0].get("seconds", 0.0))
                                  for p in peers])
        return [replies[p.partition] for p in peers]

    def _request(self, make) -> list[list[np.ndarray]]:
        """Send ``make(peer)`` (header, arrays) to every task; their replies' arrays."""
        self.requests += 1
        for _ in range(MAX_RECOVERIES + 1):
            peers = [self._peers[k] for k in sorted(self._peers)]
            try:
                for p in peers:
                    header, arrays = make(p)
                    wire.send(p.sock, header, arrays)
                return [arrays for _, arrays in self._gather(peers)]
            except (_Restart, OSError) as exc:  # WireError is an OSError
                self.recoveries += 1
                log.warning("resident tasks lost (%s); waiting for Spark to restart them",
                            str(exc) or type(exc).__name__)
                # Spark restarts every task of a barrier stage: drop this request's peers
                # (those still alive are being killed) and keep any newer ones
                for p in peers:
                    self._drop(p)
                self._regroup(RECOVERY_TIMEOUT)
        raise ResidentLost(f"resident tasks lost {MAX_RECOVERIES + 1} times")

    def _resident_or_fallback(self, name: str, *args):
        """Backend method ``name``: from the resident tasks (``_resident_<name>``), or from
        the fallback once they are lost."""
        if self.fallback is None:
            try:
                return getattr(self, "_resident_" + name)(*args)
            except ResidentLost as exc:
                if self._make_fallback is None:
                    raise
                self.lost = str(exc)
                log.warning("%s; going on with one Spark job per pass", exc)
                self._shutdown(wait=0.0)
                self.fallback = self._make_fallback()
        return getattr(self.fallback, name)(*args)

    # ------------------------------------------------------------------ Backend protocol

    def feature_counts(self) -> np.ndarray:
        return self._resident_or_fallback("feature_counts")

    def pair_counts(self, f: int) -> np.ndarray:
        return self.pair_counts_many([f])[0]

    def pair_counts_many(self, fs: list[int]) -> np.ndarray:
        """(len(fs), D, A, A, L) counts, asked for in chunks of
        :data:`~.blocks.COUNT_PASS_BYTES` per task reply."""
        return self._resident_or_fallback("pair_counts_many", [int(f) for f in fs])

    def run(self, ops: StepOps) -> np.ndarray:
        return self._resident_or_fallback("run", ops)

    def _resident_feature_counts(self) -> np.ndarray:
        if self._feature_counts is None:
            replies = self._request(lambda p: ({"op": "counts"}, []))
            self._feature_counts = np.sum([r[0] for r in replies], axis=0)
        return self._feature_counts.copy()

    def _resident_pair_counts_many(self, fs: list[int]) -> np.ndarray:
        out = []
        for chunk in pair_count_chunks(fs, self.num_features, self.arity, self.num_classes):
            replies = self._request(lambda p, c=chunk: ({"op": "pairs", "fs": c}, []))
            out.append(np.sum([r[0] for r in replies], axis=0))
        return np.concatenate(out) if len(out) > 1 else out[0]

    def _resident_run(self, ops: StepOps) -> np.ndarray:
        prior = np.asarray(ops.prior, dtype=np.float64)
        cond = np.asarray(ops.cond, dtype=np.float64)
        same = (self._prior is not None and self._cond is not None
                and np.array_equal(prior, self._prior) and np.array_equal(cond, self._cond))
        if not same:
            self._prior, self._cond = prior, cond  # new tables: every task gets them again
            self._cond_version += 1

        def make(p: _Peer):
            header: dict = {"op": "step", "method": ops.method, "block": list(ops.block)}
            arrays = [np.asarray(ops.candidates, dtype=bool)]
            if p.cond_sent != self._cond_version:
                header["cond"] = True
                arrays += [prior, cond]
                p.cond_sent = self._cond_version
            new = [f for f in ops.block if f not in p.tables and f in ops.pair_log_tables]
            header["tables"] = new
            arrays += [np.asarray(ops.pair_log_tables[f], dtype=np.float64) for f in new]
            p.tables = {f for f in ops.block if f in ops.pair_log_tables}
            return header, arrays

        replies = self._request(make)
        total = np.zeros(self.num_features, dtype=object)
        for hi, lo in replies:
            total += hi.astype(object) * (1 << 32) + lo.astype(object)
        return total

    def _shutdown(self, wait: float = 30.0) -> None:
        """Stop the tasks and end the job (cancelled if it does not end within ``wait`` s)."""
        if self._closed:
            return
        self._closed = True
        for p in list(self._peers.values()):
            try:
                wire.send(p.sock, {"op": "stop"})
            except OSError:
                pass
        self._done.wait(wait)
        if not self._done.is_set():
            self._sc.cancelJobGroup(self._group)
            self._done.wait(30)
        for p in list(self._peers.values()):
            self._drop(p)
        self._stop_accepting.set()
        self._acceptor.join(5.0)
        self._server.close()
        while True:  # tasks that arrived after the end
            try:
                self._arrived.get_nowait()[0].sock.close()
            except queue.Empty:
                break
        self._wake_r.close()
        self._wake_w.close()

    def notes(self) -> list[str]:
        """Lost tasks and a hand-over to passes, for the run's warnings."""
        out = []
        if self.recoveries:
            out.append(f"resident tasks were lost {self.recoveries} time(s); Spark "
                       "restarted them and the request in flight was sent again")
        if self.lost:
            out.append(f"{self.lost}; the selection went on with one Spark job per pass")
        return out

    def close(self) -> None:
        self._shutdown()
        if self.fallback is not None:
            self.fallback.close()


def _first_line(exc: BaseException) -> str:
    """One line that says why a job failed: the Python error raised in a task if the
    message carries one (Spark wraps it in a long Java trace), else the first line."""
    text = str(exc)
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            text = str(java.getMessage()) or text
        except Exception:  # the JVM is gone
            pass
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    raised = [ln for ln in lines if re.match(r"^[A-Za-z_.]*(Error|Exception): ", ln)
              and not ln.startswith(("org.apache", "py4j", "java."))]
    line = raised[-1] if raised else (lines[0] if lines else type(exc).__name__)
    return line[:300]
