"""Synthetic tables for the benchmarks (issue 5).

* :func:`make_table` - N rows x D discrete features with S states and 2 classes, stored
  feature-major (``codes`` (D, N) uint8, the layout of the encoded blocks) with ``y`` (N,)
  uint16. The first ``informative`` features depend on the label, the rest are noise.
* :func:`write_coded_parquet` - the same table as Parquet (int32 columns ``f0..``, ``label``).
* :func:`write_jittered_parquet` - the same table made continuous (float64, code + noise).
* :func:`write_mixed_parquet` - the end-to-end table of the issue: half continuous float32,
  half small-integer categorical (int8) columns, binary label; written row group by row
  group so that 1M x 1,000 never sits in memory at once.

    python benchmarks/data.py --rows 1000000 --features 1000 --mixed --out /tmp/vmi_e2e.parquet
"""

from __future__ import annotations

import argparse

import numpy as np


def make_table(rows: int, features: int, states: int = 8, informative: int = 10,
               noise: float = 0.6, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(codes (D, N) uint8, y (N,) uint16) with ``informative`` label-dependent features."""
    if not 2 <= states <= 256:
        raise ValueError("states must be in [2, 256]")
    rng = np.random.default_rng(seed)
    y = (rng.random(rows) < 0.5).astype(np.uint16)
    codes = rng.integers(0, states, size=(features, rows), dtype=np.uint8)
    k = min(informative, features)
    for i in range(k):
        # a latent per-row state that depends on y, observed through noise
        shift = 1 + i % max(1, states - 1)
        clean = (rng.integers(0, max(1, states // 2), size=rows) + y.astype(np.int64) * shift) % states
        keep = rng.random(rows) >= noise * (1 + i / (2 * k))
        codes[i] = np.where(keep, clean, codes[i]).astype(np.uint8)
    return codes, y


def arrow_table(codes: np.ndarray, y: np.ndarray):
    """Row-major Arrow table: int32 columns ``f0..f{D-1}`` and ``label``."""
    import pyarrow as pa

    cols = {"label": pa.array(y.astype(np.int32))}
    cols.update({f"f{i}": pa.array(codes[i].astype(np.int32)) for i in range(codes.shape[0])})
    return pa.table(cols)


def write_coded_parquet(path: str, codes: np.ndarray, y: np.ndarray, row_group: int = 65536) -> None:
    import pyarrow.parquet as pq

    pq.write_table(arrow_table(codes, y), path, row_group_size=row_group)


def write_jittered_parquet(path: str, codes: np.ndarray, y: np.ndarray, row_group: int = 65536,
                           seed: int = 0) -> None:
    """The table of :func:`make_table` made continuous: float64 columns ``f0..`` holding each
    code plus uniform [0, 1) noise (the codes are the values' floors), int32 ``label``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng([seed, 1])
    cols = {"label": pa.array(y.astype(np.int32))}
    cols.update({f"f{i}": pa.array(codes[i] + rng.random(codes.shape[1]))
                 for i in range(codes.shape[0])})
    pq.write_table(pa.table(cols), path, row_group_size=row_group)


def write_mixed_parquet(path: str, rows: int, features: int, informative: int = 20,
                        categories: int = 8, row_group: int = 131072, seed: int = 0) -> None:
    """Half float32 continuous (``c0..``), half int8 categorical (``k0..``), int32 ``label``.

    The first ``informative // 2`` columns of each kind depend on the label.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    n_cont = features // 2
    n_cat = features - n_cont
    half = informative // 2
    schema = pa.schema([("label", pa.int32())]
                       + [(f"c{i}", pa.float32()) for i in range(n_cont)]
                       + [(f"k{i}", pa.int8()) for i in range(n_cat)])
    with pq.ParquetWriter(path, schema) as writer:
        for g, start in enumerate(range(0, rows, row_group)):
            n = min(row_group, rows - start)
            rng = np.random.default_rng([seed, g])
            y = (rng.random(n) < 0.5).astype(np.int32)
            cont = rng.standard_normal((n_cont, n), dtype=np.float32)
            for i in range(min(half, n_cont)):
                cont[i] += np.float32(0.3 + 0.05 * i) * y
            cat = rng.integers(0, categories, size=(n_cat, n), dtype=np.int8)
            for i in range(min(half, n_cat)):
                keep = rng.random(n) < 0.3
                cat[i] = np.where(keep, (y * (1 + i % (categories - 1))) % categories, cat[i])
            arrays = ([pa.array(y)] + [pa.array(cont[i]) for i in range(n_cont)]
                      + [pa.array(cat[i]) for i in range(n_cat)])
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--features", type=int, default=100)
    ap.add_argument("--states", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mixed", action="store_true", help="the mixed float32/int8 end-to-end table")
    ap.add_argument("--out", required=True, help="parquet file to write")
    a = ap.parse_args(argv)
    if a.mixed:
        write_mixed_parquet(a.out, a.rows, a.features, seed=a.seed)
    else:
        codes, y = make_table(a.rows, a.features, a.states, seed=a.seed)
        write_coded_parquet(a.out, codes, y)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
