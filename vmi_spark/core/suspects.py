"""Suspect features: leaks of the label and identifiers, found before the steps.

A feature selector ranks columns by what they say about the label; a column that says
*everything* about it is more often a leak (the label in another form: its rank or
quartile, a date recorded only for one class, a grade the target is computed from) than
a discovery, and a column that names each row (an identifier) says nothing that holds on
new rows. Neither is refused: each is named with the number behind it, in the log before
the steps, in ``selection.json`` (``suspects``) and in report.md, and can be left out of
the candidates (``dropSuspects``).

Three checks, each a statistic of what the selection computes anyway (the count tables
n(x_i, y) and the statistics pass), so they cost no pass over the rows:

* **leak**: the information of a feature about the label, less its chance level
  (:func:`.criteria.chance_gains`), is at least :data:`LEAK_SHARE` of the smaller of the
  two entropies H(x_i), H(y) (the uncertainty coefficient of the direction in which the
  dependence is strongest): the feature nearly determines the label, or is nearly
  determined by it (a function of the label).
* **missing_leak**: whether the feature is missing tells the label with the same share:
  its missingness indicator m_i carries at least :data:`LEAK_SHARE` of min(H(m_i), H(y))
  (a date of death, present exactly when the label says "died").
* **identifier**: nearly every row has a value of its own, and the column shows no relation
  to the label (its information is not significant at :data:`ID_LEVEL` by the G-test: a
  high-resolution measurement, an income in whole dollars, is near-unique in a small table
  too, but it is related to what it predicts): a string, or a column of whole numbers,
  with at least :data:`ID_SHARE` distinct values among its values (strings
  counted exactly by the grouping pass, whole numbers by a k-minimum-values sketch of the
  statistics pass, :func:`vmi_spark.core.rows.distinct_estimate`). Found by the planner
  (:func:`vmi_spark.core.planning.build_plan`'s ``identifiers``).

Why :data:`LEAK_SHARE` = 0.9: an uncertainty coefficient is the fraction by which
knowing one variable cuts the entropy of the other. Ordinary predictors, even strong
ones, leave most of the label's uncertainty (the strongest single columns of the
benchmark tables of docs/quality.md reach 0.3-0.8 after the chance correction); 0.9 means
that the column alone leaves a tenth of it, which for a binary label is a column that
agrees with it on about 99 rows in 100.

References
----------
H. Theil. On the estimation of relationships involving qualitative variables. American
Journal of Sociology 76(1), 1970 (the uncertainty coefficient).
S. Kaufman, S. Rosset, C. Perlich, O. Stitelman. Leakage in data mining: formulation,
detection, and avoidance. ACM TKDD 6(4), 2012.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import literal, phrase
from .criteria import chance_gains, corrected
from .encoding import EncodingPlan
from .rows import SKETCH_K

__all__ = ["LEAK_SHARE", "ID_SHARE", "KINDS", "Suspect", "leak_suspects",
           "missing_suspects", "find_suspects", "dropped_indices", "DROP_CHOICES", "screen",
           "suspect_notes", "report_suspects", "numeric_identifier", "discordance",
           "monotone_suspects", "MONOTONE_SHARE", "MONOTONE_DISCORDANT", "copy_groups",
           "copy_notes", "report_copies", "MAX_COPY_CHECKS", "screen_all"]

#: a feature whose chance-corrected information is at least this share of min(H(x), H(y))
#: is a suspected leak
LEAK_SHARE = 0.9
#: a column with at least this share of distinct values among its values, and no relation
#: to the label at this level, is an identifier
ID_SHARE = 0.9
ID_LEVEL = 0.05
#: a feature of ordered states with at most this share of discordant pairs ...
MONOTONE_DISCORDANT = 0.001
#: ... and at least this share of the information is a monotone coarsening of the label
MONOTONE_SHARE = 0.5
#: what a suspect is
KINDS = ("leak", "missing_leak", "identifier")
#: ``dropSuspects``: which suspects leave the candidates
DROP_CHOICES = ("none", "identifiers", "all")


@dataclass(frozen=True)
class Suspect:
    """One suspect feature: its name and index among the candidates, what it is suspected
    of (:data:`KINDS`), the number behind it (``share``: an uncertainty coefficient for a
    leak, the share of distinct values for an identifier) and the sentence the log and
    the report give."""

    feature: str
    index: int
    kind: str
    share: float
    reason: str

    def to_json(self, dropped: bool) -> dict:
        """The report's entry (``selection.json``'s ``suspects``)."""
        return {"feature": self.feature, "index": self.index, "kind": self.kind,
                "share": round(self.share, 6), "reason": self.reason, "dropped": dropped}


def _entropy(p: np.ndarray, axis: int) -> np.ndarray:
    """Entropy in nats of the distributions ``p`` along ``axis`` (0 log 0 = 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=axis)


def _shares(joint: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(D,) chance-corrected I(x; y) / min(H(x), H(y)) of the (D, A, L) tables ``joint``,
    and the entropies' minimum (0 where a feature or the label is constant)."""
    n = joint.sum(axis=(1, 2)).astype(np.float64)
    p = joint / np.maximum(n, 1)[:, None, None]
    hx, hy = _entropy(p.sum(axis=2), 1), _entropy(p.sum(axis=1), 1)
    hxy = _entropy(p.reshape(len(p), -1), 1)
    mi = hx + hy - hxy
    states = (joint.sum(axis=2) > 0).sum(axis=1)
    classes = int((joint[0].sum(axis=0) > 0).sum()) if len(joint) else 0
    corrected = mi - chance_gains(states, classes, int(n[0]) if len(n) else 0)
    low = np.minimum(hx, hy)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(low > 1e-12, corrected / np.where(low > 1e-12, low, 1.0), 0.0), low


def leak_suspects(counts: np.ndarray, names: Sequence[str],
                  share: float = LEAK_SHARE) -> list[Suspect]:
    """The features whose chance-corrected information about the label is at least
    ``share`` of min(H(x_i), H(y)) (:data:`LEAK_SHARE`), from the (D, A, L) count tables
    n(x_i = a, y = l)."""
    shares, _ = _shares(np.asarray(counts, dtype=np.float64))
    return [Suspect(names[i], i, "leak", float(shares[i]),
                    f"'{names[i]}' carries {shares[i]:.0%} of the information the label and "
                    "it can share (beyond chance): it nearly determines the label or is "
                    "determined by it; a leak if it is known only after the label")
            for i in np.flatnonzero(shares >= share).tolist()]


def discordance(table: np.ndarray) -> tuple[float, float]:
    """Goodman and Kruskal's pair counts of an (A, L) table of ordered states and classes:
    the concordant pairs C (x and y ordered alike) and the discordant pairs D (ordered
    oppositely); pairs tied in x or in y are neither."""
    t = np.asarray(table, dtype=np.float64)
    # above[a, l]: rows with x > a and y > l; below[a, l]: rows with x < a and y > l
    tail_y = np.cumsum(t[:, ::-1], axis=1)[:, ::-1]  # y >= l
    gt_y = np.concatenate([tail_y[:, 1:], np.zeros((len(t), 1))], axis=1)  # y > l
    above = np.cumsum(gt_y[::-1], axis=0)[::-1]
    above = np.concatenate([above[1:], np.zeros((1, t.shape[1]))], axis=0)  # x > a
    below = np.cumsum(gt_y, axis=0)
    below = np.concatenate([np.zeros((1, t.shape[1])), below[:-1]], axis=0)  # x < a
    return float(np.sum(t * above)), float(np.sum(t * below))


def monotone_suspects(counts: np.ndarray, names: Sequence[str], ordered: Sequence[bool],
                      share: float = MONOTONE_SHARE,
                      discordant: float = MONOTONE_DISCORDANT) -> list[Suspect]:
    """For a continuous label (its classes are ordered bins): the features with ordered
    states (``ordered[i]``: bins, or sorted values without an ``(other)`` or missing
    state) whose order contradicts the label's in at most ``discordant`` of the pairs
    they order differently (Goodman-Kruskal) while carrying at least ``share`` of the
    information they and the label can share: a monotone coarsening of the label (its
    rank, quartile or grade), which the binned label hides from :func:`leak_suspects`
    when its bins do not line up with the feature's."""
    counts = np.asarray(counts, dtype=np.float64)
    shares, _ = _shares(counts)
    out = []
    for i in [j for j, o in enumerate(ordered) if o and shares[j] >= share]:
        c, d = discordance(counts[i])
        frac = min(c, d) / (c + d) if c + d > 0 else 1.0
        if frac <= discordant:
            out.append(Suspect(names[i], i, "leak", float(shares[i]),
                               f"'{names[i]}' orders the rows as the label does (discordant "
                               f"pairs {frac:.2%}) and carries {shares[i]:.0%} of the "
                               "information they can share: a rank, grade or coarsening of "
                               "the label; a leak if it is computed from it"))
    return out


def missing_suspects(counts: np.ndarray, names: Sequence[str],
                     missing: Sequence[bool], share: float = LEAK_SHARE) -> list[Suspect]:
    """The features with a missing state (the last code, where ``missing[i]``) whose
    missingness indicator carries at least ``share`` of min(H(m_i), H(y)) about the
    label."""
    counts = np.asarray(counts, dtype=np.float64)
    out = []
    for i in [j for j, m in enumerate(missing) if m]:
        table = counts[i]
        m = np.stack([table[:-1].sum(axis=0), table[-1]])  # (present, missing) x classes
        if m[1].sum() == 0:
            continue
        s, _ = _shares(m[None])
        if s[0] >= share:
            out.append(Suspect(names[i], i, "missing_leak", float(s[0]),
                               f"whether '{names[i]}' is missing carries {s[0]:.0%} of the "
                               "information it and the label can share: its missing "
                               "values mark a class"))
    return out


def _unrelated(counts: np.ndarray) -> np.ndarray:
    """(D,) bool: the features whose plug-in I(x_i; y) is not significant at
    :data:`ID_LEVEL` by the G-test (each on its own, no correction: an identifier shows no
    relation to the label at all)."""
    n = counts.sum(axis=(1, 2))
    p = counts / np.maximum(n, 1)[:, None, None]
    mi = _entropy(p.sum(axis=2), 1) + _entropy(p.sum(axis=1), 1) - \
        _entropy(p.reshape(len(p), -1), 1)
    states = (counts.sum(axis=2) > 0).sum(axis=1)
    classes = int((counts[0].sum(axis=0) > 0).sum()) if len(counts) else 0
    rows = int(n[0]) if len(n) else 0
    return mi <= chance_gains(states, classes, rows, 1.0 - ID_LEVEL)


def find_suspects(counts: np.ndarray, names: Sequence[str], missing: Sequence[bool],
                  identifiers: Mapping[str, tuple[float, str]],
                  ordered: Sequence[bool] | None = None) -> list[Suspect]:
    """Every suspect among the candidates ``names``, in feature order (a feature is
    named once: a leak before a missing leak before an identifier). ``ordered``: with a
    continuous label, which features have ordered states (:func:`monotone_suspects`)."""
    found: dict[int, Suspect] = {}
    pos = {n: i for i, n in enumerate(names)}
    unrelated = _unrelated(np.asarray(counts, dtype=np.float64))
    monotone = [] if ordered is None else monotone_suspects(
        np.stack([_without_missing(np.asarray(counts[i]), m) for i, m in enumerate(missing)])
        if len(names) else counts, names, ordered)
    for s in [*leak_suspects(counts, names), *monotone,
              *missing_suspects(counts, names, missing),
              *(Suspect(c, pos[c], "identifier", share,
                        f"{why}, and no relation to the label (G-test at {ID_LEVEL:g})")
                for c, (share, why) in identifiers.items() if c in pos and unrelated[pos[c]])]:
        found.setdefault(s.index, s)
    return [found[i] for i in sorted(found)]


def numeric_identifier(distinct: float | None, values: int) -> float | None:
    """The share of distinct values of a whole-number column with about ``distinct``
    distinct values (:func:`vmi_spark.core.rows.distinct_estimate`) among ``values``
    non-missing ones, when it is an identifier: at least 20 values and a share of at
    least :data:`ID_SHARE` (as for strings); else None."""
    if distinct is None or values < 20:
        return None
    share = min(distinct / values, 1.0)
    # an estimate above SKETCH_K values is within 1 / sqrt(k - 2) (3%): two of those below
    # the line still count, so that a key of unique values is not missed by chance
    slack = 0.0 if distinct < SKETCH_K else 2.0 / math.sqrt(SKETCH_K - 2)
    return share if share >= ID_SHARE - slack else None


def dropped_indices(suspects: Sequence[Suspect], drop: str) -> list[int]:
    """The candidates ``dropSuspects`` = ``drop`` leaves out (:data:`DROP_CHOICES`)."""
    if drop == "none":
        return []
    return [s.index for s in suspects if drop == "all" or s.kind == "identifier"]


def screen(counts: np.ndarray, plan: EncodingPlan, identifiers: Mapping[str, tuple[float, str]],
           drop: str) -> tuple[list[Suspect], list[int]]:
    """The suspects among the candidates of ``plan`` (:func:`find_suspects`, from the
    (D, A, L) ``counts``) and the indices that ``drop`` (``dropSuspects``) leaves out."""
    ordered = None
    if plan.label_type == "continuous":
        ordered = [c.kind == "bins" or (c.kind == "category" and not c.other)
                   for c in plan.columns]
    suspects = find_suspects(counts, plan.features, [c.missing for c in plan.columns],
                             identifiers, ordered)
    return suspects, dropped_indices(suspects, drop)


def _without_missing(table: np.ndarray, missing: bool) -> np.ndarray:
    """An (A, L) table with its missing state (the last code) emptied (missing values
    have no place in an order)."""
    if not missing:
        return table
    out = table.copy()
    out[-1] = 0
    return out


def suspect_notes(suspects: Sequence[Suspect], dropped: Sequence[int],
                  style: str = "ml") -> list[str]:
    """One warning line per suspect, saying whether it was left out (the parameter that
    left it out named as front end ``style`` names it)."""
    out = []
    for s in suspects:
        what = {"leak": "possible leak", "missing_leak": "possible leak",
                "identifier": "identifier"}[s.kind]
        fate = ("left out of the selection ({drop_suspects})" if s.index in dropped else
                "still a candidate")
        out.append(phrase(f"{what}: {literal(s.reason)}; {fate}", style))
    return out


def report_suspects(suspects: Sequence[Suspect], dropped: Sequence[int]) -> list[dict]:
    """``selection.json``'s ``suspects``: every suspect with ``dropped``."""
    return [s.to_json(s.index in dropped) for s in suspects]


#: at most this many groups of look-alike columns are checked for copies (a pass each)
MAX_COPY_CHECKS = 20


def _signature(table: np.ndarray) -> tuple | None:
    """What two copies of a column share: the multiset of its non-empty states' class
    counts (None for a column of fewer than two states)."""
    rows = table[table.sum(axis=1) > 0]
    if len(rows) < 2:
        return None
    return tuple(sorted(map(tuple, rows.tolist())))


def _one_to_one(joint: np.ndarray) -> bool:
    """Whether an (A, B) table of two columns' states pairs each state of one with one
    state of the other (the same column under other names)."""
    nz = joint > 0
    return bool(np.all(nz.sum(axis=1) <= 1) and np.all(nz.sum(axis=0) <= 1))


def copy_groups(counts: np.ndarray, pair_counts: Callable[[int], np.ndarray],
                max_checks: int = MAX_COPY_CHECKS) -> dict[int, list[int]]:
    """The features that are the same column once coded (a string month and the same
    month as a date; a charge that is a fixed multiple of a duration, binned at the same
    quantiles): ``{feature: [its copies]}``.

    Candidates share :func:`_signature` (copies must: each state's class counts are the
    other's); each group of candidates (at most ``max_checks``, a pass over the rows
    each) is confirmed with the pair counts n(x_i, x_f, y) of its first feature f
    (``pair_counts(f)``, (D, A, A, L)): a copy pairs its states one to one with f's.
    """
    groups: dict[tuple, list[int]] = {}
    for i in range(len(counts)):
        sig = _signature(np.asarray(counts[i]))
        if sig is not None:
            groups.setdefault(sig, []).append(i)
    out: dict[int, list[int]] = {}
    for group in [g for g in groups.values() if len(g) > 1][:max_checks]:
        joint = np.asarray(pair_counts(group[0])).sum(axis=3)
        same = [j for j in group if _one_to_one(joint[j])]
        for j in same:
            out[j] = [m for m in same if m != j]
    return out


def copy_notes(copies: Mapping[int, list[int]], names: Sequence[str]) -> list[str]:
    """One warning line per group of copies."""
    seen: set[int] = set()
    out = []
    for j in sorted(copies):
        if j in seen or not copies[j]:
            continue
        group = [j, *copies[j]]
        seen.update(group)
        out.append("the same column once coded: " + ", ".join(f"'{names[g]}'" for g in group)
                   + " (at most one of them is selected)")
    return out


def report_copies(copies: Mapping[int, list[int]], names: Sequence[str],
                  selected: Sequence[int]) -> list[dict]:
    """``selection.json``'s ``duplicates``: each selected feature with its copies."""
    return [{"feature": names[s], "copies": [names[c] for c in copies[s]]}
            for s in selected if copies.get(s)]


def screen_all(backend: Any, planned: Any, settings: Mapping[str, Any]
               ) -> tuple[list[Suspect], list[int], dict[int, list[int]], list[str]]:
    """Before the steps, from the count tables ``backend`` (a
    :class:`~vmi_spark.core.criterion.Backend`) gives: the suspects of ``planned`` (a
    :class:`~vmi_spark.core.planning.Planned`), the indices ``dropSuspects`` leaves out,
    the copies (where the gains are corrected, :func:`~.planning.corrected`: not for the
    paper's algorithm as published, ``biasCorrection='none'``, nor the comparison criteria)
    and the warning lines, in that order: what every front end runs."""
    plan = planned.plan
    counts = backend.feature_counts()
    suspects, dropped = screen(counts, plan, planned.identifiers, settings["drop_suspects"])
    copies = copy_groups(counts, backend.pair_counts) if corrected(settings) else {}
    lines = suspect_notes(suspects, dropped, getattr(settings, "style", "ml")) + \
        copy_notes(copies, plan.features)
    return suspects, dropped, copies, lines
