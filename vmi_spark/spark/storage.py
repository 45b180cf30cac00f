"""Where the encoded blocks live between passes: Spark's cache, a staging directory, or
nowhere (recomputed from the source by every pass).

Classic clusters and Spark Connect servers cache the blocks (``DataFrame.persist``).
Databricks serverless compute is Spark Connect with caching switched off: ``persist``,
``cache`` and the checkpoints fail with ``[NOT_SUPPORTED_WITH_SERVERLESS] PERSIST TABLE
is not supported on serverless compute``. There the blocks are written once, as
Parquet, to a fresh directory under a staging location the user names (for example a
Unity Catalog volume, ``/Volumes/catalog/schema/volume/tmp``) and read back by every
pass; without a staging location every pass recomputes them from the source (read,
encode, shuffle), which gives the same answer at the cost of a full read per pass.
The choice is made by trying ``persist`` once (``mode="auto"``) or asked for
explicitly, and the report says which was used.
"""

from __future__ import annotations

import os
import shutil
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..errors import InputError

__all__ = ["STORAGES", "Kept", "caching_refused", "keep"]

#: how the blocks are kept: try the cache first (``auto``), or one way only
STORAGES = ("auto", "cache", "staging", "recompute")

#: text of the errors with which a session refuses to cache (Databricks serverless)
_REFUSALS = ("NOT_SUPPORTED_WITH_SERVERLESS", "PERSIST TABLE is not supported")


#: the conf that bounds the rows of one cached columnar batch (Spark's default: 10,000)
BATCH_SIZE_CONF = "spark.sql.inMemoryColumnarStorage.batchSize"
#: bytes of encoded blocks in one cached batch
CACHE_BATCH_BYTES = 16 << 20


def cache_batch_rows(block_bytes: int) -> int:
    """Block rows per cached batch so that a batch holds about :data:`CACHE_BATCH_BYTES`.

    A block row carries up to 64k encoded rows (megabytes); at Spark's default of 10,000
    rows per batch one batch would hold a whole partition's blocks, which the memory store
    must build in the heap before it can spill it (the "Java heap space" of a 5M-row
    table under the default 1g driver).
    """
    return max(1, CACHE_BATCH_BYTES // max(1, block_bytes))


@contextmanager
def session_confs(spark: Any, confs: dict[str, str]) -> Iterator[None]:
    """Run the block with the session's SQL confs ``confs`` set, restored after (a conf
    the session does not let be set keeps its own value)."""
    old: dict[str, str | None] = {}
    for key, value in confs.items():
        try:
            before = spark.conf.get(key, None)
            spark.conf.set(key, value)
            old[key] = before
        except Exception:  # noqa: BLE001, S112 - a session that refuses the conf keeps its own
            continue
    try:
        yield
    finally:
        for key, before in old.items():
            try:
                if before is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, before)
            except Exception:  # noqa: BLE001, S110 - restoring is best effort
                pass


def batch_rows(spark: Any, rows: int):
    """Run the block with the session's cached-batch size set to ``rows``, restored after
    (left alone where the session does not let it be set)."""
    return session_confs(spark, {BATCH_SIZE_CONF: str(rows)})


def caching_refused(exc: BaseException) -> bool:
    """True if ``exc`` is a session's refusal to cache or checkpoint a DataFrame."""
    text = f"{getattr(exc, 'getErrorClass', lambda: None)() or ''} {exc}"
    return any(r in text for r in _REFUSALS)


@dataclass
class Kept:
    """A DataFrame kept for repeated passes, and how.

    Attributes
    ----------
    df : DataFrame
        What the passes read.
    how : {"cache", "staging", "recompute"}
        Spark's cache, a Parquet copy under the staging directory, or nothing.
    path : str or None
        The staging copy's directory (created by :func:`keep`, removed by
        :meth:`release`).
    """

    df: Any
    how: str
    path: str | None = None

    def release(self) -> None:
        """Drop the cached copy, or remove the staging directory this run created."""
        if self.how == "cache":
            self.df.unpersist()
        elif self.how == "staging" and self.path is not None:
            _remove_dir(self.df.sparkSession, self.path)


def keep(df, storage_level, mode: str = "auto", staging_dir: str | None = None,
         materialize: bool = True, warn: bool = True) -> Kept:
    """Keep ``df`` for repeated passes: cached if the session allows it, else staged.

    Parameters
    ----------
    df : DataFrame
        The encoded blocks.
    storage_level : StorageLevel
        For the cache.
    mode : {"auto", "cache", "staging", "recompute"}
        ``auto`` tries the cache and, if the session refuses it (serverless), uses
        the staging directory when one is given, else recomputation.
    staging_dir : str, optional
        A directory Spark can write and read (a Unity Catalog volume on Databricks);
        the copy goes to a new subdirectory ``vmi-blocks-<random>`` of it.
    materialize : bool
        Run the job that fills the cache now (a count).
    warn : bool
        Warn when the session refuses caching and there is no staging directory.

    Returns
    -------
    Kept
    """
    if mode not in STORAGES:
        raise InputError(f"unknown block storage {mode!r} (choose from {', '.join(STORAGES)})")
    if mode == "staging" and not staging_dir:
        raise InputError("block storage 'staging' needs a staging directory")
    if mode in ("auto", "cache"):
        try:
            kept = df.persist(storage_level)
        except Exception as exc:  # noqa: BLE001 - serverless refuses; anything else is real
            if mode == "cache" or not caching_refused(exc):
                raise
        else:
            if materialize:
                try:
                    kept.count()
                except BaseException:
                    kept.unpersist()
                    raise
            return Kept(kept, "cache")
        mode = "staging" if staging_dir else "recompute"
        if mode == "recompute" and warn:
            warnings.warn("this session cannot cache DataFrames (Databricks serverless?): "
                          "every pass re-reads and re-encodes the input; name a staging "
                          "directory (stagingDir / --staging-dir) to read it once",
                          UserWarning, stacklevel=2)
    if mode == "recompute" or staging_dir is None:
        return Kept(df, "recompute")
    path = staging_dir.rstrip("/") + f"/vmi-blocks-{uuid.uuid4().hex[:16]}"
    df.write.mode("error").parquet(path)
    return Kept(df.sparkSession.read.parquet(path), "staging", path)


def _remove_dir(spark, path: str) -> None:
    """Remove ``path`` (a directory :func:`keep` created) on Spark's or the local file system."""
    try:
        jvm = spark.sparkContext._jvm
        conf = spark.sparkContext._jsc.hadoopConfiguration()
    except Exception:  # noqa: BLE001 - Spark Connect: no JVM on this side
        jvm = None
    if jvm is not None:
        p = jvm.org.apache.hadoop.fs.Path(path)
        p.getFileSystem(conf).delete(p, True)
        return
    local = path[len("file:"):] if path.startswith("file:") else path
    if os.path.isdir(local):  # a local or FUSE-mounted path (/Volumes/... on Databricks)
        shutil.rmtree(local, ignore_errors=True)
    else:
        warnings.warn(f"cannot remove the staging copy {path} from this client; remove it "
                      "by hand", UserWarning, stacklevel=3)
