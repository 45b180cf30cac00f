"""Progress lines: one INFO line per greedy step (the job, the estimator, the notebook).

Spark-free and light on purpose: the job logs its steps without importing ``pyspark.ml``.
The candidates and K the lines count come from the run that selects, once it has
decided them (:func:`begin`): never recomputed by the front end that logs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from .params import is_vmi

log = logging.getLogger("vmi_spark")


class StepLogger:
    """An ``on_step`` callback that logs one INFO line per greedy step to ``vmi_spark``.

    ``step 7/50 feature=x12 bound=0.4312 gain=0.0123 block=0 elapsed=12.3s eta=75.1s``:
    elapsed counts from the logger's creation (so it includes reading and encoding);
    the ETA is the mean step time so far times the steps left. For the comparison
    criteria the value is the criterion (``score=``) and there are no blocks. When the
    selection may end before K (``selection_mode`` ``gain``) the count and the ETA are
    upper bounds: ``step 3/<=40 ... eta_max=9.1s``.

    The names and K are those of the run (:meth:`begin`, called by the run once the
    plan is made); before that the features are shown by index.
    """

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.total: int | None = None
        self.names: Sequence[str] | Callable[[int], str] | None = None
        self.open_end = False
        self.log = logger or log
        self.t0 = time.perf_counter()

    def begin(self, names: Sequence[str], total: int, open_end: bool = False) -> None:
        """The run's candidate features (``names[i]`` is candidate ``i``), its K and
        whether it may stop before K on its own rule (``open_end``)."""
        self.names, self.total, self.open_end = names, total, open_end

    def name(self, i: int) -> str:
        """The name of candidate ``i`` (``#i`` when the run has not named them)."""
        if callable(self.names):
            return self.names(i)
        return self.names[i] if self.names is not None and 0 <= i < len(self.names) else f"#{i}"

    def __call__(self, sel: Any) -> None:
        if not self.log.isEnabledFor(logging.INFO) or not sel.selected:
            return
        k, i = len(sel.selected), sel.selected[-1]
        total = max(self.total or k, k)
        upto = "<=" if self.open_end and total > k else ""
        elapsed = time.perf_counter() - self.t0
        eta = sum(sel.step_seconds) / k * (total - k)
        if is_vmi(sel.method):
            self.log.info("step %d/%s%d feature=%s bound=%.4f gain=%.4f block=%d elapsed=%.1fs "
                          "eta%s=%.1fs", k, upto, total, self.name(i), sel.scores[-1],
                          sel.gains[-1], sel.blocks[-1], elapsed, "_max" if upto else "", eta)
        else:
            self.log.info("step %d/%s%d feature=%s score=%.4f elapsed=%.1fs eta%s=%.1fs", k,
                          upto, total, self.name(i), sel.scores[-1], elapsed, "_max" if upto else "", eta)
        self.log.debug("step %d took %.3fs", k, sel.step_seconds[-1])


def begin(on_step: Any, names: Sequence[str], total: int, open_end: bool = False) -> None:
    """Tell an ``on_step`` callback that counts (a :class:`StepLogger`, or anything with
    its ``begin``) the run's candidates and K; any other callback is left alone."""
    start = getattr(on_step, "begin", None)
    if callable(start):
        start(names, total, open_end)
