"""The spark-submit job: parse arguments, read, select, write ``selection.json``.

``jobs/select_features.py`` calls :func:`main`; tests call it directly.
Bad input ends with one line on stderr and exit status 2, and nothing written.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import warnings
from typing import Any, Sequence

from .errors import InputError

log = logging.getLogger("vmi_spark")

FORMATS = ("parquet", "csv", "orc", "json")
METHOD_CHOICES = ("vmi_naive", "vmi_pairwise", "mim", "mrmr", "jmi", "cmim", "cife", "spec_cmi")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too)
        raise InputError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="select_features.py",
                description="Select features with variational information maximisation "
                            "(VMI, Gao et al. NIPS 2016) on Spark. With no arguments, runs "
                            "a demo on the paper's synthetic tree model.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--input", help="input path (file or directory)")
    src.add_argument("--table", help="catalog table to read, e.g. db.t")
    p.add_argument("--format", default="parquet", choices=FORMATS,
                   help="input format (default parquet; csv is read with a header row)")
    p.add_argument("--label", help="label column")
    p.add_argument("--features", help="comma-separated feature columns (default: all but the label)")
    p.add_argument("--method", default="vmi_naive", choices=METHOD_CHOICES)
    p.add_argument("--num-features", type=int, default=None, help="K, features to select")
    p.add_argument("--output", help="output directory for selection.json")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output directory")
    p.add_argument("--restart-tolerance", type=float, default=0.0,
                   help="restart a block when the best gain is <= this (default 0.0; "
                        "the authors' program uses 0.01)")
    p.add_argument("--num-bins", type=int, default=10)
    p.add_argument("--max-categories", type=int, default=32)
    p.add_argument("--max-classes", type=int, default=1000)
    p.add_argument("--handle-invalid", default="keep", choices=("keep", "skip", "error"))
    p.add_argument("--report-candidates", type=int, default=0,
                   help="also report the best N candidates and their scores at each step")
    p.add_argument("--demo-rows", type=int, default=5000, help="rows of the demo data")
    p.add_argument("--quiet", action="store_true", help="only errors")
    p.add_argument("--verbose", action="store_true", help="debug logging and full tracebacks")
    return p


def _check_output(path: str, overwrite: bool) -> None:
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise InputError(f"output '{path}' exists and is not a directory")
        if os.listdir(path) and not overwrite:
            raise InputError(f"output directory '{path}' exists and is not empty "
                             "(use --overwrite to replace it)")


def write_report(path: str, report: dict[str, Any], overwrite: bool) -> None:
    """Write ``selection.json`` to a temporary directory, then move it into place."""
    parent = os.path.dirname(os.path.abspath(path)) or "."
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".vmi-tmp-", dir=parent)
    try:
        with open(os.path.join(tmp, "selection.json"), "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=2, ensure_ascii=False, allow_nan=False, default=str)
            fh.write("\n")
        from .report import plot_bounds, render_markdown

        with open(os.path.join(tmp, "report.md"), "w", encoding="utf-8") as fh:
            fh.write(render_markdown(report))
        try:
            plot_bounds(report, os.path.join(tmp, "bounds.png"))
        except ImportError:  # matplotlib is an optional extra: the job works without it
            log.info("matplotlib not installed: no bounds.png (pip install 'vmi_spark[plots]')")
        if os.path.exists(path):
            _check_output(path, overwrite)
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def read_input(spark, args: argparse.Namespace):
    """Read ``--input``/``--table`` with Spark; bad paths become :class:`InputError`."""
    try:
        if args.table:
            return spark.read.table(args.table)
        if not args.input:
            raise InputError("--input or --table is required (or give no arguments for the demo)")
        reader = spark.read.format(args.format)
        if args.format == "csv":
            reader = reader.option("header", "true").option("inferSchema", "true")
        df = reader.load(args.input)
        df.schema  # noqa: B018 - force schema resolution (missing path, unreadable file)
        return df
    except Exception as exc:
        if not _is_spark_error(exc):
            raise
        raise InputError(f"cannot read input '{args.input or args.table}': {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    """One line describing a (possibly Java) exception: its root cause's message."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            cause = java
            while cause.getCause() is not None:
                cause = cause.getCause()
            text = (cause.getMessage() or cause.toString()).strip().splitlines()
            if text:
                return text[0]
        except Exception:  # the JVM is gone: fall back to the Python text
            pass
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _is_spark_error(exc: BaseException) -> bool:
    from pyspark.errors import PySparkException

    return isinstance(exc, PySparkException) or type(exc).__module__.startswith("py4j")


def _quiet_jvm_logs(spark, verbose: bool) -> None:
    """Keep the console to this job's own lines unless --verbose (classic mode only)."""
    try:
        spark.sparkContext.setLogLevel("INFO" if verbose else "FATAL")
    except Exception:  # Spark Connect has no SparkContext; the server owns its logs
        pass


def _log_step(total: int):
    def on_step(sel) -> None:
        k = len(sel.selected)
        f = sel.selected[-1]
        elapsed = sum(sel.step_seconds)
        eta = elapsed / k * (total - k)
        log.info("step %d/%d: feature %d, bound %.6f, gain %.6f, block %d (%.2fs, elapsed %.1fs, eta %.1fs)",
                 k, total, f, sel.scores[-1], sel.gains[-1], sel.blocks[-1], sel.step_seconds[-1],
                 elapsed, eta)
    return on_step


def run(args: argparse.Namespace, spark) -> dict[str, Any]:
    """Run the job for parsed ``args`` on ``spark``; returns the report."""
    from .spark.select import run_selection
    from .synthetic import tree_model

    demo = not (args.input or args.table)
    if demo and (args.label or args.output):
        raise InputError("--input or --table is required")
    if demo:
        df = spark.createDataFrame(tree_model(args.demo_rows, seed=0))
        label, k = "y", args.num_features or 9
    else:
        if not args.label:
            raise InputError("--label is required")
        if not args.output:
            raise InputError("--output is required")
        _check_output(args.output, args.overwrite)
        df = read_input(spark, args)
        label, k = args.label, args.num_features if args.num_features is not None else 50
    features = [c.strip() for c in args.features.split(",")] if args.features else None
    if features is not None and any(not c for c in features):
        raise InputError("--features has an empty column name")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_selection(df, label, features=features, method=args.method, num_features=k,
                               restart_tolerance=args.restart_tolerance, num_bins=args.num_bins,
                               max_categories=args.max_categories, max_classes=args.max_classes,
                               handle_invalid=args.handle_invalid,
                               report_candidates=args.report_candidates, on_step=_log_step(k))
    for w in caught:
        log.warning("%s", w.message)
    report = result.report()
    report["input"] = "demo: synthetic tree model" if demo else (args.input or args.table)
    report["format"] = None if demo else args.format
    if demo:
        print_summary(report)
    else:
        write_report(args.output, report, args.overwrite)
        log.info("wrote %s", os.path.join(args.output, "selection.json"))
    return report


def print_summary(report: dict[str, Any]) -> None:
    print(f"VMI feature selection ({report['method']}) on {report['num_rows']} rows, "
          f"label '{report['label']}'")
    print(f"{'step':>4}  {'feature':<12} {'bound (nats)':>12}  block")
    for i, (name, score, block) in enumerate(zip(report["selected"], report["scores"],
                                                 report["blocks"]), 1):
        print(f"{i:>4}  {name:<12} {score:>12.6f}  {block}")
    if report.get("stopped_early"):
        print(f"stopped early: {report['stopped_early']}")


def main(argv: Sequence[str] | None = None, spark=None) -> int:
    """Entry point; returns the exit status (0 ok, 2 bad input)."""
    verbose = argv is not None and "--verbose" in argv or argv is None and "--verbose" in sys.argv
    try:
        args = build_parser().parse_args(argv)
    except InputError as exc:
        print(f"select_features: error: {exc}", file=sys.stderr)
        return 2
    level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
        log.propagate = False
    log.setLevel(level)
    t0 = time.perf_counter()
    try:
        if spark is None:
            from pyspark.sql import SparkSession

            spark = SparkSession.builder.appName("vmi_spark select_features").getOrCreate()
            _quiet_jvm_logs(spark, args.verbose)
        run(args, spark)
    except InputError as exc:
        print(f"select_features: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a Spark failure reading or scanning the input
        if verbose or not _is_spark_error(exc):
            raise
        print(f"select_features: error: {_first_line(exc)}", file=sys.stderr)
        return 2
    log.debug("done in %.1fs", time.perf_counter() - t0)
    return 0


def cli() -> None:
    """Console script ``vmi-select`` (same as ``spark-submit jobs/select_features.py``)."""
    sys.exit(main())
