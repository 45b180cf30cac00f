"""What one read of the input could save (issue 46 item 2), measured per row group in one
process with the pyarrow reader's own functions.

Today the pyarrow reader reads every column twice: the statistics pass (with the fused
bin-edge sample) and the encoding pass. The one-read design keeps, in the first pass,
each categorical column's cells as provisional one-byte codes (a partition-local
dictionary) and remaps them to the final codes after the plan; only the columns binned
by quantiles (many values) are read again. For each of the first ``--groups`` row groups
of a table, in turn, ``--reps`` times (the minimum kept):

* ``read_all``, ``read_binned``, ``read_coded``: :func:`~vmi_spark.spark.sources.arrow_source.read_group`
  of every column, of the label and the binned (floating) columns, of the label and the
  coded (integer) columns: the second read today, and what the design would still read;
* ``encode_binned``: the binned columns' codes (ten equal-frequency bins of the group's
  values; the same work in both designs);
* ``encode_coded``: the coded columns' final codes from their values
  (:func:`~vmi_spark.core.encoding.encode_column`, as the encoding pass does), and
  ``provisional``: the design's first-pass work on them, the local dictionary codes
  (each column's values minus its minimum, through a small table), and ``remap``: the
  codes after the plan (``remap_tables``: a 256-entry table per column, made per row
  group here, once per partition in the design; ``remap``: one gather a column);
* ``kept_mb``: the provisional codes the design keeps per row group (one byte a coded cell).

The saving on the second pass is ``read_all - read_binned + encode_coded - remap``; its
price is ``provisional`` in the first pass plus keeping ``kept_mb`` between the passes.

    .venv/bin/python benchmarks/one_read.py /tmp/vmi_tables/mixed_1m_1000.parquet \\
        /tmp/vmi_tables/coded_5m_100.parquet --out benchmarks/results/s46_one_read.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def best(fn, reps: int) -> tuple[float, object]:
    """(minimum seconds over ``reps`` calls, the last result)."""
    out, secs = None, []
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        secs.append(time.perf_counter() - t)
    return min(secs), out


def provisional(values):
    """(codes, values): a column's local one-byte codes and the values they stand for.
    One-byte integers are their own codes (their bit patterns); wider integers whose span
    is at most 256 their offset from the minimum; others a dictionary of their values."""
    import numpy as np

    if values.dtype.itemsize == 1:
        return values.view(np.uint8), np.arange(256, dtype=np.uint8).view(values.dtype)
    lo, hi = int(values.min()), int(values.max())
    if hi - lo < 256:
        return (values - values.dtype.type(lo)).astype(np.uint8), np.arange(lo, hi + 1)
    distinct, codes = np.unique(values, return_inverse=True)  # at most 256 (checked)
    return codes.astype(np.uint8), distinct


def one_group(pf, g: int, binned: list[str], coded: list[str], reps: int) -> dict:
    import numpy as np
    import pyarrow as pa

    from vmi_spark.core.encoding import binned_plan, categorical_plan, encode_column
    from vmi_spark.spark.sources.arrow_source import read_group

    label = ["label"]
    row: dict = {"group": g, "rows": pf.metadata.row_group(g).num_rows}
    row["read_all"], _ = best(lambda: read_group(pf, g, label + binned + coded), reps)
    row["read_binned"], wide = best(lambda: read_group(pf, g, label + binned), reps)
    if binned:  # ten equal-frequency bins of the group's own values
        vals = [wide.column(c).combine_chunks() for c in binned]
        bplans = [binned_plan(c, np.quantile(a.to_numpy(), np.arange(1, 10) / 10).tolist(),
                              False) for c, a in zip(binned, vals)]
        row["encode_binned"], _ = best(
            lambda: [encode_column(a, p) for a, p in zip(vals, bplans)], reps)
    else:
        row["encode_binned"] = 0.0
    row["read_coded"], table = best(lambda: read_group(pf, g, label + coded), reps)
    cols = [table.column(c).combine_chunks() for c in coded]
    plans = [categorical_plan(c, "double", sorted(set(np.unique(a.to_numpy()).tolist())),
                              False, 256) for c, a in zip(coded, cols)]
    row["encode_coded"], final = best(
        lambda: [encode_column(a, p) for a, p in zip(cols, plans)], reps)
    row["provisional"], prov = best(lambda: [provisional(a.to_numpy()) for a in cols], reps)

    def tables():  # made once per (partition, column) in the design: here per group
        out = []
        for (_, values), p in zip(prov, plans):
            table = np.zeros(256, dtype=np.uint8)  # local code -> final code
            table[:len(values)] = encode_column(pa.array(values.astype(np.float64)), p)
            out.append(table)
        return out
    row["remap_tables"], remap_tables = best(tables, reps)
    row["remap"], remapped = best(
        lambda: [t[codes] for t, (codes, _) in zip(remap_tables, prov)], reps)
    if not all(np.array_equal(a, b) for a, b in zip(final, remapped)):
        raise AssertionError(f"group {g}: the remapped codes differ from the encoded ones")
    row["kept_mb"] = round(sum(c.nbytes for c, _ in prov) / 2**20, 1)
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tables", nargs="+")
    ap.add_argument("--groups", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    import pyarrow as pa
    import pyarrow.parquet as pq

    res: dict = {"what": __doc__.splitlines()[0],
                 "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                 "load_before": os.getloadavg()[0], "tables": []}
    for path in args.tables:
        pf = pq.ParquetFile(path)
        fields = [f for f in pf.schema_arrow if f.name != "label"]
        binned = [f.name for f in fields if pa.types.is_floating(f.type)]
        coded = [f.name for f in fields if pa.types.is_integer(f.type)]
        groups = [one_group(pf, g, binned, coded, args.reps)
                  for g in range(min(args.groups, pf.num_row_groups))]
        share = pf.metadata.num_rows / sum(r["rows"] for r in groups)
        whole = {k: round(sum(r[k] for r in groups) * share, 2)
                 for k in ("read_all", "read_binned", "read_coded", "encode_binned", "encode_coded",
                           "provisional", "remap_tables", "remap", "kept_mb")}
        saved = whole["read_all"] - whole["read_binned"] + whole["encode_coded"] - whole["remap"]
        entry = {"path": os.path.basename(path), "rows": pf.metadata.num_rows,
                 "binned_cols": len(binned), "coded_cols": len(coded),
                 "row_groups": pf.num_row_groups, "groups": groups,
                 "whole_file_one_core": whole,
                 "second_pass_saved_one_core": round(saved, 2),
                 "first_pass_added_one_core": whole["provisional"]}
        res["tables"].append(entry)
        print(json.dumps({k: v for k, v in entry.items() if k != "groups"}), flush=True)
    res["load_after"] = os.getloadavg()[0]
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
