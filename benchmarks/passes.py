"""The statistics and encoding passes over a wide table, in one process (issue 21, target 3).

What a task of ``run_selection`` does with the rows before the selection, without Spark's
scheduling around it: the driver's look at a first batch (``_sure_binned``), the
statistics pass (``column_stats_fn`` over ``read_chunks``) and the encoding pass
(``chunk_encoder`` over ``read_chunks``), each over every row group of the table in this
process, for the Parquet columns (``ParquetReader``) and the vector column
(``ParquetVectorReader``) of the tables ``wide.py --data DIR`` wrote (written here if
missing). Seconds per pass; ``--profile`` prints the top functions of each pass. Both
kinds must give the same blocks (checked). The load average is recorded.

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python benchmarks/passes.py \\
        --data /tmp/wide-data --dims 30000 --out benchmarks/results/s17_passes.json
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def _timed(fn, profile: bool):
    """(seconds, result, profile text) of ``fn()`` (``run.timed``, under cProfile if asked)."""
    from run import timed

    if not profile:
        return (*timed(fn), "")
    prof = cProfile.Profile()
    took, out = timed(prof.runcall, fn)
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(8)
    return took, out, s.getvalue()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--dims", type=int, nargs="+", default=[30000])
    ap.add_argument("--kinds", nargs="+", default=["columns", "vector"],
                    choices=["columns", "vector"])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--data", required=True, help="wide.py's --data directory")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    import pyarrow as pa
    from pyspark.sql import SparkSession

    import wide
    from run import save
    from vmi_spark.spark.sources.arrow_source import ParquetReader, parquet_source
    from vmi_spark.spark.chunks.codes import chunk_encoder
    from vmi_spark.spark.plan import build_plan
    from vmi_spark.core.rows import column_stats_fn, merge_stats
    from vmi_spark.spark.sources.vector_source import ParquetVectorReader

    for d in args.dims:  # the tables, as wide.py writes them (a Spark job of its own)
        wide.main(["--rows", str(args.rows), "--dims", str(d), "--kinds", *args.kinds,
                   "--data", args.data, "--tables-only"])
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .getOrCreate())
    res = {"rows": args.rows, "load_start": round(os.getloadavg()[0], 2), "runs": []}
    try:
        for d in args.dims:
            cols = spark.read.parquet(os.path.join(args.data, f"cols{args.rows}x{d}.parquet"))
            names = [c for c in cols.columns if c != "label"]
            readers = {"columns": lambda: ParquetReader(
                spark, parquet_source(cols, cols.columns), 2, presample=(32, "quantile"))}
            if "vector" in args.kinds:
                vec = spark.read.parquet(os.path.join(args.data, f"vec{args.rows}x{d}.parquet"))
                readers["vector"] = lambda: ParquetVectorReader(
                    vec, "label", "features", names, 2,
                    parquet_source(vec, ["label", "features"]), presample=(32, "quantile"))
            plan = None
            blocks: dict[str, list] = {}
            for _ in range(args.reps):
                for kind in args.kinds:
                    reader = readers[kind]()
                    units = [pa.RecordBatch.from_pydict(
                        {"id": pa.array(range(len(reader.source.units)), pa.int64())})]
                    look, _, _ = _timed(lambda: reader._sure_binned("label", names, 64), False)
                    stats = column_stats_fn(len(names), 64, 1000, False, chunks=True)
                    read = reader.read_chunks(["label", *names])
                    st, out, st_prof = _timed(lambda: list(stats(read(iter(units)))),
                                              args.profile)
                    if plan is None:
                        merged = merge_stats([json.loads(out[0].column(0)[0].as_py())],
                                             len(names), 64, 1000)

                        class Known:  # the statistics just counted
                            def column_stats(self, *a, **k):
                                return merged
                        plan, _ = build_plan(cols.schema, "label", names, 32, 64, 1000,
                                             "keep", Known())
                    encode = chunk_encoder(plan, 512, chunks=True)
                    read = reader.read_chunks(["label", *names])
                    et, got, et_prof = _timed(lambda: list(encode(read(iter(units)))),
                                              args.profile)
                    got = [(rb.column("n")[0].as_py(), rb.column("codes")[0].as_py())
                           for rb in got]
                    blocks.setdefault(kind, got)
                    assert got == blocks[kind] == next(iter(blocks.values())), \
                        f"{kind}: other blocks"
                    cells = args.rows * d
                    row = {"d": d, "kind": kind, "look_s": round(look, 3),
                           "statistics_s": round(st, 3), "encode_s": round(et, 3),
                           "statistics_ns_per_cell": round(st / cells * 1e9, 2),
                           "encode_ns_per_cell": round(et / cells * 1e9, 2),
                           "load": round(os.getloadavg()[0], 2)}
                    res["runs"].append(row)
                    print(json.dumps(row), flush=True)
                    if args.profile:
                        print(st_prof, et_prof, flush=True)
    finally:
        spark.stop()
    res["load_end"] = round(os.getloadavg()[0], 2)
    save(res, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
