"""Greedy forward selection with the restart rule (the paper's Algorithm 1).

The loop runs on the driver and is independent of where the rows live: a
*backend* supplies the count tables and runs one pass of :class:`StepOps` over
all rows, returning the exact (fixed-point) per-feature sums.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from .bound import NAIVE, PAIRWISE, SCALE, StepOps, naive_own
from .tables import conditional, mutual_information, pair_conditional, safe_log


class Backend(Protocol):
    """Where the rows live: in memory, or cached on a Spark cluster.

    Implemented by :class:`vmi_spark.core.inmemory.InMemoryBackend`,
    :class:`vmi_spark.spark.backend.SparkBackend` and
    :class:`vmi_spark.spark.resident.ResidentBackend`.
    """

    def feature_counts(self) -> np.ndarray:
        """(D, A, L) int64 counts n(x_i = a, y)."""

    def pair_counts(self, f: int) -> np.ndarray:
        """(D, A, A, L) int64 counts n(x_i = a, x_f = b, y)."""

    def pair_counts_many(self, fs: list[int]) -> np.ndarray:
        """(len(fs), D, A, A, L) int64 counts n(x_i = a, x_f = b, y) for every f in ``fs``."""

    def close(self) -> None:
        """Release what the backend holds (it is not used afterwards)."""

    def run(self, ops: StepOps) -> np.ndarray:
        """Apply ``ops`` to every block; return the summed (D,) int64 partials.

        For ``vmi_naive`` these are the mixture terms only (:func:`.bound.naive_partials`);
        the loop adds :func:`.bound.naive_own`.
        """


#: why a selection ended: K features selected; the best candidate gained less than the
#: threshold (``min_gain``); every feature selected; no feature informative on its own;
#: an ``on_step`` callback raised :class:`StopSelection`
STOP_REASONS = ("num_features", "threshold", "no_features_left", "no_information", "callback")


class StopSelection(Exception):
    """Raised by an ``on_step`` callback to end the selection after the current step."""


class ResumeMismatch(ValueError):
    """A saved selection (a checkpoint) that replaying its steps does not reproduce."""


def check_replayed(saved: Selection, t: int, feature: int | None, score: float,
                   gain: float, block: int, candidates: list[tuple[int, float]] | None) -> None:
    """Raise :class:`ResumeMismatch` unless step ``t`` (0-based) of ``saved`` is what the
    replay computed: the feature (None: the replay stopped there), its score, gain and
    block, and (when recorded) the candidates."""
    if feature is None:
        raise ResumeMismatch(f"it has {len(saved.selected)} steps; the selection stops after "
                             f"{t}")
    got = (feature, score, gain, block)
    want = (saved.selected[t], saved.scores[t], saved.gains[t], saved.blocks[t])
    if got != want:
        raise ResumeMismatch(
            f"step {t + 1} selects feature {feature} (score {score!r}, gain {gain!r}, block "
            f"{block}); the checkpoint says feature {want[0]} (score {want[1]!r}, gain "
            f"{want[2]!r}, block {want[3]})")
    if candidates is not None and saved.candidates and \
            [tuple(c) for c in saved.candidates[t]] != list(candidates):
        raise ResumeMismatch(f"step {t + 1}'s candidates are not the checkpoint's")


@dataclass
class Selection:
    """The outcome of a selection: per step the feature, the block's bound, the block."""

    method: str
    selected: list[int] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    gains: list[float] = field(default_factory=list)
    blocks: list[int] = field(default_factory=list)
    step_seconds: list[float] = field(default_factory=list)
    candidates: list[list[tuple[int, float]]] = field(default_factory=list)
    restarts: int = 0
    stopped_early: str | None = None
    #: why the selection ended: one of :data:`STOP_REASONS`
    stop_reason: str | None = None
    num_rows: int = 0
    mutual_information: list[float] = field(default_factory=list)


def report_fields(sel: Selection, names: list[str]) -> dict:
    """The per-step fields of a report (``selection.json``) for feature ``names``."""
    out = {
        "method": sel.method,
        "features": list(names),
        "selected": [names[i] for i in sel.selected],
        "selected_indices": list(sel.selected),
        "scores": list(sel.scores),
        "gains": list(sel.gains),
        "blocks": list(sel.blocks),
        "restarts": sel.restarts,
        "stopped_early": sel.stopped_early,
        "stop_reason": sel.stop_reason,
        "step_seconds": list(sel.step_seconds),
    }
    if sel.candidates:
        out["candidates"] = [[{"feature": names[i], "index": i, "score": v} for i, v in step]
                             for step in sel.candidates]
    return out


def restore_steps(result: Selection, saved: Selection) -> None:
    """Copy the per-step record of ``saved`` into ``result`` (a resumed run)."""
    for name in ("selected", "scores", "gains", "blocks", "step_seconds", "candidates"):
        setattr(result, name, [list(v) if isinstance(v, list) else v
                               for v in getattr(saved, name)])
    result.restarts = saved.restarts


def _new_block_reaches(mi: np.ndarray, candidates: np.ndarray, min_gain: float) -> bool:
    """Whether a new block would start with a gain of at least ``min_gain``."""
    return bool(candidates.any() and np.max(mi[candidates]) >= min_gain)


def _below_threshold(gain: float, min_gain: float | None, in_block: bool) -> str:
    """The report's sentence for a selection that stopped on the gain threshold."""
    what = ("raises the bound by" if in_block
            else "has a one-feature bound (mutual information) of")
    tail = " and no new block would start above it" if in_block else ""
    return f"the best candidate {what} {gain:.6g} nats, below the threshold {min_gain:g}{tail}"


def top_candidates(values: np.ndarray, n: int) -> list[tuple[int, float]]:
    """The ``n`` best (index, value) pairs, best first, ties to the lowest index."""
    if n <= 0:
        return []
    finite = np.flatnonzero(np.isfinite(values))
    order = finite[np.lexsort((finite, -values[finite]))]
    return [(int(i), float(values[i])) for i in order[:n]]


def select_vmi(
    backend: Backend,
    method: str,
    num_features: int,
    restart_tolerance: float = 0.0,
    report_candidates: int = 0,
    on_step: Callable[[Selection], None] | None = None,
    resume: Selection | None = None,
    conditional_fn: Callable[[np.ndarray], np.ndarray] | None = None,
    min_gain: float | None = None,
) -> Selection:
    """Select up to ``num_features`` features by maximising the variational bound.

    Parameters
    ----------
    backend : Backend
        Supplies count tables and runs passes over the rows.
    method : {"vmi_naive", "vmi_pairwise"}
        The Q-distribution.
    num_features : int
        How many features to select (K).
    restart_tolerance : float
        A block is cleared when the best candidate raises its bound by no more
        than this (0.0 in the paper's Algorithm 1; the authors' program uses 1e-2).
    report_candidates : int
        Also record the best ``report_candidates`` (feature, bound) pairs per step.
    on_step : callable, optional
        Called with the running :class:`Selection` after every selected feature.
    resume : Selection, optional
        A selection saved after a completed step of the same run (same data and
        parameters). Its steps are not trusted: they are replayed through the greedy
        rule (each step's candidates scored again, the restart rule applied) and must
        come out the same, bit for bit (features, scores, gains, blocks, and the
        candidates when recorded), else :class:`ResumeMismatch`; the loop then continues
        after its last step (``on_step`` only for the new steps) and ends with the same
        result as an uninterrupted run. The replay costs what those steps cost.
    conditional_fn : callable, optional
        Maps the (D, A, L) counts to the table p(x_i = a | y) used by the naive Q
        (for example :func:`vmi_spark.core.kde.kde_conditional`); the default is
        the plug-in estimate. With it, the first feature of a block is chosen by
        the bound of a one-feature block under that table (one pass over the rows)
        instead of the plug-in mutual information. ``vmi_naive`` only.
    min_gain : float, optional
        Stop when the best candidate raises the current block's bound by less than
        this (nats) and no restart would help: a block whose best gain falls below
        ``min_gain`` is restarted if some remaining feature's one-feature bound
        (its mutual information with the label) reaches ``min_gain``; otherwise the
        selection ends with ``stop_reason = "threshold"``. ``num_features`` stays
        an upper bound. ``None`` (the default) never stops on the gain.

    Returns
    -------
    Selection

    References
    ----------
    S. Gao, G. Ver Steeg, A. Galstyan. Variational Information Maximization for
    Feature Selection. NIPS 2016, Algorithm 1.
    """
    if method not in (NAIVE, PAIRWISE):
        raise ValueError(f"unknown method {method!r}")
    counts = backend.feature_counts()
    num_cols = counts.shape[0]
    n_rows = int(counts[0].sum())
    prior = counts[0].sum(axis=0) / n_rows
    if conditional_fn is not None and method != NAIVE:
        raise ValueError("conditional_fn is supported for vmi_naive only")
    cond = conditional(counts) if conditional_fn is None else conditional_fn(counts)
    # the naive bound's first term depends only on the counts: added to every naive pass
    own = naive_own(counts, cond) if method == NAIVE else np.zeros(num_cols, dtype=np.int64)
    if conditional_fn is None:
        mi = mutual_information(counts)
    else:  # the one-feature bound under the given table: I_LB of block {i} for every i
        ops = StepOps(method=method, prior=prior, cond=cond,
                      candidates=np.ones(num_cols, dtype=bool), label=f"{method} relevance")
        mi = (backend.run(ops) + own).astype(np.float64) / SCALE / n_rows
    result = Selection(method=method, num_rows=n_rows, mutual_information=[float(v) for v in mi])

    chosen = np.zeros(num_cols, dtype=bool)
    block: list[int] = []
    tables: dict[int, np.ndarray] = {}
    bound = 0.0
    block_index = 0
    replay = resume if resume is not None and resume.selected else None
    t_step = time.perf_counter()

    while len(result.selected) < num_features:
        t = len(result.selected)
        replaying = replay is not None and t < len(replay.selected)
        candidates = ~chosen
        if not candidates.any():
            result.stopped_early = "no features left to select"
            result.stop_reason = "no_features_left"
            break
        if not block:
            gains = np.where(candidates, mi, -np.inf)
        else:
            ops = StepOps(method=method, prior=prior, cond=cond, candidates=candidates,
                          block=tuple(block), pair_log_tables=tables,
                          label=f"{method} step {len(result.selected) + 1}/{num_features}")
            sums = (backend.run(ops) + own).astype(np.float64) / SCALE
            gains = np.where(candidates, sums / n_rows, -np.inf)
        best = int(np.argmax(gains))  # first maximum: ties go to the lowest index
        gain = float(gains[best])
        below = min_gain is not None and gain < min_gain
        if block and (not gain > restart_tolerance
                      or min_gain is not None and below
                      and _new_block_reaches(mi, candidates, min_gain)):
            block = []
            tables = {}
            bound = 0.0
            block_index += 1
            result.restarts += 1
            continue
        if not block and not gain > 0.0:
            result.stop_reason = "no_information"
            result.stopped_early = (
                "no remaining feature has positive mutual information with the label "
                f"(selected {len(result.selected)} of {num_features})")
            warnings.warn(f"VMI selection stopped early: {result.stopped_early}", RuntimeWarning,
                          stacklevel=2)
            break
        if below:
            result.stop_reason = "threshold"
            result.stopped_early = _below_threshold(gain, min_gain, bool(block))
            break
        if report_candidates:
            result.candidates.append(top_candidates(bound + gains if block else gains,
                                                    report_candidates))
        bound = gain if not block else bound + gain
        if replaying:
            assert replay is not None
            check_replayed(replay, t, best, bound, gain, block_index,
                           result.candidates[t] if report_candidates else None)
        block.append(best)
        chosen[best] = True
        if method == PAIRWISE:
            tables[best] = safe_log(pair_conditional(backend.pair_counts(best)))
        result.selected.append(best)
        result.scores.append(bound)
        result.gains.append(gain)
        result.blocks.append(block_index)
        now = time.perf_counter()
        result.step_seconds.append(now - t_step)
        t_step = now
        if replaying:  # the saved step, as it was (its time included)
            assert replay is not None
            result.step_seconds[t] = replay.step_seconds[t]
            continue
        if on_step is not None:
            try:
                on_step(result)
            except StopSelection:
                result.stop_reason = "callback"
                break
    if replay is not None and len(result.selected) < len(replay.selected):
        check_replayed(replay, len(result.selected), None, 0.0, 0.0, 0, None)
    if result.stop_reason is None:
        result.stop_reason = "num_features"
    return result
