"""The sizes that choose a route or cut the work, in one place, and the seam to change them.

:class:`Limits` holds every such size with its default; :func:`current` gives the ones in
force, which the code reads when it decides (on the driver: a value a Spark task needs is
read there and passed to the task). :func:`overridden` changes some of them for a block
and puts them back after it, as scikit-learn's ``config_context`` does: how tests run a
route on small data. The state is the module's, not a context variable, so that the
threads of :class:`~vmi_spark.core.inmemory.ThreadedBackend` see it too. No pyspark.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .resources import available_memory

__all__ = ["DEFAULT", "Limits", "available_bytes", "current", "overridden"]


@dataclass(frozen=True)
class Limits:
    """The sizes in force (see the module docstring); each field says what it bounds."""

    #: rows the bin edges are placed on: exact quantiles up to this many rows, above it
    #: a content-hashed sample of about this many (binning.md)
    sample_rows: int = 200_000
    #: largest table (rows x (features + 1)) selected in the driver when its rows are
    #: counted without Spark (a Parquet input pyarrow reads from the driver)
    driver_cells: int = 64_000_000
    #: largest table selected in the driver when Spark is asked for its rows (one
    #: ``limit`` job; smaller, as those rows come through the JVM)
    probe_cells: int = 8_000_000
    #: most bytes of pairwise state (8 per row, feature and class) the driver keeps; a
    #: larger pairwise selection ships the driver's codes to the executors instead
    driver_pair_bytes: int = 512 << 20
    #: bytes of vector elements in one batch read from the input: Spark's readers hold a
    #: batch's vectors whole in the heap (800 MB at 10,000 rows of 10,000 elements)
    vector_batch_bytes: int = 64 << 20
    #: rows consecutive vector batches are joined up to before they are cut into columns
    #: (per value, reading and the statistics cost least from about 1,000 to 2,000 rows)
    vector_join_rows: int = 2048
    #: vector elements such a joined batch holds at most
    vector_join_cells: int = 32 << 20
    #: rows the one-byte column chunks of small-integer vectors are joined up to instead
    #: (one process, 20k rows x 10,000 elements: the statistics pass 1.7-2.4 s in batches
    #: of 2,048 rows, 1.1-1.3 s in 256)
    vector_byte_rows: int = 256
    #: columns fetched to the driver at once when placing bin edges
    split_chunk: int = 64
    #: cells of a column chunk the pyarrow readers cut a batch into (``ParquetReader``,
    #: ``VectorReader``): a chunk is used before the next is read (see
    #: ``arrow_source.READ_CELLS``)
    read_cells: int = 1 << 17
    #: most bytes of one encoded chunk (its codes and classes): the JVM copies each chunk
    #: whole (Arrow, cache), and large byte arrays crowd a small heap
    chunk_bytes: int = 8 << 20
    #: most of a block manager's cache memory the encoded rows may take before they are
    #: cached on disk (the memory store builds each cached batch in the heap before it
    #: can spill: a cache near its limit ends in "Java heap space")
    cache_share: float = 0.5
    #: most bytes of encoded chunks in one Arrow batch a task sends its Python worker
    #: (less where the heap is small)
    arrow_batch_bytes: int = 64 << 20
    #: bytes of counts one task sends per count request (bulk pair counts are split to fit)
    count_pass_bytes: int = 32 << 20
    #: the longest a call of ``tracking.log_selection`` waits for MLflow (seconds): an
    #: unreachable or silent tracking server ends in a TimeoutError, never a hang
    deadline_seconds: float = 30.0
    #: the least width of a sparse vector column read from its non-zeros (narrower ones
    #: are read as dense codes, whose results are those of the expanded columns)
    sparse_min_width: int = 10_000
    #: bytes available to the driver's Python that a sparse selection's estimate and the
    #: criteria's own tables (``planning.check_fits``) are checked against; None:
    #: measured (``resources.available_memory``; :func:`available_bytes`)
    driver_available_bytes: int | None = None
    #: the oldest pyarrow (major, minor) the pyarrow reader (Parquet files read by pyarrow
    #: in the Python workers) is used with: the oldest a supported runtime ships that runs
    #: here, Databricks 15.4 LTS's 14.0.1 (older: Spark's reader)
    arrow_reader_min: tuple[int, int] = (14, 0)


#: the defaults (the module constants that documents name are aliases of its fields)
DEFAULT = Limits()
_current = DEFAULT


def current() -> Limits:
    """The limits in force: :data:`DEFAULT` unless :func:`overridden` changed some."""
    return _current


def _checked(changes: dict[str, object]) -> Limits:
    """``current()`` with ``changes``: a TypeError naming an unknown field, a ValueError
    naming a field whose value is not a positive number of the default's kind (or None,
    where that is the default; a version where the default is one)."""
    fields = {f.name: f for f in dataclasses.fields(Limits)}
    for name, value in changes.items():
        if name not in fields:
            raise TypeError(f"overridden() got an unknown limit {name!r}")
        default = getattr(DEFAULT, name)
        if value is None and default is None:
            continue
        if isinstance(default, tuple):  # a version: as many whole numbers >= 0
            if not (isinstance(value, tuple) and len(value) == len(default) and all(
                    isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)):
                raise ValueError(f"limit {name} must be a version of {len(default)} whole "
                                 f"numbers like {default!r}, got {value!r}")
            continue
        kinds = (int, float) if isinstance(default, float) else (int,)
        if isinstance(value, bool) or not isinstance(value, kinds) or not value > 0:
            kind = "an int" if kinds == (int,) else "a number"
            raise ValueError(f"limit {name} must be {kind} > 0, got {value!r}")
    return dataclasses.replace(_current, **changes)  # type: ignore[arg-type]


@contextmanager
def overridden(**changes: object) -> Iterator[Limits]:
    """Run the block with the named limits changed (the others as they are); they are put
    back when it ends, also on an exception. Nested blocks stack. Yields the limits in
    force inside the block. A name that is not a field of :class:`Limits`: TypeError;
    a value that is not a positive number (an int where the default is one; None where
    the default is None: measured; a version where the default is one): ValueError.
    """
    global _current
    before, _current = _current, _checked(changes)
    try:
        yield _current
    finally:
        _current = before


def available_bytes() -> int | None:
    """The bytes available to this process's Python that the driver's checks use:
    :attr:`Limits.driver_available_bytes` where it is set, else measured
    (:func:`.resources.available_memory`; None where it cannot be known)."""
    given = current().driver_available_bytes
    return available_memory() if given is None else given
