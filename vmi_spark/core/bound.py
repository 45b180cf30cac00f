"""Per-chunk kernels of the variational bound (Gao, Ver Steeg & Galstyan, NIPS 2016).

A *chunk* is a run of rows held together: ``codes`` (D, n) uint8 feature codes,
``y`` (n,) class codes, and the running per-row state of the current selection
*block* (Algorithm 1's: the features selected since the last restart): the normalised
posterior q(y | x_S) and, for the pairwise Q-distribution, the running sums over the
selected j of log p(x_i | x_j, c) - log p(x_i | x_j, y_k) for the classes c other than
the row's own.

For a candidate feature i the bound increment is (Eq. fs_update, rewritten with
the normalised posterior r_k(y) = q(y | x_S^k))::

    I_LB(S + i) - I_LB(S) = 1/N sum_k [ log c_i^k(y_k) - log sum_y r_k(y) c_i^k(y) ]

with c_i^k(y) = q(x_i^k | x_S^k, y): p(x_i | y) for the naive Bayes Q and the
geometric mean of p(x_i | x_j, y) over the block's selected j for the pairwise Q.

Every per-row log is rounded to a fixed-point integer (2**-32 nats) before it is
summed, so a sum over rows is exact and the same for every partitioning of the
rows; the rounding costs at most 2.4e-10 nats in the mean (two logs per row for
the naive Q, whose first term comes from the counts, one for the pairwise Q).

Row weights (:mod:`.weights`): every function here takes the chunk's int64 weights ``w``
(None: every row weighs 1). A weighted row's terms count ``w`` times, exactly: the counts
are sums of weights and a step's sums are wide (:mod:`.wide`, a (2, D) ``[hi, lo]``
instead of a (D,) int64), so a row of integer weight w gives the integers of w copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import kernels, wide
from .kernels import fixed_log

#: fixed-point scale of per-row log contributions (defined with the loops that round)
SCALE = kernels.SCALE

#: rows per chunk; keeps an int64 chunk sum far from overflow (|log| < 700)
MAX_CHUNK_ROWS = 1 << 16
#: chunks are cut in multiples of this many rows where the choice is free: the compiled
#: loops run over a candidate's rows in SIMD strides, and a row count off the stride leaves
#: every candidate of every chunk a scalar tail (15% of a naive step at 30,000 candidates
#: in chunks of 279 rows)
CHUNK_ROW_STEP = 64
NAIVE = "vmi_naive"
PAIRWISE = "vmi_pairwise"
METHODS = (NAIVE, PAIRWISE)


def whole_strides(rows: int, *, up: bool = False) -> int:
    """``rows`` rounded to a multiple of :data:`CHUNK_ROW_STEP`: down (at least one
    stride), or ``up``."""
    if up:
        return -(-rows // CHUNK_ROW_STEP) * CHUNK_ROW_STEP
    return max(CHUNK_ROW_STEP, rows - rows % CHUNK_ROW_STEP)


#: the pattern kernel is used while (patterns x states) <= rows / PATTERN_RATIO: a table
#: cell costs a numpy log (about 25 ns), a row of the compiled per-row kernel about 1 ns
#: (the numpy per-row loops about 25 ns); the choice never changes an integer
PATTERN_RATIO = 32 if kernels.BACKEND == "numba" else 2
#: (candidate, x_i, pattern) cells the pattern kernel's mixture holds at once
PATTERN_CHUNK_CELLS = 1 << 20
#: pairwise scores per (pattern, x_i, y) cell while the cells are at most rows / PAIR_CELL_RATIO.
#: A cell costs L-1 exps and a log, a row a count and a fill; compiled, the per-row pass
#: (:func:`kernels.pair_fold_scores`) costs about what that filling does, so the cells win
#: only while very few (chunks of 12,544 rows: even or ahead by up to 0.17 ns a candidate
#: row at 8-64 cells, -0.18 to +0.14 at 128-162, behind from 256 on: 2.5-8.3 against
#: 2.0-2.2 ns; benchmarks/pair_cells.py, s19_pair_cells.json)
PAIR_CELL_RATIO = 64 if kernels.BACKEND == "numba" else 2


@dataclass(frozen=True)
class Routes:
    """Where a step takes the pattern and cell routes instead of the rows: the defaults
    above, chosen by speed; a route never changes an integer (the tests force each).

    ``pattern_ratio`` (:data:`PATTERN_RATIO`), ``pattern_chunk_cells``
    (:data:`PATTERN_CHUNK_CELLS`), ``pair_cell_ratio`` (:data:`PAIR_CELL_RATIO`).
    """

    pattern_ratio: int = PATTERN_RATIO
    pattern_chunk_cells: int = PATTERN_CHUNK_CELLS
    pair_cell_ratio: int = PAIR_CELL_RATIO


@dataclass
class StepOps:
    """What one pass over the rows computes: the candidates' bound increments.

    ``block`` is the current selection block (feature indices in selection order);
    ``cond`` the (D, A, L) table p(x_i = a | y); ``candidates`` masks the features to
    score. For the pairwise Q, ``pair_log_tables[f]`` is the (D, A, A, L) table
    log p(x_i = a | x_f = b, y) of every block feature f. ``label`` names the pass
    (shown as the Spark job description). ``routes`` says when the rows are grouped
    (:class:`Routes`; the defaults everywhere but in tests and benchmarks).
    """

    method: str
    prior: np.ndarray
    cond: np.ndarray
    candidates: np.ndarray
    block: tuple[int, ...] = ()
    pair_log_tables: dict[int, np.ndarray] = field(default_factory=dict)
    label: str = ""
    routes: Routes = Routes()

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown method {self.method!r}")

    @property
    def pairwise(self) -> bool:
        """The pairwise Q (per-row running sums, the block's pair tables); else naive Bayes."""
        return self.method == PAIRWISE




def block_patterns(codes: np.ndarray, block, arity: int, max_patterns: int):
    """Group the rows by their codes on the block's features, in block order.

    Features are taken while (patterns so far) x ``arity`` stays within ``max_patterns``.
    Returns ``(ids, num, pattern_codes, used)``: ``ids`` (n,) each row's pattern (0..num-1),
    ``pattern_codes`` the code of every used feature per pattern, and ``used`` how many of
    the block's features the patterns cover (the first ``used``).
    """
    n = codes.shape[1]
    ids = np.zeros(n, dtype=np.intp)
    num = 1
    pat_codes: list[np.ndarray] = []
    used = 0
    for f in block:
        if num * arity > max_patterns:
            break
        key = ids * arity + codes[f]
        present = np.bincount(key, minlength=num * arity) > 0
        remap = np.cumsum(present) - 1
        ids = remap[key]
        kept = np.flatnonzero(present)
        pat_codes = [pc[kept // arity] for pc in pat_codes] + [kept % arity]
        num = len(kept)
        used += 1
    return ids, num, pat_codes, used


def naive_posterior(codes: np.ndarray, block, cond: np.ndarray, prior: np.ndarray,
                    max_patterns: int):
    """The naive-Bayes posterior q(y | x_S) of every row, grouped by pattern of x_S.

    Rows with the same codes on the block's features share one posterior, so it is
    computed once per distinct pattern while there are at most ``max_patterns`` of
    them. Returns ``(ids, post, rest)``: ``ids`` (n,) the row's pattern, ``post``
    (P, L) the posteriors of the patterns over ``block[:len(block) - len(rest)]``,
    and ``rest`` the block features still to fold in per row. Every product and
    normalisation is elementwise, so a pattern's posterior is bitwise the row's.
    """
    ids, num, pat_codes, used = block_patterns(codes, block, cond.shape[1], max_patterns)
    post = np.tile(np.asarray(prior, dtype=np.float64), (num, 1))
    for f, pc in zip(block[:used], pat_codes):
        post *= cond[f].take(pc, axis=0)
        kernels.normalise(post)
    return ids, post, tuple(block[used:])


def naive_own(counts: np.ndarray, cond: np.ndarray) -> np.ndarray:
    """The first term of the naive bound, from the counts: (D,) int64 fixed point.

    ``sum_k rint(2**32 log p(x_i^k | y_k))`` over all rows, which is
    ``sum_{a,y} n(x_i = a, y) rint(2**32 log p(a | y))``. Add it to the summed
    :func:`naive_partials` of all chunks to get the bound increments. Above 2**21 rows (or
    that much weight) the sums may pass int64: they are then Python ints (an object array).
    """
    counts = np.asarray(counts, dtype=np.int64)
    seen = counts > 0
    table = np.where(seen, fixed_log(np.where(seen, cond, 1.0).astype(np.float64)), 0)
    if int(counts.sum(axis=(1, 2)).max(initial=0)) < 1 << 21:  # |table| < 2**41.5: int64
        return (table * counts).sum(axis=(1, 2))
    # a weighted table (or one of more than 2**21 rows): the exact sums, as Python ints
    d = counts.shape[0]
    return wide.exact(wide.limb_dot(counts.reshape(d, -1), table.reshape(d, -1)))


@dataclass
class NaiveState:
    """The per-row naive-Bayes posterior of one chunk of rows, kept from step to step.

    ``rows`` (L, n) is q(y | x_S) of every row for the features of ``block``, folded in
    one at a time in block order as :func:`naive_posterior` does. A step whose block
    extends ``block`` folds only the features it adds (one gather and normalisation
    per row instead of m), with the same bits. ``tables`` are the prior and p(x | y)
    arrays it was computed with: a step with other tables (another selection, another
    conditional) rebuilds it. Empty while the chunk's rows fit the pattern kernel,
    which needs no per-row posterior.
    """

    rows: np.ndarray | None = None
    block: tuple[int, ...] = ()
    tables: tuple[np.ndarray, ...] = ()

    def holds(self, ops: StepOps) -> bool:
        """Whether the kept posterior is of a prefix of ``ops.block`` under its tables."""
        held = self.block
        return (self.rows is not None and len(self.tables) == 2 and bool(held)
                and self.tables[0] is ops.prior and self.tables[1] is ops.cond
                and ops.block[:len(held)] == held)

    @property
    def nbytes(self) -> int:
        return 0 if self.rows is None else int(self.rows.nbytes)


def naive_rows(codes: np.ndarray, ops: StepOps, state: NaiveState | None):
    """The posterior the naive step needs: ``(ids, post)`` per pattern, or ``(None, rows)``.

    Rows that fall into few patterns of the block's features get the pattern posteriors
    (``ids`` (n,) and ``post`` (P, L)); otherwise the (L, n) posterior of every row,
    folded on from ``state`` when its block is a prefix of ``ops.block`` and kept there.
    """
    cond = ops.cond
    if state is not None and state.holds(ops):
        assert state.rows is not None
        rest = ops.block[len(state.block):]
        rows = state.rows
        if rest:
            n = codes.shape[1]
            rows = kernels.row_posterior(rows.T, np.arange(n, dtype=np.intp), codes, rest, cond)
    else:
        limit = max(1, codes.shape[1] // (ops.routes.pattern_ratio * cond.shape[1]))
        ids, post, rest = naive_posterior(codes, ops.block, cond, ops.prior, limit)
        if not rest:
            return ids, post
        rows = kernels.row_posterior(post, ids, codes, rest, cond)
    if state is not None:
        state.rows, state.block, state.tables = rows, tuple(ops.block), (ops.prior, cond)
    return None, rows


def naive_partials(codes: np.ndarray, ops: StepOps,
                   state: NaiveState | None = None, w: np.ndarray | None = None) -> np.ndarray:
    """Fixed-point per-feature sums of the mixture term of the naive bound over one chunk.

    The naive increment of candidate i sums over rows ``log p(x_i^k | y_k) - log sum_y
    r_k(y) p(x_i^k | y)`` with r_k = q(y | x_S^k). The first term depends only on the
    counts n(x_i, y) (:func:`naive_own`); this returns minus the sum of the second,
    each row's log rounded to 2**-32 nats. The posterior is rebuilt from the block's
    features (m gathers per row), or folded on from ``state`` (:class:`NaiveState`).
    While the rows fall into few patterns of x_S the sum is taken over counts
    n(pattern, x_i) instead of rows, which gives the same integers with one log per
    table cell. The loops run compiled when numba is installed (:mod:`.kernels`), with
    the same integers. With row weights ``w`` the sums are wide ((2, D), :mod:`.wide`).
    """
    num_features, n = codes.shape
    cond = ops.cond
    out = np.zeros(num_features, dtype=np.int64) if w is None else wide.zeros(num_features)
    cands = np.flatnonzero(ops.candidates)
    if n == 0 or len(cands) == 0:
        return out
    ids, post = naive_rows(codes, ops, state)
    if ids is not None:
        out[..., cands] = -pattern_log_sums(codes, cands, ids, post, cond, w,
                                           ops.routes.pattern_chunk_cells)
        return out
    if w is None:
        out[cands] = -kernels.mix_log_sums(codes, cands, post, cond)
    else:
        out[:, cands] = -kernels.mix_log_sums_w(codes, cands, post, cond, w)
    return out


def pattern_log_sums(codes: np.ndarray, cands: np.ndarray, ids: np.ndarray, post: np.ndarray,
                     cond: np.ndarray, w: np.ndarray | None = None,
                     chunk_cells: int = PATTERN_CHUNK_CELLS) -> np.ndarray:
    """Per candidate i: sum over (x_i = a, pattern p) of n(a, p) rint(2**32 log max(
    sum_y post[p, y] p(a | y), TINY)), the pattern kernel's mixture term.

    Candidates are taken ``chunk_cells`` table cells at a time, so that a
    chunk of a few hundred rows of a wide table costs a few array operations, not a few
    per candidate. The same products, sums and logs as one candidate at a time. With row
    weights ``w``, n(a, p) is the cell's weight and the sums are wide ((2, C)).
    """
    num, num_classes = post.shape
    arity = cond.shape[1]
    out = np.zeros(len(cands), dtype=np.int64) if w is None else wide.zeros(len(cands))
    step = max(1, chunk_cells // (arity * num))
    for s in range(0, len(cands), step):
        part = cands[s:s + step]
        c = cond[part]  # (C, A, L)
        mix = post[None, None, :, 0] * c[:, :, None, 0]  # (C, A, P)
        for k in range(1, num_classes):
            mix += post[None, None, :, k] * c[:, :, None, k]
        if w is None:
            cnt = kernels.pattern_counts(codes, part, ids, num, arity)
            out[s:s + len(part)] = (cnt * fixed_log(mix)).sum(axis=(1, 2))
        else:
            cnt = kernels.pattern_counts_w(codes, part, ids, num, arity, w)
            out[:, s:s + len(part)] = wide.limb_dot(cnt.reshape(len(part), -1),
                                                    fixed_log(mix).reshape(len(part), -1))
    return out


@dataclass
class ChunkState:
    """Per-row state of the pairwise Q over one chunk of rows.

    ``posterior`` (n, L) is q(y | x_S) normalised per row. ``log_ratio`` (D, n, L-1) holds,
    for every row k and every class c other than the row's own y_k (in increasing order),
    sum_j [log p(x_i | x_j, c) - log p(x_i | x_j, y_k)] over the block's features j: the
    log-ratio of the pairwise Q's class-c term to the own class's. The own class's term is
    finite (the row itself was counted), so the ratio is never +inf or NaN, and one class
    fewer is kept, summed and exponentiated than with the per-class sums. ``block`` is what
    the state has folded in, in order. ``many_cells`` is ``(limit, block)`` once a block had
    more (pattern, x_i, y) cells than ``limit`` in these rows: so has every block that
    extends it (its patterns only split further), and those are scored per row without
    grouping the rows again.
    """

    posterior: np.ndarray
    log_ratio: np.ndarray
    block: tuple[int, ...] = ()
    many_cells: tuple[int, tuple[int, ...]] | None = None

    @classmethod
    def initial(cls, prior: np.ndarray, n: int, num_features: int) -> ChunkState:
        prior = np.asarray(prior, dtype=np.float64)
        post = np.tile(prior, (n, 1))
        return cls(post, np.zeros((num_features, n, max(len(prior) - 1, 0))), ())

    @property
    def nbytes(self) -> int:
        return int(self.posterior.nbytes + self.log_ratio.nbytes)

    def reset(self, prior: np.ndarray) -> None:
        self.posterior[:] = prior
        self.log_ratio[:] = 0.0
        self.block = ()


def pairwise_add(codes: np.ndarray, y: np.ndarray, state: ChunkState, f: int,
                 ops: StepOps) -> None:
    """Fold feature ``f`` into the pairwise state (posterior, then the pair sums)."""
    _add_to_posterior(codes, y, state, f, ops)
    # the candidates, and the block features still to be folded in (their factor needs it)
    targets = ops.candidates.copy()
    targets[list(ops.block[len(state.block) + 1:])] = True
    kernels.pair_fold(state.log_ratio, ops.pair_log_tables[f], codes, codes[f], y,
                      np.flatnonzero(targets))
    state.block = (*state.block, f)


def _add_to_posterior(codes: np.ndarray, y: np.ndarray, state: ChunkState, f: int,
                      ops: StepOps) -> None:
    """Multiply feature ``f``'s factor into ``state.posterior`` and normalise it (the pair
    sums and ``state.block`` are left to the caller)."""
    m = len(state.block)
    if m > 0:
        # the class terms relative to the own class's (1): the same posterior once normalised
        kernels.pair_posterior(state.posterior, state.log_ratio[f], y, m)
    else:
        state.posterior *= ops.cond[f].take(codes[f], axis=0)
        kernels.normalise(state.posterior)


def pairwise_sync(codes: np.ndarray, y: np.ndarray, state: ChunkState, ops: StepOps,
                  upto: int | None = None) -> None:
    """Bring ``state`` to ``ops.block`` (its first ``upto`` features): fold in the missing
    features, or rebuild."""
    block = ops.block[:upto]
    held = state.block
    if block[:len(held)] != held:
        state.reset(ops.prior)
        held = ()
    for f in block[len(held):]:
        pairwise_add(codes, y, state, f, ops)


def pairwise_partials(codes: np.ndarray, y: np.ndarray, state: ChunkState,
                      ops: StepOps, w: np.ndarray | None = None) -> np.ndarray:
    """Fixed-point per-feature sums of the pairwise bound increments over one chunk.

    Per row ``log c_i(y_k) - log sum_y r(y) c_i(y)`` with c_i the geometric mean of
    p(x_i | x_j, y) over the block's features j, computed as
    ``-log(r(y_k) + sum_{c != y_k} r(c) c_i(c) / c_i(y_k))``. Non-candidates get 0.
    The block's last feature, when the state still lacks it, is folded into each
    candidate's sums in the same pass that scores it (:func:`kernels.pair_fold_scores`;
    with more than two classes, compiled, a fold and then a score). With row weights ``w``
    the sums are wide ((2, D), :mod:`.wide`).
    """
    y = np.asarray(y, dtype=np.intp)
    if state.block != ops.block:
        pairwise_sync(codes, y, state, ops, upto=len(ops.block) - 1)
    d = codes.shape[0]
    out = np.zeros(d, dtype=np.int64) if w is None else wide.zeros(d)
    cands = np.flatnonzero(ops.candidates)
    if not len(cands):
        pairwise_sync(codes, y, state, ops)
        return out
    cells = _cells(codes, state, ops)
    m = len(ops.block)
    if w is not None:
        if state.block != ops.block:
            pairwise_add(codes, y, state, ops.block[-1], ops)
        if cells is not None:
            ids, num = cells
            out[:, cands] = kernels.pair_cell_scores_w(state.log_ratio, state.posterior, codes,
                                                       ids, y, cands, m, ops.cond.shape[1],
                                                       num, w)
        else:
            out[:, cands] = kernels.pair_scores_w(state.log_ratio, state.posterior, y, cands,
                                                  m, w)
        return out
    if state.block != ops.block:  # the block's last feature is still to be folded in
        last = ops.block[-1]
        if cells is None:
            _add_to_posterior(codes, y, state, last, ops)
            out[cands] = kernels.pair_fold_scores(state.log_ratio, ops.pair_log_tables[last],
                                                  codes, codes[last], y, state.posterior,
                                                  cands, m)
            state.block = ops.block
            return out
        pairwise_add(codes, y, state, last, ops)
    if cells is not None:
        # rows with the same (pattern, x_i, y) share their terms: one exp and log per cell
        ids, num = cells
        out[cands] = kernels.pair_cell_scores(state.log_ratio, state.posterior, codes, ids, y,
                                              cands, m, ops.cond.shape[1], num)
    else:
        out[cands] = kernels.pair_scores(state.log_ratio, state.posterior, y, cands, m)
    return out


def _cells(codes: np.ndarray, state: ChunkState,
           ops: StepOps) -> tuple[np.ndarray, int] | None:
    """``(ids, num)``, the rows' patterns of ``ops.block``, when its (pattern, x_i, y) cells
    are few enough to be scored instead of the rows (:attr:`Routes.pair_cell_ratio`); else None,
    noted in ``state.many_cells`` so that the blocks extending it are not grouped again."""
    n, arity = codes.shape[1], ops.cond.shape[1]
    limit = max(1, n // ops.routes.pair_cell_ratio)
    if state.many_cells is not None:
        had_limit, had = state.many_cells
        if had_limit == limit and ops.block[:len(had)] == had:
            return None
    ids, num, _, used = block_patterns(codes, ops.block, arity, limit)
    if used == len(ops.block) and num * arity * state.posterior.shape[1] <= limit:
        return ids, num
    state.many_cells = (limit, ops.block)
    return None


def run_chunk(codes: np.ndarray, y: np.ndarray, state: ChunkState | NaiveState | None,
              ops: StepOps, w: np.ndarray | None = None) -> np.ndarray:
    """One pass over a chunk of rows: the (D,) fixed-point partial sums of ``ops`` (wide,
    (2, D), with row weights ``w``).

    ``state`` is the chunk's :class:`ChunkState` (pairwise; required) or
    :class:`NaiveState` (naive; optional, None rebuilds the posterior)."""
    if ops.pairwise:
        assert isinstance(state, ChunkState) and ops.block
        return pairwise_partials(codes, y, state, ops, w)
    assert state is None or isinstance(state, NaiveState)
    return naive_partials(codes, ops, state, w)


def pair_counts(codes: np.ndarray, y: np.ndarray, f: int, arity: int, num_classes: int,
                w: np.ndarray | None = None) -> np.ndarray:
    """``n(x_i = a, x_f = b, y)`` for every feature i: shape (D, A, A, L), int64 (sums of
    the row weights ``w`` if given)."""
    y64 = np.asarray(y, dtype=np.int64)
    if w is not None:
        return kernels.pair_counts_w(codes, y64, f, arity, num_classes, w)
    return kernels.pair_counts(codes, y64, f, arity, num_classes)


def feature_counts(codes: np.ndarray, y: np.ndarray, arity: int, num_classes: int,
                   w: np.ndarray | None = None) -> np.ndarray:
    """``n(x_i = a, y)`` for every feature i: shape (D, A, L), int64 (sums of the row
    weights ``w`` if given)."""
    y64 = np.asarray(y, dtype=np.int64)
    if w is not None:
        return kernels.feature_counts_w(codes, y64, arity, num_classes, w)
    return kernels.feature_counts(codes, y64, arity, num_classes)


def pair_counts_many(codes: np.ndarray, y: np.ndarray, fs, arity: int,
                     num_classes: int, w: np.ndarray | None = None) -> np.ndarray:
    """``n(x_i = a, x_f = b, y)`` for every feature i and every f in ``fs``.

    Shape (len(fs), D, A, A, L), int64; ``out[k]`` equals ``pair_counts(codes, y, fs[k], ...)``.
    """
    fs = [int(f) for f in fs]
    num_features = codes.shape[0]
    out = np.empty((len(fs), num_features, arity, arity, num_classes), dtype=np.int64)
    for k, f in enumerate(fs):
        out[k] = pair_counts(codes, y, f, arity, num_classes, w)
    return out
