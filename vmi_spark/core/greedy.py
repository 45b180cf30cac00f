"""The greedy loop: forward selection over any criterion, with the restart rule.

One loop (:func:`select`) runs every method. It is independent of where the rows live
and of what a method scores: a *backend* (:class:`Backend`) supplies the count tables
and runs passes over the rows, and a *criterion* (:class:`~.criterion.Criterion`, from
the registry in :mod:`.criteria`) turns them into every candidate's gain at each step.
The loop takes the best candidate (ties to the lowest index), records the step, and
decides when to stop; for the variational bound it also keeps the current block and
clears it by the paper's restart rule (Algorithm 1).

A resumed selection (a checkpoint's steps) is not trusted: the loop runs its steps again
through the same scorer and requires each to come out the same, bit for bit
(:class:`ResumeMismatch` otherwise), before it goes on.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from . import criteria
from .criterion import Backend, Criterion, Scorer
from .report_schema import SelectionReport

__all__ = ["Backend", "STOP_REASONS", "StopSelection", "ResumeMismatch", "Selection",
           "report_fields", "restore_steps", "top_candidates", "select", "select_vmi",
           "select_classic"]


#: why a selection ended: K features selected; the best candidate gained less than the
#: threshold (``min_gain``); every feature selected; no feature informative on its own;
#: no remaining feature significant (``stop_level``); an ``on_step`` callback raised
#: :class:`StopSelection`
STOP_REASONS = ("num_features", "threshold", "no_features_left", "no_information",
                "not_significant", "callback")


class StopSelection(Exception):
    """Raised by an ``on_step`` callback to end the selection after the current step."""


class ResumeMismatch(ValueError):
    """A saved selection (a checkpoint) that replaying its steps does not reproduce."""


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
    #: the suspect features found before the steps (:mod:`.suspects`, report entries)
    suspects: list[dict] = field(default_factory=list)
    #: the selected features' copies (:func:`.suspects.copy_groups`, report entries)
    duplicates: list[dict] = field(default_factory=list)


def report_fields(sel: Selection, names: list[str]) -> SelectionReport:
    """The per-step fields of a report (``selection.json``) for feature ``names``."""
    out: SelectionReport = {
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
        "suspects": [dict(s) for s in sel.suspects],
        "duplicates": [dict(d) for d in sel.duplicates],
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


def top_candidates(values: np.ndarray, n: int) -> list[tuple[int, float]]:
    """The ``n`` best (index, value) pairs, best first, ties to the lowest index."""
    if n <= 0:
        return []
    finite = np.flatnonzero(np.isfinite(values))
    order = finite[np.lexsort((finite, -values[finite]))]
    return [(int(i), float(values[i])) for i in order[:n]]


@dataclass
class _Block:
    """The current block of a criterion with blocks (:attr:`Criterion.vmi`): its features
    in selection order, its bound and its index (0, +1 at each restart). A criterion
    without blocks leaves it empty: its score is the gain."""

    features: list[int] = field(default_factory=list)
    bound: float = 0.0
    index: int = 0


def _criterion(criterion: Criterion | str,
               conditional_fn: Callable[[np.ndarray], np.ndarray] | None,
               min_gain: float | None) -> Criterion:
    """The criterion (a registered name, or an object), checked against the arguments."""
    if isinstance(criterion, str):
        try:
            criterion = criteria.criterion(criterion)
        except KeyError:
            names = tuple(c.name for c in criteria.registered())
            raise ValueError(f"unknown method {criterion!r}; expected one of {names}") from None
    if min_gain is not None and not criterion.nats:
        raise ValueError(f"a gain threshold is not defined for {criterion.name} (its values "
                         f"are {criterion.unit}, not nats)")
    if conditional_fn is not None and not criterion.kde:
        kde = ", ".join(c.name for c in criteria.registered() if c.kde)
        raise ValueError(f"conditional_fn is supported for {kde} only")
    return criterion


class _Replay:
    """The saved steps of a resumed selection (none without one), checked one by one as
    the loop runs them again (:func:`select`)."""

    def __init__(self, saved: Selection | None, num_cols: int):
        saved = saved if saved is not None else Selection(method="")
        n = len(saved.selected)
        if any(len(getattr(saved, name)) != n for name in ("scores", "gains", "blocks")):
            raise ResumeMismatch(f"it has {n} selected features but "
                                 f"{len(saved.scores)} scores, {len(saved.gains)} gains and "
                                 f"{len(saved.blocks)} blocks")
        for t, f in enumerate(saved.selected):
            if not isinstance(f, (int, np.integer)) or isinstance(f, bool) \
                    or not 0 <= f < num_cols or f in saved.selected[:t]:
                raise ResumeMismatch(f"step {t + 1} selects {f!r}, not one of the {num_cols} "
                                     "features not selected before it")
        self.saved, self.steps = saved, n

    def covers(self, t: int) -> bool:
        """Whether step ``t`` (0-based) is a saved one, replayed rather than new."""
        return t < self.steps

    def label(self, t: int) -> str:
        return " (replay)" if self.covers(t) else ""

    def check(self, t: int, feature: int, score: float, gain: float, block: int,
              candidates: list[tuple[int, float]] | None) -> None:
        """Raise :class:`ResumeMismatch` unless step ``t`` (0-based) as replayed (its
        feature, score, gain and block, and the candidates when both have them) is the
        saved one; nothing for a new step."""
        if not self.covers(t):
            return
        saved = self.saved
        want = (saved.selected[t], saved.scores[t], saved.gains[t], saved.blocks[t])
        if (feature, score, gain, block) != want:
            raise ResumeMismatch(
                f"step {t + 1} selects feature {feature} (score {score!r}, gain {gain!r}, "
                f"block {block}); the checkpoint says feature {want[0]} (score {want[1]!r}, "
                f"gain {want[2]!r}, block {want[3]})")
        if candidates is not None and t < len(saved.candidates) and \
                [tuple(c) for c in saved.candidates[t]] != list(candidates):
            raise ResumeMismatch(f"step {t + 1}'s candidates are not the checkpoint's")

    def recorded(self, result: Selection, t: int) -> bool:
        """After step ``t`` is recorded in ``result``: a replayed step keeps its saved time,
        and after the last one the restarts counted must be the saved ones. True for a
        replayed step (nobody is told of it again)."""
        if not self.covers(t):
            return False
        if t < len(self.saved.step_seconds):
            result.step_seconds[t] = self.saved.step_seconds[t]
        if t + 1 == self.steps and result.restarts != self.saved.restarts:
            raise ResumeMismatch(f"its {self.steps} steps make {result.restarts} restarts; "
                                 f"the checkpoint says {self.saved.restarts}")
        return True

    def finished(self, result: Selection, num_features: int) -> None:
        """Raise :class:`ResumeMismatch` if the selection ended before the saved steps did."""
        t = len(result.selected)
        if t < self.steps:
            why = (result.stopped_early or result.stop_reason) \
                if result.stop_reason not in (None, "num_features") \
                else f"{num_features} features asked for"
            raise ResumeMismatch(f"it has {self.steps} steps; the selection stops after {t} "
                                 f"({why})")


def _new_block_reaches(mi: np.ndarray, candidates: np.ndarray, min_gain: float) -> bool:
    """Whether a new block would start with a gain of at least ``min_gain``."""
    return bool(candidates.any() and np.max(mi[candidates]) >= min_gain)


def _stop(result: Selection, reason: str, why: str | None = None) -> None:
    result.stop_reason = reason
    result.stopped_early = why


def _restarts(block: _Block, gain: float, candidates: np.ndarray, relevance: np.ndarray,
              restart_tolerance: float, min_gain: float | None) -> bool:
    """The restart rule: a block whose best gain is no more than ``restart_tolerance``, or
    below ``min_gain`` when a new block would start at ``min_gain`` or more, is cleared."""
    if not block.features:
        return False
    if not gain > restart_tolerance:
        return True
    return min_gain is not None and gain < min_gain \
        and _new_block_reaches(relevance, candidates, min_gain)


def _stops(result: Selection, crit: Criterion, block: _Block, gain: float, raw: float,
           min_gain: float | None, num_features: int, warn: bool = True) -> bool:
    """Whether the selection ends before taking the best candidate (its compared gain
    ``gain``, its plug-in gain ``raw``): a new block of the bound that would start without
    information (plug-in mutual information 0), or a gain below ``min_gain``. Records why
    in ``result`` (and warns of the first, with ``warn``)."""
    if crit.vmi and not block.features and not raw > 0.0:
        _stop(result, "no_information", "no remaining feature has positive mutual "
              f"information with the label (selected {len(result.selected)} of "
              f"{num_features})")
        if warn:
            warnings.warn(f"VMI selection stopped early: {result.stopped_early}",
                          RuntimeWarning, stacklevel=3)  # select's caller
        return True
    if min_gain is not None and gain < min_gain:
        _stop(result, "threshold", crit.below_threshold(gain, min_gain, bool(block.features)))
        return True
    return False


def _insignificant(result: Selection, level: float | None) -> str:
    """The report's sentence for a selection that ended where the evidence did."""
    return (f"no remaining feature is related to the label significantly at {level:g} "
            f"(G-test, Bonferroni over the features; selected {len(result.selected)})")


def _corrected(scorer: Scorer, raw: np.ndarray, block: Sequence[int], candidates: np.ndarray,
               chance: bool, significance: float | None) -> np.ndarray:
    """The gains the loop compares: ``raw`` itself, or with ``chance`` each less the gain
    it reaches by chance; with ``significance`` too, only the gains that extend a block
    significantly at that level (Bonferroni over the candidates: the G-test's critical
    value at 1 - level / m) stay, the others are -inf (none: a restart). The first
    feature of a block is the best by its corrected relevance, tested or not, among the
    candidates with some plug-in information (with none left, the loop stops)."""
    if not chance:
        return raw
    gains = raw - scorer.chance(block)
    if not len(block):  # a feature independent of the label in the sample never starts one
        return np.where(raw > 0.0, gains, -np.inf)
    if significance is not None:  # a new block takes the best, tested or not
        m = max(int(candidates.sum()), 1)
        gains = np.where(raw > scorer.chance(block, 1.0 - significance / m), gains, -np.inf)
    return gains


def _candidates(gains: np.ndarray, values: np.ndarray, block: _Block,
                n: int) -> list[tuple[int, float]]:
    """The best ``n`` candidates, best first: the bound of the block each would give, or
    the criterion's value."""
    ranked = block.bound + gains if block.features else gains
    shown = block.bound + values if block.features else values
    return [(i, float(shown[i])) for i, _ in top_candidates(ranked, n)]


def _score(block: _Block, gain: float) -> float:
    """The score of a step that adds ``gain`` to ``block`` (the gain itself in a new or no
    block)."""
    return block.bound + gain if block.features else gain


def _record(result: Selection, block: _Block, best: int, gain: float, blocks: bool,
            t_step: float) -> float:
    """Add ``best`` to the selection (and, with blocks, to the block) with its ``gain``
    and the seconds since ``t_step``; returns the time now."""
    score = _score(block, gain)
    if blocks:
        block.features.append(best)
        block.bound = score
    result.selected.append(best)
    result.scores.append(score)
    result.gains.append(gain)
    result.blocks.append(block.index)
    now = time.perf_counter()
    result.step_seconds.append(now - t_step)
    return now


def select(
    backend: Backend,
    criterion: Criterion | str,
    num_features: int,
    *,
    restart_tolerance: float = 0.0,
    report_candidates: int = 0,
    on_step: Callable[[Selection], None] | None = None,
    resume: Selection | None = None,
    conditional_fn: Callable[[np.ndarray], np.ndarray] | None = None,
    min_gain: float | None = None,
    chance: bool = False,
    significance: float | None = None,
    stop_level: float | None = None,
    exclude: Sequence[int] = (),
    copies: Mapping[int, Sequence[int]] | None = None,
) -> Selection:
    """Select up to ``num_features`` features greedily by ``criterion``.

    At each step the criterion gives every candidate's gain and the best is selected
    (ties to the lowest index). For the variational bound (a criterion with
    :attr:`~.criterion.Criterion.vmi`) the features are chosen in blocks: a step's gain
    is what the candidate adds to the block's bound, a block starts with the feature of
    most mutual information with the label, and a block whose best gain is no more than
    ``restart_tolerance`` is cleared (a restart), as in the paper's Algorithm 1.

    Parameters
    ----------
    backend : Backend
        Supplies count tables and runs passes over the rows.
    criterion : Criterion or str
        The method: a registered name (``vmi_naive``, ``vmi_pairwise``, ``mim``,
        ``mrmr``, ``jmi``, ``cmim``, ``cife``, ``spec_cmi``; :mod:`.criteria`) or a
        criterion object.
    num_features : int
        How many features to select (K).
    restart_tolerance : float
        A block is cleared when the best candidate raises its bound by no more
        than this (0.0 in the paper's Algorithm 1; the authors' program uses 1e-2).
        Criteria with blocks only.
    report_candidates : int
        Also record the best ``report_candidates`` (feature, score) pairs per step.
    on_step : callable, optional
        Called with the running :class:`Selection` after every selected feature;
        raising :class:`StopSelection` ends the selection.
    resume : Selection, optional
        A selection saved after a completed step of the same run (same data and
        parameters). Its steps are not trusted: the loop runs them again through the
        criterion (every candidate scored, the restart rule applied; the comparison
        criteria fold the saved features' pair tables from bulk count passes) and each
        must come out the same, bit for bit (feature, score, gain, block, the candidates
        when both have them, and the restarts), else :class:`ResumeMismatch`, raised
        before any new step. The loop then continues after the last saved step
        (``on_step`` only for the new steps; the saved step times kept) and ends with the
        same result as an uninterrupted run. The replay costs what those steps cost.
    conditional_fn : callable, optional
        Maps the (D, A, L) counts to the table p(x_i = a | y) used by the naive Q
        (for example :func:`vmi_spark.core.kde.kde_conditional`); the default is
        the plug-in estimate. With it, the first feature of a block is chosen by
        the bound of a one-feature block under that table (one pass over the rows)
        instead of the plug-in mutual information. Criteria with
        :attr:`~.criterion.Criterion.kde` only (``vmi_naive``).
    min_gain : float, optional
        Stop when the best candidate's gain is less than this (nats); ``num_features``
        stays an upper bound. For the bound, a block whose best gain falls below
        ``min_gain`` is restarted if some remaining feature's one-feature bound (its
        mutual information with the label) reaches ``min_gain``; otherwise the
        selection ends with ``stop_reason = "threshold"``. Not defined for a criterion
        whose values are not in nats (SPEC_CMI: eigenvector entries). ``None`` (the
        default) never stops on the gain.
    chance : bool
        Rank and restart by each candidate's gain less the gain it would reach by chance
        (:meth:`~.criterion.Scorer.chance`: for the bound (A_i - 1)(L - 1) / 2N nats,
        :func:`.criteria.chance_gains`; nothing for the comparison criteria), not by the
        plug-in gain itself; ``min_gain`` compares the corrected gain. The scores and
        gains recorded stay the plug-in ones (the bound), and the selection still stops
        early only when no remaining feature has any plug-in information. False (the
        default) is the paper's Algorithm 1 on plug-in estimates.
    significance : float, optional
        With ``chance``: a block grows only with a candidate whose gain is significant at
        this level by the G-test (2N times the gain against the chi-square quantile with
        the candidate's degrees of freedom, Bonferroni over the candidates); when none is,
        the block restarts. A new block starts with the best corrected relevance. With
        ``restart_tolerance`` -inf (never restart) there is no test.
    stop_level : float, optional
        Stop where the evidence stops (the default when no K is given): only a feature
        whose own I(x_i; y) is significant at this level by the G-test (Bonferroni over
        the D features, :func:`.criteria.significant_relevance`) may start a block of the
        bound or be taken by a comparison criterion; with ``chance``, a block grows only
        with a significant gain (``significance`` at this level). When no remaining
        feature qualifies the selection ends with ``stop_reason = "not_significant"``
        (``num_features`` stays an upper bound).
    exclude : sequence of int
        Features that are never candidates (the suspects ``dropSuspects`` leaves out).
    copies : mapping, optional
        ``{feature: its copies}`` (:func:`.suspects.copy_groups`): once a feature is
        selected its copies are no longer candidates (a copy adds nothing to I(x_S; y),
        though the naive Bayes bound would count it twice).

    Returns
    -------
    Selection
        Per step the feature, its score (the block's bound; for a comparison
        criterion its value, for SPEC_CMI its eigenvector entry), its gain and its
        block (all 0 without blocks); why the selection ended (:data:`STOP_REASONS`).

    Raises
    ------
    ValueError
        An unknown method, or an argument the criterion does not take.
    ResumeMismatch
        ``resume`` is not what this selection's first steps are.

    References
    ----------
    S. Gao, G. Ver Steeg, A. Galstyan. Variational Information Maximization for
    Feature Selection. NIPS 2016, Algorithm 1.
    G. Brown, A. Pocock, M.-J. Zhao, M. Lujan. Conditional Likelihood Maximisation:
    A Unifying Framework for Information Theoretic Feature Selection. JMLR 13, 2012.
    """
    crit = _criterion(criterion, conditional_fn, min_gain)
    if not crit.corrected:  # a comparison criterion's gain is its own score
        chance, significance = False, None
    if restart_tolerance == -np.inf:  # one block: nothing to restart on
        significance = None
    t_step = time.perf_counter()
    scorer = crit.start(backend, conditional_fn)
    result = Selection(method=crit.name, num_rows=scorer.num_rows,
                       mutual_information=[float(v) for v in scorer.relevance])
    chosen = np.zeros(len(scorer.relevance), dtype=bool)
    never = np.zeros(len(chosen), dtype=bool)
    never[list(exclude)] = True
    # a new block's first gain: the relevance (beyond chance, with ``chance``)
    relevance = _corrected(scorer, scorer.relevance, (), ~chosen, chance, significance)
    block = _Block()
    replay = _Replay(resume, len(chosen))
    if replay.steps:
        scorer.replay(list(replay.saved.selected))
    evident = None if stop_level is None else criteria.significant_relevance(
        backend.feature_counts(), scorer.relevance, stop_level)
    if evident is not None and chance and significance is None and crit.corrected \
            and restart_tolerance != -np.inf:
        significance = stop_level  # a block grows only with a significant gain
    while len(result.selected) < num_features:
        t = len(result.selected)
        candidates = ~chosen & ~never
        if not candidates.any():
            _stop(result, "no_features_left", "no features left to select")
            break
        if evident is not None and not (crit.vmi and block.features) and \
                not (candidates & evident).any():
            _stop(result, "not_significant", _insignificant(result, stop_level))
            break
        label = f"{crit.name} step {t + 1}/{num_features}" + replay.label(t)
        raw = np.where(candidates, scorer.gains(candidates, block.features, label), -np.inf)
        gains = _corrected(scorer, raw, block.features, candidates, chance, significance)
        if evident is not None and not (crit.vmi and block.features):
            gains = np.where(evident, gains, -np.inf)  # a new block, or a criterion's pick
        best = int(np.argmax(gains))  # first maximum: ties go to the lowest index
        gain = float(gains[best])
        if _restarts(block, gain, candidates, relevance, restart_tolerance, min_gain):
            block = _Block(index=block.index + 1)
            scorer.restart()
            result.restarts += 1
            continue
        if _stops(result, crit, block, gain, float(raw[best]), min_gain, num_features,
                  warn=not replay.covers(t)):
            break
        values = scorer.values(raw)
        if report_candidates:
            result.candidates.append(_candidates(gains, values, block, report_candidates))
        # a saved step is checked before the scorer is told, so before it counts anything
        replay.check(t, best, _score(block, float(values[best])), float(values[best]),
                     block.index, result.candidates[t] if report_candidates else None)
        chosen[best] = True
        if copies:
            never[list(copies.get(best, ()))] = True
        scorer.chose(best)
        t_step = _record(result, block, best, float(values[best]), crit.vmi, t_step)
        if replay.recorded(result, t):  # the saved step, as it was (its time included)
            continue
        if on_step is not None:
            try:
                on_step(result)
            except StopSelection:
                result.stop_reason = "callback"
                break
    replay.finished(result, num_features)
    if result.stop_reason is None:
        result.stop_reason = "num_features"
    return result


def _names(vmi: bool) -> tuple[str, ...]:
    """The registered criteria with blocks (``vmi``), or without."""
    return tuple(c.name for c in criteria.registered() if c.vmi == vmi)


def select_vmi(backend: Backend, method: str, num_features: int,
               restart_tolerance: float = 0.0, report_candidates: int = 0,
               on_step: Callable[[Selection], None] | None = None,
               resume: Selection | None = None,
               conditional_fn: Callable[[np.ndarray], np.ndarray] | None = None,
               min_gain: float | None = None) -> Selection:
    """:func:`select` by a Q-distribution of the bound (``method``: ``vmi_naive`` or
    ``vmi_pairwise``; ``ValueError`` for another), the arguments by position too."""
    if method not in _names(vmi=True):
        raise ValueError(f"unknown method {method!r}")
    return select(backend, method, num_features, restart_tolerance=restart_tolerance,
                  report_candidates=report_candidates, on_step=on_step, resume=resume,
                  conditional_fn=conditional_fn, min_gain=min_gain)


def select_classic(backend: Backend, method: str, num_features: int,
                   report_candidates: int = 0,
                   on_step: Callable[[Selection], None] | None = None,
                   resume: Selection | None = None,
                   min_gain: float | None = None) -> Selection:
    """:func:`select` by a comparison criterion (``method``: ``mim``, ``mrmr``, ``jmi``,
    ``cmim``, ``cife`` or ``spec_cmi``; ``ValueError`` for another), the arguments by
    position too."""
    if method not in _names(vmi=False):
        raise ValueError(f"unknown method {method!r}; expected one of {_names(vmi=False)}")
    return select(backend, method, num_features, report_candidates=report_candidates,
                  on_step=on_step, resume=resume, min_gain=min_gain)
