"""Progress lines: one INFO line per greedy step (the job, the estimator, the notebook).

Spark-free and light on purpose: the job logs its steps without importing ``pyspark.ml``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from .params import is_vmi

log = logging.getLogger("vmi_spark")


class StepLogger:
    """An ``on_step`` callback that logs one INFO line per greedy step to ``vmi_spark``.

    ``step 7/50 feature=x12 bound=0.4312 gain=0.0123 block=0 elapsed=12.3s eta=75.1s``:
    elapsed counts from the logger's creation (so it includes reading and encoding);
    the ETA is the mean step time so far times the steps left. For the comparison
    criteria the value is the criterion (``score=``) and there are no blocks.
    """

    def __init__(self, total: int | None, names: list[str] | Callable[[int], str] | None = None,
                 logger: logging.Logger | None = None) -> None:
        self.total = total
        self.names = names
        self.log = logger or log
        self.t0 = time.perf_counter()

    def __call__(self, sel: Any) -> None:
        if not self.log.isEnabledFor(logging.INFO) or not sel.selected:
            return
        k, i = len(sel.selected), sel.selected[-1]
        # no K: the selection stops on the evidence, so there is no count to show
        total = k if self.total is None else max(self.total, k)
        of = "" if self.total is None else f"/{total}"
        if callable(self.names):
            name = self.names(i)
        else:
            name = self.names[i] if self.names is not None and 0 <= i < len(self.names) else f"#{i}"
        elapsed = time.perf_counter() - self.t0
        eta = sum(sel.step_seconds) / k * (total - k)
        if is_vmi(sel.method):
            self.log.info("step %d%s feature=%s bound=%.4f gain=%.4f block=%d elapsed=%.1fs "
                          "eta=%.1fs", k, of, name, sel.scores[-1], sel.gains[-1],
                          sel.blocks[-1], elapsed, eta)
        else:
            self.log.info("step %d%s feature=%s score=%.4f elapsed=%.1fs eta=%.1fs", k, of,
                          name, sel.scores[-1], elapsed, eta)
        self.log.debug("step %d took %.3fs", k, sel.step_seconds[-1])
