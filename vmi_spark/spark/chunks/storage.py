"""Where the encoded chunks of rows live between passes: Spark's cache, a staging directory, or
nowhere (recomputed from the source by every pass).

Classic clusters and Spark Connect servers cache the chunks (``DataFrame.persist``).
Databricks serverless compute is Spark Connect with caching switched off: ``persist``,
``cache`` and the checkpoints fail with ``[NOT_SUPPORTED_WITH_SERVERLESS] PERSIST TABLE
is not supported on serverless compute``. There the chunks are written once, as
Parquet, to a fresh directory under a staging location the user names (for example a
Unity Catalog volume, ``/Volumes/catalog/schema/volume/tmp``) and read back by every
pass; without a staging location every pass recomputes them from the source (read,
encode, shuffle), which gives the same answer at the cost of a full read per pass.
The choice is made by trying ``persist`` once (``mode="auto"``) or asked for
explicitly, and the report says which was used.

A staging copy is a directory ``vmi-chunks-<16 hex digits>`` holding the job's marker
(:data:`CHUNKS_MARKER`, written first) and Spark's Parquet files (``data``); versions
that called runs of rows "blocks" wrote ``vmi-blocks-*`` and ``_VMI_SPARK_BLOCKS``, still
recognised (:data:`SPELLINGS`). On the
driver's file system (a local path, or ``/Volumes/...`` on Databricks) the run holds an
exclusive lock on that directory until it removes it; the lock dies with the process, so a
copy a killed run left is recognised by the next run that uses the same staging directory
(its marker, and a lock nobody holds) and removed, and nothing else there ever is. The
staging location must not be, contain or lie inside the input (:func:`check_staging`).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import posixpath
import re
import shutil
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ... import files
from ...errors import InputError
from ...params import ParameterError, ParameterWarning

__all__ = ["STORAGES", "Kept", "caching_refused", "keep"]

#: how the chunks are kept: try the cache first (``auto``), or one way only
STORAGES = ("auto", "cache", "staging", "recompute")

#: name prefix of a staging copy under the staging directory
CHUNKS_PREFIX = "vmi-chunks-"
#: the marker file a run writes first into its staging copy, and the ``kind`` it names
CHUNKS_MARKER = "_VMI_SPARK_CHUNKS"
CHUNKS_KIND = "chunks"
#: the Parquet files of a staging copy, inside its directory
CHUNKS_DATA = "data"
#: (prefix, marker, kind) of a staging copy: the one a run writes, then the one versions
#: before the rename wrote (their runs of rows were "blocks"), which :func:`sweep` still
#: recognises and :func:`check_staging` still keeps out of the input
SPELLINGS = ((CHUNKS_PREFIX, CHUNKS_MARKER, CHUNKS_KIND),
             ("vmi-blocks-", "_VMI_SPARK_BLOCKS", "blocks"))

#: text of the errors with which a session refuses to cache (Databricks serverless)
_REFUSALS = ("NOT_SUPPORTED_WITH_SERVERLESS", "PERSIST TABLE is not supported")


#: the conf that bounds the rows of one cached columnar batch (Spark's default: 10,000)
BATCH_SIZE_CONF = "spark.sql.inMemoryColumnarStorage.batchSize"
#: bytes of encoded chunks in one cached batch
CACHE_BATCH_BYTES = 16 << 20


def cache_batch_rows(chunk_bytes: int, most_bytes: int | None = None) -> int:
    """Chunk rows per cached batch so that a batch holds about :data:`CACHE_BATCH_BYTES`
    (or ``most_bytes``, if less; at least one chunk).

    A chunk row carries up to 64k encoded rows (megabytes); at Spark's default of 10,000
    rows per batch one batch would hold a whole partition's chunks, which the memory store
    must build in the heap before it can spill it (the "Java heap space" of a 5M-row
    table under the default 1g driver).
    """
    return max(1, min(CACHE_BATCH_BYTES, most_bytes or CACHE_BATCH_BYTES) // max(1, chunk_bytes))


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
    local : str or None
        That directory on the driver's file system, when it is there.
    lock : int or None
        The descriptor of ``local`` holding the run's lock on it.
    made : list of str
        Directories :func:`keep` created above the copy (removed again if empty).
    """

    df: Any
    how: str
    path: str | None = None
    local: str | None = None
    lock: int | None = None
    made: list[str] = field(default_factory=list)

    def release(self) -> None:
        """Drop the cached copy, or remove the staging directory this run created."""
        if self.how == "cache":
            self.df.unpersist()
        elif self.how == "staging" and self.path is not None:
            if self.lock is not None:
                _remove_locked(self.local or "", self.lock)
                self.lock = None
            else:
                _remove_dir(self.df.sparkSession, self.path)
            for d in reversed(self.made):
                files.LocalFS().remove_empty_dir(d)
            self.path = None


def keep(df, storage_level, mode: str = "auto", staging_dir: str | None = None,
         materialize: bool = True, warn: bool = True) -> Kept:
    """Keep ``df`` for repeated passes: cached if the session allows it, else staged.

    Parameters
    ----------
    df : DataFrame
        The encoded chunks.
    storage_level : StorageLevel
        For the cache.
    mode : {"auto", "cache", "staging", "recompute"}
        ``auto`` tries the cache and, if the session refuses it (serverless), uses
        the staging directory when one is given, else recomputation.
    staging_dir : str, optional
        A directory Spark can write and read (a Unity Catalog volume on Databricks);
        the copy goes to a new subdirectory ``vmi-chunks-<random>`` of it.
    materialize : bool
        Run the job that fills the cache now (a count).
    warn : bool
        Warn when the session refuses caching and there is no staging directory.

    Returns
    -------
    Kept
    """
    if mode not in STORAGES:
        raise InputError(f"unknown chunk storage {mode!r} (choose from {', '.join(STORAGES)})")
    if mode == "staging" and not staging_dir:
        raise InputError("chunk storage 'staging' needs a staging directory")
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
            warnings.warn(ParameterWarning(
                "staging_dir", "this session cannot cache DataFrames (Databricks serverless?): "
                               "every pass re-reads and re-encodes the input; name a staging "
                               "directory ({staging_dir}) to read it once"), stacklevel=2)
    if mode == "recompute" or staging_dir is None:
        return Kept(df, "recompute")
    kept = _staging_copy(df, staging_dir)
    try:
        data = kept.path + "/" + CHUNKS_DATA  # type: ignore[operator]
        df.write.mode("error").parquet(data)
        kept.df = df.sparkSession.read.parquet(data)
    except BaseException:
        kept.release()
        raise
    return kept


def _local_dir(spark, path: str) -> str | None:
    """Spark path ``path`` on the driver's file system, or None if it is elsewhere."""
    try:
        jvm = spark.sparkContext._jvm
        conf = spark.sparkContext._jsc.hadoopConfiguration()
    except Exception:  # noqa: BLE001 - Spark Connect: the server's paths; local if here too
        jvm = None
    if jvm is not None:
        p = jvm.org.apache.hadoop.fs.Path(path)
        path = str(p.getFileSystem(conf).makeQualified(p))
    if files.scheme_of(path) not in files.LOCAL_SCHEMES:
        return None
    local = os.path.realpath(files.local_path(path))
    if jvm is None and not os.path.isdir(local):
        return None
    return local


def _staging_copy(df, staging_dir: str) -> Kept:
    """A new, empty staging copy's directory under ``staging_dir`` (for ``df``): its marker
    written first and, on the driver's file system, the run's lock held on it (copies
    killed runs left there are removed first)."""
    spark = df.sparkSession
    name = CHUNKS_PREFIX + uuid.uuid4().hex[:16]
    path = staging_dir.rstrip("/") + "/" + name
    marker = json.dumps({"writer": "vmi_spark", "kind": CHUNKS_KIND, "name": name,
                         "pid": os.getpid()}) + "\n"
    local = _local_dir(spark, staging_dir)
    if local is None:  # another file system (HDFS, S3, ...): the marker, no lock
        fs = files.hadoop_fs(spark)
        if fs is not None:
            fs.write_text(fs.join(path, CHUNKS_MARKER), marker)
        return Kept(df, "staging", path)
    made = files.LocalFS().makedirs(local)
    for gone in sweep(local):
        warnings.warn(f"removed the staging copy {posixpath.join(local, gone)} that an "
                      "interrupted run left (its marker, no live lock)", UserWarning,
                      stacklevel=3)
    mine = os.path.join(local, name)
    os.mkdir(mine)
    fd = os.open(mine, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    kept = Kept(df, "staging", path, mine, fd, made)
    try:
        try:
            files.lock_soon(fd)
        except OSError as exc:  # a file system without locks: proceed, unprovable later
            if isinstance(exc, BlockingIOError) or exc.errno not in (
                    errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL):
                raise
        files.create_at(fd, CHUNKS_MARKER, marker)
    except BaseException:
        kept.release()
        raise
    return kept


def sweep(directory: str) -> list[str]:
    """Remove the staging copies killed runs left in local ``directory``; returns their names.

    A copy is removed only if it is a directory (not a link) named ``vmi-chunks-<16 hex
    digits>`` (or an earlier version's ``vmi-blocks-<16 hex digits>``: :data:`SPELLINGS`)
    whose lock nobody holds (its run is gone) and which holds the marker of its spelling
    naming it and nothing but that marker and ``data``; it is emptied through directory
    descriptors (no link is followed). Anything else is left alone.
    """
    removed: list[str] = []
    try:
        root = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return removed
    try:
        for name in sorted(os.listdir(root)):
            spelling = _spelling(name)
            if spelling is None:
                continue
            _, marker, kind = spelling
            try:
                fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=root)
            except OSError:  # a link, a file, gone: not a copy this run can prove is one
                continue
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:  # a live run holds it (or no locks here: unprovable)
                    continue
                mark = files.marker_of(fd, marker, kind)
                if mark is None or mark.get("name") != name or \
                        set(os.listdir(fd)) - {marker, CHUNKS_DATA}:
                    continue
                if files.same_file(os.lstat(name, dir_fd=root), os.fstat(fd)):
                    files.empty_at(fd)
                    os.rmdir(name, dir_fd=root)
                    removed.append(name)
            finally:
                os.close(fd)
    finally:
        os.close(root)
    return removed


def _spelling(name: str) -> tuple[str, str, str] | None:
    """The :data:`SPELLINGS` entry whose copies are named like ``name``, else None."""
    for spelling in SPELLINGS:
        if re.fullmatch(re.escape(spelling[0]) + "[0-9a-f]{16}", name):
            return spelling
    return None


def _remove_locked(local: str, fd: int) -> None:
    """Remove the run's own locked staging copy ``local`` (through its descriptor ``fd``),
    then drop the lock."""
    try:
        files.empty_at(fd)
        try:
            if files.same_file(os.lstat(local), os.fstat(fd)):
                os.rmdir(local)
        except FileNotFoundError:
            pass
    finally:
        os.close(fd)


#: stands for the staging directory's name in a message (phrased by the front end)
_FLAG = "\x00staging_dir\x00"


def check_staging(df, staging_dir: str) -> None:
    """Refuse a staging directory a run could not write its copy in, or whose copy
    (``vmi-chunks-*``; nor an earlier version's ``vmi-blocks-*``, which :func:`sweep`
    removes) would be, contain or lie inside the input of ``df``; before anything
    is read, with the job's rules (:func:`vmi_spark.files.check_staging_dir`,
    :func:`vmi_spark.files.check_overlaps`).

    The input is where ``df`` reads its files: the root paths of its file relations and
    the locations of its catalog tables (classic sessions; under Spark Connect the paths
    of the data sources in the client's plan), and the directory (above Hive-style
    ``k=v`` directories) of any input file outside those (a catalog table under Connect).

    Raises
    ------
    ParameterError
        One line naming the staging directory as the front end names it.
    """
    spark = df.sparkSession
    try:
        qualified = files.check_staging_dir(files.hadoop_fs(spark), staging_dir, _FLAG)
        copy = files.resolve(qualified, _FLAG)
        inputs = [files.Location("input", root, loc.root, loc.parts)
                  for root in input_roots(df) for loc in [files.resolve(root, "the input")]]
        for prefix, _, _ in SPELLINGS:
            files.check_overlaps([files.Location(_FLAG, staging_dir, copy.root,
                                                 copy.parts + (prefix + "*",))], inputs)
    except InputError as exc:
        text = str(exc).replace("{", "{{").replace("}", "}}")
        raise ParameterError("staging_dir", text.replace(_FLAG, "{staging_dir}")) from None


def check_checkpoint_dir(df, checkpoint_dir: str) -> None:
    """Refuse a checkpoint directory that is, contains or lies inside the input of ``df``
    (see :func:`check_staging`): the job's rule for ``--checkpoint-dir``, for
    :func:`~vmi_spark.spark.select.run_selection` too.

    Raises
    ------
    ParameterError
        One line naming the checkpoint directory as the front end names it.
    """
    try:
        where = files.resolve(checkpoint_dir, _CHECKPOINT, local_only=True)
        files.check_overlaps([where], [files.Location("input", root, loc.root, loc.parts)
                                         for root in input_roots(df)
                                         for loc in [files.resolve(root, "input")]])
    except InputError as exc:
        text = str(exc).replace("{", "{{").replace("}", "}}")
        raise ParameterError("checkpoint_dir",
                             text.replace(_CHECKPOINT, "{checkpoint_dir}")) from None


#: stands for the checkpoint directory's name in a message
_CHECKPOINT = "\x00checkpoint_dir\x00"


def input_roots(df) -> list[str]:
    """Where ``df`` reads its files (see :func:`check_staging`), as URIs or paths."""
    roots: list[str] = []
    jdf = getattr(df, "_jdf", None)
    try:
        if jdf is not None:
            leaves = jdf.queryExecution().analyzed().collectLeaves().iterator()
            while leaves.hasNext():
                roots += _leaf_roots(leaves.next())
        else:  # Spark Connect: the paths the client's plan reads
            roots += _read_paths(df._plan.plan(df.sparkSession.client))
    except Exception:  # noqa: BLE001, S110 - a plan of another shape: the files below
        pass
    try:
        paths = list(df.inputFiles())
    except Exception:  # noqa: BLE001 - no files (a local relation, a computed frame)
        paths = []
    under = [files.resolve(r, "") for r in roots]
    for f in paths:
        loc = files.resolve(f, "")
        if any(files.relation(loc, r) for r in under):
            continue
        parts = list(loc.parts[:-1])
        while parts and re.match(r"^[^=]+=", parts[-1]):
            parts.pop()
        roots.append(loc.root + "/" + "/".join(parts))
        under.append(files.resolve(roots[-1], ""))
    return roots


def _read_paths(message) -> list[str]:
    """The paths of every data source a Spark Connect plan (protobuf) reads."""
    out: list[str] = []
    for fd, value in message.ListFields():
        if fd.message_type is None:
            continue
        for item in ([value] if hasattr(value, "ListFields") else list(value)):
            if not hasattr(item, "ListFields"):  # a map's entries
                continue
            if item.DESCRIPTOR.full_name == "spark.connect.Read.DataSource":
                out += [str(p) for p in item.paths]
            else:
                out += _read_paths(item)
    return out


def _leaf_roots(leaf) -> list[str]:
    """Root paths of one leaf of an analyzed plan (a file relation, a catalog table)."""
    out: list[str] = []
    name = leaf.getClass().getName()
    if name.endswith(".LogicalRelation"):
        rel = leaf.relation()
        if rel.getClass().getName().endswith(".HadoopFsRelation"):
            paths = rel.location().rootPaths().iterator()
            while paths.hasNext():
                out.append(str(paths.next()))
        table = leaf.catalogTable()
        if table.isDefined():
            out.append(str(table.get().location()))
    elif name.endswith(".HiveTableRelation"):
        out.append(str(leaf.tableMeta().location()))
    return out


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
