"""Count tables and the plug-in quantities derived from them.

All inputs are integer count arrays; every float derived here is a deterministic
function of those integers, so the results do not depend on how the rows that
produced the counts were partitioned.
"""

from __future__ import annotations

import numpy as np

from . import explog


def conditional(counts: np.ndarray) -> np.ndarray:
    """Normalise a count table along all axes but the last two into p(a | b..., y).

    ``counts[..., a, y]`` -> ``p[..., a, y] = counts[..., a, y] / sum_a counts[..., a, y]``.
    A column that was never observed (0/0) gives probability 0, following the
    convention that a state never seen with that class has zero probability.
    """
    counts = np.asarray(counts, dtype=np.float64)
    denom = counts.sum(axis=-2, keepdims=True)
    out = np.zeros_like(counts)
    np.divide(counts, denom, out=out, where=denom > 0)
    return out


def pair_conditional(counts3: np.ndarray) -> np.ndarray:
    """``counts3[i, a, b, y] = n(x_i=a, x_f=b, y)`` -> ``p(x_i=a | x_f=b, y)`` (0/0 -> 0)."""
    counts3 = np.asarray(counts3, dtype=np.float64)
    denom = counts3.sum(axis=1, keepdims=True)
    out = np.zeros_like(counts3)
    np.divide(counts3, denom, out=out, where=denom > 0)
    return out


def safe_log(p: np.ndarray) -> np.ndarray:
    """Natural log with log(0) = -inf and no warning: :func:`.explog.log`, the same bits
    with every numpy and on every CPU (``np.log`` differs in the last bit between numpy
    1.x and 2.x, and between SIMD paths)."""
    p = np.asarray(p, dtype=np.float64)
    out = np.full(p.shape, -np.inf)
    pos = p > 0
    out[pos] = explog.log(p[pos])
    return out


def mutual_information(counts: np.ndarray) -> np.ndarray:
    """Plug-in I(x_i; y) in nats for every feature from ``counts[i, a, y]``.

    A feature whose sample is exactly independent of y (``n(a,y) N == n(a) n(y)``
    for every cell, e.g. a constant column) gets exactly 0.0 rather than a
    rounding residue, so "no feature can raise the bound" is decided exactly.
    """
    counts = np.asarray(counts, dtype=np.int64)
    n_total = counts.sum(axis=(1, 2))  # per feature (all equal to N)
    n_a = counts.sum(axis=2, keepdims=True)
    n_y = counts.sum(axis=1, keepdims=True)
    nz = counts > 0
    num = counts.astype(np.float64) * n_total[:, None, None]
    den = (n_a * n_y).astype(np.float64)
    ratio = np.ones_like(num)
    np.divide(num, den, out=ratio, where=nz)
    terms = np.where(nz, counts * explog.log(ratio), 0.0)  # numpy-independent bits
    mi = _ordered_sum(terms) / np.maximum(n_total, 1)
    independent = np.all(products_equal(counts, n_total[:, None, None], n_a, n_y), axis=(1, 2))
    mi[independent] = 0.0
    return mi


#: below this many rows (or this much weight) the products of two counts fit int64
EXACT_PRODUCTS = 3_000_000_000


def products_equal(a, b, c, d) -> np.ndarray:
    """``a * b == c * d`` exactly, elementwise, for non-negative int64 counts below 2**53
    (sums of row weights can pass :data:`EXACT_PRODUCTS`, and their products int64): equal
    modulo 2**64 (uint64 products wrap) and within 2**63 of each other in float64 (whose
    products of numbers below 2**53 are off by at most 2**54 relative 2**-52), hence equal."""
    a, b, c, d = (np.asarray(x, dtype=np.int64) for x in (a, b, c, d))
    if max(int(x.max(initial=0)) for x in (a, b, c, d)) < EXACT_PRODUCTS:
        return a * b == c * d
    wrapped = a.astype(np.uint64) * b.astype(np.uint64) == c.astype(np.uint64) * d.astype(np.uint64)
    near = np.abs(a.astype(np.float64) * b - c.astype(np.float64) * d) < 2.0**63
    return wrapped & near


def log_likelihood_sums(counts: np.ndarray) -> np.ndarray:
    """``sum_k log p(x_ik | y_k)`` for every feature, from ``counts[i, a, y]``.

    This is N times the first term of the naive bound's increment (the paper's
    "nominator"); the sample's own state is always observed, so it is finite.
    """
    counts = np.asarray(counts, dtype=np.int64)
    logp = safe_log(conditional(counts))
    return _ordered_sum(counts * np.where(counts > 0, logp, 0.0))


def _ordered_sum(terms: np.ndarray) -> np.ndarray:
    """Per-feature sum of the (state, class) terms in sorted order.

    Summing in a canonical order makes the result independent of how the states
    are numbered, so a relabelled copy of a column ties exactly (and the tie then
    goes to the lower index) instead of differing in the last bit.
    """
    flat = np.sort(terms.reshape(terms.shape[0], -1), axis=1)
    return flat.sum(axis=1)


def entropy(counts: np.ndarray) -> float:
    """Plug-in entropy (nats) of a 1-D count vector."""
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    p = counts[counts > 0] / total
    return float(-(p * explog.log(p)).sum())
