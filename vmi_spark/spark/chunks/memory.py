"""How big the encoded rows' pieces may be on the JVM's heap: a chunk, an Arrow batch of
chunks, a cached batch, and whether the cache goes to disk.

Every rule here asks the session what memory it has (:func:`.session.storage_memory`,
:func:`.session.jvm_slots`) and bounds a piece by it, so that a run on spark-submit's
default 1g driver neither fills the heap nor is slower than it must be elsewhere. The
execution route (:mod:`.routes`) asks these rules; nothing else sizes a piece.
"""

from __future__ import annotations

from pyspark import StorageLevel

from ...core import limits
from ...core.bound import MAX_CHUNK_ROWS, whole_strides
from ...core.criteria import criterion
from ...core.limits import DEFAULT
from ..session import is_local, jvm_slots, storage_memory
from .storage import session_confs

#: smallest chunk (rows) when the rows are spread over the task slots
MIN_CHUNK_ROWS = 4096
#: most of a block manager's cache memory the encoded rows may take before they go to disk
#: (the default: the code reads ``limits.current().cache_share``)
CACHE_SHARE = DEFAULT.cache_share
#: most bytes of one encoded chunk (its codes and classes)
#: (the default: the code reads ``limits.current().chunk_bytes``)
CHUNK_BYTES = DEFAULT.chunk_bytes
#: bytes of per-row state (a pairwise selection's) a chunk may hold
PAIR_CHUNK_BYTES = 32 << 20
#: the conf that bounds the rows of one Arrow batch a task sends its Python worker
ARROW_BATCH_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"
#: most bytes of encoded chunks in one such batch (less where the heap is small)
#: (the default: the code reads ``limits.current().arrow_batch_bytes``)
ARROW_BATCH_BYTES = DEFAULT.arrow_batch_bytes


def chunk_rows_for(num_rows: int, parts: int, num_features: int, method: str,
                   num_classes: int, most_bytes: int | None = None) -> int:
    """Rows of an encoded chunk on the executors.

    About four chunks per task slot (``parts``), so that every core has work in every
    pass; at most :data:`CHUNK_BYTES` a chunk, because the JVM copies each chunk whole
    (Arrow, cache) and large byte arrays crowd a small heap (a 5M x 100 table under the
    default 1g driver); with per-row state (``vmi_pairwise``) at most
    :data:`PAIR_CHUNK_BYTES` of it; at most ``most_bytes`` (:func:`disk_object_bytes`)
    when given; a multiple of :data:`~vmi_spark.core.bound.CHUNK_ROW_STEP` (at least 256).
    """
    rows = min(MAX_CHUNK_ROWS, max(MIN_CHUNK_ROWS, whole_strides(-(-num_rows // (4 * parts)),
                                                                 up=True)))
    chunk_bytes = limits.current().chunk_bytes
    most = min(chunk_bytes, most_bytes or chunk_bytes) // (num_features + 2)
    state = criterion(method).row_state_bytes(num_features, num_classes)
    if state:
        most = min(most, PAIR_CHUNK_BYTES // state)
    return max(256, min(rows, whole_strides(most)))


def chunk_batches(spark, chunk_bytes: int):
    """Run the block with Spark's Arrow batches to the Python workers holding
    :func:`arrow_batch_chunks` chunk rows each, restored after.

    Spark's default is 10,000 rows a batch: for chunk rows (a chunk is up to
    :data:`CHUNK_BYTES`) that is a whole partition, which the task builds in the JVM's
    heap before the worker sees any of it -- 500 MB a task for a 1M x 1,000 table, the
    "Java heap space" of spark-submit's default 1g driver.
    """
    return session_confs(spark, {ARROW_BATCH_CONF: str(arrow_batch_chunks(spark, chunk_bytes))})


def arrow_batch_chunks(spark, chunk_bytes: int) -> int:
    """Chunk rows of one Arrow batch: at most :func:`arrow_batch_budget` bytes (from the
    heap the session actually has), at least one."""
    return max(1, arrow_batch_budget(spark) // max(1, chunk_bytes))


def arrow_batch_budget(spark) -> int:
    """Bytes of chunks one task may hold in the JVM at once: :data:`ARROW_BATCH_BYTES`,
    or a quarter of a block manager's cache memory over the tasks its JVM runs at once
    if that is less (54 MB under a 1g local[2] driver)."""
    budget = limits.current().arrow_batch_bytes
    memory = storage_memory(spark)
    if memory is not None:
        budget = min(budget, memory // (4 * jvm_slots(spark)))
    return budget


def cache_level(spark, level: StorageLevel, encoded_bytes: int, parts: int,
                   notes: list[str]) -> StorageLevel:
    """``level``, or disk only when the encoded rows would fill more than half of a block
    manager's cache memory (:data:`CACHE_SHARE`): the memory store builds each cached
    batch in the heap before it can spill, so a cache near its limit ends in "Java heap
    space" instead of spilling (a 5M x 100 table under the default 1g driver). Resident
    tasks keep their chunks in the Python workers; the disk copy is read once."""
    if level != StorageLevel.MEMORY_AND_DISK:
        return level
    memory = storage_memory(spark)
    if memory is None or not cached_on_disk(spark, encoded_bytes, parts, memory):
        return level
    notes.append(f"the encoded rows ({encoded_bytes >> 20} MiB) are cached on disk: more than "
                 f"half of the {memory >> 20} MiB a block manager may cache")
    return StorageLevel.DISK_ONLY


def cached_on_disk(spark, encoded_bytes: int, parts: int,
                    memory: int | None = None) -> bool:
    """Whether the encoded rows (``encoded_bytes`` over ``parts`` partitions) take more
    than :data:`CACHE_SHARE` of a block manager's cache memory (``memory``, asked of the
    session when not given), so that the default storage level's cache goes to disk
    (:func:`cache_level`)."""
    memory = storage_memory(spark) if memory is None else memory
    share = encoded_bytes / max(1, parts) * (parts if is_local(spark) else 1)
    return memory is not None and share > limits.current().cache_share * memory


#: the conf that says after how many objects Spark's Java serializer forgets the ones
#: it wrote (Spark's default: 100)
STREAM_RESET_CONF = "spark.serializer.objectStreamReset"


def disk_object_bytes(spark, encoded_bytes: int, parts: int) -> int | None:
    """Most bytes of one chunk (and one cached batch) when the cache goes to disk.

    A cache on disk is written with Spark's serializer; the Java serializer (Spark's
    default) keeps every object it wrote until it has written
    ``spark.serializer.objectStreamReset`` of them (100 by default): 100 cached batches
    of 16 MiB are 1.6 GiB of heap per task, more than a whole partition of the encoded
    rows of a 1M x 1,000 table -- the "Java heap space" of spark-submit's default 1g
    driver. The job starts its session with the reset at 1 (:func:`.session.job_confs`);
    in any other session a chunk and a cached batch are made small enough that the
    objects a task keeps fit the heap's share of a task (:func:`arrow_batch_budget`).
    None when there is nothing to bound (the cache stays in memory, Kryo, a reset of 1,
    Spark Connect).
    """
    if not cached_on_disk(spark, encoded_bytes, parts):
        return None
    try:
        conf = spark.sparkContext.getConf()
        serializer = conf.get("spark.serializer", "org.apache.spark.serializer.JavaSerializer")
        reset = int(conf.get(STREAM_RESET_CONF, "100"))
    except Exception:  # noqa: BLE001 - Spark Connect: the server's settings are not known
        return None
    if "JavaSerializer" not in serializer or reset == 1:
        return None
    budget = arrow_batch_budget(spark)
    return max(1, budget // (reset if reset > 0 else 10_000))
