"""Synthetic discrete tables for the benchmarks: N rows x D features, S states, 2 classes.

Codes are stored feature-major, ``codes`` (D, N) uint8 (the layout of the encoded
blocks), and the label ``y`` (N,) uint16. The first ``informative`` features depend
on the label (a class-dependent shift of the state with noise), the rest are noise,
so a selection has something to find and the posteriors become non-trivial.

    python benchmarks/data.py --rows 200000 --features 100 --states 8 --out /tmp/vmi_data
"""

from __future__ import annotations

import argparse
import os

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
        shift = (1 + i % max(1, states - 1))
        clean = (rng.integers(0, max(1, states // 2), size=rows) + y.astype(np.int64) * shift) % states
        keep = rng.random(rows) >= noise * (1 + i / (2 * k))
        codes[i] = np.where(keep, clean, codes[i]).astype(np.uint8)
    return codes, y


def save_numpy(path: str, codes: np.ndarray, y: np.ndarray) -> None:
    os.makedirs(path, exist_ok=True)
    np.save(os.path.join(path, "codes.npy"), codes)
    np.save(os.path.join(path, "y.npy"), y)


def load_numpy(path: str) -> tuple[np.ndarray, np.ndarray]:
    return np.load(os.path.join(path, "codes.npy")), np.load(os.path.join(path, "y.npy"))


def save_parquet(path: str, codes: np.ndarray, y: np.ndarray, row_group: int = 65536) -> None:
    """Row-major parquet, one int8-coded column per feature (f0..f{D-1}) plus ``label``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = {f"f{i}": pa.array(codes[i].astype(np.int32)) for i in range(codes.shape[0])}
    cols["label"] = pa.array(y.astype(np.int32))
    pq.write_table(pa.table(cols), path, row_group_size=row_group)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--features", type=int, default=100)
    ap.add_argument("--states", type=int, default=8)
    ap.add_argument("--informative", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="directory for codes.npy / y.npy")
    ap.add_argument("--parquet", action="store_true", help="also write <out>/table.parquet")
    a = ap.parse_args(argv)
    codes, y = make_table(a.rows, a.features, a.states, a.informative, seed=a.seed)
    save_numpy(a.out, codes, y)
    if a.parquet:
        save_parquet(os.path.join(a.out, "table.parquet"), codes, y)
    print(f"wrote {a.out}: codes {codes.shape} uint8, y {y.shape}, classes {np.bincount(y).tolist()}")


if __name__ == "__main__":
    main()
