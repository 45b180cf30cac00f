"""The resident job's driver side: it listens, starts the tasks and talks to them.

:class:`ResidentTasks` opens a listening socket, starts the barrier job whose tasks
(:mod:`.resident_client`) connect back, and keeps one authenticated connection per task;
:meth:`ResidentTasks.request` sends a request to every task and gathers their replies
(:mod:`.resident_protocol`). Connections are accepted and authenticated off the greedy
loop, by a thread of their own (:class:`Acceptor`) with a short deadline per connection,
size limits checked before anything is parsed or allocated and a cap on connections
waiting: another local process cannot change, crash, stall or slow a selection.

Failures: if a task or its executor dies, Spark retries the whole barrier stage; the new
tasks re-read their partitions and connect again, and the request in flight is sent again
(the tables they have not seen with it). Tasks gone for good raise :class:`ResidentLost`.
"""

from __future__ import annotations

import hmac
import logging
import queue
import secrets
import selectors
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from pyspark.sql import DataFrame

from ...errors import raised_line
from ..chunks.codes import ChunkStage, map_chunks
from ..session import task_slots
from . import wire
from .resident_protocol import (
    MAX_HELLO_CHUNK_BYTES,
    MAX_HELLO_HEADER,
    TASK_SCHEMA,
    Held,
    hello_fields,
)

log = logging.getLogger("vmi_spark")

#: seconds to wait for every task to connect when the selection starts
START_TIMEOUT = 300.0
#: seconds to wait for a retried stage's tasks to connect after a task was lost
RECOVERY_TIMEOUT = 600.0
#: seconds with fewer task slots than resident tasks before they count as lost
SLOTS_GRACE = 10.0
#: times a request is re-sent after losing tasks before the selection fails
MAX_RECOVERIES = 4
#: seconds a new connection has to present the whole hello before it is closed
HELLO_TIMEOUT = 2.0
#: connections that have not yet presented the secret; a new one beyond closes the oldest
MAX_PENDING = 16


class ResidentUnavailable(RuntimeError):
    """The resident tasks could not be started here (the caller can fall back to passes)."""


class ResidentLost(RuntimeError):
    """The resident tasks are gone for good in the middle of a selection."""


class _Restart(Exception):
    """A newer attempt of a task connected while a request was in flight."""


@dataclass
class Peer:
    """One task's authenticated connection: its partition, attempt, chunks and rows, and
    what it holds of the step tables."""

    sock: socket.socket
    partition: int
    attempt: int
    chunks: list[int]
    rows: int
    held: Held = field(default_factory=Held)


@dataclass
class Pending:
    """A connection that has not yet presented a whole hello."""

    sock: socket.socket
    deadline: float
    buf: bytearray = field(default_factory=bytearray)
    need: int = 4  # bytes of the part being read
    part: int = 0  # which: 0 the header's length, 1 the header, 2 the chunk ids
    header: dict = field(default_factory=dict)
    shapes: list = field(default_factory=list)


class Acceptor:
    """Accept connections and keep those that present the run's secret in a hello.

    Every connection is read without blocking, in parts whose sizes are checked before
    they are read: the header's length (at most :data:`MAX_HELLO_HEADER`), the header
    (parsed by :func:`.wire.parse_header`; the secret is compared with
    :func:`hmac.compare_digest`), then, only for the right secret, the chunk ids. A
    connection has :data:`HELLO_TIMEOUT` seconds for all of it; at most
    :data:`MAX_PENDING` connections wait (a new one closes the oldest). Anything else
    closes the connection without a word.
    """

    def __init__(self, server: socket.socket, secret: bytes, stop: threading.Event):
        self.server = server
        self.secret = secret
        self.stop = stop
        self.pending: dict[socket.socket, Pending] = {}  # oldest first
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
            p = Pending(conn, time.monotonic() + HELLO_TIMEOUT)
            self.pending[conn] = p
            self.sel.register(conn, selectors.EVENT_READ, p)

    def _close(self, p: Pending, why: str) -> None:
        log.debug("resident: refused a connection (%s)", why)
        self.pending.pop(p.sock, None)
        try:
            self.sel.unregister(p.sock)
        except (KeyError, ValueError):
            pass
        p.sock.close()

    def _read(self, p: Pending) -> tuple[Peer, int] | None:
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

    def _advance(self, p: Pending) -> tuple[Peer, int] | None:
        """The next part of ``p``'s hello is in ``p.buf``: check it, set up the next."""
        if p.part == 0:  # the header's length
            (size,) = wire.LENGTH.unpack(p.buf)
            if not 0 < size <= MAX_HELLO_HEADER:
                raise ValueError(f"hello of {size} bytes")
            p.part, p.need, p.buf = 1, size, bytearray()
            return None
        if p.part == 1:  # the header: only the right secret goes on
            header, shapes, total = wire.parse_header(p.buf, MAX_HELLO_CHUNK_BYTES)
            secret = header.get("secret")
            if not (header.get("op") == "hello" and type(secret) is str
                    and hmac.compare_digest(secret.encode(), self.secret)):
                raise ValueError("not a resident task of this run")
            if [(d.str, len(s)) for d, s in shapes] != [("<i8", 1)]:
                raise ValueError("a hello without its chunk ids")
            p.header, p.shapes, p.part, p.need, p.buf = header, shapes, 2, total, bytearray()
            if total:
                return None
        (chunks,) = wire.arrays_from(p.shapes, p.buf)
        partition, attempt, rows, tasks = hello_fields(p.header)
        self.pending.pop(p.sock, None)
        self.sel.unregister(p.sock)
        p.sock.setblocking(True)
        p.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return Peer(p.sock, partition, attempt, [int(b) for b in chunks], rows), tasks


class ResidentTasks:
    """The resident job, seen from the driver: the tasks' connections and their requests.

    Listens on the driver's host, starts the barrier job over ``chunks`` (one task per
    partition running ``task_fn(address, secret, num_features, arity, num_classes,
    state_budget)``, described as ``description``) and waits until every task has
    connected; :class:`ResidentUnavailable` if they do not within ``start_timeout``
    seconds or the job cannot start. ``listen_hook`` (a test's) is called with
    :attr:`address` once the driver listens.

    Attributes
    ----------
    address : tuple
        Where the driver listens (host, port).
    peers : dict
        The connected tasks (:class:`Peer`) by partition.
    num_tasks : int or None
        The job's number of tasks (known once one has connected).
    requests, recoveries : int
        Requests sent; times tasks were lost and the request sent again.
    task_seconds : list
        Per request, every task's time on it.
    task_rows : list
        One row per task (:data:`.resident_protocol.TASK_SCHEMA`) once the job has ended.
    """

    def __init__(self, chunks: DataFrame | ChunkStage, num_features: int, arity: int,
                 num_classes: int, description: str, task_fn: Callable, start_timeout: float,
                 state_budget: int,
                 listen_hook: Callable[[tuple[str, int]], None] | None = None):
        self.requests = 0
        self.recoveries = 0
        self.task_rows: list = []
        self.task_seconds: list[list[float]] = []
        self.peers: dict[int, Peer] = {}
        self.num_tasks: int | None = None
        self._spark = chunks.sparkSession
        self._sc = self._spark.sparkContext
        self._listen()
        self._secret = secrets.token_hex(16)
        self._group = f"vmi_spark-resident-{uuid.uuid4().hex[:12]}"
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._chunk_ids: list[int] | None = None
        self._num_rows: int | None = None
        self._closed = False
        self._arrived: queue.SimpleQueue[tuple[Peer, int]] = queue.SimpleQueue()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_w.setblocking(False)
        self._stop_accepting = threading.Event()
        self._acceptor = threading.Thread(target=self._accept_loop, daemon=True,
                                          name="vmi_spark-resident-acceptor")
        self._acceptor.start()
        if listen_hook is not None:
            listen_hook(self.address)
        self._start_job(chunks, description, task_fn(
            self.address, self._secret, num_features, arity, num_classes, state_budget))
        try:
            self._regroup(start_timeout, starting=True)
        except BaseException:
            self.close(wait=0.0)
            raise

    def _listen(self) -> None:
        """Listen on the driver's host (its bind address), on a free port."""
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
        self.address = (host, self._server.getsockname()[1])

    def _start_job(self, chunks: DataFrame | ChunkStage, description: str,
                   fn: Callable) -> None:
        """Run the barrier job in a thread of its own (it ends when the tasks stop)."""
        def run_job() -> None:
            try:
                self._sc.setJobGroup(self._group, description, interruptOnCancel=True)
                # a shuffle after the barrier stage makes it a map stage, which Spark
                # retries as a whole when a task is lost (a failed barrier result stage
                # fails the job)
                tasks = map_chunks(chunks, fn, TASK_SCHEMA, barrier=True).repartition(1)
                self.task_rows = tasks.collect()
            except BaseException as exc:  # reported to the driver's loop
                self._error = exc
            finally:
                self._done.set()

        from pyspark import InheritableThread

        self._thread = InheritableThread(target=run_job)
        self._thread.daemon = True
        self._thread.start()

    def _accept_loop(self) -> None:
        """The acceptor thread: authenticated peers go to ``_arrived`` (and wake the loop)."""
        acceptor = Acceptor(self._server, self._secret.encode(), self._stop_accepting)
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

    def _register(self, peer: Peer, tasks: int) -> None:
        if self._closed:
            peer.sock.close()
            return
        if self.num_tasks is None:
            self.num_tasks = tasks
        old = self.peers.get(peer.partition)
        if old is not None and old.attempt >= peer.attempt:
            peer.sock.close()  # an older attempt connecting late
            return
        self.peers[peer.partition] = peer
        if old is not None:
            old.sock.close()
            raise _Restart()

    def _regroup(self, timeout: float, starting: bool = False) -> None:
        """Wait until every partition has a live task connected."""
        lost = ResidentUnavailable if starting else ResidentLost
        deadline = time.monotonic() + timeout
        short_since: float | None = None
        while self.num_tasks is None or len(self.peers) < self.num_tasks:
            if self._done.is_set():
                why = raised_line(self._error) if self._error else "the job ended"
                raise lost(f"the resident tasks failed: {why}") from self._error
            now = time.monotonic()
            if now > deadline:
                raise lost(f"the resident tasks did not all connect within {timeout:.0f} s "
                           f"({len(self.peers)} of {self.num_tasks or '?'})")
            if not starting and self.num_tasks is not None:
                # a barrier stage needs a slot for every task: after losing executors
                # the retried stage may never be scheduled
                if task_slots(self._spark) < self.num_tasks:
                    short_since = short_since if short_since is not None else now
                    if now - short_since > SLOTS_GRACE:
                        raise lost(f"only {task_slots(self._spark)} task slots left for "
                                   f"{self.num_tasks} resident tasks")
                else:
                    short_since = None
            try:
                self._take(0.5)
            except _Restart:
                pass
        self._check_chunks()

    def _check_chunks(self) -> None:
        """Every chunk is held by exactly one task, and it is the same set as before."""
        ids = sorted(b for p in self.peers.values() for b in p.chunks)
        rows = sum(p.rows for p in self.peers.values())
        if len(set(ids)) != len(ids):
            raise RuntimeError("resident tasks hold overlapping chunks")
        if self._chunk_ids is None:
            self._chunk_ids, self._num_rows = ids, rows
        elif ids != self._chunk_ids or rows != self._num_rows:
            raise RuntimeError("the resident tasks came back with different chunks")

    def _drop(self, peer: Peer) -> None:
        if self.peers.get(peer.partition) is peer:
            del self.peers[peer.partition]
        peer.sock.close()

    def _gather(self, peers: list[Peer]) -> list[tuple[dict, list[np.ndarray]]]:
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

    def request(self, make: Callable[[Peer], tuple[dict, list[np.ndarray]]]
                ) -> list[list[np.ndarray]]:
        """Send ``make(peer)`` (a request's header and arrays) to every task; their replies'
        arrays, in partition order. Tasks lost on the way are waited for (Spark restarts
        them) and asked again, up to :data:`MAX_RECOVERIES` times; then
        :class:`ResidentLost`. A task's error is a ``RuntimeError``."""
        self.requests += 1
        for _ in range(MAX_RECOVERIES + 1):
            peers = [self.peers[k] for k in sorted(self.peers)]
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

    def close(self, wait: float = 30.0) -> None:
        """Stop the tasks and end the job (cancelled if it does not end within ``wait`` s)."""
        if self._closed:
            return
        self._closed = True
        for p in list(self.peers.values()):
            try:
                wire.send(p.sock, {"op": "stop"})
            except OSError:
                pass
        self._done.wait(wait)
        if not self._done.is_set():
            self._sc.cancelJobGroup(self._group)
            self._done.wait(30)
        for p in list(self.peers.values()):
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

