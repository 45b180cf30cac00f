"""Spark's ``xxhash64`` SQL function in numpy, for the rows the plan samples.

The encoding plan places bin edges on a sample of rows chosen by
``pmod(xxhash64(label, c1, c2, ...), 2**30) < threshold`` over the typed columns
(:meth:`vmi_spark.spark.spark_source.SparkSource.quantile_splits`). The Parquet fast path
(:mod:`vmi_spark.spark.arrow_source`) reads rows in the Python workers and must keep
exactly the same rows, so it computes the same hash here: XXH64 as Spark implements it
(``org.apache.spark.sql.catalyst.expressions.XXH64``), chained over the columns with
seed 42; a null leaves the running hash unchanged, a double is hashed as
``doubleToLongBits`` (every NaN as the canonical NaN, -0.0 as 0.0), a string as its
UTF-8 bytes. ``tests/test_arrow_source.py`` checks it against Spark's own function.
"""

from __future__ import annotations

import numpy as np

#: Spark's seed for ``xxhash64``
SEED = 42
_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)
_MASK = (1 << 64) - 1
_CANONICAL_NAN = np.uint64(0x7FF8000000000000)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _fmix(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(33))
    h = h * _P2
    h = h ^ (h >> np.uint64(29))
    h = h * _P3
    return h ^ (h >> np.uint64(32))


def hash_doubles(values: np.ndarray, valid: np.ndarray | None, seed: np.ndarray) -> np.ndarray:
    """``XXH64.hashLong(doubleToLongBits(v), seed)`` per row; rows not ``valid`` keep ``seed``.

    ``values`` float64, ``seed`` uint64, both (n,); returns uint64 (n,).
    """
    with np.errstate(over="ignore"):
        v = np.where(values == 0.0, 0.0, values)  # -0.0 hashes as 0.0
        bits = v.view(np.uint64).copy()
        bits[np.isnan(v)] = _CANONICAL_NAN
        h = seed + _P5 + np.uint64(8)
        h = h ^ (_rotl(bits * _P2, 31) * _P1)
        h = _rotl(h, 27) * _P1 + _P4
        h = _fmix(h)
    if valid is not None:
        h = np.where(valid, h, seed)
    return h


def _rotl_int(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK


def hash_bytes(data: bytes, seed: int) -> int:
    """``XXH64.hashUnsafeBytes`` of ``data`` with ``seed`` (unsigned 64-bit integers)."""
    p1, p2, p3, p4, p5 = (int(p) for p in (_P1, _P2, _P3, _P4, _P5))
    n = len(data)
    off = 0
    if n >= 32:
        v1 = (seed + p1 + p2) & _MASK
        v2 = (seed + p2) & _MASK
        v3 = seed
        v4 = (seed - p1) & _MASK
        while off <= n - 32:
            lanes = [int.from_bytes(data[off + 8 * i: off + 8 * i + 8], "little") for i in range(4)]
            v1 = (_rotl_int((v1 + lanes[0] * p2) & _MASK, 31) * p1) & _MASK
            v2 = (_rotl_int((v2 + lanes[1] * p2) & _MASK, 31) * p1) & _MASK
            v3 = (_rotl_int((v3 + lanes[2] * p2) & _MASK, 31) * p1) & _MASK
            v4 = (_rotl_int((v4 + lanes[3] * p2) & _MASK, 31) * p1) & _MASK
            off += 32
        h = (_rotl_int(v1, 1) + _rotl_int(v2, 7) + _rotl_int(v3, 12) + _rotl_int(v4, 18)) & _MASK
        for v in (v1, v2, v3, v4):
            v = (_rotl_int((v * p2) & _MASK, 31) * p1) & _MASK
            h = ((h ^ v) * p1 + p4) & _MASK
    else:
        h = (seed + p5) & _MASK
    h = (h + n) & _MASK
    while off <= n - 8:
        k1 = int.from_bytes(data[off:off + 8], "little")
        h ^= (_rotl_int((k1 * p2) & _MASK, 31) * p1) & _MASK
        h = (_rotl_int(h, 27) * p1 + p4) & _MASK
        off += 8
    if off + 4 <= n:
        h ^= (int.from_bytes(data[off:off + 4], "little") * p1) & _MASK
        h = (_rotl_int(h, 23) * p2 + p3) & _MASK
        off += 4
    while off < n:
        h ^= (data[off] * p5) & _MASK
        h = (_rotl_int(h, 11) * p1) & _MASK
        off += 1
    return int(_fmix(np.array([h], dtype=np.uint64))[0])


def hash_strings(values: list, seed: np.ndarray) -> np.ndarray:
    """``XXH64.hashUnsafeBytes`` of each string's UTF-8 bytes; None keeps ``seed``."""
    out = seed.copy()
    memo: dict[tuple[str, int], int] = {}
    for i, s in enumerate(values):
        if s is None:
            continue
        key = (s, int(seed[i]))
        h = memo.get(key)
        if h is None:
            h = memo[key] = hash_bytes(s.encode("utf-8"), int(seed[i]))
        out[i] = h
    return out


def in_sample(hashes: np.ndarray, threshold: int, modulus: int) -> np.ndarray:
    """``pmod(h, modulus) < threshold`` for Spark's signed hashes (``modulus`` a power of 2)."""
    return (hashes & np.uint64(modulus - 1)) < np.uint64(threshold)
