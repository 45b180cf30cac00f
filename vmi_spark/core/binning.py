"""Where a numeric column's bin edges go: spike-aware quantiles, equal width, or MDLP.

A binning is a sorted tuple of *edges* ``e_1 < e_2 < ... < e_m``; a value ``v`` gets
the code ``#{e_j <= v}`` (``np.searchsorted(edges, v, side="right")``, the convention
of Spark's ``Bucketizer`` and of the encoder), so there are ``m + 1`` states and a
missing value (null or NaN) is left to the caller, which gives it an extra state as
before. Three strategies place the edges:

``quantile`` (the default)
    Spike-aware equal frequency (:func:`quantile_binning`): a value holding more than
    ``1 / numBins`` of the non-missing rows (zero, a sentinel such as -1 or 999) is a
    state of its own, and the other values share the remaining bins equally.
``uniform``
    Equal width between robust limits, the 0.5 % and 99.5 % quantiles
    (:func:`uniform_binning`); values outside the limits fall into the end bins.
``mdlp``
    Fayyad & Irani's supervised discretisation with its MDL stopping rule, computed
    from the class counts of a fine spike-aware quantile grid (:func:`mdlp_binning`).

A continuous label is binned with ``quantile`` into ``labelBins`` classes
(:func:`resolve_label_type`, :func:`label_binning`), and :func:`describe` gives a
binning as a JSON-ready dict for reports and saved models (:func:`from_description`
reads it back, validated).

Everything is computed from sorted *value counts* (:func:`value_counts`), or, for
``mdlp``, from a (grid cell, class) count table; both are sums over rows, so the
edges are the same for every row order and partitioning. Counts may be exact or
those of a sample: the rules are the same.

References
----------
U. M. Fayyad, K. B. Irani. Multi-Interval Discretization of Continuous-Valued
Attributes for Classification Learning. IJCAI 1993, 1022-1027.
J. Dougherty, R. Kohavi, M. Sahami. Supervised and Unsupervised Discretization of
Continuous Features. ICML 1995.
S. Ramirez-Gallego et al. Data Discretization: Taxonomy and Big Data Challenge.
WIREs Data Mining and Knowledge Discovery 6(1), 2016 (the Spark MDLP discretiser).
G. Brown, A. Pocock, M.-J. Zhao, M. Lujan. Conditional Likelihood Maximisation: A
Unifying Framework for Information Theoretic Feature Selection. JMLR 13, 2012 (FEAST).
M. L. Balinski, H. P. Young. Fair Representation, 2nd ed. Brookings, 2001 (Adams'
method of apportionment, used to share bins between the runs between spikes).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .units import is_whole, show

QUANTILE = "quantile"
UNIFORM = "uniform"
MDLP = "mdlp"
#: the values of the ``binning`` parameter
STRATEGIES = (QUANTILE, UNIFORM, MDLP)
#: the values of the ``labelType`` parameter
LABEL_TYPES = ("auto", "categorical", "continuous")
#: classes of a continuous label unless ``labelBins`` says otherwise
DEFAULT_LABEL_BINS = 10
#: share of the values below (and above) the limits of ``uniform`` bins
UNIFORM_TAIL = 0.005
#: cells of the candidate grid ``mdlp`` cuts (one-byte codes with a missing state)
MDLP_GRID_CELLS = 255


@dataclass(frozen=True)
class Binning:
    """How one numeric column (or a continuous label) is cut into states.

    ``edges`` are strictly increasing; ``v`` gets the code ``#{edges <= v}``.
    ``spikes`` are the values that are a state of their own (sorted).
    """

    strategy: str
    edges: tuple[float, ...]
    spikes: tuple[float, ...] = ()

    @property
    def num_states(self) -> int:
        """States of the non-missing values (``len(edges) + 1``)."""
        return len(self.edges) + 1


# --------------------------------------------------------------------------- value counts


def value_counts(values: np.ndarray, counts: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values and their counts, NaN dropped.

    Parameters
    ----------
    values : array of float
        Raw values (a column or a sample of it), or the distinct values of several
        partitions, in any order and with repeats.
    counts : array of int, optional
        The count of each entry of ``values``; 1 each when omitted.

    Returns
    -------
    (values, counts) : float64 array, int64 array
        Strictly increasing values and the total count of each (all positive); the
        same whatever the order or partitioning of the input.
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    if counts is None:  # each value once: no counts to check or carry
        nan = np.isnan(v)
        v = (v[~nan] if nan.any() else v) + 0.0  # a copy; -0.0 + 0.0 == +0.0
        v.sort()
        starts = _run_starts(v)
        return v[starts], np.diff(np.append(starts, len(v))).astype(np.int64)
    c = np.asarray(counts, dtype=np.int64).ravel()
    if len(c) != len(v):
        raise ValueError(f"{len(v)} values but {len(c)} counts")
    if (c < 0).any():
        raise ValueError("value counts must not be negative")
    keep = ~np.isnan(v) & (c > 0)
    v = v[keep] + 0.0  # -0.0 + 0.0 == +0.0, as the encoder sees it
    order = np.argsort(v, kind="stable")
    v, c = v[order], c[keep][order]
    starts = _run_starts(v)
    return v[starts], (np.add.reduceat(c, starts) if len(v) else c)


def _run_starts(v: np.ndarray) -> np.ndarray:
    """Where each run of equal values of the sorted ``v`` starts."""
    if len(v) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.concatenate([[True], v[1:] != v[:-1]]))


def value_at_ranks(values: np.ndarray, counts: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """The values at 0-based ``ranks`` of the sorted sample that ``values, counts`` describe.

    Rank ``r`` is the value ``v[r]`` of the sorted raw sample: the first value whose
    cumulative count exceeds ``r``.
    """
    pos = np.searchsorted(np.cumsum(counts), np.asarray(ranks, dtype=np.int64), side="right")
    return values[pos]


# --------------------------------------------------------------------------- quantile


def spike_mask(counts: np.ndarray, num_bins: int) -> np.ndarray:
    """Which values hold more than ``1 / num_bins`` of the rows (``count * num_bins > n``).

    Fewer than ``num_bins`` values can qualify, since together they hold more than
    ``k / num_bins`` of the rows. Exact integer arithmetic.
    """
    counts = np.asarray(counts, dtype=np.int64)
    return counts * num_bins > int(counts.sum())


def non_spike_runs(spikes: np.ndarray) -> list[tuple[int, int]]:
    """The index ranges ``[a, b)`` of the runs of non-spike values around the spikes.

    With ``k`` spikes there are ``k + 1`` runs (some empty): before the first spike,
    between consecutive spikes, and after the last.
    """
    where = np.flatnonzero(spikes)
    starts = [0, *(int(p) + 1 for p in where)]
    stops = [*(int(p) for p in where), len(spikes)]
    return list(zip(starts, stops))


def limit_spikes(counts: np.ndarray, spikes: np.ndarray, num_bins: int) -> np.ndarray:
    """Spikes demoted to ordinary values until every non-empty run can have a bin.

    ``k`` spikes leave ``num_bins - k`` bins, and each non-empty run between them
    needs one. When there are more such runs (possible only when spikes hold about
    half of the rows or more), the spike with the fewest rows, and among equal counts
    the largest value, becomes an ordinary value, until the runs fit; the states then
    never exceed ``num_bins``.
    """
    spikes = spikes.copy()
    while True:
        k = int(spikes.sum())
        busy = sum(1 for a, b in non_spike_runs(spikes) if b > a)
        if busy <= num_bins - k or k == 0:
            return spikes
        idx = np.flatnonzero(spikes)
        weakest = idx[np.lexsort((-idx, counts[idx]))[0]]
        spikes[weakest] = False


def share_bins(sizes: list[int], caps: list[int], bins: int) -> list[int]:
    """Share ``bins`` between runs of ``sizes`` rows, at most ``caps`` each (Adams' method).

    Every non-empty run gets one bin; each further bin goes to the run with the most
    rows per bin so far (ties: the lower run), skipping runs that already have as many
    bins as distinct values (``caps``). This makes the largest rows-per-bin as small
    as it can be. Empty runs get none; bins nobody can use are left unused.
    """
    alloc = [1 if s > 0 else 0 for s in sizes]
    for _ in range(bins - sum(alloc)):
        best = -1
        for j, s in enumerate(sizes):
            if s == 0 or alloc[j] >= caps[j]:
                continue
            if best < 0 or s * alloc[best] > sizes[best] * alloc[j]:
                best = j
        if best < 0:
            break
        alloc[best] += 1
    return alloc


def equal_frequency_cuts(values: np.ndarray, counts: np.ndarray, bins: int) -> np.ndarray:
    """Cut values giving ``bins`` (fewer on ties) equal-frequency bins of one run.

    The rule used before spikes were recognised: with ``m`` rows, the cuts are the
    values at ranks ``floor(j m / bins)``, ``j = 1 .. bins - 1``, without repeats and
    above the run's smallest value; each cut is the lowest value of the bin above it.
    """
    if bins <= 1 or len(values) == 0:
        return np.empty(0)
    m = int(counts.sum())
    cand = np.unique(value_at_ranks(values, counts, (np.arange(1, bins) * m) // bins))
    return cand[cand > values[0]]


def quantile_binning(values: np.ndarray, counts: np.ndarray, num_bins: int) -> Binning:
    """Spike-aware equal-frequency bins (the ``quantile`` strategy).

    Parameters
    ----------
    values, counts : arrays
        Sorted distinct non-missing values and their counts (:func:`value_counts`),
        exact or of a sample.
    num_bins : int
        ``numBins``: at most this many states (the missing state comes on top).

    Returns
    -------
    Binning
        With ``n`` rows, every value holding more than ``n / num_bins`` of them is a
        spike (:func:`spike_mask`, :func:`limit_spikes`). The ``k`` spikes cut the
        other values into runs; the runs share ``num_bins - k`` bins
        (:func:`share_bins`) and each run is cut into equal-frequency bins
        (:func:`equal_frequency_cuts`). Walking up the values, each state's lower edge
        is its smallest value, except that the state just above a spike ``s`` starts
        at ``np.nextafter(s, inf)`` (:func:`place_edges`). So a spike's state holds
        exactly ``s`` and a value strictly between two spikes never shares a state
        with either, but for unseen values: a spike that is the smallest value also
        takes any smaller value and the largest any larger one, as end bins do, and a
        value missing from ``values`` that lies between two adjacent spikes joins the
        upper one. Without spikes the edges are those of plain equal-frequency bins.

    Examples
    --------
    A column of 50 rows, 46 zeros (92 %) and the amounts 1, 2, 3, 4, with
    ``num_bins = 5``: zero holds 46 > 50 / 5 rows, so it is a spike; the other
    ``5 - 1 = 4`` bins go to the run above it, four rows, one per bin (cuts at ranks
    1, 2, 3 of the run: 2, 3, 4). The edges are ``[5e-324, 2, 3, 4]``
    (``5e-324 = nextafter(0, inf)``), the states ``0``, ``(0, 2)``, ``[2, 3)``,
    ``[3, 4)``, ``[4, inf)``, and the codes of 0, 1, 2, 3, 4 are 0, 1, 2, 3, 4.
    Plain equal-frequency bins put every cut (ranks 10, 20, 30, 40) on 0 and make the
    column one constant state.

    A sentinel column ``-1 (x3), 10, 20, 30, 40, 999 (x3)`` with ``num_bins = 4``:
    -1 and 999 hold 3 > 10 / 4 rows each; the run between them gets the 2 remaining
    bins, cut at its rank 2 (30). Edges ``[nextafter(-1, inf), 30, 999]``, states
    ``-1``, ``(-1, 30)``, ``[30, 999)``, ``999``. Plain equal-frequency bins (cuts at
    30 and 999) would put the sentinel -1 in one bin with 10 and 20.
    """
    _check_bins(num_bins, "numBins")
    vals, cnts = _checked_counts(values, counts)
    if len(vals) == 0:
        return Binning(QUANTILE, ())
    spikes = limit_spikes(cnts, spike_mask(cnts, num_bins), num_bins)
    runs = non_spike_runs(spikes)
    sizes = [int(cnts[a:b].sum()) for a, b in runs]
    shares = share_bins(sizes, [b - a for a, b in runs], num_bins - int(spikes.sum()))
    spike_values = [float(v) for v in vals[spikes]]
    run_cuts = [equal_frequency_cuts(vals[a:b], cnts[a:b], shares[j]) if b > a else None
                for j, (a, b) in enumerate(runs)]
    return Binning(QUANTILE, place_edges(run_cuts, spike_values), tuple(spike_values))


def place_edges(run_cuts: list[np.ndarray | None], spikes: list[float]) -> tuple[float, ...]:
    """The edges of the states of the runs and spikes, walking up the values.

    Parameters
    ----------
    run_cuts : list
        For each of the ``k + 1`` runs around the spikes, its cuts
        (:func:`equal_frequency_cuts`), or None when the run is empty.
    spikes : list of float
        The ``k`` spike values, sorted.

    Returns
    -------
    tuple of float
        Each state's lower edge is its smallest value, except that the state just above
        a spike ``s`` starts at ``nextafter(s, inf)``; the first state has no lower edge.
    """
    edges: list[float] = []
    below: float | None = None  # the spike just below, if the last state was one
    started = False
    for j, cuts in enumerate(run_cuts):
        if cuts is not None:
            if below is not None:
                edges.append(_above(below))
            edges.extend(float(c) for c in cuts)
            below, started = None, True
        if j < len(spikes):
            if below is not None:
                edges.append(_above(below))
            elif started:
                edges.append(spikes[j])
            below, started = spikes[j], True
    return tuple(edges)


# --------------------------------------------------------------------------- uniform


def uniform_binning(values: np.ndarray, counts: np.ndarray, num_bins: int,
                    tail: float = UNIFORM_TAIL) -> Binning:
    """Equal-width bins between robust limits (the ``uniform`` strategy).

    Parameters
    ----------
    values, counts : arrays
        Sorted distinct non-missing values and their counts (:func:`value_counts`).
    num_bins : int
        ``numBins``: the number of equal-width bins (fewer if edges coincide).
    tail : float
        Share of the finite values left below the lower limit and above the upper:
        with ``n`` finite values and ``r = floor(tail * n)``, the limits are the values
        at ranks ``r`` and ``n - 1 - r`` (0.5 % and 99.5 % quantiles by default).

    Returns
    -------
    Binning
        Edges ``lo + j (hi - lo) / num_bins``, ``j = 1 .. num_bins - 1``; values
        beyond the limits (and infinities) fall into the end bins. When the limits
        coincide (more than 99 % of the rows share a value) they widen to the
        smallest and largest finite values; a constant column has no edges.

    Notes
    -----
    FEAST (Brown et al. 2012) recommends 10 equal-width bins between the smallest and
    largest value (``tail = 0``, scikit-learn's ``KBinsDiscretizer(strategy="uniform")``).
    One outlier then squeezes the whole column into one bin, hence the robust limits.
    Equal-width bins ignore spikes: a value holding most rows shares its bin with its
    neighbours.
    """
    _check_bins(num_bins, "numBins")
    if not 0.0 <= tail < 0.5:
        raise ValueError(f"tail must be in [0, 0.5), got {tail}")
    vals, cnts = _checked_counts(values, counts)
    finite = np.isfinite(vals)
    vals, cnts = vals[finite], cnts[finite]
    n = int(cnts.sum())
    if n == 0:
        return Binning(UNIFORM, ())
    r = int(math.floor(tail * n))
    lo, hi = (float(x) for x in value_at_ranks(vals, cnts, np.array([r, n - 1 - r])))
    if lo == hi:
        lo, hi = float(vals[0]), float(vals[-1])
    if lo == hi:
        return Binning(UNIFORM, ())
    t = np.arange(1, num_bins, dtype=np.float64) / num_bins
    width = hi - lo
    edges = lo + t * width if math.isfinite(width) else lo * (1.0 - t) + hi * t
    edges = np.unique(edges)
    return Binning(UNIFORM, tuple(float(e) for e in edges[edges > lo]))


# --------------------------------------------------------------------------- mdlp


def class_entropy(counts: np.ndarray) -> np.ndarray:
    """Entropy in bits of the class counts along the last axis (0 for no rows)."""
    counts = np.asarray(counts, dtype=np.float64)
    n = counts.sum(axis=-1, keepdims=True)
    p = np.divide(counts, n, out=np.zeros_like(counts), where=n > 0)
    logp = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -(p * logp).sum(axis=-1)


def information_gain(left: np.ndarray, right: np.ndarray) -> float:
    """Gain(A, T; S) in bits: Ent(S) minus the row-weighted entropies of S1 and S2."""
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    n1, n2 = int(left.sum()), int(right.sum())
    n = n1 + n2
    ent = class_entropy(np.stack([left + right, left, right]))
    return float(ent[0] - (n1 * ent[1] + n2 * ent[2]) / n)


def mdlp_accepts(left: np.ndarray, right: np.ndarray) -> bool:
    """Fayyad & Irani's MDL criterion for cutting S into S1 (``left``) and S2 (``right``).

    Accept iff ``Gain > log2(N - 1) / N + Delta / N`` with
    ``Delta = log2(3^k - 2) - [k Ent(S) - k1 Ent(S1) - k2 Ent(S2)]``, where ``N`` is
    the rows of S and ``k``, ``k1``, ``k2`` the classes present in S, S1, S2
    (entropies in bits; Fayyad & Irani 1993, Sec. 3).
    """
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    total = left + right
    n = int(total.sum())
    if n < 2 or left.sum() == 0 or right.sum() == 0:
        return False
    k, k1, k2 = (int((c > 0).sum()) for c in (total, left, right))
    ent, ent1, ent2 = class_entropy(np.stack([total, left, right]))
    delta = math.log2(3 ** k - 2) - (k * ent - k1 * ent1 - k2 * ent2)
    return information_gain(left, right) > (math.log2(n - 1) + delta) / n


def best_boundary(counts: np.ndarray) -> int | None:
    """The cut ``t`` of a (cell, class) table into cells ``< t`` and ``>= t`` with the
    lowest class-information entropy ``(n1 Ent(S1) + n2 Ent(S2)) / N``.

    Only cuts leaving rows on both sides count; ties (e.g. around an empty cell) go to
    the lowest ``t``. None when no cut leaves rows on both sides.
    """
    counts = np.asarray(counts, dtype=np.int64)
    left = np.cumsum(counts, axis=0)[:-1]
    right = counts.sum(axis=0) - left
    n1, n2 = left.sum(axis=1), right.sum(axis=1)
    valid = (n1 > 0) & (n2 > 0)
    if not valid.any():
        return None
    ent = n1 * class_entropy(left) + n2 * class_entropy(right)
    ent[~valid] = np.inf
    return int(np.argmin(ent)) + 1


def mdlp_cuts(class_counts: np.ndarray, max_bins: int | None = None) -> np.ndarray:
    """Fayyad & Irani's recursive MDLP cuts of a (grid cell, class) count table.

    Parameters
    ----------
    class_counts : (G, L) int array
        Rows of each class in each of the G cells of a candidate grid, in value order
        (one aggregation pass over the rows gives it).
    max_bins : int, optional
        At most this many intervals (``numBins``); None for no limit.

    Returns
    -------
    Sorted int array of cut positions ``t`` (cells ``< t`` below, ``>= t`` above).
    Every interval is cut at its :func:`best_boundary` if :func:`mdlp_accepts` agrees,
    and both halves are treated the same way. Without ``max_bins`` that is the plain
    recursion; with it the accepted cuts are made in order of the entropy they remove,
    ``N * Gain`` (ties: the lower interval), until there are ``max_bins`` intervals.
    """
    counts = np.asarray(class_counts, dtype=np.int64)
    if counts.ndim != 2:
        raise ValueError(f"class_counts must be (cells, classes), got shape {counts.shape}")
    heap: list[tuple[float, int, int, int]] = []

    def consider(a: int, b: int) -> None:
        sub = counts[a:b]
        t = best_boundary(sub)
        if t is None:
            return
        left, right = sub[:t].sum(axis=0), sub[t:].sum(axis=0)
        if mdlp_accepts(left, right):
            removed = int(sub.sum()) * information_gain(left, right)
            heapq.heappush(heap, (-removed, a, a + t, b))

    consider(0, len(counts))
    cuts: list[int] = []
    while heap and (max_bins is None or len(cuts) + 1 < max_bins):
        _, a, t, b = heapq.heappop(heap)
        cuts.append(t)
        consider(a, t)
        consider(t, b)
    return np.array(sorted(cuts), dtype=np.int64)


def mdlp_binning(grid: Binning, class_counts: np.ndarray,
                 max_bins: int | None = None) -> Binning:
    """Supervised bins (the ``mdlp`` strategy): the grid edges MDLP keeps.

    Parameters
    ----------
    grid : Binning
        The candidate grid, spike-aware quantile bins with :data:`MDLP_GRID_CELLS`
        cells (``quantile_binning(values, counts, MDLP_GRID_CELLS)``).
    class_counts : (grid.num_states, L) int array
        Rows of each class per grid state, non-missing rows only.
    max_bins : int, optional
        At most this many states (``numBins``).

    Returns
    -------
    Binning
        A subset of the grid's edges; the spikes are the grid's spikes whose state
        survives intact (both its edges kept).

    Notes
    -----
    The cuts are chosen to separate the classes of these rows, so the plug-in
    I(x; y) of the column measured on the same rows is biased upwards.
    """
    counts = np.asarray(class_counts, dtype=np.int64)
    if counts.ndim != 2 or counts.shape[0] != grid.num_states:
        raise ValueError(f"class_counts must have one row per grid state ({grid.num_states}), "
                         f"got shape {counts.shape}")
    if max_bins is not None:
        _check_bins(max_bins, "numBins")
    grid_edges = np.asarray(grid.edges, dtype=np.float64)
    edges = tuple(float(e) for e in grid_edges[mdlp_cuts(counts, max_bins) - 1])
    return Binning(MDLP, edges, spikes_kept(grid, edges))


def spikes_kept(grid: Binning, edges: tuple[float, ...]) -> tuple[float, ...]:
    """The spikes of ``grid`` whose grid state is still a state of ``edges`` (a subset
    of the grid's edges): both the grid edges around the spike are among ``edges``."""
    kept = set(edges)
    g = grid.edges
    out = []
    for s in grid.spikes:
        i = int(np.searchsorted(np.asarray(g, dtype=np.float64), s, side="right"))
        if (i == 0 or g[i - 1] in kept) and (i == len(g) or g[i] in kept):
            out.append(s)
    return tuple(out)


# --------------------------------------------------------------------------- one call


def check_strategy(strategy: Any) -> str:
    """``strategy`` if it is a known ``binning`` value, else a one-line ValueError
    (callable before any data is read)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"binning must be quantile, uniform or mdlp, got {strategy!r}")
    return strategy


def fit_binning(strategy: str, values: np.ndarray, num_bins: int,
                labels: np.ndarray | None = None, num_classes: int | None = None,
                weights: np.ndarray | None = None) -> Binning:
    """The binning of one column from its values (a sample or all), in one call.

    Parameters
    ----------
    strategy : str
        ``binning``: ``quantile``, ``uniform`` or ``mdlp``.
    values : array of float
        The column's values, NaN for missing (dropped here), in any order.
    num_bins : int
        ``numBins``.
    labels, num_classes : int array and int, optional
        For ``mdlp`` only: the class code (0 .. num_classes - 1) of each row of
        ``values``.
    weights : int array, optional
        Each row's weight in integer units (:mod:`vmi_spark.core.weights`): every count
        is then a sum of weights, so a row of weight w places the edges as w copies of
        it would.

    Returns
    -------
    Binning
        :func:`quantile_binning` or :func:`uniform_binning` of the value counts; for
        ``mdlp``, :func:`mdlp_binning` with at most ``num_bins`` states over a
        :data:`MDLP_GRID_CELLS`-cell quantile grid, counted from these rows.
    """
    check_strategy(strategy)
    v = np.asarray(values, dtype=np.float64)
    wts = None if weights is None else np.asarray(weights, dtype=np.int64)
    if strategy == QUANTILE:
        return quantile_binning(*value_counts(v, wts), num_bins)
    if strategy == UNIFORM:
        return uniform_binning(*value_counts(v, wts), num_bins)
    if labels is None or num_classes is None:
        raise ValueError("binning 'mdlp' needs the class labels of the rows")
    y = np.asarray(labels, dtype=np.int64)
    if y.shape != v.shape:
        raise ValueError(f"{len(v)} values but {len(y)} labels")
    known = ~np.isnan(v)
    wk = None if wts is None else wts[known]
    grid = quantile_binning(*value_counts(v[known], wk), MDLP_GRID_CELLS)
    counts = np.zeros((grid.num_states, num_classes), dtype=np.int64)
    np.add.at(counts, (assign_codes(grid.edges, v[known]), y[known]), 1 if wk is None else wk)
    return mdlp_binning(grid, counts, max_bins=num_bins)


# --------------------------------------------------------------------------- codes


def assign_codes(edges: tuple[float, ...] | list[float] | np.ndarray, values: np.ndarray,
                 missing_code: int | None = None) -> np.ndarray:
    """Codes ``#{edges <= v}`` of ``values`` (int64); NaN gets ``missing_code`` if given.

    Without ``missing_code`` a NaN sorts above every edge and gets the last state, so
    callers with missing values pass the missing state's code.
    """
    v = np.asarray(values, dtype=np.float64)
    codes = np.searchsorted(np.asarray(edges, dtype=np.float64), v, side="right")
    if missing_code is not None:
        codes = np.where(np.isnan(v), missing_code, codes)
    return codes.astype(np.int64)


def regrid_codes(grid: Binning, edges: tuple[float, ...]) -> np.ndarray:
    """Lookup table from the codes of ``grid`` to those of ``edges`` (a subset of the
    grid's edges, e.g. :func:`mdlp_binning`'s): ``table[assign_codes(grid.edges, x)]``
    equals ``assign_codes(edges, x)``, so rows coded on the grid need not be read again.
    """
    lower = np.array([-np.inf, *grid.edges], dtype=np.float64)  # each grid state's lower edge
    return assign_codes(edges, lower)


# --------------------------------------------------------------------------- labels


def resolve_label_type(requested: str, classes: list[Any] | None, *, numeric: bool,
                       floating: bool) -> str:
    """``categorical`` or ``continuous``: how the label is coded (``labelType``).

    Parameters
    ----------
    requested : str
        ``labelType``: ``auto``, ``categorical`` or ``continuous``.
    classes : list or None
        The label's distinct non-missing values, or None when there are more than
        ``maxClasses`` of them (the statistics pass stops collecting there).
    numeric : bool
        The label column is numeric (string and boolean labels are not).
    floating : bool
        The label column is floating point (float, double or decimal).

    Returns
    -------
    str
        ``auto`` gives ``continuous`` for a numeric label with more distinct values than
        ``maxClasses`` (the only way such a label can be used) and for a floating-point
        label with a non-integer value; otherwise ``categorical``. An explicit choice is
        kept; ``continuous`` needs a numeric label.
    """
    if requested not in LABEL_TYPES:
        raise ValueError(f"labelType must be auto, categorical or continuous, got {requested!r}")
    if requested == "continuous" and not numeric:
        raise ValueError("labelType is 'continuous' but the label column is not numeric")
    if requested != "auto":
        return requested
    if not numeric:
        return "categorical"
    if classes is None:
        return "continuous"
    if floating and any(not float(c).is_integer() for c in classes):
        return "continuous"
    return "categorical"


def looks_continuous(num_classes: int, rows: int) -> bool:
    """Whether a categorical label with ``num_classes`` classes over ``rows`` labelled
    rows deserves the warning that it looks continuous (more classes than rows / 2)."""
    return 2 * num_classes > rows


def label_binning(values: np.ndarray, counts: np.ndarray,
                  label_bins: int = DEFAULT_LABEL_BINS) -> Binning:
    """Classes of a continuous label: ``labelBins`` spike-aware equal-frequency bins.

    The same rule as the ``quantile`` strategy (:func:`quantile_binning`), so a label
    value shared by more than ``1 / labelBins`` of the rows is a class of its own;
    class ``c`` is the state ``c`` of the returned binning.
    """
    _check_bins(label_bins, "labelBins")
    return quantile_binning(values, counts, label_bins)


# --------------------------------------------------------------------------- describe


def state_labels(binning: Binning, unit: str | None = None) -> list[str]:
    """Readable names of the states in code order.

    A spike's state is named by its value, the others are intervals. An edge that is
    the next double above a round number ``p`` (6 significant digits, or a whole number
    of ``unit``; the edge just above a spike, ``nextafter(p, inf)``) is written as ``p``
    with the bracket turned, which is the same set of doubles: ``[nextafter(0, inf), 2)``
    is ``(0, 2)``, and ``[-1, nextafter(0, inf))`` is ``[-1, 0]``. With a ``unit``
    (:mod:`vmi_spark.core.units`: a date, a timestamp, an interval) the values are written
    in its form (``[2024-01-01, 2024-02-01)``).
    """
    edges = list(binning.edges)
    bounds = [-math.inf, *edges, math.inf]
    labels = []
    for i in range(len(edges) + 1):
        lo, hi = bounds[i], bounds[i + 1]
        own = [s for s in binning.spikes if lo <= s and (s < hi or i == len(edges))]
        if own:
            labels.append(show(own[0], unit))
            continue
        lo_p, hi_p = _below_if_shorter(lo, unit), _below_if_shorter(hi, unit)
        left = f"({show(lo, unit)}" if lo == -math.inf else (
            f"({show(lo_p, unit)}" if lo_p is not None else f"[{show(lo, unit)}")
        right = f"{show(hi_p, unit)}]" if hi_p is not None else f"{show(hi, unit)})"
        labels.append(f"{left}, {right}")
    return labels


def describe(binning: Binning) -> dict[str, Any]:
    """A JSON-ready dict of a binning: strategy, edges, spikes and state names.

    Edges and spikes are exact floats (``json`` writes the shortest repr that reads
    back the same double); infinities are the strings ``"inf"`` and ``"-inf"``.
    """
    return {"strategy": binning.strategy,
            "edges": [json_float(e) for e in binning.edges],
            "spikes": [json_float(s) for s in binning.spikes],
            "states": state_labels(binning)}


def from_description(raw: Any) -> Binning:
    """A :class:`Binning` from :func:`describe`'s dict (read back from a file), validated.

    Raises ValueError with a one-line message on anything :func:`describe` cannot have
    written: an unknown strategy, a non-number, NaN, edges or spikes not strictly
    increasing. ``states`` is derived and ignored.
    """
    if not isinstance(raw, dict):
        raise ValueError(f"a binning must be an object, got {type(raw).__name__}")
    strategy = raw.get("strategy")
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown binning strategy {strategy!r}")
    edges = _float_list(raw.get("edges"), "edges")
    spikes = _float_list(raw.get("spikes", []), "spikes")
    return Binning(strategy, edges, spikes)


# --------------------------------------------------------------------------- helpers


def _check_bins(num_bins: Any, name: str) -> None:
    if isinstance(num_bins, bool) or not isinstance(num_bins, (int, np.integer)) or num_bins < 2:
        raise ValueError(f"{name} must be an integer of at least 2, got {num_bins!r}")


def _checked_counts(values: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``values, counts`` as arrays, checked to be what :func:`value_counts` returns."""
    v = np.asarray(values, dtype=np.float64)
    c = np.asarray(counts, dtype=np.int64)
    if v.ndim != 1 or v.shape != c.shape:
        raise ValueError("values and counts must be 1-D arrays of the same length")
    if np.isnan(v).any() or (len(v) > 1 and not (np.diff(v) > 0).all()) or (c <= 0).any():
        raise ValueError("values must be sorted, distinct and not NaN, with positive counts "
                         "(use value_counts)")
    return v, c


def _above(s: float) -> float:
    """The smallest double above ``s``."""
    return math.nextafter(s, math.inf)  # numpy's warns "overflow" at the largest double


def _below_if_shorter(e: float, unit: str | None = None) -> float | None:
    """The double just below ``e`` if it is a round number (6 significant digits, or a
    whole number of ``unit``) and ``e`` is not, else None: ``e`` is then the edge just
    above that number."""
    if not math.isfinite(e):
        return None
    p = math.nextafter(e, -math.inf)
    if unit is not None:
        return p if is_whole(p, unit) and not is_whole(e, unit) else None
    return p if _is_round(p) and not _is_round(e) else None


def _is_round(x: float) -> bool:
    """Written exactly with 6 significant digits (subnormal numbers other than 0 are not)."""
    if x == 0.0:
        return True
    return abs(x) >= np.finfo(np.float64).tiny and float(f"{x:.6g}") == x


def json_float(x: float) -> float | str:
    """``x`` for JSON: a float, or ``"inf"`` / ``"-inf"`` (JSON has no infinities)."""
    return float(x) if math.isfinite(x) else ("inf" if x > 0 else "-inf")


def _float_list(raw: Any, name: str) -> tuple[float, ...]:
    if not isinstance(raw, list):
        raise ValueError(f"binning {name} must be a list")
    out = []
    for x in raw:
        if x in ("inf", "-inf"):
            out.append(math.inf if x == "inf" else -math.inf)
        elif isinstance(x, float) and not math.isnan(x):
            out.append(x)
        elif isinstance(x, int) and not isinstance(x, bool) and abs(x) < 2 ** 1023:
            out.append(float(x))
        else:
            raise ValueError(f"binning {name} hold something that is not a number: {x!r}")
    if any(b <= a for a, b in zip(out, out[1:])):
        raise ValueError(f"binning {name} are not strictly increasing")
    return tuple(out)
