"""The statistics pass of one task over a wide Parquet table, in one process (issue 21,
target 3): how a row group is decoded decides most of its cost.

For each D, a 20k-row table of 8-state int32 columns in 4,096-row groups is written once;
then the pass (``ColumnStats`` over typed batches, as a task runs it) reads it three ways,
in turn, ``--reps`` times each:

* ``whole``: every row group in one ``read_row_group`` call (the reader before session 16);
* ``joined``: :func:`~vmi_spark.spark.sources.arrow_source.read_group`, ``READ_CELLS`` at a time,
  the chunks joined into one batch again (what a pass with ``handleInvalid=skip`` reads);
* ``chunks``: :func:`~vmi_spark.spark.sources.arrow_source.read_fn` with ``chunk_cells``, each
  chunk counted before the next is decoded (the statistics pass and the encoder otherwise).

Nanoseconds per cell of the read alone and of the whole pass; all three must give the
same statistics (checked). The load average is recorded.

    .venv/bin/python benchmarks/read_chunks.py --dims 10000 30000 --out benchmarks/results/s16_read_chunks.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))


def one_pass(path: str, how: str) -> tuple[float, float, dict]:
    """(read seconds, pass seconds, statistics) of one pass over ``path``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vmi_spark.spark.sources import arrow_source as A
    from vmi_spark.core.rows import ColumnStats, feature_array, typed_array

    pf = pq.ParquetFile(path)
    columns = ["label"] + [c for c in pf.schema_arrow.names if c != "label"]
    d = len(columns) - 1
    stats = ColumnStats(d, 64, 1000, False)
    if how == "whole":
        def items():
            for g in range(pf.num_row_groups):
                rb = pf.read_row_group(g, columns=columns, use_threads=False).to_batches()[0]
                yield 0, pa.RecordBatch.from_arrays(
                    [typed_array(rb.column(0), "double"),
                     *(feature_array(rb.column(j), "double") for j in range(1, d + 1))],
                    names=[f"_c{j}" for j in range(d + 1)])
    else:
        units = tuple((0, g, pf.metadata.row_group(g).num_rows, 0)
                      for g in range(pf.num_row_groups))
        source = A.ParquetSource(("file://" + path,), units, dict.fromkeys(columns, "double"))
        asked = [pa.RecordBatch.from_pydict({"id": pa.array(range(len(units)), pa.int64())})]
        chunked = how == "chunks"
        read = A.read_fn(source, columns, A.READ_CELLS if chunked else None)

        def items():
            for item in read(iter(asked)):
                yield item if chunked else (0, item)
    it, read_s = items(), 0.0
    start = time.perf_counter()
    while True:
        t = time.perf_counter()
        item = next(it, None)
        read_s += time.perf_counter() - t
        if item is None:
            break
        stats.add(item[1], item[0])
    total = time.perf_counter() - start
    out = json.loads(stats.json())
    out["values"] = [None if v is None else sorted(v) for v in out["values"]]
    return read_s, total, out


WRITE = """
import sys
sys.path.insert(0, sys.argv[1])
from data import make_table, write_coded_parquet
codes, y = make_table(int(sys.argv[2]), int(sys.argv[3]), seed=int(sys.argv[3]))
write_coded_parquet(sys.argv[4], codes, y, row_group=4096)
"""


def main(argv=None) -> int:
    import subprocess

    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--dims", type=int, nargs="+", default=[10000, 30000])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    from run import save

    res = {"rows": args.rows, "load_start": round(os.getloadavg()[0], 2), "runs": []}
    with tempfile.TemporaryDirectory(prefix="read-chunks-") as tmp:
        for d in args.dims:
            path = os.path.join(tmp, f"cols{d}.parquet")
            subprocess.run([sys.executable, "-c", WRITE, HERE, str(args.rows), str(d), path],
                           check=True)
            first = None
            for _ in range(args.reps):
                for how in ("whole", "joined", "chunks"):
                    read_s, total, stats = one_pass(path, how)
                    if first is None:
                        first = stats
                    assert stats == first, f"{how} gave other statistics"
                    cells = d * args.rows
                    row = {"d": d, "how": how, "read_ns_per_cell": round(read_s / cells * 1e9, 2),
                           "pass_ns_per_cell": round(total / cells * 1e9, 2),
                           "load": round(os.getloadavg()[0], 2)}
                    res["runs"].append(row)
                    print(json.dumps(row), flush=True)
    res["load_end"] = round(os.getloadavg()[0], 2)
    save(res, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
