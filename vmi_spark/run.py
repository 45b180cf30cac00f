"""One run of a selection, the same for every front end.

The job, the Spark estimator (:func:`vmi_spark.spark.select.run_selection`) and the
scikit-learn selector (:meth:`vmi_spark.sklearn.VMIFeatureSelector.fit`) differ in how
they read and encode the rows and in the backend that holds the codes; from a plan
(:class:`~vmi_spark.core.planning.Planned`) and that backend on, a selection is this
module's :func:`run_planned`, once (a wide sparse vector's elements too): the policy
(K, the least gain, the corrections and the stopping rule, :class:`Policy`), the
progress lines' candidates and K, the suspects and copies warned of before the steps,
the greedy steps (continued from a checkpoint where the front end keeps one,
:class:`Keeper`), and the stability runs.

Spark-free: it imports the core, the parameter spec and the progress lines only.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import numpy as np

from . import progress
from .core.greedy import Backend, ResumeMismatch, Selection, select
from .core.planning import Planned
from .core.sparse import ElementPlanned
from .core.stability import Masked, run_stability, summarize
from .core.suspects import report_copies, report_suspects, screen_all
from .errors import ParameterWarning
from .params import Settings, corrections, plan_size, stops_on_evidence

log = logging.getLogger("vmi_spark")

OnStep = Callable[[Selection], None]


@dataclass(frozen=True)
class Policy:
    """How a run selects, decided once from the settings and the number of candidates.

    ``k`` is the most features it takes (K capped at the candidates, ``capped`` the
    warning if it was), ``min_gain`` the least gain of ``selectionMode='gain'``,
    ``open_end`` whether it may stop before ``k`` on its own rule (the progress lines
    then count to an upper bound), and ``corrections`` the greedy loop's keywords for
    ``biasCorrection`` and the stopping rule (:func:`vmi_spark.params.corrections`).
    """

    method: str
    k: int
    min_gain: float | None
    open_end: bool
    restart_tolerance: float
    corrections: dict[str, Any] = field(default_factory=dict)
    capped: ParameterWarning | None = None

    @classmethod
    def of(cls, settings: Settings, candidates: int) -> Policy:
        """The policy of ``settings`` over ``candidates`` features."""
        k, min_gain, capped = plan_size(settings, candidates)
        if capped is not None:  # in the names of the front end that asked
            capped = ParameterWarning(capped.key, capped.template, settings.style)
        return cls(settings.method, k, min_gain,
                   min_gain is not None or stops_on_evidence(settings),
                   settings.restart_tolerance, corrections(settings), capped)

    def select(self, backend: Backend, *, exclude: Sequence[int] = (),
               copies: dict[int, list[int]] | None = None, on_step: OnStep | None = None,
               resume: Selection | None = None, conditional_fn: Callable | None = None,
               report_candidates: int = 0) -> Selection:
        """The greedy selection over ``backend`` by this policy
        (:func:`vmi_spark.core.greedy.select`)."""
        return select(backend, self.method, self.k, restart_tolerance=self.restart_tolerance,
                      report_candidates=report_candidates, on_step=on_step, resume=resume,
                      conditional_fn=conditional_fn, min_gain=self.min_gain, exclude=exclude,
                      copies=copies, **self.corrections)


class Keeper(Protocol):
    """Where a front end keeps a run's steps between runs (the Spark front end's
    checkpoint, :mod:`vmi_spark.checkpoint`)."""

    def resume(self, k: int) -> Selection | None:
        """The steps saved by an earlier run of this input and these parameters, if any."""

    def saving(self, on_step: OnStep | None) -> OnStep:
        """``on_step`` preceded by saving the steps so far."""

    def refused(self, exc: ResumeMismatch) -> Exception:
        """The error to raise when the saved steps do not replay (``exc``)."""


@dataclass
class Ran:
    """A run's selection (its ``suspects`` and ``duplicates`` filled in), the stability
    runs' summary (or None) and the policy it ran by."""

    selection: Selection
    stability: dict[str, Any] | None
    policy: Policy


def run_planned(backend: Backend, planned: Planned | ElementPlanned, settings: Settings,
                notes: list[str], *,
                on_step: OnStep | None = None, keeper: Keeper | None = None,
                conditional_fn: Callable[[np.ndarray], np.ndarray] | None = None,
                lap: Callable[[str], None] | None = None) -> Ran:
    """Select features of ``planned`` over ``backend`` (which holds its codes): a
    column plan, or a wide sparse vector's elements
    (:class:`~vmi_spark.core.sparse.ElementPlanned`, over their sparse tables or a
    screened selection's dense codes).

    Every note the run gives (K capped, the suspects and copies, an early stop) is
    warned of as it is found and appended to ``notes``, the list the front end reports.
    ``on_step`` is told each step (a :class:`~vmi_spark.progress.StepLogger` is first
    told the candidates and K, :func:`vmi_spark.progress.begin`); ``keeper`` continues
    from saved steps and saves every step; ``conditional_fn`` is the ``kde``
    estimator's smoothing; ``lap(phase)`` closes the phases ``steps`` and ``stability``.
    With ``stability`` runs the backend must give masked views
    (:class:`~vmi_spark.core.stability.Masked`, as every backend does).
    """
    plan = planned.plan
    policy = Policy.of(settings, len(plan.features))
    if policy.capped is not None:
        warn_and_keep(notes, policy.capped)
    progress.begin(on_step, plan.features, policy.k, open_end=policy.open_end)
    suspects, dropped, copies, lines = screen_all(backend, planned, settings)
    for line in lines:
        warn_and_keep(notes, line)
    resume = None
    if keeper is not None:
        resume = keeper.resume(policy.k)
        on_step = keeper.saving(on_step)
    try:
        sel = policy.select(backend, exclude=dropped, copies=copies, on_step=on_step,
                            resume=resume, conditional_fn=conditional_fn,
                            report_candidates=settings.report_candidates)
    except ResumeMismatch as exc:  # edited saved steps: refused, never trusted
        if keeper is None:
            raise
        raise keeper.refused(exc) from None
    sel.suspects = report_suspects(suspects, dropped)
    sel.duplicates = report_copies(copies, plan.features, sel.selected)
    if lap is not None:
        lap("steps")
    stability = None
    if settings.stability:
        def again(view: Backend) -> Selection:  # the main run's policy, candidates, no keeper
            return policy.select(view, exclude=dropped, copies=copies,
                                 conditional_fn=conditional_fn)
        runs = run_stability(cast(Masked, backend), again, settings.stability, settings.stability_seed,
                             settings.stability_fraction, on_run=_log_run)
        stability = summarize(runs, plan.features, sel.selected)
        if lap is not None:
            lap("stability")
    notes.extend(stop_notes(sel))
    return Ran(sel, stability, policy)


def stop_notes(sel: Selection) -> list[str]:
    """The report's note that ``sel`` stopped before its K (none for a selection that
    took its K, or ended at the least gain it was asked for)."""
    if sel.stopped_early and sel.stop_reason != "threshold":
        return [f"stopped early: {sel.stopped_early}"]
    return []


def warn_and_keep(notes: list[str], note: str | Warning) -> None:
    """Warn of ``note`` now and keep it for the report."""
    notes.append(str(note))
    if isinstance(note, Warning):
        warnings.warn(note, stacklevel=3)
    else:
        warnings.warn(note, UserWarning, stacklevel=3)


def _log_run(b: int, sel: Selection) -> None:
    log.info("stability run %d: %d features on %d rows", b + 1, len(sel.selected),
             sel.num_rows)
