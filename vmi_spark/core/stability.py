"""Stability selection: the same selection on B random half-samples of the rows.

A scheduled pruning job wants to know whether its K features would come back on other
rows. :func:`run_stability` runs the selection B more times, each on a random subsample
of the rows (a :class:`HalfSample`, half of them by default), over the rows already
encoded and held by the backend (no second read of the input: each run is a
:meth:`masked` view of the same chunks), and :func:`summarize` reports per feature how
often it was selected and its mean rank, and the stability index of Nogueira, Sechidis
and Brown (JMLR 2018) with its asymptotic confidence interval (:func:`nogueira`).

The subsamples. A row is kept in run b when a 64-bit hash of its *encoded* row (its
feature codes and class, as the chunks hold them), the seed and b falls below
``fraction * 2**64`` (:meth:`HalfSample.keep`). The masks are therefore the same for any
partitioning, reader, execution and CPU, and the same in memory; a row is kept or left out
whole, with its weight, so that a table whose rows carry integer weights draws the same
subsamples as the same table with each row repeated. Rows whose codes are all equal (after
binning) are kept or left out together: a half-sample is half of the distinct encoded rows
in expectation, not of their count (for a table of few distinct encoded rows the
subsamples are coarse; the report gives each run's row count).

Cost: one count pass and the K steps of each run, B times, plus the one prepare (read,
plan, encode) they share (``benchmarks/stability.py``).

References
----------
S. Nogueira, K. Sechidis, G. Brown. On the Stability of Feature Selection Algorithms.
JMLR 18(174):1-54, 2018 (Definition 4, the estimator; Section 5, its asymptotic
normal distribution, the variance estimate and the confidence intervals, as in the
authors' code, ``getVarianceofStability`` and ``confidenceIntervals``).
N. Meinshausen, P. Buehlmann. Stability Selection. JRSS B 72(4), 2010 (subsamples of half
the rows).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Protocol

import numpy as np

from .criterion import Backend

#: the reported interval is the (1 - ALPHA) confidence interval: 95 %
ALPHA = 0.05

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _splitmix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser, elementwise on uint64 (wrapping arithmetic)."""
    x = x.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x


def _mix(value: int) -> int:
    """SplitMix64 of one Python int (the same function as :func:`_splitmix`)."""
    return int(_splitmix(np.array([value & _M64], dtype=np.uint64))[0])


@dataclass(frozen=True)
class HalfSample:
    """The rows of stability run ``run`` (from 0) under ``seed``: a row is kept when the
    hash of its encoded row, the seed and the run is below ``fraction`` of 2**64.

    A callable ``keep(codes, y) -> (n,) bool`` over a chunk's (D, n) codes and (n,)
    classes; small and picklable, so the Spark executions ship it to their tasks."""

    seed: int
    run: int
    fraction: float = 0.5

    def multipliers(self, d: int) -> tuple[np.uint64, np.ndarray]:
        """The hash's start and its (d + 1,) odd multipliers under the seed: one per
        feature, the last for the class."""
        base = _mix(self.seed * _GOLDEN + 1)
        return np.uint64(base), \
            _splitmix(np.arange(d + 1, dtype=np.uint64) + np.uint64(base)) | np.uint64(1)

    def row_hashes(self, codes: np.ndarray, y: np.ndarray) -> np.ndarray:
        """(n,) uint64: the hash of every row's codes and class under the seed (not the
        run). Feature j's code is multiplied by an odd constant of its own (from the seed)
        and the products summed modulo 2**64, then mixed."""
        d, n = codes.shape
        base, mult = self.multipliers(d)
        h = np.full(n, base, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for j in range(d):
                h += codes[j].astype(np.uint64) * mult[j]
            h += (np.asarray(y).astype(np.uint64) + np.uint64(1)) * mult[d]
        return _splitmix(h)

    def sparse_row_hashes(self, zero: np.ndarray, y: np.ndarray, row: np.ndarray,
                          element: np.ndarray, code: np.ndarray) -> np.ndarray:
        """:meth:`row_hashes` of rows given by their non-zeros: ``zero`` (D,) each
        feature's code where a row stores nothing (-1: every row stores one), ``y`` (n,)
        the classes, and per stored entry its ``row``, ``element`` and ``code``. The
        same hashes as of the rows' full codes (a sum modulo 2**64: the zeros' products
        once for all rows, each stored entry's difference from its zero added)."""
        zero = np.maximum(np.asarray(zero, dtype=np.int64), 0).astype(np.uint64)
        base, mult = self.multipliers(len(zero))
        with np.errstate(over="ignore"):
            start = base + np.sum(zero * mult[:-1], dtype=np.uint64)
            h = np.full(len(y), start, dtype=np.uint64)
            h += (np.asarray(y).astype(np.uint64) + np.uint64(1)) * mult[-1]
            el = np.asarray(element, dtype=np.int64)
            step = (np.asarray(code).astype(np.uint64) - zero[el]) * mult[el]
            np.add.at(h, np.asarray(row, dtype=np.int64), step)
        return _splitmix(h)

    def kept(self, hashes: np.ndarray) -> np.ndarray:
        """(n,) bool: the rows of this run, from their :meth:`row_hashes`."""
        salt = np.uint64(_mix(self.seed ^ (_mix(self.run + 0x5851F42D4C957F2D))))
        with np.errstate(over="ignore"):
            u = _splitmix(hashes ^ salt)
        return u < np.uint64(min(int(self.fraction * 2.0**64), _M64))

    def keep(self, codes: np.ndarray, y: np.ndarray) -> np.ndarray:
        """(n,) bool: the rows of this run."""
        return self.kept(self.row_hashes(codes, y))

    def __call__(self, codes: np.ndarray, y: np.ndarray) -> np.ndarray:
        return self.keep(codes, y)

    def to_dict(self) -> dict:
        return {"seed": self.seed, "run": self.run, "fraction": self.fraction}

    @classmethod
    def from_dict(cls, raw: Any) -> HalfSample:
        """The half-sample of :meth:`to_dict` (read from a request), checked."""
        if not isinstance(raw, dict):
            raise ValueError("a half-sample must be an object")
        seed, run, fraction = raw.get("seed"), raw.get("run"), raw.get("fraction")
        if type(seed) is not int or type(run) is not int or seed < 0 or run < 0 \
                or type(fraction) is not float or not 0.0 < fraction < 1.0:
            raise ValueError("a half-sample needs int seed and run >= 0 and a fraction in (0, 1)")
        return cls(seed, run, fraction)


class Masked(Backend, Protocol):
    """A backend that can give a view of its rows with some left out."""

    def masked(self, keep: HalfSample) -> Backend:
        """The same rows, only those ``keep`` keeps (closed after use)."""
        ...


# --------------------------------------------------------------------------- the index


def nogueira(z: np.ndarray, alpha: float = ALPHA) -> dict[str, Any]:
    """The stability of M feature sets of d features (``z``: (M, d) 0/1, a row per run).

    Nogueira, Sechidis & Brown (2018), Definition 4:
    ``Phi = 1 - mean_f s_f^2 / ((k/d)(1 - k/d))`` with ``s_f^2 = M/(M-1) p_f (1 - p_f)``,
    ``p_f`` the share of the runs that selected f and ``k`` the mean number selected.
    Its variance (their Section 5): ``v = 4/M^2 sum_i (phi_i - mean phi)^2`` with
    ``phi_i = [ (1/d) sum_f z_if p_f - k_i k/d^2 + Phi/2 (2 k k_i/d^2 - k_i/d - k/d + 1) ]
    / ((k/d)(1 - k/d))``, and the interval ``Phi +- z_{1-alpha/2} sqrt(v)``.

    Returns ``index``, ``variance``, ``ci`` ([low, high]) and ``alpha``; the index is None
    (undefined) when fewer than two runs or when every run selected no feature or all of
    them (k = 0 or d).
    """
    z = np.asarray(z, dtype=np.float64)
    m, d = z.shape
    out: dict[str, Any] = {"index": None, "variance": None, "ci": None, "alpha": alpha}
    if m < 2 or d == 0:
        return out
    p = z.mean(axis=0)
    k = z.sum(axis=1)
    kbar = float(p.sum())
    denom = (kbar / d) * (1.0 - kbar / d)
    if not denom > 0.0:
        return out
    phi = 1.0 - (m / (m - 1.0)) * float(np.mean(p * (1.0 - p))) / denom
    per = ((z * p).mean(axis=1) - k * kbar / d**2
           + (phi / 2.0) * (2.0 * kbar * k / d**2 - k / d - kbar / d + 1.0)) / denom
    var = 4.0 / m**2 * float(np.sum((per - per.mean()) ** 2))
    half = NormalDist().inv_cdf(1.0 - alpha / 2.0) * math.sqrt(var)
    out.update(index=phi, variance=var, ci=[phi - half, phi + half])
    return out


# --------------------------------------------------------------------------- the runs


@dataclass
class StabilityRuns:
    """B selections on half-samples: each run's selected features (in selection order),
    its rows (their total weight, with row weights: the selection's N) and its seconds
    (its count pass and its steps)."""

    seed: int
    fraction: float
    selections: list[list[int]] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


def run_stability(backend: Masked, select_fn: Callable[[Backend], Any], runs: int, seed: int,
                  fraction: float = 0.5,
                  on_run: Callable[[int, Any], None] | None = None) -> StabilityRuns:
    """Run ``select_fn`` (the main selection's greedy loop: the same method, K and
    thresholds) on ``runs`` half-samples of ``backend``'s rows (:meth:`Masked.masked`
    views, each closed after its run; their warnings, such as a run that stopped early,
    are not repeated). ``on_run(b, selection)`` is told each run's end."""
    out = StabilityRuns(seed, fraction)
    for b in range(runs):
        t0 = time.perf_counter()
        view = backend.masked(HalfSample(seed, b, fraction))
        try:
            with warnings.catch_warnings():  # a run's notes (stopped early) are the runs' own
                warnings.simplefilter("ignore")
                sel = select_fn(view)
        finally:
            view.close()
        out.selections.append(list(sel.selected))
        out.rows.append(int(sel.num_rows))
        out.seconds.append(time.perf_counter() - t0)
        if on_run is not None:
            on_run(b, sel)
    return out


def summarize(runs: StabilityRuns, names: Sequence[str],
              selected: Sequence[int] | None = None) -> dict[str, Any]:
    """The report's ``stability``: per feature (input order) its selection ``frequency``
    (the share of the runs that selected it) and ``mean_rank`` (its mean 1-based position
    in the runs that selected it, None if none did), the features by frequency
    (``ranking``: frequency descending, then mean rank, then input order), the index of
    :func:`nogueira` and each run's selection and rows. ``selected`` (the main selection)
    adds each selected feature's frequency (``selected_frequency``)."""
    d, m = len(names), len(runs.selections)
    z = np.zeros((m, d), dtype=np.int8)
    ranks: list[list[int]] = [[] for _ in range(d)]
    for i, sel in enumerate(runs.selections):
        for r, f in enumerate(sel):
            z[i, f] = 1
            ranks[f].append(r + 1)
    freq = z.mean(axis=0) if m else np.zeros(d)
    mean_rank = [float(np.mean(r)) if r else None for r in ranks]
    order = sorted(range(d), key=lambda f: (-freq[f], mean_rank[f] if mean_rank[f] is not None
                                             else math.inf, f))
    features = [{"feature": names[f], "index": f, "frequency": float(freq[f]),
                 "mean_rank": mean_rank[f], "selected_in": int(z[:, f].sum())} for f in order]
    out: dict[str, Any] = {
        "runs": m, "fraction": runs.fraction, "seed": runs.seed,
        **nogueira(z),
        "features": features,
        "run_selections": [[names[f] for f in sel] for sel in runs.selections],
        "run_rows": list(runs.rows),
        "run_seconds": list(runs.seconds),
        "method_note": ("index: Nogueira, Sechidis & Brown (JMLR 2018), 1 when every run "
                        "selects the same features, about 0 for selections at random"),
    }
    if selected is not None:
        out["selected_frequency"] = {names[f]: float(freq[f]) for f in selected}
    return out
