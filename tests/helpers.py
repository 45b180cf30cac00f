"""Shared test data builders (plain numpy/pandas; no Spark)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

DATA = Path(__file__).parent / "data"


def lung() -> tuple[np.ndarray, np.ndarray]:
    """The lung data (73 x 325, values {1,3,5}; labels 1..7)."""
    x = np.loadtxt(DATA / "lung" / "penglungEW.txt").astype(int)
    y = np.loadtxt(DATA / "lung" / "penglungEW_labels.txt").astype(int)
    return x, y


def lung_frame() -> pd.DataFrame:
    x, y = lung()
    df = pd.DataFrame(x, columns=[f"f{i}" for i in range(x.shape[1])])
    df["label"] = y
    return df


def codes_of(x: np.ndarray) -> np.ndarray:
    """(N, D) values -> (D, N) codes by sorted unique value per column."""
    return np.stack([np.searchsorted(np.unique(x[:, j]), x[:, j]) for j in range(x.shape[1])]).astype(np.uint8)


def random_discrete(seed: int, n: int = 240, d: int = 8, states: int = 3, classes: int = 3) -> pd.DataFrame:
    """Discrete features with a few informative and redundant ones."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    cols = {}
    for j in range(d):
        if j % 3 == 0:
            v = (y + rng.integers(0, 2, n) * rng.integers(0, states, n)) % states
        elif j % 3 == 1 and j > 1:
            v = (cols[f"c{j - 1}"] + (rng.random(n) < 0.3) * rng.integers(0, states, n)) % states
        else:
            v = rng.integers(0, states, n)
        cols[f"c{j}"] = v.astype(np.int64)
    df = pd.DataFrame(cols)
    df["y"] = y
    return df


GATED_JOB = Path(__file__).parent / "gated_job.py"


def gate_env(env: dict, gate: Path, step: int) -> dict:
    """``env`` for a spark-submit of :data:`GATED_JOB` that pauses after ``step`` steps."""
    gate.mkdir(parents=True, exist_ok=True)
    return dict(env, VMI_TEST_GATE=str(gate), VMI_TEST_GATE_STEP=str(step))


def wait_until_paused(proc, gate: Path, timeout: float = 300) -> bool:
    """True once the gated job has paused; False if it ended or ``timeout`` passed first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if (gate / "paused").exists():
            return True
        time.sleep(0.02)
    return False


def resume(gate: Path) -> None:
    """Let the paused gated job go on."""
    (gate / "resume").write_text("")


#: the work tree (the package imported from it, whatever is installed)
ROOT = Path(__file__).resolve().parents[1]


def python_after(prelude: str, code: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``prelude + code`` in a fresh Python of this venv, the package imported from
    the work tree: the tests that change what a process can import (an old PySpark, no
    PySpark at all) set that up in ``prelude``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", prelude + code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
