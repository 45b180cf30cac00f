"""Exact sums of weighted fixed-point terms, wider than int64.

An unweighted step sums one fixed-point term per row (2**-32 nats, at most 2**41.5 in
magnitude: ``|log| <= -log(TINY) < 691``) over at most
:data:`~vmi_spark.core.bound.MAX_CHUNK_ROWS` (2**16) rows of a chunk, which int64 holds
with room to spare. With row weights (:mod:`vmi_spark.core.weights`) a row's term counts
``w`` times: a chunk's sum ``sum_k w_k t_k`` may need 84 bits (a table's total weight is
below :data:`~vmi_spark.core.weights.MAX_TOTAL_WEIGHT` = 2**42 units). So a weighted chunk
sum is kept *wide*: two int64 arrays ``hi`` and ``lo`` with the value ``hi * 2**32 + lo``
(``lo`` in [0, 2**32) as a kernel returns it, larger after sums of several), stacked as a
(2, C) array. The kernels accumulate in three limbs of 21 bits (:func:`limb_dot`): with
``w = wh 2**21 + wl`` and ``t = th 2**21 + tl`` every partial product is below 2**43 in
magnitude, so 2**19 of them sum in int64 without overflow, and the limbs are carried into
the (hi, lo) pair at the end (:func:`limbs_to_wide`). Everything is integer arithmetic:
the sum of a table whose rows carry integer weights is the sum of the same table with
each row repeated, bit for bit.

Sums over chunks add ``hi`` and ``lo`` separately (exact for up to 2**31 chunks) and
:func:`exact` turns either form, an unweighted (C,) int64 or a wide (2, C) one, into
Python integers.
"""

from __future__ import annotations

import numpy as np

#: bits of a limb (:func:`limb_dot`)
LIMB = 21
_MASK = (1 << LIMB) - 1
#: the low half of a wide value: ``lo`` is below 2**32 as a kernel returns it
HALF = 32


def is_wide(part: np.ndarray) -> bool:
    """Whether ``part`` is a wide (2, C) sum (a weighted chunk's), not a (C,) int64 one."""
    return part.ndim == 2


def limbs_to_wide(a2: np.ndarray, a1: np.ndarray, a0: np.ndarray) -> np.ndarray:
    """(2, C) int64 ``[hi, lo]`` with ``hi * 2**32 + lo = a2 2**42 + a1 2**21 + a0`` and
    ``lo`` in [0, 2**32) (the limbs' carries propagated; arithmetic shifts floor)."""
    a0 = np.asarray(a0, dtype=np.int64)
    a1 = np.asarray(a1, dtype=np.int64) + (a0 >> LIMB)
    a0 = a0 & _MASK
    a2 = np.asarray(a2, dtype=np.int64) + (a1 >> LIMB)
    a1 = a1 & _MASK
    lo = a0 + ((a1 & ((1 << (HALF - LIMB)) - 1)) << LIMB)
    hi = (a2 << (2 * LIMB - HALF)) + (a1 >> (HALF - LIMB))
    return np.stack([hi, lo])


def limb_dot(w: np.ndarray, t: np.ndarray, axis: int = -1) -> np.ndarray:
    """Exact ``sum(w * t, axis)`` as a wide (2, ...) int64 ``[hi, lo]``, for int64 ``w`` in
    [0, 2**42) and ``t`` with ``|t| < 2**42``, at most 2**19 terms per sum."""
    w = np.asarray(w, dtype=np.int64)
    t = np.asarray(t, dtype=np.int64)
    wh, wl = w >> LIMB, w & _MASK
    th, tl = t >> LIMB, t & _MASK
    a2 = (wh * th).sum(axis=axis)
    a1 = (wh * tl).sum(axis=axis) + (wl * th).sum(axis=axis)
    a0 = (wl * tl).sum(axis=axis)
    return limbs_to_wide(a2, a1, a0)


def zeros(size: int) -> np.ndarray:
    """A wide (2, size) zero."""
    return np.zeros((2, size), dtype=np.int64)


def exact(part: np.ndarray) -> np.ndarray:
    """The (C,) exact sums (an object array of Python ints) of an unweighted (C,) int64
    or a wide (2, C) int64 ``[hi, lo]``."""
    part = np.asarray(part)
    if part.dtype == object:
        return part
    if not is_wide(part):
        return part.astype(object)
    return part[0].astype(object) * (1 << HALF) + part[1].astype(object)


def add(total: np.ndarray | None, part: np.ndarray) -> np.ndarray:
    """``total + part`` for chunk sums of one kind (unweighted int64, or wide), ``total``
    updated in place when it is an array already (None: a copy of ``part``)."""
    if total is None:
        return np.array(part, dtype=np.int64, copy=True)
    total += part
    return total
