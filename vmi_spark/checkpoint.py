"""Resumable selections: the state of a run after every completed step, as JSON.

A checkpoint holds only what the greedy loop needs to continue (the selected
features, their scores, gains and blocks, the restart count, the candidates and
step times) and a *fingerprint* of the input and the parameters: the SHA-256 of
the encoding plan (columns, bins, categories, classes, row counts), the per-feature
count tables n(x_i, y) and the selection parameters. A checkpoint whose
fingerprint differs is refused, so a resumed run continues only the run that wrote
it. The file is written to a temporary name and renamed, so a killed driver
leaves either the previous step's checkpoint or the new one, never a torn file.
It is read with :mod:`json` only (never unpickled).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from typing import Any

import numpy as np

from .core.greedy import Selection
from .errors import InputError
from .outputs import current_umask

FILE_NAME = "vmi_checkpoint.json"
VERSION = 1


def fingerprint(plan_json: str, counts: np.ndarray, params: dict[str, Any]) -> str:
    """SHA-256 over the plan, the count tables and the parameters (hex)."""
    h = hashlib.sha256()
    h.update(plan_json.encode())
    h.update(np.ascontiguousarray(counts, dtype=np.int64).tobytes())
    h.update(str(tuple(np.shape(counts))).encode())
    h.update(json.dumps(params, sort_keys=True, default=str).encode())
    return h.hexdigest()


class Checkpoint:
    """The checkpoint file of one run in directory ``path`` (on the driver's file system)."""

    def __init__(self, path: str, fingerprint: str):
        self.path = path
        self.fingerprint = fingerprint
        self.file = os.path.join(path, FILE_NAME)

    def load(self) -> Selection | None:
        """The saved selection, None if there is none; refuses another run's checkpoint."""
        if not os.path.exists(self.file):
            return None
        try:
            with open(self.file, encoding="utf-8") as fh:
                data = json.load(fh)
            if not isinstance(data, dict) or data.get("version") != VERSION:
                raise ValueError("unknown checkpoint version")
            saved = data["fingerprint"]
            sel = Selection(method=str(data["method"]),
                            selected=[int(v) for v in data["selected"]],
                            scores=[float(v) for v in data["scores"]],
                            gains=[float(v) for v in data["gains"]],
                            blocks=[int(v) for v in data["blocks"]],
                            step_seconds=[float(v) for v in data["step_seconds"]],
                            candidates=[[(int(i), float(v)) for i, v in step]
                                        for step in data["candidates"]],
                            restarts=int(data["restarts"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError(f"cannot read the checkpoint {self.file}: {exc}") from None
        if saved != self.fingerprint:
            raise InputError(
                f"the checkpoint in {self.path} was written for a different input or different "
                "parameters; remove it or use another --checkpoint-dir")
        n = len(sel.selected)
        if not (len(sel.scores) == len(sel.gains) == len(sel.blocks) == n):
            raise InputError(f"cannot read the checkpoint {self.file}: inconsistent step lists")
        return sel

    def save(self, sel: Selection) -> None:
        """Atomically replace the checkpoint with the state after ``sel``'s last step."""
        os.makedirs(self.path, exist_ok=True)
        data = {"version": VERSION, "fingerprint": self.fingerprint, "method": sel.method,
                "selected": list(sel.selected), "scores": list(sel.scores),
                "gains": list(sel.gains), "blocks": list(sel.blocks),
                "step_seconds": list(sel.step_seconds),
                "candidates": [[[i, v] for i, v in step] for step in sel.candidates],
                "restarts": sel.restarts}
        fd, tmp = tempfile.mkstemp(prefix=".vmi_checkpoint.", dir=self.path)
        try:
            os.fchmod(fd, 0o666 & ~current_umask())  # mkstemp makes 0600: follow the umask
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.file)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
