"""The plain numpy baseline of the issue (not used by the library).

``numpy_step`` is the "plain single-threaded numpy step" of issue 5: for every candidate
gather the class-conditional table p(x_i | y) at every cell, dot with the per-row
posterior, take the log, and average over the rows. float64, no fixed point; it is also
the float64 reference the exact fixed-point sums are compared with.
"""

from __future__ import annotations

import numpy as np


def row_posterior(codes: np.ndarray, block, cond: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """(N, L) naive-Bayes posterior q(y | x_S) of every row for the block's features."""
    post = np.tile(np.asarray(prior, dtype=np.float64), (codes.shape[1], 1))
    for f in block:
        post *= cond[f][codes[f]]
        post /= post.sum(axis=1, keepdims=True)
    return post


def numpy_step(codes: np.ndarray, y: np.ndarray, post: np.ndarray, cond: np.ndarray,
               candidates: np.ndarray) -> np.ndarray:
    """Plain numpy naive step: mean over rows of log c_i(y) - log sum_y r(y) c_i(y)."""
    out = np.zeros(codes.shape[0])
    rows = np.arange(codes.shape[1])
    for i in np.flatnonzero(candidates):
        factor = cond[i][codes[i]]                   # (N, L) gather
        mix = (post * factor).sum(axis=1)            # dot with the posterior
        out[i] = np.mean(np.log(factor[rows, y]) - np.log(mix))
    return out
