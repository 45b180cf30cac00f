"""What a selection criterion is: the interface between the greedy loop and a method.

A method (``vmi_naive``, ``mrmr``, ...) is a :class:`Criterion`: a registry entry
(:mod:`.criteria`) that says what it needs from a :class:`Backend` and how it scores.
:func:`vmi_spark.core.greedy.select` runs every criterion through the same loop:

1. ``scorer = criterion.start(backend)`` reads the count tables it needs (every
   criterion starts from ``backend.feature_counts()``) and holds the selection's
   running state;
2. each step, ``scorer.gains(candidates, block, label)`` gives every feature's value
   of being added (the loop reads it at the candidates only), the loop takes the
   largest (ties to the lowest index) and tells the scorer ``scorer.chose(f)``;
3. a criterion with blocks (:attr:`Criterion.vmi`: the variational bound) is also told
   when the loop clears its block (``scorer.restart()``). A resumed run replays the
   saved steps through the same calls (each choice checked against the saved one before
   the next step is scored); ``scorer.replay(selected)`` is told them first, so that it
   may count what they need in bulk.

The attributes are what the front ends and the executions decide on (which tables a
step needs, the ``kde`` estimator, whether ``selectionMode='gain'`` is defined, the
per-row state the executors keep), so that no one compares method names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .bound import StepOps


class Backend(Protocol):
    """Where the rows live: in memory, or cached on a Spark cluster.

    Implemented by :class:`vmi_spark.core.inmemory.InMemoryBackend`,
    :class:`vmi_spark.spark.executions.passes.SparkBackend` and
    :class:`vmi_spark.spark.executions.resident.ResidentBackend`.
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
        """Apply ``ops`` to every chunk of rows; return the summed (D,) int64 partials.

        For ``vmi_naive`` these are the mixture terms only (:func:`.bound.naive_partials`);
        the criterion adds :func:`.bound.naive_own`.
        """


class Scorer(Protocol):
    """One selection's state of a criterion (made by :meth:`Criterion.start`).

    Attributes
    ----------
    num_rows : int
        Rows counted (N).
    relevance : numpy.ndarray
        (D,) every feature's one-feature value: the plug-in I(x_i; y) in nats (for the
        bound under a smoothed table, the one-feature bound). The report's
        ``mutual_information``; the bound's restart rule compares it with the threshold.
    """

    num_rows: int
    relevance: np.ndarray

    def gains(self, candidates: np.ndarray, block: Sequence[int], label: str) -> np.ndarray:
        """(D,) the value of adding each feature now, largest best (read at ``candidates``,
        a (D,) bool mask, only). ``block`` is the current block's features in selection
        order (always empty for a criterion without blocks); ``label`` names the step
        (a Spark job description)."""

    def values(self, gains: np.ndarray) -> np.ndarray:
        """The values recorded for the features ranked by ``gains`` (``gains`` itself,
        except where the ranking key is not the value: SPEC_CMI ranks rounded entries)."""

    def chance(self, block: Sequence[int], p: float | None = None) -> np.ndarray:
        """(D,) the gain each candidate would reach by chance when added to ``block``
        (a feature independent of the label): its expectation, or with ``p`` its ``p``
        quantile, for the loop's ``chance`` correction."""
        ...

    def chose(self, f: int) -> None:
        """Feature ``f`` was selected (into the current block)."""

    def restart(self) -> None:
        """The block was cleared (criteria with blocks only)."""

    def replay(self, selected: Sequence[int]) -> None:
        """The saved steps ``selected`` (features in selection order) are about to be run
        again: :meth:`gains` and :meth:`chose` follow as for new steps, and each choice is
        checked against ``selected`` before the next step is scored. A scorer may count
        what those steps need in bulk here (lazily: a replay that diverges at a step
        needs nothing after it); the values must be the ones the steps compute."""


class BaseScorer:
    """A :class:`Scorer` with the defaults: values are the gains, nothing to update."""

    num_rows: int
    relevance: np.ndarray

    def gains(self, candidates: np.ndarray, block: Sequence[int], label: str) -> np.ndarray:
        raise NotImplementedError

    def values(self, gains: np.ndarray) -> np.ndarray:
        return gains

    def chance(self, block: Sequence[int], p: float | None = None) -> np.ndarray:
        """(D,) the gain every candidate reaches by chance (none here: zeros)."""
        return np.zeros(len(self.relevance))

    def chose(self, f: int) -> None:
        pass

    def restart(self) -> None:
        pass

    def replay(self, selected: Sequence[int]) -> None:
        pass


@dataclass(frozen=True, kw_only=True)
class Criterion:
    """A selection method: what it needs from a backend, and how it scores.

    Subclasses implement :meth:`start`; :mod:`.criteria` registers one instance per
    method name.

    Attributes
    ----------
    name : str
        The name every front end accepts (``method``).
    description : str
        One line for help texts.
    vmi : bool
        A Q-distribution of the variational bound: the features are chosen in blocks,
        a block is cleared by the restart rule, and a step's score is the bound I_LB of
        its block; otherwise a comparison criterion (score = the criterion's value, one
        block).
    pair_tables_per_step : bool
        Each step needs the pair tables n(x_i, x_f, y) of the feature f chosen last.
    all_pair_tables : bool
        Needs the pair tables of every pair of features up front (spec_cmi).
    kde : bool
        Supports the ``kde`` estimator of p(x_i | y) (``conditional_fn`` of the loop).
    corrected : bool
        The loop's bias corrections (``chance``, ``significance``) apply to its gains:
        plug-in gains of the bound, which grow with a candidate's number of states
        (:meth:`Scorer.chance`). A comparison criterion's value is its own score, never
        corrected.
    unit : str
        What the values are: ``"nats"``, or what they are instead (the gain threshold
        of ``selectionMode='gain'`` is defined in nats only).
    """

    name: str
    description: str
    vmi: bool = False
    pair_tables_per_step: bool = False
    all_pair_tables: bool = False
    kde: bool = False
    corrected: bool = False
    unit: str = "nats"

    @property
    def nats(self) -> bool:
        """The values and gains are in nats (a gain threshold is defined)."""
        return self.unit == "nats"

    def start(self, backend: Backend,
              conditional_fn: Callable[[np.ndarray], np.ndarray] | None = None) -> Scorer:
        """Read the count tables this criterion starts from; the selection's state.

        ``conditional_fn`` maps the (D, A, L) counts to the table p(x_i = a | y) (the
        ``kde`` estimator); only criteria with :attr:`kde` take it.
        """
        raise NotImplementedError

    def below_threshold(self, gain: float, min_gain: float, in_block: bool) -> str:
        """The report's sentence for a selection that stopped on the gain threshold."""
        return (f"the best candidate's {self.name} criterion is {gain:.6g} nats, below the "
                f"threshold {min_gain:g}")

    def driver_bytes(self, num_features: int) -> int:
        """The least bytes the selection's own tables take at once in the process that
        runs the greedy loop, for ``num_features`` candidates, whatever the rows: a lower
        bound known before reading (the states and classes are not). 0 for criteria whose
        tables grow with the features only linearly (small next to the rows)."""
        return 0

    def row_state_bytes(self, num_features: int, num_classes: int) -> int:
        """Bytes a row's state takes next to its codes on the executors (from step to
        step, for the whole selection); 0 when the steps keep no per-row state that
        grows with the features."""
        return 0
