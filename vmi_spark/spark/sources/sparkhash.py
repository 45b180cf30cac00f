"""Spark's ``xxhash64`` SQL function in numpy, for the rows the plan samples.

The encoding plan places bin edges on a sample of rows chosen by
``pmod(xxhash64(label, c1, c2, ...), 2**30) < threshold`` over the typed columns
(:meth:`vmi_spark.spark.sources.spark_source.SparkSource.quantile_splits`). The Parquet fast path
(:mod:`vmi_spark.spark.sources.arrow_source`) reads rows in the Python workers and must keep
exactly the same rows, so it computes the same hash here: XXH64 as Spark implements it
(``org.apache.spark.sql.catalyst.expressions.XXH64``), chained over the columns with
seed 42; a null leaves the running hash unchanged, a double is hashed as
``doubleToLongBits`` (every NaN as the canonical NaN, -0.0 as 0.0), a string as its
UTF-8 bytes. ``tests/test_arrow_source.py`` checks it against Spark's own function.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

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


def _compile_hash(numba):
    """The compiled :func:`hash_doubles` for a numeric column of any numpy type: one loop
    over the rows instead of a dozen numpy passes (the same integers), each value's bits
    read as it is hashed (:func:`vmi_spark.core.explog.bitcasts`), cached as the step
    loops are (:func:`vmi_spark.core.kernels_numba.cache_safely`). ``valid`` of length 0
    means every row is valid."""
    from ...core.explog import bitcasts
    from ...core.kernels_numba import cache_safely

    f2i, _ = bitcasts(numba)
    p1, p2, p3, p4, p5 = _P1, _P2, _P3, _P4, _P5
    canonical, eight = np.int64(_CANONICAL_NAN), np.uint64(8)
    s27, s29, s31, s32, s33, s37 = (np.uint64(k) for k in (27, 29, 31, 32, 33, 37))

    @numba.njit(nogil=True)
    def hash_loop(values, valid, seed):  # pragma: no cover - compiled
        n = values.shape[0]
        every = valid.shape[0] == 0
        out = np.empty(n, dtype=np.uint64)
        for i in range(n):
            if not every and not valid[i]:
                out[i] = seed[i]
                continue
            v = np.float64(values[i])
            # -0.0 + 0.0 is 0.0 (hashed as 0.0); every NaN as the canonical NaN
            k = np.uint64(canonical if v != v else f2i(v + 0.0)) * p2
            h = (seed[i] + p5 + eight) ^ (((k << s31) | (k >> s33)) * p1)
            h = ((h << s27) | (h >> s37)) * p1 + p4
            h ^= h >> s33
            h *= p2
            h ^= h >> s29
            h *= p3
            out[i] = h ^ (h >> s32)
        return out
    return cache_safely(hash_loop)


_compiled: list = []  # [the compiled loop or None], filled at the first numeric column


def _hash_loop():
    """The compiled loop, or None without numba (loaded at first use: a Python worker that
    never samples does not pay for numba)."""
    if not _compiled:
        from ...core.kernels import load_numba

        numba = load_numba()
        try:
            _compiled.append(_compile_hash(numba) if numba is not None else None)
        except Exception:  # pragma: no cover - numba present but unusable here
            _compiled.append(None)
    return _compiled[0]


def hash_column(arr: pa.Array, seed: np.ndarray) -> np.ndarray:
    """The next running hash over one column of a typed batch: :func:`hash_strings` of a
    string column; of a numeric column (any integer or floating Arrow type, read as
    doubles), :func:`hash_doubles`, compiled with numba when it is installed."""
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        return hash_strings(arr.to_pylist(), seed)
    values = arr.to_numpy(zero_copy_only=False)  # nulls -> nan, skipped by valid below
    valid = arr.is_valid().to_numpy(zero_copy_only=False) if arr.null_count else None
    loop = _hash_loop()
    if loop is not None:
        try:
            return loop(values, np.zeros(0, dtype=bool) if valid is None else valid, seed)
        except Exception:  # pragma: no cover - a type numba cannot compile: numpy below
            pass
    return hash_doubles(values.astype(np.float64), valid, seed)


def in_sample(hashes: np.ndarray, threshold: int, modulus: int) -> np.ndarray:
    """``pmod(h, modulus) < threshold`` for Spark's signed hashes (``modulus`` a power of 2)."""
    return (hashes & np.uint64(modulus - 1)) < np.uint64(threshold)
