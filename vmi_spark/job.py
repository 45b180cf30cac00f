"""The spark-submit job: parse arguments, read, select, write ``selection.json``.

``jobs/select_features.py`` calls :func:`main`; tests call it directly.
Bad input ends with one line on stderr and exit status 2, and nothing written.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib.util
import json
import logging
import os
import sys
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from . import changes, files, hints, outputs
from .core.report_schema import SelectionReport
from .errors import InputError, flat, one_line
from .params import (
    AUTO_MAX_FEATURES,
    DEFAULT_THRESHOLDS,
    SPEC,
    ParameterError,
    ParameterWarning,
    Settings,
    as_given,
    default,
    parameter,
    validate,
)

log = logging.getLogger("vmi_spark")

#: spec keys whose flags the job adds by hand (comma lists) or not at all
_OWN_FLAGS = ("features", "exclude")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse prints usage too)
        raise InputError(message)

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        """As argparse, but a number flag takes a negative value given after a space
        (``--restart-tolerance -inf``, ``-1e-3``): argparse reads those as flags."""
        given = list(sys.argv[1:] if args is None else args)
        numeric = {o for a in self._actions if a.type in (int, float) for o in a.option_strings}
        joined: list[str] = []
        for arg in given:
            if joined and joined[-1] in numeric and arg.startswith("-") and _is_number(arg):
                joined[-1] = f"{joined[-1]}={arg}"
            else:
                joined.append(arg)
        return super().parse_known_args(joined, namespace)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="select_features.py",
                description="Select features with variational information maximisation "
                            "(VMI, Gao et al. NIPS 2016) on Spark. With no arguments, runs "
                            "a demo on the paper's synthetic tree model.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--input", help="input path (file or directory)")
    src.add_argument("--table", help="catalog table to read, e.g. db.t")
    p.add_argument("--format", default=None, metavar="NAME",
                   help="input format: any data source name Spark can read, e.g. parquet, csv, "
                        "orc, json, delta, iceberg (default parquet; csv is read with a header "
                        "row and inferred types, otherwise with Spark's defaults)")
    p.add_argument("--read-option", action="append", default=[], type=_read_option,
                   metavar="KEY=VALUE",
                   help="an option for Spark's reader, e.g. multiLine=true or sep=; "
                        "(repeatable; passed to spark.read.option; a Parquet --input is then "
                        "read with Spark's reader)")
    p.add_argument("--features", metavar="COLS", help=parameter("features").help("cli"))
    p.add_argument("--exclude", metavar="COLS", help=parameter("exclude").help("cli"))
    _add_spec_arguments(p, [q.key for q in SPEC if q.flag and q.key not in _OWN_FLAGS])
    p.add_argument("--output", help="output directory for selection.json, report.md and "
                                     "bounds.png, on the driver's file system; it must not be, "
                                     "contain or lie inside the input or another output")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a previous output of this job (an --output directory holding "
                        "only the job's files) or the --output-table; any other non-empty "
                        "directory is refused even so (a --write-selected directory holding "
                        "only the job's earlier output is replaced without it)")
    p.add_argument("--write-selected", metavar="DIR",
                   help="also write the input without the candidate features that were not "
                        "selected (the label, the selected features and every column left out "
                        "of the selection kept), in the input's format and partitioning (a Spark "
                        "path, outside the input); a directory holding only the job's earlier "
                        "output there is replaced, anything else refused")
    p.add_argument("--output-table", metavar="NAME",
                   help="also write the input without the unselected candidate features to "
                        "this catalog table (saveAsTable), in the input's format and partitioning")
    p.add_argument("--remote", metavar="URL",
                   help="run through Spark Connect: sc://host:port for a Connect server, or "
                        "local[N] to start one in this process (needs pyspark[connect]; "
                        "default: a classic session, master from spark-submit)")
    p.add_argument("--mlflow", action="store_true",
                   help="log the parameters, the bound and gain per step and the report files "
                        "to MLflow: the active run, else a new run (MLFLOW_TRACKING_URI, "
                        "MLFLOW_EXPERIMENT_NAME); needs vmi_spark[mlflow]. Done anyway when "
                        "the process has an active run")
    p.add_argument("--quiet", action="store_true", help="warnings and errors only (no progress)")
    p.add_argument("--verbose", action="store_true", help="debug logging and full tracebacks")
    return p


def _add_spec_arguments(p: argparse.ArgumentParser, keys: Sequence[str]) -> None:
    """Add the flags of spec parameters ``keys``: type, default, choices, help."""
    for key in keys:
        spec = parameter(key)
        # argparse formats help with %: a literal percent sign (0.5%) is written %%
        kwargs: dict[str, Any] = {"help": spec.help("cli").replace("%", "%%"),
                                  "metavar": spec.metavar}
        if spec.type is bool:  # a switch: on when given
            p.add_argument(spec.name("cli"), action="store_true", default=spec.default,
                           help=kwargs["help"])
            continue
        if spec.type in (int, float):
            kwargs["type"] = spec.type
        if spec.choices is not None:
            kwargs.update(choices=spec.choices, metavar=None)
        if key == "num_features":  # the demo has its own default: decided in check_args
            kwargs["help"] += (f" (default: on the evidence, at most {AUTO_MAX_FEATURES}; "
                               f"demo {spec.default_for('demo')})")
        else:
            kwargs["default"] = spec.default_for("cli")
            if spec.default_for("cli") is not None:
                kwargs["help"] += f" (default {spec.default_for('cli')})".replace("%", "%%")
        if "cli" in spec.aliases:  # either spelling, kept only when given: check_args unaliases
            kwargs["default"] = argparse.SUPPRESS
            p.add_argument(spec.aliases["cli"], **{**kwargs, "help": argparse.SUPPRESS,
                                                   "dest": spec.aliases["python"]})
        p.add_argument(spec.name("cli"), **kwargs)


@dataclass(frozen=True)
class CheckedArgs:
    """The job's arguments as :func:`check_args` checked them: ``args`` the parsed flags
    (a copy, the default of ``--num-features`` filled in, the settings' values as the spec
    normalised them) and ``settings`` the selection's :class:`~vmi_spark.params.Settings`."""

    args: argparse.Namespace
    settings: Settings


def check_args(parsed: argparse.Namespace) -> CheckedArgs:
    """Check everything about ``parsed`` that needs no data (before Spark starts).

    Returns the checked arguments (``parsed`` itself is left as it is); raises
    :class:`InputError` (one line naming the flag) otherwise. One decision: :func:`main`
    makes it once, before Spark starts, and :func:`run` takes its result.
    """
    with as_given(vars(parsed), "python", "cli") as given:  # an earlier flag named as given
        return _checked(argparse.Namespace(**given))


def _checked(args: argparse.Namespace) -> CheckedArgs:
    """:func:`check_args` of the flags ``args`` (a copy, under the flags' present names)."""
    demo = not (args.input or args.table)
    if demo and (args.label or args.output or args.write_selected or args.output_table
                 or args.previous or args.weight_col):
        raise InputError("--input or --table is required")
    if args.fail_on_change and not args.previous:
        raise InputError("--fail-on-change needs --previous (the earlier run's --output)")
    if args.previous is not None and not args.previous.strip():
        raise InputError("--previous is empty")
    if args.weight_col is not None and not args.weight_col.strip():
        raise InputError("--weight-col is empty")
    _check_conflicts(args)
    if not demo and not args.label:
        raise InputError("--label is required")
    if not demo and not args.output:
        raise InputError("--output is required")
    if args.num_features is None:  # not given
        args.num_features = default("num_features", "demo" if demo else "cli")
    # the job's flags (a setting without one, e.g. the in-memory selector's threads, keeps
    # its default)
    settings = Settings.of({k: getattr(args, k) for k in Settings.KEYS if hasattr(args, k)},
                           "cli", "demo" if demo else "cli")
    vars(args).update(settings)
    vars(args).update(validate({"demo_rows": args.demo_rows}, "cli"))
    for flag in ("features", "exclude"):
        given = getattr(args, flag)
        if given is not None and any(not c.strip() for c in given.split(",")):
            raise InputError(f"--{flag} has an empty column name")
    if args.label in (_columns(args.features) or []):
        raise InputError(f"--label '{args.label}' is also listed in --features: the label "
                         "is never a feature")
    if args.remote is not None:
        from .spark.session import is_local_remote

        if not (args.remote.startswith("sc://") or is_local_remote(args.remote)):
            raise InputError(f"--remote must be sc://host:port or local[N], got '{args.remote}'")
    return CheckedArgs(args, settings)


def _check_conflicts(args: argparse.Namespace) -> None:
    """Refuse flags that contradict each other (one of them would be ignored)."""
    if args.quiet and args.verbose:
        raise InputError("--quiet and --verbose contradict each other: give one")
    mode = args.selection_mode
    given = args.num_features is not None  # before check_args fills in the default
    if mode != "numTopFeatures" and given:
        raise InputError(f"--num-features applies to --selection-mode numTopFeatures, not "
                         f"'{mode}' (which selects {_MODE_SIZE[mode]}): give one of the two")
    if mode == "numTopFeatures" and args.selection_threshold is not None:
        raise InputError("--selection-threshold applies to --selection-mode gain or fraction "
                         "(numTopFeatures selects --num-features): give one of the two")


#: what each selection mode but numTopFeatures selects, in the conflicts' words
_MODE_SIZE = {"gain": "until a step gains less than --selection-threshold nats",
              "fraction": "the --selection-threshold fraction of the candidates"}


def _message(exc: InputError) -> str:
    """The one error line, in the job's own flag names."""
    return flat(exc.restyled("cli") if isinstance(exc, ParameterError) else exc)


def write_report(path: str, report: SelectionReport) -> None:
    """Write ``selection.json``, ``report.md``, ``steps.csv``, ``bounds.png`` and (with
    stability runs) ``stability.png`` into the new directory ``path`` (the staging
    directory of ``--output``; modes follow the umask)."""
    os.mkdir(path)
    with open(os.path.join(path, "selection.json"), "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=2, ensure_ascii=False, allow_nan=False, default=str)
        fh.write("\n")
    from .report import plot_bounds, plot_stability, render_markdown, write_steps_csv

    with open(os.path.join(path, "report.md"), "w", encoding="utf-8") as fh:
        fh.write(render_markdown(report))
    write_steps_csv(report, os.path.join(path, "steps.csv"))
    try:
        plot_bounds(report, os.path.join(path, "bounds.png"))
        plot_stability(report, os.path.join(path, "stability.png"))
    except ImportError:  # matplotlib is an optional extra: the job works without it
        log.info("matplotlib not installed: no bounds.png (pip install 'vmi_spark[plots]')")


def _warm_report_imports() -> None:
    """Import matplotlib's Agg canvas on a daemon thread while Spark starts.

    The report needs it after the steps, and importing it then adds about half a second
    to the job's wall time; while the JVM starts, the driver's Python mostly waits. The
    report imports it again (then a no-op); a failure here is left for the report to
    meet. Only modules that never import back into pyspark or vmi_spark are loaded here,
    so the import locks of the two threads cannot wait on each other.
    """
    if importlib.util.find_spec("matplotlib") is None:
        return

    def load() -> None:
        try:
            import matplotlib.backends.backend_agg  # noqa: F401
            import matplotlib.figure  # noqa: F401
        except Exception:  # noqa: BLE001 - the report says what is missing
            pass

    threading.Thread(target=load, name="vmi_spark-warm-imports", daemon=True).start()


def _read_option(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of ``--read-option`` (argparse type)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got '{text}'")
    return key.strip(), value


def read_input(spark, args: argparse.Namespace):
    """Read ``--input``/``--table`` with Spark; bad paths become :class:`InputError`."""
    try:
        if args.table:
            reader = spark.read
            for key, value in args.read_option:
                reader = reader.option(key, value)
            df = reader.table(args.table)
            df.schema  # noqa: B018 - a missing table fails here also under Spark Connect
            return df
        if not args.input:
            raise InputError("--input or --table is required (or give no arguments for the demo)")
        fmt = args.format or "parquet"
        reader = spark.read.format(fmt)
        if fmt == "csv":
            reader = reader.option("header", "true").option("inferSchema", "true")
        for key, value in args.read_option:
            reader = reader.option(key, value)
        df = reader.load(args.input)
        df.schema  # noqa: B018 - force schema resolution (missing path, unreadable file)
        return df
    except Exception as exc:
        if not _is_spark_error(exc):
            raise
        if "DATA_SOURCE_NOT_FOUND" in str(exc):
            raise InputError(f"unknown format '{args.format}': Spark has no data source of that "
                             "name (is its package on the classpath?)") from exc
        hint = hints.explain(exc, spark, args.table)
        if hint is not None:
            raise InputError(hint) from exc
        raise InputError(f"cannot read input '{args.input or args.table}': {one_line(exc)}") from exc


def _is_spark_error(exc: BaseException) -> bool:
    from pyspark.errors import PySparkException

    return isinstance(exc, PySparkException) or type(exc).__module__.startswith("py4j")


def _what(args: argparse.Namespace) -> str:
    """The first progress line: what the job is about to read and select."""
    if not (args.input or args.table):
        return f"demo: {args.demo_rows} rows of the paper's synthetic tree model"
    source = (f"table {args.table}" if args.table
              else f"{args.input} ({args.format or 'parquet'})")
    return f"selecting {_how_many(args)} ({args.method}) for label '{args.label}' of {source}"


def _how_many(args: argparse.Namespace) -> str:
    """How many features the run selects, as its ``--selection-mode`` decides it."""
    mode, threshold = args.selection_mode, args.selection_threshold
    if mode == "numTopFeatures":
        if args.num_features is None:
            return f"up to {AUTO_MAX_FEATURES} features, while one is significant"
        return f"{args.num_features} features"
    if mode == "fraction":
        t = DEFAULT_THRESHOLDS[mode] if threshold is None else threshold
        return f"a fraction {t:g} of the features"
    if threshold is None:
        return "features while one is significant"
    return f"features while one gains at least {threshold:g} nats"


def _spark_log_level(args: argparse.Namespace) -> str:
    """Spark's console level: INFO with --verbose, ERROR with --quiet, else WARN (its
    warnings, not its INFO lines)."""
    return "INFO" if args.verbose else "ERROR" if args.quiet else "WARN"


def _quiet_jvm_logs(spark, args: argparse.Namespace) -> None:
    """Keep the console to this job's own lines and Spark's warnings (classic mode, or a
    Connect server in this process; a remote Connect server owns its logs)."""
    from .spark.session import TASK_TRACE_LOGGERS, set_log_level

    set_log_level(spark, _spark_log_level(args))
    if args.verbose:  # the failed tasks' traces too
        set_log_level(spark, "INFO", TASK_TRACE_LOGGERS)


def _log_step():
    """One INFO line per step: ``step 7/50 feature=x12 bound=0.4312 gain=0.0123 block=0 ...``
    (the candidates and K are the run's: :func:`vmi_spark.progress.begin`)."""
    from .progress import StepLogger

    return StepLogger(log)


@contextlib.contextmanager
def _warnings_logged() -> Iterator[None]:
    """Log the warnings raised inside as WARNING lines of ``vmi_spark`` when they are
    raised (a parameter's in the job's flag names), not the libraries' notes to their
    developers (as Python's default filters: PySpark 3.5's distutils and unclosed-socket
    warnings, one per Spark job)."""
    def show(message, category, filename, lineno, file=None, line=None) -> None:
        text = message.phrase("cli") if isinstance(message, ParameterWarning) else message
        log.warning("%s", text)

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        for category in (DeprecationWarning, PendingDeprecationWarning, ResourceWarning):
            warnings.simplefilter("ignore", category)
        warnings.showwarning = show
        yield


def _check_output_table(spark, args: argparse.Namespace) -> None:
    name = args.output_table
    if args.table and name.strip().lower() == args.table.strip().lower():
        raise InputError(f"--output-table '{name}' is the input table; Spark cannot overwrite "
                         "a table it is reading (write to another table)")
    if spark.catalog.tableExists(name) and not args.overwrite:
        raise InputError(f"table '{name}' already exists (use --overwrite to replace it)")


def _table_layout(spark, name: str) -> tuple[str | None, list[str]]:
    """(provider, partition columns) of a catalog table."""
    parts = [c.name for c in spark.catalog.listColumns(name) if c.isPartition]
    provider = None
    try:
        for row in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect():
            if (row[0] or "").strip() == "Provider":
                provider = (row[1] or "").strip().lower() or None
    except Exception as exc:  # noqa: BLE001 - no DESCRIBE ... EXTENDED: use --format
        log.debug("cannot describe table %s: %s", name, exc)
    return provider, parts


def _path_partitions(df) -> list[str]:
    """Partition columns Spark discovered from Hive-style ``k=v`` directories of the input."""
    from urllib.parse import unquote

    files = df.inputFiles()
    if not files:
        return []
    keys: list[str] = []
    for segment in reversed(files[0].rstrip("/").split("/")[:-1]):
        if "=" not in segment:
            break
        keys.insert(0, unquote(segment.split("=", 1)[0]))
    columns = {c.lower(): c for c in df.columns}
    return [columns[k.lower()] for k in keys if k.lower() in columns]


def _pruned(df, report: SelectionReport, parts: list[str]):
    """The input without the candidate features that were not selected: the label, the
    selected features and every column left out of the selection (keys, excluded and
    weight columns, arrays, maps, the partition columns) are kept, in the input's order."""
    from pyspark.sql import functions as F

    from .spark.plan import quote

    drop = set(report["features"]) - set(report["selected"]) - {*parts}
    return df.select(*[F.col(quote(c)) for c in df.columns if c not in drop])


def _writer(df, fmt: str, parts: list[str]):
    w = df.write.format(fmt)
    if fmt == "csv":
        w = w.option("header", "true")
    return w.partitionBy(*parts) if parts else w


def output_request(args: argparse.Namespace) -> outputs.OutputRequest:
    """What the output checks and claims need of parsed ``args`` (:mod:`vmi_spark.outputs`
    sees no argument namespace)."""
    return outputs.OutputRequest(output=args.output, write_selected=args.write_selected,
                                 checkpoint_dir=args.checkpoint_dir,
                                 staging_dir=args.staging_dir, overwrite=args.overwrite,
                                 input=args.input, table=args.table)


#: the ``--previous`` report and why it could not be read (read before anything is written)
Previous = tuple[dict[str, Any] | None, str | None]


@dataclass(frozen=True)
class Outcome:
    """What a run of the job ends with: its report, and why it was not logged to MLflow
    with ``--mlflow`` (None if it was, or was not asked to be)."""

    report: SelectionReport
    tracking_error: str | None = None


def run(checked: CheckedArgs, spark, *, started: float | None = None,
        previous: Previous = (None, "not read"),
        request: outputs.OutputRequest | None = None) -> Outcome:
    """Run the job for the ``checked`` arguments on ``spark``.

    ``checked`` is what :func:`check_args` returned (``main`` checks them before Spark starts);
    ``started`` is when the job began (``perf_counter``; the report's ``job_seconds``,
    from this call if None), ``previous`` the ``--previous`` report :func:`main` read,
    ``request`` the outputs' :func:`output_request` ``main`` checked before Spark started
    (built from ``checked.args`` if None). Before anything is read, the outputs are checked as
    the session sees them and claimed (:mod:`vmi_spark.outputs`); they are written in
    staging and moved into place last.
    """
    if not isinstance(checked, CheckedArgs):
        raise ValueError("run() takes the arguments check_args() returned")
    args, settings = checked.args, checked.settings
    started = time.perf_counter() if started is None else started
    if not (args.input or args.table):  # the demo
        return _select_and_write(args, settings, spark, None, None, started=started,
                                 previous=previous)
    location = _table_location(spark, args.table) if args.table else None
    request = output_request(args) if request is None else request
    with outputs.claims(request, spark, location) as claimed:
        if args.output_table:
            _check_output_table(spark, args)
        df = read_input(spark, args)
        notes = [*csv_header_notes(spark, args, df), *csv_notes(spark, args, df)]
        return _select_and_write(args, settings, spark, df, claimed, notes, started=started,
                                 previous=previous)


#: bytes of each CSV input file (at most CSV_FILES of them) looked at by :func:`csv_notes`
CSV_SAMPLE_BYTES = 4 << 20
CSV_FILES = 8
_COMPRESSED = (".gz", ".bz2", ".zst", ".lz4", ".snappy", ".deflate", ".xz", ".zip", ".br")


def _csv_options(args: argparse.Namespace) -> dict[str, str] | None:
    """The ``--read-option``s of a CSV ``--input`` by lower-cased key; None for any other
    input."""
    if args.table or (args.format or "parquet").lower() != "csv":
        return None
    return {k.lower(): v for k, v in args.read_option}


def csv_notes(spark, args: argparse.Namespace, df) -> list[str]:
    """A warning when a CSV ``--input`` read line by line (``multiLine`` off, Spark's
    default) looks as if quoted fields hold line breaks: lines with an odd number of
    quote characters (escaped quotes not counted) in the first :data:`CSV_SAMPLE_BYTES` of
    up to :data:`CSV_FILES` of its files. Spark then splits such a record into several
    (200 records read as 240), silently. Read in the driver, no Spark job; compressed
    files and files it cannot open are skipped; the result is never changed."""
    opts = _csv_options(args)
    if opts is None or opts.get("multiline", "").strip().lower() == "true":
        return []
    quote, escape = opts.get("quote", '"'), opts.get("escape", "\\")
    if len(quote) != 1 or quote == "\u0000":
        return []
    try:
        files = sorted(df.inputFiles())[:CSV_FILES]
    except Exception:  # noqa: BLE001 - no file listing (Connect, a source without files)
        return []
    odd = lines = 0
    first = None
    for uri in files:
        if uri.lower().endswith(_COMPRESSED):
            continue
        head = _file_head(spark, uri, CSV_SAMPLE_BYTES)
        if head is None:
            continue
        text = head.decode("utf-8", errors="replace").split("\n")
        if len(head) >= CSV_SAMPLE_BYTES or text[-1:] == [""]:
            text = text[:-1]  # the cut line, or nothing after the last line break
        for i, line in enumerate(text, 1):
            if escape and escape != quote:
                line = line.replace(escape + escape, "").replace(escape + quote, "")
            lines += 1
            if line.count(quote) % 2:
                odd += 1
                first = first or (uri, i)
    if not odd:
        return []
    assert first is not None
    return [f"the CSV input has {odd} of {lines} lines (in the first {CSV_SAMPLE_BYTES >> 20} "
            f"MiB of {len(files)} file(s)) with an odd number of {quote} characters, e.g. "
            f"line {first[1]} of {first[0]}: quoted fields with line breaks split their "
            "records when a CSV is read line by line; if so, read it with --read-option "
            "multiLine=true"]


def csv_header_notes(spark, args: argparse.Namespace, df) -> list[str]:
    """A warning when Spark renamed a CSV ``--input``'s header names: names that are the
    same but for case (Spark compares them without case) or repeated become the name with
    its column index appended (``A``, ``a`` read as ``A0``, ``a1``), and the selection
    and its outputs use those. The header is the first line of the first file."""
    opts = _csv_options(args)
    if opts is None or opts.get("header", "true").strip().lower() != "true":
        return []
    try:
        first = next(u for u in sorted(df.inputFiles()) if not u.lower().endswith(_COMPRESSED))
    except Exception:  # noqa: BLE001 - no file listing, or only compressed files
        return []
    head = _file_head(spark, first, 1 << 20)
    if not head:
        return []
    sep = opts.get("sep", opts.get("delimiter", ","))
    try:
        header = next(csv.reader([head.decode("utf-8", "replace").splitlines()[0]],
                                 delimiter=sep, quotechar=opts.get("quote", '"')))
    except (csv.Error, TypeError, IndexError, StopIteration):
        return []
    renamed = [(h, c) for h, c in zip(header, df.columns) if h != c]
    if len(header) != len(df.columns) or not renamed:
        return []
    return ["Spark renamed columns of the CSV header (a repeated name, compared without "
            "case, gets its column index; an empty one _c<index>): "
            + ", ".join(f"'{h}' to '{c}'" for h, c in renamed[:10])
            + ("..." if len(renamed) > 10 else "") + "; the selection and its outputs use "
            "the new names"]


def _file_head(spark, uri: str, limit: int) -> bytes | None:
    """The first ``limit`` bytes of an input file (local, or through the session's Hadoop
    file system), or None."""
    if files.scheme_of(uri) in files.LOCAL_SCHEMES:
        try:
            with open(files.local_path(uri), "rb") as fh:
                return fh.read(limit)
        except OSError:
            return None
    try:
        jvm = spark.sparkContext._jvm
        p = jvm.org.apache.hadoop.fs.Path(uri)
        stream = p.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).open(p)
        try:
            bounded = jvm.org.apache.commons.io.input.BoundedInputStream(stream, limit)
            return bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(bounded))
        finally:
            stream.close()
    except Exception as exc:  # noqa: BLE001 - Connect, or unreadable: no warning then
        log.debug("cannot look at %s: %s", uri, one_line(exc))
        return None


def _select_and_write(args: argparse.Namespace, settings: Settings, spark, df, claimed,
                      notes: Sequence[str] = (), *, started: float,
                      previous: Previous) -> Outcome:
    """Select on ``df`` (the demo data when None) by ``settings`` and write the claimed
    outputs; ``notes`` are warnings about the input (logged, and in the report's
    ``warnings``)."""
    for note in notes:
        log.warning("%s", note)
    from .spark.select import run_selection
    from .synthetic import tree_model

    demo = df is None
    if demo:
        df = spark.createDataFrame(tree_model(args.demo_rows, seed=0))
    label = "y" if demo else args.label
    weight_col = None if demo else args.weight_col
    # Spark's reader where asked for, or where read options may change what is read;
    # else run_selection reads a plain Parquet scan (--input or a table) with pyarrow
    reader = "spark" if demo or args.reader == "spark" or args.read_option else "auto"
    settings = settings.replace(reader=reader)
    features, exclude = _columns(args.features), _columns(args.exclude)
    vector = None if demo else _vector_column(df, features)
    if vector is not None and (args.write_selected or args.output_table):
        raise InputError(f"--{'write-selected' if args.write_selected else 'output-table'} "
                         f"drops unselected feature columns, but --features '{vector}' is one "
                         "vector column: write its selected elements with VMISelectorModel."
                         "transform, or give feature columns")
    with _warnings_logged():  # as they come: before the steps they are about
        # the steps are counted and named from the run's own candidates and K
        if vector is not None:  # the estimator's route: a wide sparse vector's non-zeros
            report = _select_vector(df, label, vector, settings, exclude, weight_col)
        else:
            report = run_selection(df, label, settings, features=features, exclude=exclude,
                                   weight_col=weight_col, on_step=_log_step()).report()
    report["job_seconds"] = time.perf_counter() - started
    report["input"] = "demo: synthetic tree model" if demo else (args.input or args.table)
    report["format"] = None if demo else (args.format or (None if args.table else "parquet"))
    if demo:
        report["reader"] = None
    report["read_options"] = dict(args.read_option)
    report["warnings"] = [*notes, *report.get("warnings", [])]
    report["input_schema"] = changes.input_schema(
        [(f.name, f.dataType.simpleString()) for f in df.schema.fields])
    report["input_rows"] = (report["num_rows"] + report["rows_dropped"] + report["rows_skipped"]
                            + (report.get("weights") or {}).get("rows_zero_weight", 0))
    if getattr(args, "previous", None):
        earlier, reason = previous
        report["changes"] = changes.compare(earlier, report, args.previous, reason)
        if earlier is None:
            log.warning("--previous '%s' not compared: %s", args.previous, reason)
    if demo:
        print_summary(report)
    else:
        _write_outputs(spark, claimed, df, args, report)
        log_outcome(report, args.num_features if args.selection_mode == "numTopFeatures"
                    else None)
    return Outcome(report, _track(report, None if demo else args.output,
                                  getattr(args, "mlflow", False), args.quiet))


def _vector_column(df, features: list[str] | None) -> str | None:
    """The one vector column ``--features`` names (a Spark ML ``features`` vector), or
    None (feature columns)."""
    from .spark.plan import is_vector_type

    if features is None or len(features) != 1:
        return None
    field = next((f for f in df.schema.fields if f.name == features[0]), None)
    return features[0] if field is not None and is_vector_type(field.dataType) else None


def _select_vector(df, label: str, vector: str, settings, exclude: list[str] | None,
                   weight_col: str | None) -> SelectionReport:
    """The report of a selection of the elements of the vector column ``vector``: from its
    non-zeros when the estimator would read it so (the one route decision,
    :func:`vmi_spark.spark.sources.sparse_vectors.sparse_route`), else as the estimator's
    ``featuresCol``."""
    from .spark.select import run_selection
    from .spark.sources.sparse_vectors import sparse_route, sparse_selection

    if sparse_route(df, vector, settings, weight_col=weight_col, exclude=exclude):
        return sparse_selection(df, label, vector, settings, on_step=_log_step())
    return run_selection(df, label, settings, features_col=vector, exclude=exclude,
                         weight_col=weight_col, on_step=_log_step()).report()


def _columns(text: str | None) -> list[str] | None:
    """A comma-separated ``--features`` or ``--exclude`` as a list (None if not given)."""
    return [c.strip() for c in text.split(",")] if text else None


#: exit status with --mlflow when the selection was written but not logged to MLflow
TRACKING_FAILED_STATUS = 4


def _track(report: SelectionReport, report_dir: str | None, asked: bool,
           quiet: bool = False) -> str | None:
    """Log to MLflow with --mlflow or in an active run (bounded: :mod:`vmi_spark.tracking`).
    Returns why it failed with --mlflow (:func:`main` prints it as the job's error and exits
    :data:`TRACKING_FAILED_STATUS`; the selection is written by then), else None; without
    --mlflow (an active run) a failure is a log line."""
    from . import tracking

    if not asked and tracking.active_run() is None:
        return None
    if quiet:  # MLflow's own INFO lines (a new sqlite store's migrations)
        logging.getLogger("mlflow").setLevel(logging.WARNING)
    try:
        with tracking.bounded_http():  # and log_selection waits DEADLINE_SECONDS at most
            tracking.log_selection(report, report_dir)
    except Exception as exc:  # noqa: BLE001 - tracking is a side channel
        if asked:
            return flat(exc)
        log.error("could not log the selection to MLflow: %s", flat(exc))
    return None


def _table_location(spark, name: str) -> str | None:
    """The storage location of a catalog table, when ``DESCRIBE TABLE EXTENDED`` gives one."""
    try:
        if not spark.catalog.tableExists(name):
            return None  # read_input says so
        for row in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect():
            if (row[0] or "").strip() == "Location":
                return (row[1] or "").strip() or None
    except Exception as exc:  # noqa: BLE001 - a view, or no such table: read_input says so
        log.debug("no location for table %s: %s", name, exc)
    return None


def _write_outputs(spark, claimed: outputs.Claims, df, args: argparse.Namespace,
                   report: SelectionReport) -> None:
    """Write the report, the pruned input (--write-selected) and the --output-table.

    Everything goes to the claimed staging directories first (the pruned files with a
    :data:`~vmi_spark.outputs.SELECTED_MARKER`), then the table is written, and the staged
    directories are moved into place last, so a failure leaves no output behind.
    """
    out, sel = claimed.get("--output"), claimed.get("--write-selected")
    assert out is not None  # run() requires --output
    try:
        if sel is not None or args.output_table:
            if args.table:
                provider, parts = _table_layout(spark, args.table)
                fmt = provider if provider not in (None, "hive") else (args.format or "parquet")
            else:
                fmt, parts = args.format or "parquet", _path_partitions(df)
            pruned = _pruned(df, report, parts)
            report["pruned"] = {"columns": pruned.columns, "format": fmt, "partition_by": parts,
                                "path": args.write_selected, "table": args.output_table}
            if sel is not None:  # "errorifexists": not under Connect
                _writer(pruned, fmt, parts).mode("error").save(sel.payload)
                written = [rel for rel, kind in sel.fs.tree(sel.payload) if kind == "file"]
                sel.fs.write_text(sel.fs.join(sel.payload, outputs.SELECTED_MARKER),
                                  outputs.marker_text(report, written))
            if args.output_table:
                _writer(pruned, fmt, parts).mode("overwrite" if args.overwrite else "error") \
                    .saveAsTable(args.output_table)
                log.info("wrote table %s (%s)", args.output_table, ", ".join(pruned.columns))
        write_report(out.payload, report)
        out.commit()
        log.info("wrote %s", os.path.join(args.output, "selection.json"))
        if sel is not None:
            sel.commit()
            log.info("wrote %s (%s)", args.write_selected, ", ".join(report["pruned"]["columns"]))
    except Exception as exc:
        if _is_spark_error(exc):
            raise InputError(f"cannot write the pruned input: {one_line(exc)}") from exc
        raise


def print_summary(report: SelectionReport) -> None:
    print(f"VMI feature selection ({report['method']}) on {report['num_rows']} rows, "
          f"label '{report['label']}'")
    print(f"{'step':>4}  {'feature':<12} {'bound (nats)':>12}  block")
    for i, (name, score, block) in enumerate(zip(report["selected"], report["scores"],
                                                 report["blocks"]), 1):
        print(f"{i:>4}  {name:<12} {score:>12.6f}  {block}")
    if report.get("stopped_early"):
        print(f"stopped early: {report['stopped_early']}")


def log_outcome(report: SelectionReport, asked: int | None) -> None:
    """The job's closing lines, from the report it wrote: the features selected, and a
    warning when none was, or when a given K (``asked``) was not reached (the selection
    stopped early; a K capped at the candidates was warned of when it was capped, and a
    stop for want of information by the selection itself)."""
    sel, why = report["selected"], report.get("stopped_early")
    log.info("selected %d feature(s): %s", len(sel), ", ".join(sel) if sel else "none")
    if report.get("stop_reason") == "no_information":
        return
    if not sel:
        log.warning("no feature selected: %s", why or report.get("stop_reason"))
    elif asked is not None and why:
        log.warning("stopped early: %s (%d of the %d features asked for)", why, len(sel), asked)


class _StderrHandler(logging.StreamHandler):
    """Writes to the current ``sys.stderr`` (not the one at creation; tests swap it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def main(argv: Sequence[str] | None = None, spark=None) -> int:
    """Entry point; returns the exit status (0 ok, 2 bad input)."""
    verbose = argv is not None and "--verbose" in argv or argv is None and "--verbose" in sys.argv
    try:
        checked = check_args(build_parser().parse_args(argv))  # all of it before Spark starts
    except InputError as exc:
        print(f"select_features: error: {_message(exc)}", file=sys.stderr)
        return 2
    args = checked.args
    level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    if not any(isinstance(h, _StderrHandler) for h in log.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
    log.propagate = False  # our own handler prints; no duplicates through the root logger
    log.setLevel(level)
    t0 = time.perf_counter()
    previous: Previous = (None, "not read")
    if args.previous:  # read before anything is written (it may be this run's --output)
        try:
            previous = (changes.read_previous(args.previous), None)
        except changes.PreviousError as exc:
            previous = (None, str(exc))
    try:
        hints.check_format_name(args.format)
        if not (args.remote or "").startswith("sc://"):  # else the server's files
            hints.check_input_exists(args.input)
        request = output_request(args)  # one request: checked now, claimed by run
        outputs.check_before_spark(request)
        if args.input and not args.table:
            hints.check_format(args.input, args.format)
        if args.mlflow:  # a store MLflow refuses, known before Spark starts
            from .tracking import check_tracking_uri

            problem = check_tracking_uri()
            if problem is not None:
                raise InputError(problem)
        if spark is None:
            from ._deps import require_pyspark

            try:
                require_pyspark("select_features")
            except ImportError as exc:
                raise InputError(str(exc)) from None
            from pyspark.sql import SparkSession

            log.info("%s; starting Spark", _what(args))
            if args.output:  # the report's plot (the demo writes none)
                _warm_report_imports()

            if args.remote:
                from .spark.session import check_reachable, remote_session

                try:
                    if args.remote.startswith("sc://"):
                        check_reachable(args.remote)
                    spark = remote_session(args.remote, "vmi_spark select_features")
                except (ConnectionError, ValueError) as exc:
                    raise InputError(str(exc)) from None
                except ImportError as exc:
                    raise InputError(f"--remote needs the Spark Connect client "
                                     f"(pip install 'pyspark[connect]'): {exc}") from exc
            else:
                from .spark.session import job_confs, preset_log_level

                builder = SparkSession.builder.appName("vmi_spark select_features")
                for key, value in job_confs().items():
                    builder = builder.config(key, value)
                if not preset_log_level(_spark_log_level(args)):  # then after its INFO lines
                    builder = builder.config("spark.log.level", _spark_log_level(args))
                spark = builder.getOrCreate()
            _quiet_jvm_logs(spark, args)
            hints.check_worker_python(spark)
        outcome = run(checked, spark, started=t0, previous=previous, request=request)
    except InputError as exc:
        print(f"select_features: error: {_message(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # a Spark failure reading or scanning the input
        if verbose or not _is_spark_error(exc):
            raise
        print(f"select_features: error: {hints.explain(exc) or one_line(exc)}",
              file=sys.stderr)
        return 2
    log.debug("done in %.1fs", time.perf_counter() - t0)
    report, failed = outcome.report, outcome.tracking_error
    if failed is not None:  # the outputs are written; "nothing logged" is not a success
        print(f"select_features: error: --mlflow: the selection was written but not logged "
              f"to MLflow (exit status {TRACKING_FAILED_STATUS}): {failed}", file=sys.stderr)
    if args.fail_on_change and changes.changed(report.get("changes")):
        ch = report["changes"]
        log.warning("the selected features changed since --previous (entered: %s; left: %s); "
                    "exit status %d (--fail-on-change)", ", ".join(ch["entered"]) or "none",
                    ", ".join(ch["left"]) or "none", changes.CHANGED_STATUS)
        return TRACKING_FAILED_STATUS if failed is not None else changes.CHANGED_STATUS
    return TRACKING_FAILED_STATUS if failed is not None else 0


def cli() -> None:
    """Console script ``vmi-select`` (same as ``spark-submit jobs/select_features.py``)."""
    sys.exit(main())
