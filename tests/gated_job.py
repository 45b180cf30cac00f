"""``jobs/select_features.py`` with a gate after a step, for tests that act mid-selection.

spark-submit this file instead of the job, with ``VMI_TEST_GATE`` (a directory) and
``VMI_TEST_GATE_STEP`` (a step count) in the driver's environment. After the checkpoint
of that step is saved (the run needs ``--checkpoint-dir``), the driver writes
``<gate>/paused`` and waits until ``<gate>/resume`` exists (at most 300 s), so a test can
kill a worker, the Python workers or the driver at a known point instead of racing steps
that take milliseconds. Everything else is the job unchanged; executors never run this.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from vmi_spark.checkpoint import Checkpoint
from vmi_spark.job import main

GATE = Path(os.environ["VMI_TEST_GATE"])
STEP = int(os.environ["VMI_TEST_GATE_STEP"])
_save = Checkpoint.save


def _gated_save(self, sel):
    _save(self, sel)
    if len(sel.selected) == STEP and not (GATE / "resume").exists():
        (GATE / "paused").write_text(str(os.getpid()))
        deadline = time.monotonic() + 300
        while not (GATE / "resume").exists() and time.monotonic() < deadline:
            time.sleep(0.02)


Checkpoint.save = _gated_save

if __name__ == "__main__":
    sys.exit(main())
