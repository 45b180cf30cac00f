"""Where the encoding pass's time goes in Spark (issue 46 item 2): what one read of the
input could save, measured on the job's own route, plan and partitions.

One ``local[2]`` session with spark-submit's defaults (1g driver, the job's
``spark.serializer.objectStreamReset=1``) per table; the job's route, plan (its statistics
pass, fused bin-edge sample) and execution route are made once, then in turn, ``--reps``
times each, over the same evened partitions (``RowSource.evened(parts)``):

* ``encode_cache``: the encoding pass as the job runs it: encoded and kept (cached, on
  disk when the blocks pass half the block manager's memory) and released;
* ``encode_noop``: the same blocks written to Spark's ``noop`` sink (no cache);
* ``read_all``: the same tasks reading every column of the rows and yielding nothing;
* ``read_binned``: reading only the label and the columns the plan bins by quantiles:
  what the one-read design would still read a second time.

``read_all - read_binned`` is the most a bit-identical one-read design saves on the
second pass (the decode of the coded columns); it still pays the rest (encoding, the
blocks into the cache) once.

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python benchmarks/one_read_spark.py \\
        /tmp/vmi_tables/mixed_1m_1000.parquet --out benchmarks/results/s46_one_read_spark.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def timed(fn) -> dict:
    load = os.getloadavg()[0]
    t = time.perf_counter()
    fn()
    return {"seconds": round(time.perf_counter() - t, 2), "load_before": load,
            "load_after": os.getloadavg()[0]}


def one_table(spark, path: str, reps: int) -> dict:
    from pyspark import StorageLevel

    from vmi_spark.params import Settings
    from vmi_spark.spark import routes as R
    from vmi_spark.spark import select as S
    from vmi_spark.spark.chunks.memory import cache_level
    from vmi_spark.spark.chunks.storage import batch_rows, cache_batch_rows, keep
    from vmi_spark.spark.columns import resolve

    settings = Settings.of({}, "python")
    df = spark.read.parquet(path)
    phases = S.Phases()
    route = R.choose_rows(resolve(df, "label"), None, settings)
    planned = S._plan(route, settings, phases)  # noqa: SLF001 (the job's own plan)
    plan, skip = planned.plan, planned.skip_cols
    ex = R.choose_execution(plan, route, settings)
    d = len(route.features)
    binned = [c.name for c in plan.columns if c.kind == "bins"]
    notes: list[str] = []
    level = cache_level(spark, StorageLevel.MEMORY_AND_DISK, plan.num_rows * (d + 2),
                        ex.parts, notes)
    out: dict = {"path": os.path.basename(path), "rows": plan.num_rows, "features": d,
                 "binned": len(binned), "parts": ex.parts, "block_rows": ex.chunk_rows,
                 "reader": route.read_by, "cache": "disk" if not level.useMemory else "memory",
                 "plan_phases": {k: round(v, 2) for k, v in phases.items()}, "runs": []}
    source = route.source
    cap = ex.disk_cap if level.useDisk else None

    def reader(cols):
        even = source.evened(ex.parts)
        read = even.read_chunks(cols)

        def fn(batches):
            for _ in read(batches):
                pass
            return iter(())
        return even.frame(ex.parts).mapInArrow(fn, "x int")

    def encoded():
        return source.evened(ex.parts).encode_chunks(plan, ex.chunk_rows, skip,
                                                    partitions=ex.parts)

    def encode_cache():
        keep(encoded(), level, "auto", None).release()

    def noop(frame):
        frame.write.format("noop").mode("overwrite").save()

    variants = {
        "encode_cache": encode_cache,
        "encode_noop": lambda: noop(encoded()),
        "read_all": lambda: noop(reader(["label", *route.features])),
        "read_binned": lambda: noop(reader(["label", *binned])),
    }
    with batch_rows(spark, cache_batch_rows(ex.chunk_rows * (d + 2), cap)), source.reading():
        for rep in range(reps):
            for name, fn in variants.items():
                row = {"variant": name, "rep": rep, **timed(fn)}
                out["runs"].append(row)
                print(json.dumps(row), flush=True)
    out["median"] = {name: sorted(r["seconds"] for r in out["runs"]
                                  if r["variant"] == name)[reps // 2] for name in variants}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tables", nargs="+")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    from pyspark.sql import SparkSession

    res: dict = {"what": __doc__.splitlines()[0],
                 "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                 "tables": []}
    for path in args.tables:
        spark = (SparkSession.builder.master("local[2]")
                 .config("spark.ui.enabled", "false")
                 .config("spark.serializer.objectStreamReset", "1").getOrCreate())
        try:
            entry = one_table(spark, path, args.reps)
        finally:
            spark.stop()
        res["tables"].append(entry)
        print(json.dumps({k: v for k, v in entry.items() if k != "runs"}), flush=True)
        if args.out:
            with open(args.out, "w") as fh:
                json.dump(res, fh, indent=1)
    res["finished_utc"] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
