"""The resident tasks' protocol: the messages between the driver and its resident tasks.

Every message is a :mod:`.wire` message (a JSON header and raw arrays; nothing is
unpickled). A task connects to the driver and opens with a *hello*; then the driver sends
requests and the task answers each one, until the driver says *stop*:

========  =======================================  =====================================
op        request (header; arrays)                 reply (arrays)
========  =======================================  =====================================
hello     the run's secret, the task's partition,  (the task's first message; the
          attempt, rows and number of tasks;       driver answers with a request)
          its chunk ids (int64)
counts    --                                       n(x_i, y): (D, A, L) int64
pairs     ``fs``: features                         n(x_i, x_f, y): (len(fs), D, A, A, L)
step      ``method``, ``block``, ``cond`` (the     the candidates' exact sums as two
          tables follow), ``tables`` (features     int64 halves (:func:`add_split`,
          whose pair tables follow); candidates    :func:`joined`)
          (bool), [p(y), p(x_i | y)], [tables]
stop      --                                       (none: the task ends)
========  =======================================  =====================================

A ``counts``, ``pairs`` or ``step`` request may carry ``mask`` (a stability run's
half-sample, :class:`vmi_spark.core.stability.HalfSample`): the task then answers over
the rows it keeps, and drops its tables when the mask changes (:meth:`Held.view`).
A reply header carries ``seconds`` (the task's time on the request), or ``error`` (one
line) instead of arrays. The driver sends a task the tables it does not hold yet only
(:class:`Held`). The size limits are checked before anything is parsed or allocated.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
from pyspark.sql import types as T

from ...core.bound import StepOps

#: most array bytes a task accepts in one request (tables; generous)
MAX_REQUEST_BYTES = 4 << 30
#: most bytes of a request's header a task accepts (the fields are small; arrays follow)
MAX_REQUEST_HEADER = 1 << 20
#: largest hello header (fixed small fields; the chunk ids follow as an array)
MAX_HELLO_HEADER = 1024
#: largest chunk id array in a hello (8 bytes a chunk), read only after the secret matched
MAX_HELLO_CHUNK_BYTES = 8 << 20

#: what each task returns when the job ends: its partition, chunks, rows, requests served
TASK_SCHEMA = T.StructType([T.StructField("partition", T.IntegerType()),
                            T.StructField("chunks", T.IntegerType()),
                            T.StructField("rows", T.LongType()),
                            T.StructField("requests", T.LongType())])

_HELLO_FIELDS = ("partition", "attempt", "rows", "tasks")


def hello(secret: str, partition: int, tasks: int, attempt: int, rows: int) -> dict:
    """A task's hello header (its chunk ids follow as one int64 array)."""
    return {"op": "hello", "secret": secret, "partition": partition, "tasks": tasks,
            "attempt": attempt, "rows": rows}


def hello_fields(header: dict) -> tuple[int, int, int, int]:
    """``(partition, attempt, rows, tasks)`` of a hello header; ``ValueError`` unless each
    is an int >= 0 and there is at least one task."""
    fields = [header.get(k) for k in _HELLO_FIELDS]
    if not all(type(v) is int and v >= 0 for v in fields) or header["tasks"] < 1:
        raise ValueError("a hello with malformed fields")
    partition, attempt, rows, tasks = (int(v) for v in fields)  # type: ignore[arg-type]
    return partition, attempt, rows, tasks


@dataclass
class Held:
    """What one task holds of the step tables, as the driver recorded it: the version of
    (p(y), p(x_i | y)) last sent to it and the features whose pair tables it keeps, and the
    rows it answers over (``mask``: a stability run's half-sample, None for all; a task
    that changes its rows drops its tables, :meth:`view`)."""

    cond: int = -1
    tables: set[int] = field(default_factory=set)
    mask: dict | None = None

    def view(self, mask: dict | None) -> None:
        """Record a request over the rows of ``mask``: after a change the task holds no
        tables (they were those of other rows), so all of them are sent again."""
        if mask != self.mask:
            self.cond, self.tables, self.mask = -1, set(), mask


def step_request(ops: StepOps, held: Held, version: int, prior: np.ndarray,
                 cond: np.ndarray) -> tuple[dict, list[np.ndarray]]:
    """The step request for a task that holds ``held`` (updated to what it will hold):
    the candidates; (``prior``, ``cond``), version ``version``, unless it holds them; the
    pair tables of the block's features it lacks."""
    header: dict = {"op": "step", "method": ops.method, "block": list(ops.block)}
    arrays = [np.asarray(ops.candidates, dtype=bool)]
    if held.cond != version:
        header["cond"] = True
        arrays += [prior, cond]
        held.cond = version
    new = [f for f in ops.block if f not in held.tables and f in ops.pair_log_tables]
    header["tables"] = new
    arrays += [np.asarray(ops.pair_log_tables[f], dtype=np.float64) for f in new]
    held.tables = {f for f in ops.block if f in ops.pair_log_tables}
    return header, arrays


@dataclass
class Step:
    """A step request as a task reads it: ``prior`` and ``cond`` are None when the task
    holds them already, ``tables`` the pair tables sent with it."""

    method: str
    block: tuple[int, ...]
    candidates: np.ndarray
    prior: np.ndarray | None
    cond: np.ndarray | None
    tables: dict[int, np.ndarray]


def read_step(header: dict, arrays: Sequence[np.ndarray]) -> Step:
    """The :class:`Step` of a step request's header and arrays."""
    it: Iterator[np.ndarray] = iter(arrays)
    candidates = next(it).astype(bool)
    prior = cond = None
    if header.get("cond"):
        prior, cond = next(it), next(it)
    tables = {int(f): next(it) for f in header.get("tables", [])}
    return Step(header["method"], tuple(int(f) for f in header["block"]), candidates, prior,
                cond, tables)


def add_split(hi: np.ndarray, lo: np.ndarray, p: np.ndarray) -> None:
    """Add int64 ``p`` to a (hi, lo) pair of int64 sums without overflow (exact): the
    reply of a step is the pair."""
    hi += p >> 32
    lo += p & 0xFFFFFFFF


def joined(replies: Sequence[Sequence[np.ndarray]], size: int) -> np.ndarray:
    """The exact (``size``,) sums (Python ints) of the tasks' (hi, lo) step replies."""
    total = np.zeros(size, dtype=object)
    for hi, lo in replies:
        total += hi.astype(object) * (1 << 32) + lo.astype(object)
    return total
