"""Session probes and helpers that work with a classic and with a Spark Connect session.

The probes (:func:`is_connect`, :func:`parallelism`, :func:`task_slots`,
:func:`jvm_slots`, :func:`storage_memory`, :func:`unavailable_reason`) are the one place the library asks what a session is
and what it can run.

A Spark Connect session (``SparkSession.builder.remote(...)``) has no
``SparkContext``: ``spark.sparkContext``, ``setLogLevel`` and
``setJobDescription`` raise there. Library code that wants those goes through
these helpers instead, which do the classic thing in classic mode and a safe
equivalent (or nothing) under Connect.
"""

from __future__ import annotations

import atexit
import os
import re
from pathlib import Path
from typing import Any

__all__ = ["is_connect", "is_local_remote", "remote_address", "check_reachable", "remote_session",
           "set_log_level", "describe_jobs", "parallelism", "task_slots", "jvm_slots", "storage_memory",
           "unavailable_reason"]

#: prefix of the job tags :func:`describe_jobs` adds under Spark Connect
TAG_PREFIX = "vmi_spark"


def is_connect(spark: Any) -> bool:
    """True if ``spark`` is a Spark Connect session (no JVM on this side, no SparkContext)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def parallelism(spark) -> int:
    """Task slots of the session (``defaultParallelism``; its conf under Spark Connect)."""
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # Spark Connect: no SparkContext
        try:
            return max(1, int(spark.conf.get("spark.default.parallelism", "2")))
        except Exception:
            return 2


def task_slots(spark) -> int:
    """Tasks that can run at once in a classic session (what a barrier stage may use)."""
    sc = spark.sparkContext
    jsc = sc._jsc.sc()
    try:
        profile = jsc.resourceProfileManager().defaultResourceProfile()
        return max(1, int(jsc.maxNumConcurrentTasks(profile)))
    except Exception:  # an older or different JVM side: the default parallelism
        return max(1, int(sc.defaultParallelism))


def is_local(spark) -> bool:
    """Whether a classic session runs in local mode (its tasks share the driver's JVM)."""
    try:
        return str(spark.sparkContext.master).startswith("local")
    except Exception:  # noqa: BLE001 - Spark Connect: not known here
        return False


def jvm_slots(spark) -> int:
    """Tasks one JVM runs at once: the driver's slots in local mode, else an executor's
    cores (``spark.executor.cores``; 2 where it is not set)."""
    if is_local(spark):
        return parallelism(spark)
    try:
        cores = spark.sparkContext.getConf().get("spark.executor.cores", None)
        return max(1, int(cores)) if cores else 2
    except Exception:  # noqa: BLE001 - Spark Connect: no SparkContext
        return 2


def storage_memory(spark) -> int | None:
    """Bytes of cache one block manager may hold: the smallest maximum over the session's
    block managers (the driver's alone in local mode); None where it cannot be asked
    (Spark Connect, another JVM side)."""
    if is_connect(spark):
        return None
    try:
        status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()
        it = status.values().iterator()
        sizes = []
        while it.hasNext():
            sizes.append(int(it.next()._1()))
        return min(sizes) if sizes else None
    except Exception:  # noqa: BLE001 - no answer: the caller keeps its storage level
        return None


#: settings the job starts its own session with, where the user set none:
#: Spark's Java serializer forgets what it wrote after every object, not after 100
#: (a cache on disk of 100 chunks' batches would otherwise stay in the heap, see
#: :func:`vmi_spark.spark.chunks.memory.disk_object_bytes`)
JOB_CONFS = {"spark.serializer.objectStreamReset": "1"}


def job_confs() -> dict[str, str]:
    """Those of :data:`JOB_CONFS` the user did not set (``--conf``, spark-defaults.conf),
    for the session the job starts; nothing where that cannot be asked."""
    try:
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()  # the gateway JVM: the submitted settings
        conf = SparkConf()
        return {k: v for k, v in JOB_CONFS.items() if not conf.contains(k)}
    except Exception:  # noqa: BLE001 - no JVM to ask: Spark's defaults
        return {}


def unavailable_reason(spark) -> str | None:
    """Why resident tasks (:mod:`.resident`) cannot run in ``spark`` (None: they can)."""
    if is_connect(spark):
        return "Spark Connect (the executors cannot reach the client)"
    conf = spark.sparkContext.getConf()
    if conf.get("spark.dynamicAllocation.enabled", "false").lower() == "true":
        return "dynamic allocation is enabled (Spark's barrier stages do not support it)"
    return None


def is_local_remote(url: str) -> bool:
    """True if ``url`` asks for an in-process Connect server (``local``, ``local[2]``, ...)."""
    return url == "local" or url.startswith("local[")


def remote_session(url: str, app_name: str | None = None):
    """A Spark Connect session for ``url``.

    ``sc://host:port[/;param=value...]`` connects to a running Connect server;
    ``local``, ``local[N]`` or ``local[*]`` start one in this process (pyspark's own
    in-process server, with that master) and connect to it.
    """
    from pyspark.sql import SparkSession

    if not (url.startswith("sc://") or is_local_remote(url)):
        raise ValueError(f"--remote must be sc://host:port or local[N], got {url!r}")
    # spark-submit exports its master (local[*] unless --master) as MASTER, and pyspark
    # refuses a master next to a Connect URL (CANNOT_CONFIGURE_SPARK_CONNECT_MASTER): the
    # URL asked for wins while the session starts (an in-process server gets url's master)
    master = os.environ.pop("MASTER", None)
    try:
        builder = SparkSession.builder.remote(url)
        if app_name:
            builder = builder.appName(app_name)
        session = builder.getOrCreate()
    finally:
        if master is not None:
            os.environ["MASTER"] = master
    if is_local_remote(url) and "PYSPARK_GATEWAY_PORT" in os.environ:
        # under spark-submit the in-process server runs in spark-submit's JVM, whose
        # non-daemon server threads would keep it alive after this process ends
        atexit.register(_stop_local_server, session)
    return session


def _stop_local_server(session: Any) -> None:
    """Stop a Connect session and the in-process server it was started with."""
    sc = _local_context()
    for stop in (session.stop, getattr(sc, "stop", None)):
        try:
            if stop is not None:
                stop()
        except Exception:  # noqa: BLE001 - the process is ending anyway
            pass


def remote_address(url: str) -> tuple[str, int]:
    """``(host, port)`` of an ``sc://host[:port][/;param=value...]`` URL (port 15002 by default)."""
    from urllib.parse import urlsplit

    netloc = urlsplit(url).netloc
    if not url.startswith("sc://") or not netloc:
        raise ValueError(f"not a Spark Connect URL: {url!r}")
    parts = urlsplit("//" + netloc)
    return parts.hostname or "localhost", parts.port or 15002


def check_reachable(url: str, timeout: float = 10.0) -> None:
    """Raise ``ConnectionError`` unless a TCP connection to the server of ``url`` opens.

    The Connect client retries an unreachable server for about ten minutes (it
    tolerates server restarts); a job should rather fail at once with a clear message.
    """
    import socket

    host, port = remote_address(url)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        raise ConnectionError(f"cannot reach the Spark Connect server at {host}:{port} "
                              f"({exc.strerror or exc})") from None


def _local_context():
    """The SparkContext of an in-process Connect server, if this process runs one."""
    try:
        from pyspark import SparkContext

        return SparkContext._active_spark_context
    except Exception:  # pragma: no cover - pyspark without the classic core
        return None


#: the console logging the job starts Spark with (Spark's defaults, the root at WARN)
CONSOLE_LOG4J = Path(__file__).with_name("log4j2-console.properties")


def preset_log_level(level: str) -> bool:
    """Set Spark's console log level before the SparkContext starts; returns whether it
    could.

    A SparkContext logs a few dozen INFO lines while it starts. ``spark.log.level``
    applies only after the first of them, and Spark's logging, finding log4j 2 with its
    default configuration when the context starts, loads its own profile at INFO. So
    the driver's JVM (spark-submit's, or the one the gateway starts now) is given
    :data:`CONSOLE_LOG4J` first, the same profile at ``level``, unless the user
    configured log4j 2 (a configuration file of their own), which is left as it is
    (only its root level is set).
    """
    try:
        from pyspark import SparkContext

        if SparkContext._active_spark_context is not None:
            return False  # started already: setLogLevel does it
        SparkContext._ensure_initialized()  # the gateway JVM, without a context
        jvm: Any = SparkContext._jvm
        log4j = jvm.org.apache.logging.log4j
        logging, module = _spark_logging(jvm)
        default = bool(_call(logging, module, "islog4j2DefaultConfigured") or _call(
            logging, module, "org$apache$spark$internal$Logging$$defaultSparkLog4jConfig"))
        if default:  # Spark's profile or none: the user configured nothing
            ctx = log4j.LogManager.getContext(False)
            ctx.setConfigLocation(jvm.java.net.URI(CONSOLE_LOG4J.as_uri()))
            _set_flag(SparkContext._gateway, jvm, logging, module, "defaultSparkLog4jConfig",
                      False)
        log4j.core.config.Configurator.setRootLevel(log4j.Level.toLevel(level))
        # configured now: the context must not initialise Spark's logging again (under
        # spark-submit, which un-initialised it before starting this Python, it would
        # load Spark's profile at INFO over this one)
        _set_flag(SparkContext._gateway, jvm, logging, module, "initialized", True)
        return True
    except Exception:  # noqa: BLE001 - no log4j 2, no gateway: Spark logs as it will
        return False


def _spark_logging(jvm: Any) -> tuple[Any, Any]:
    """Spark's ``org.apache.spark.internal.Logging`` object: its class and instance."""
    cls = jvm.java.lang.Class.forName("org.apache.spark.internal.Logging$")
    return cls, cls.getField("MODULE$").get(None)


def _call(cls: Any, module: Any, name: str) -> Any:
    """Call the no-argument method ``name`` of Spark's ``Logging`` object."""
    return cls.getMethod(name, None).invoke(module, None)


def _set_flag(gateway: Any, jvm: Any, cls: Any, module: Any, name: str, value: bool) -> None:
    """Set the boolean field ``name`` of Spark's ``Logging`` object (by reflection).

    ``defaultSparkLog4jConfig`` False: Spark's default profile is no longer in use, so a
    SparkContext that starts later does not load it again (at INFO) over
    :data:`CONSOLE_LOG4J`; ``initialized`` True: Spark's logging is configured, so the
    context does not initialise it again (spark-submit un-initialises it before starting
    the Python driver). Internal fields of Spark 3.3 to 4.x; where they are not there,
    :func:`preset_log_level` fails and Spark's start-up INFO lines are printed
    (``spark.log.level`` applies after them).
    """
    types = gateway.new_array(jvm.java.lang.Class, 1)
    types[0] = jvm.java.lang.Boolean.TYPE
    args = gateway.new_array(jvm.java.lang.Object, 1)
    args[0] = jvm.java.lang.Boolean.TRUE if value else jvm.java.lang.Boolean.FALSE
    cls.getMethod(f"org$apache$spark$internal$Logging$${name}_$eq", types).invoke(module, args)


#: the loggers :data:`CONSOLE_LOG4J` keeps quieter than the root: they print a failed task's
#: whole Java and Python trace
TASK_TRACE_LOGGERS = ("org.apache.spark.executor.Executor",
                      "org.apache.spark.scheduler.TaskSetManager")


def set_log_level(spark: Any, level: str, loggers: tuple[str, ...] = ()) -> bool:
    """Set Spark's console log level (of the named ``loggers`` only, if given); returns
    whether it could.

    Classic mode: ``sparkContext.setLogLevel``. Connect with an in-process server
    (``remote("local[N]")``): the server's SparkContext lives in this process and is
    used. Connect to a remote server: the server owns its logs; nothing is done.
    """
    try:
        sc = spark.sparkContext if not is_connect(spark) else _local_context()
        if sc is None:
            return False
        if not loggers:
            sc.setLogLevel(level)
            return True
        log4j = sc._jvm.org.apache.logging.log4j
        for name in loggers:
            log4j.core.config.Configurator.setLevel(name, log4j.Level.toLevel(level))
        return True
    except Exception:
        pass
    return False


_TAG_CHARS = re.compile(r"[^A-Za-z0-9_.:=/ -]+")
_current_tags: dict[int, str] = {}


def describe_jobs(spark: Any, text: str | None) -> None:
    """Label the Spark jobs that follow with ``text`` (``None`` clears the label).

    Classic mode: ``sparkContext.setJobDescription`` (the Spark UI's job
    description). Spark Connect has no job descriptions; there the label becomes a
    job tag ``vmi_spark: <text>`` (shown with the jobs, and usable with
    ``spark.interruptTag``), replacing the previous one. Never raises.
    """
    try:
        if not is_connect(spark):
            spark.sparkContext.setJobDescription(text or None)
            return
        key = id(spark)
        old = _current_tags.pop(key, None)
        if old is not None:
            try:
                spark.removeTag(old)
            except Exception:  # tags are per thread: added by another thread
                pass
        if text:
            tag = f"{TAG_PREFIX}: {_TAG_CHARS.sub('_', text)}"[:200]
            spark.addTag(tag)
            _current_tags[key] = tag
    except Exception:  # labels are cosmetic: never fail a selection over them
        pass
