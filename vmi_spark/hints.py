"""Errors that say how to fix them: what the job can tell from the input and the
session before Spark reads anything, and what a Spark failure means for the user.

* :func:`sniff_format`: a local ``--input`` whose first bytes say Parquet, ORC or JSON
  while ``--format`` says otherwise (a Parquet file read as CSV gives a column list of
  ``PAR1...`` bytes);
* :func:`check_input_exists`, :func:`check_format_name`: a local ``--input`` that does
  not exist, a ``--format`` that is a typo of a known data source;
* :func:`check_worker_python`: in local mode, that the Python the workers run
  (``PYSPARK_PYTHON``) can import ``vmi_spark`` (else every pass fails in a worker, with
  a Python traceback inside a Java one);
* :func:`explain`: a Spark failure as one line: a worker without the package, a table
  the session's catalog does not have.

Spark-free except where a session is passed in.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
from typing import Any

from .errors import InputError

#: the first bytes of a file in each format (JSON: its first non-blank character)
_MAGIC = ((b"PAR1", "parquet"), (b"ORC", "orc"), (b"Obj\x01", "avro"))
_NAMES = {"parquet": "Parquet", "orc": "ORC", "avro": "Avro", "json": "JSON", "csv": "CSV"}


#: data file names a directory's first file is looked for by (Spark's part files, or a
#: data extension): a README or a checksum beside them is not sniffed
_DATA_FILE = re.compile(r"^part-|\.(parquet|orc|avro|json|jsonl|csv|tsv|txt)$", re.IGNORECASE)


def _first_file(path: str) -> str | None:
    """``path`` if it is a file, else the first data file under directory ``path`` (a
    ``part-`` file or one with a data extension; names starting with ``_`` or ``.`` are
    metadata, as Spark skips them)."""
    if os.path.isfile(path):
        return path
    if not os.path.isdir(path):
        return None
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        for name in sorted(files):
            if not name.startswith(("_", ".")) and _DATA_FILE.search(name):
                return os.path.join(root, name)
    return None


def sniff_format(path: str) -> str | None:
    """The format a local file's first bytes show (``parquet``, ``orc``, ``avro``,
    ``json``), or None when they show none of these (CSV, text, compressed, unreadable)."""
    first = _first_file(path)
    if first is None:
        return None
    try:
        with open(first, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return None
    for magic, fmt in _MAGIC:
        if head.startswith(magic):
            return fmt
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text[:1] in (b"{", b"["):
        return "json"
    return None


def check_format(path: str | None, fmt: str | None) -> None:
    """Refuse a local ``--input`` whose bytes say another format than ``--format`` (the
    default ``parquet``): one line naming both and the flag to give.

    Raises
    ------
    InputError
        The first file's bytes show Parquet, ORC, Avro or JSON and ``--format`` says
        something else, or ``--format`` is ``parquet`` and the file is none of these
        (e.g. a CSV file).
    """
    from .files import local_path, scheme_of

    if path is None or scheme_of(path) not in (None, "file"):
        return  # a URI: the driver does not read it
    local = local_path(path)
    first = _first_file(local)
    if first is None:
        return
    want = (fmt or "parquet").lower()
    seen = sniff_format(first)
    if seen is not None and seen != want and want in _NAMES:
        raise InputError(f"--input '{path}' holds {_NAMES[seen]} data ('{first}' starts like "
                         f"a {_NAMES[seen]} file), not {_NAMES[want]}: give --format {seen}")
    if seen is None and want == "parquet" and os.path.isfile(local) and _looks_like_text(first):
        raise InputError(f"--input '{path}' is not Parquet ('{first}' is text): give "
                         "--format csv (or json, ...) for a text file")


#: data source names Spark has built in, or that its common packages add: a --format
#: close to one of these but not one is a typo (any other name is left to Spark: a
#: plugin may have it)
KNOWN_FORMATS = ("parquet", "csv", "json", "orc", "text", "avro", "xml", "delta", "iceberg",
                 "hudi", "jdbc", "binaryFile", "libsvm", "image")


def check_format_name(fmt: str | None) -> None:
    """Refuse a ``--format`` that is a near miss of a known data source name
    (``parqet``: did you mean 'parquet'?), before Spark starts; a name far from all of
    them (a plugin's, a class name) is Spark's to find."""
    if fmt is None or "." in fmt or fmt.lower() in (f.lower() for f in KNOWN_FORMATS):
        return
    close = difflib.get_close_matches(fmt.lower(), [f.lower() for f in KNOWN_FORMATS], n=1,
                                      cutoff=0.75)
    if close:
        name = next(f for f in KNOWN_FORMATS if f.lower() == close[0])
        raise InputError(f"unknown --format '{fmt}'; did you mean '{name}'?")


#: Hadoop glob characters: a segment holding one is a pattern
_GLOB = re.compile(r"[*?\[{]")


def check_input_exists(path: str | None) -> None:
    """Refuse a local ``--input`` that does not exist (one line, before Spark starts).

    Checked for a ``file:`` URI, and for a path without a scheme when that names the
    driver's own files (:func:`default_fs_is_local`); any other URI (``hdfs:``,
    ``s3:``, ``dbfs:``) is Spark's to read. For a glob pattern, the directory above
    its first pattern segment must exist.
    """
    from .files import local_path, scheme_of

    if path is None or scheme_of(path) not in (None, "file"):
        return
    if scheme_of(path) is None and not default_fs_is_local():
        return
    local = local_path(path)
    segments = local.split("/")
    glob_at = next((i for i, seg in enumerate(segments) if _GLOB.search(seg)), None)
    what = local if glob_at is None else "/".join(segments[:glob_at]) or "."
    if not os.path.exists(what):
        shown = "" if glob_at is None else f" (the directory '{what}' of the pattern)"
        raise InputError(f"--input '{path}' does not exist{shown}")


def default_fs_is_local() -> bool:
    """Whether a path without a scheme names the driver's own files, as far as can be
    told before Spark reads: not on Databricks (DBFS); under spark-submit, Hadoop's
    ``fs.defaultFS`` as the launched JVM has it (``spark.hadoop.fs.defaultFS``, else
    ``core-site.xml``); else no Hadoop configuration in the environment
    (``HADOOP_CONF_DIR``, ``YARN_CONF_DIR``, ``core-site.xml`` or ``fs.defaultFS`` in
    Spark's conf directory or ``PYSPARK_SUBMIT_ARGS``). False when unsure."""
    if os.environ.get("DATABRICKS_RUNTIME_VERSION"):
        return False
    if os.environ.get("PYSPARK_GATEWAY_PORT"):  # spark-submit's JVM is running: ask it
        return _submitted_default_fs().lower().startswith("file:")
    if os.environ.get("HADOOP_CONF_DIR") or os.environ.get("YARN_CONF_DIR") or \
            "fs.defaultFS" in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        return False
    home = os.environ.get("SPARK_HOME")
    conf = os.environ.get("SPARK_CONF_DIR") or (os.path.join(home, "conf") if home else None)
    if conf is None:
        return True
    if os.path.exists(os.path.join(conf, "core-site.xml")):
        return False
    try:
        with open(os.path.join(conf, "spark-defaults.conf"), encoding="utf-8") as fh:
            return "fs.defaultFS" not in fh.read()
    except OSError:
        return True


def _submitted_default_fs() -> str:
    """Hadoop's ``fs.defaultFS`` in the JVM spark-submit launched (its ``--conf``
    ``spark.hadoop.fs.defaultFS``, else the ``core-site.xml`` on its class path), or
    ``""`` when it cannot be asked. Connects to that JVM only (no SparkContext)."""
    try:
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()
        jvm: Any = SparkContext._jvm
        return str(SparkConf().get("spark.hadoop.fs.defaultFS", None)
                   or jvm.org.apache.hadoop.conf.Configuration().get("fs.defaultFS") or "")
    except Exception:  # noqa: BLE001 - unsure: Spark reads the path
        return ""


def _looks_like_text(path: str) -> bool:
    """Whether the file's first KiB is printable text (a CSV, a TSV)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(1024)
    except OSError:
        return False
    if not head:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(c.isprintable() or c in "\r\n\t" for c in text)


def worker_python(spark) -> str:
    """The Python the session's workers run: ``spark.pyspark.python``, else
    ``PYSPARK_PYTHON``, else ``python3`` (PySpark's default)."""
    try:
        conf = spark.sparkContext.getConf().get("spark.pyspark.python")
    except Exception:  # noqa: BLE001 - Spark Connect: no SparkContext here
        conf = None
    return conf or os.environ.get("PYSPARK_PYTHON") or "python3"


def check_worker_python(spark) -> None:
    """In local mode, check that the workers' Python can import ``vmi_spark`` (and
    numpy and pyarrow) before any pass runs: one line naming ``PYSPARK_PYTHON`` otherwise.

    On a cluster the workers are elsewhere; a failure there is explained by
    :func:`explain` when it happens.
    """
    try:
        master = spark.sparkContext.master
    except Exception:  # noqa: BLE001 - Spark Connect: the server's Python
        return
    if not str(master).startswith("local"):
        return
    python = worker_python(spark)
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        return  # this interpreter: it imported vmi_spark already
    code = "import vmi_spark, numpy, pyarrow"
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(f"the Python workers cannot start '{python}' ({exc}): set "
                         "PYSPARK_PYTHON to the Python that has vmi_spark installed") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["it failed"])[-1]
        raise InputError(f"the Python workers' Python '{python}' cannot import vmi_spark "
                         f"({last}): set PYSPARK_PYTHON to the Python that has vmi_spark "
                         "installed (or ship it with --py-files)")


_NO_MODULE = re.compile(r"No module named '([A-Za-z0-9_.]+)'")


def explain(exc: BaseException, spark=None, table: str | None = None) -> str | None:
    """One line that says what a Spark failure means and how to fix it, or None.

    * a Python worker without the package (``No module named 'vmi_spark'``, or numpy,
      pyarrow): name ``PYSPARK_PYTHON``;
    * a worker Python that does not exist (``Cannot run program``);
    * ``--table`` not found: say which catalog the session has and how to reach a
      metastore;
    * the JVM's heap ran out (or the context stopped after it did): name
      ``--driver-memory``.
    """
    text = str(exc)
    missing = _NO_MODULE.search(text)
    if missing and missing.group(1).split(".")[0] in ("vmi_spark", "numpy", "pyarrow",
                                                       "pandas"):
        return (f"the Python workers cannot import {missing.group(1)}: set PYSPARK_PYTHON "
                "(and spark.pyspark.python on a cluster) to a Python that has vmi_spark "
                "installed, or ship the package with --py-files")
    if "Cannot run program" in text and "python" in text.lower():
        return ("the Python workers' Python does not exist on the executors: set "
                "PYSPARK_PYTHON to a Python that has vmi_spark installed")
    if table and "TABLE_OR_VIEW_NOT_FOUND" in text:
        return _table_hint(spark, table)
    if any(m in text for m in _HEAP_MARKS):
        return ("Spark's JVM ran out of memory (OutOfMemoryError); give it more: "
                "spark-submit --driver-memory 4g (spark.driver.memory; on a cluster also "
                "--executor-memory), and please report the table's size")
    if any(m in text for m in _STOPPED_MARKS):
        return ("Spark stopped during the run (killed, or its JVM out of memory: then "
                "spark-submit --driver-memory 4g, spark.driver.memory; on a cluster also "
                "--executor-memory); the lines above this one tell which")
    return None


#: what a Spark failure says when the JVM's heap ran out
_HEAP_MARKS = ("OutOfMemoryError", "Java heap space")
#: what it says when the context stopped under it: a heap that ran out (the driver's
#: heartbeat receiver gone, then every job cancelled), but also a kill or a stop
_STOPPED_MARKS = ("RpcEndpointRef", "SparkContext was shut down")


def _table_hint(spark, table: str) -> str:
    catalog = None
    try:
        catalog = spark.conf.get("spark.sql.catalogImplementation")
    except Exception:  # noqa: BLE001 - Connect servers may not say
        pass
    where = (" (this session's catalog is in-memory: a plain spark-submit has no "
             "metastore; add --conf spark.sql.catalogImplementation=hive with the "
             "cluster's hive-site.xml, or read the files with --input)"
             if catalog == "in-memory" else
             " (on Databricks give catalog.schema.table of Unity Catalog)")
    return f"--table '{table}' not found in the session's catalog{where}"
