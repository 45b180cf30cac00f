"""The statistics pass's fused work on a few row groups, in one process, for an A/B of two
checkouts in turn (issue 46 item 2): ``ColumnStats`` over every column and the bin-edge
sample (Spark's xxhash64 over the label and the float columns, the kept rows packed per
chunk of columns) as ``BatchReader.column_stats`` runs them in a task.

Prints, per checkout and round: the first run (numba's cache loaded, memory first touched)
and a second (warm) in seconds, a digest of the sample's bytes (must be equal) and the load.

    .venv/bin/python benchmarks/fused_pass.py /tmp/vmi_tables/mixed_1m_1000.parquet \\
        --checkouts /tmp/old /work/main --groups 0,1 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

ONE = r"""
import hashlib, os, sys, time
root, path, groups = sys.argv[1], sys.argv[2], [int(g) for g in sys.argv[3].split(",")]
sys.path.insert(0, root)
import pyarrow as pa, pyarrow.parquet as pq
from vmi_spark.spark.sources import arrow_source as A
from vmi_spark.core.rows import ColumnStats
assert A.__file__.startswith(root), A.__file__
pf = pq.ParquetFile(path)
cols = pf.schema_arrow.names
feats = [c for c in cols if c != "label"]
units = tuple((0, g, pf.metadata.row_group(g).num_rows, 0) for g in groups)
read = A.read_fn(A.ParquetSource((path,), units, {c: "double" for c in cols}), ["label", *feats])
ub = [pa.record_batch([pa.array(list(range(len(groups))))], names=["u"])]
floats = [1 + j for j, c in enumerate(feats) if pf.schema_arrow.field(c).type == pa.float32()]
chunks = A._chunks(len(floats), None)
def fused():
    stats = ColumnStats(len(feats), 16, 32, False)
    sampler = A._Sampler(len(floats), 1 + len(floats), A._threshold(pf.metadata.num_rows),
                         False, None, chunks)
    for rb in read(ub):
        stats.add(rb)
        sampler.add(pa.RecordBatch.from_arrays(
            [rb.column(0), *(rb.column(j) for j in floats)],
            names=[f"_c{j}" for j in range(1 + len(floats))]))
    return b"".join(r.column("values")[0].as_py() for r in sampler.rows())
load = os.getloadavg()[0]
t = time.perf_counter(); fused(); first = time.perf_counter() - t
t = time.perf_counter(); out = fused(); warm = time.perf_counter() - t
print(f"{root}: first {first:.2f} s, warm {warm:.2f} s, sample {hashlib.sha256(out).hexdigest()[:12]}, load {load:.1f}")
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input")
    ap.add_argument("--checkouts", nargs="+", required=True)
    ap.add_argument("--groups", default="0,1")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    for _ in range(args.rounds):
        for root in args.checkouts:
            subprocess.run([sys.executable, "-c", ONE, os.path.abspath(root), args.input,
                            args.groups], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
