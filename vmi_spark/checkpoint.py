"""Resumable selections: the state of a run after every completed step, as JSON.

A checkpoint holds only what the greedy loop needs to continue (the selected
features, their scores, gains and blocks, the restart count, the candidates and
step times) and a *fingerprint* of the input and the parameters: the SHA-256 of
the encoding plan (columns, bins, categories, classes, row counts), the per-feature
count tables n(x_i, y) and the selection parameters. A checkpoint whose
fingerprint differs is refused, so a resumed run continues only the run that wrote
it. The file is written to a temporary name and renamed, so a killed driver
leaves either the previous step's checkpoint or the new one, never a torn file.
It is read with :mod:`json` only (never unpickled), only if it is a regular file (a
symbolic link is not followed) of bounded size, and every field is checked. The saved
steps are still not trusted: the selection replays them through the greedy rule and
refuses a checkpoint they do not reproduce bit for bit
(:class:`~vmi_spark.core.greedy.ResumeMismatch`; docs/usage.md, Resumable runs).
A run holds its checkpoint directory (:func:`checkpoint_held`, an exclusive ``flock``) from
before it reads the checkpoint until its last step: two runs never write one directory's
checkpoint at once.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import math
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from .core.greedy import ResumeMismatch, Selection
from .errors import InputError, ParameterError, flat, literal
from .files import current_umask
from .params import Settings

FILE_NAME = "vmi_checkpoint.json"
"""The file the job keeps in ``--checkpoint-dir``."""
VERSION = 1


def fingerprint(plan_json: str, counts: np.ndarray, params: dict[str, Any]) -> str:
    """SHA-256 over the plan, the count tables and the parameters (hex)."""
    h = hashlib.sha256()
    h.update(plan_json.encode())
    h.update(np.ascontiguousarray(counts, dtype=np.int64).tobytes())
    h.update(str(tuple(np.shape(counts))).encode())
    h.update(json.dumps(params, sort_keys=True, default=str).encode())
    return h.hexdigest()


#: bytes a checkpoint may have besides its per-step record
BASE_BYTES = 1 << 20
#: bytes allowed per step (selected, score, gain, block, time) and per reported candidate
STEP_BYTES = 256
CANDIDATE_BYTES = 64


def _reject_constant(name: str) -> float:
    raise ValueError(f"non-finite number {name}")


def _exact(value: Any, kind: type) -> bool:
    """``value`` is exactly of ``kind`` (bool is no int; an int is accepted as a float)."""
    if kind is float:
        return type(value) in (int, float)
    return type(value) is kind


def _typed_list(data: dict, key: str, kind: type) -> list:
    values = data.get(key)
    if type(values) is not list or not all(_exact(v, kind) for v in values):
        raise ValueError(f"{key!r} is not a list of {kind.__name__}s")
    return values


def _finite(values: list, key: str, nonnegative: bool = False) -> list[float]:
    out = [float(v) for v in values]
    if not all(math.isfinite(v) and (v >= 0 or not nonnegative) for v in out):
        raise ValueError(f"{key!r} holds a number that is not finite"
                         + (" and non-negative" if nonnegative else ""))
    return out


def _index(value: Any, num_features: int, key: str) -> int:
    if type(value) is not int or not 0 <= value < num_features:
        raise ValueError(f"{key!r} holds {value!r}, not a feature index in "
                         f"[0, {num_features})")
    return value


class Checkpoint:
    """The checkpoint file of one run in directory ``path`` (on the driver's file system).

    ``num_features`` (the run's number of features), ``method`` and ``report_candidates``
    bound and check what :meth:`load` accepts: the file is trusted in nothing but its
    JSON syntax.
    """

    def __init__(self, path: str, fingerprint: str, num_features: int, method: str,
                 report_candidates: int = 0):
        self.path = path
        self.fingerprint = fingerprint
        self.file = os.path.join(path, FILE_NAME)
        self.num_features = int(num_features)
        self.method = method
        self.report_candidates = max(0, int(report_candidates))

    @property
    def max_bytes(self) -> int:
        """The largest checkpoint file this run could have written."""
        per_step = STEP_BYTES + CANDIDATE_BYTES * min(self.report_candidates, self.num_features)
        return BASE_BYTES + self.num_features * per_step

    def load(self) -> Selection | None:
        """The saved selection, None if there is none; refuses another run's checkpoint.

        Every field is checked (types, lengths, feature indices in range and distinct,
        blocks and restarts consistent, finite numbers, the method): anything else is an
        :class:`~vmi_spark.errors.InputError` naming the file, never a different selection.
        """
        if not os.path.lexists(self.file):
            return None
        try:
            data = self._read()
            if data.get("version") != VERSION:
                raise ValueError("unknown checkpoint version")
            saved = data.get("fingerprint")
            if type(saved) is not str:
                raise ValueError("no fingerprint")
        except (OSError, ValueError, RecursionError, MemoryError) as exc:
            raise InputError(f"cannot read the checkpoint {self.file}: "
                             f"{flat(exc, 200)}") from None
        if saved != self.fingerprint:
            raise InputError(
                f"the checkpoint in {self.path} was written for a different input or different "
                "parameters; remove it or use another --checkpoint-dir")
        try:
            return self._selection(data)
        except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as exc:
            raise InputError(f"invalid checkpoint {self.file}: {flat(exc, 200)}") from None

    def _read(self) -> dict:
        """The file's JSON object; its size is bounded before anything is parsed."""
        # non-blocking open: a FIFO put in its place must not hang the run; a symbolic
        # link is not followed (the job reads and replaces only a file it wrote)
        try:
            fd = os.open(self.file, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ValueError("a symbolic link, not a regular file") from None
            raise
        with open(fd, "rb", buffering=0) as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ValueError("not a regular file")
            os.set_blocking(fd, True)
            limit = self.max_bytes
            raw = fh.read(limit + 1)
        if len(raw) > limit:
            raise ValueError(f"larger than {limit} bytes (this run writes less)")
        # nesting deeper than the interpreter's recursion limit is a RecursionError
        data = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
        if type(data) is not dict:
            raise ValueError("not a JSON object")
        return data

    def _selection(self, data: dict) -> Selection:
        """The :class:`Selection` in ``data``, every field checked."""
        d = self.num_features
        method = data.get("method")
        if method != self.method:
            raise ValueError(f"method {method!r} is not this run's {self.method!r}")
        selected = [_index(v, d, "selected") for v in _typed_list(data, "selected", int)]
        n = len(selected)
        if len(set(selected)) != n:
            raise ValueError("'selected' holds a feature twice")
        if n > d:
            raise ValueError(f"{n} steps for {d} features")
        lists = {key: _typed_list(data, key, kind) for key, kind in (
            ("scores", float), ("gains", float), ("blocks", int), ("step_seconds", float),
            ("candidates", list))}
        for key, values in lists.items():
            if key != "candidates" and len(values) != n:
                raise ValueError(f"{len(values)} {key} for {n} selected features")
        scores = _finite(lists["scores"], "scores")
        gains = _finite(lists["gains"], "gains")
        seconds = _finite(lists["step_seconds"], "step_seconds", nonnegative=True)
        blocks = lists["blocks"]
        restarts = data.get("restarts")
        if type(restarts) is not int:
            raise ValueError("'restarts' is not an int")
        steps = [b1 - b0 for b0, b1 in zip(blocks, blocks[1:])]
        if (blocks[:1] not in ([], [0]) or any(s not in (0, 1) for s in steps)
                or restarts != (blocks[-1] if blocks else 0)):
            raise ValueError("'blocks' and 'restarts' do not describe restarted blocks "
                             "(0, 0, ..., 1, 1, ...; restarts = the last block)")
        candidates = self._candidates(lists["candidates"], n)
        return Selection(method=method, selected=selected, scores=scores, gains=gains,
                         blocks=list(blocks), step_seconds=seconds, candidates=candidates,
                         restarts=restarts)

    def _candidates(self, steps: list, n: int) -> list[list[tuple[int, float]]]:
        """Per step at most ``report_candidates`` distinct (index, finite score) pairs."""
        want = n if self.report_candidates else 0
        if len(steps) != want:
            raise ValueError(f"{len(steps)} candidate lists for {want} steps")
        out = []
        for step in steps:
            if len(step) > self.report_candidates:
                raise ValueError("a step lists more candidates than this run reports")
            pairs = []
            for pair in step:
                if type(pair) is not list or len(pair) != 2 or not _exact(pair[1], float):
                    raise ValueError("a candidate is not an [index, score] pair")
                pairs.append((_index(pair[0], self.num_features, "candidates"),
                              _finite([pair[1]], "candidates")[0]))
            if len({i for i, _ in pairs}) != len(pairs):
                raise ValueError("a step lists a candidate twice")
            out.append(pairs)
        return out

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


# ------------------------------------------------------------ the checkpoint directory's lock


@contextmanager
def checkpoint_held(path: str) -> Iterator[None]:
    """Hold the checkpoint directory ``path`` (made if missing) while the block runs: an
    exclusive ``flock`` of the directory itself (no file of its own), released when the
    block ends or the process does, killed or not.

    Another process holding it is a one-line :class:`~vmi_spark.errors.ParameterError`
    naming the directory, before this run reads or writes anything in it. A file system
    that cannot lock (``flock`` unsupported: some network mounts) leaves the directory
    unlocked, as before.
    """
    os.makedirs(path, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:  # not a directory it can open: the first save says what is wrong
        yield
        return
    try:
        _hold_checkpoint(fd, path)
        yield
    finally:
        os.close(fd)


def check_checkpoint_free(path: str) -> None:
    """Refuse (as :func:`checkpoint_held`) a checkpoint directory another run holds now,
    holding it only for the check: the job asks before its session starts. A missing one
    is free (and not made)."""
    if os.path.isdir(path):
        with checkpoint_held(path):
            pass


def _hold_checkpoint(fd: int, path: str) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise ParameterError("checkpoint_dir", "another run is using the "
                             f"{{checkpoint_dir}} {literal(path)}: give each run that "
                             "runs at the same time its own") from None
    except OSError:  # no flock on this file system: unlocked
        pass


# ------------------------------------------------------------ a run's keeper


class Checkpointed:
    """A run's :class:`~vmi_spark.run.Keeper`: its checkpoint (``ckpt``); a resume is
    noted in ``notes`` (the report's warnings)."""

    def __init__(self, ckpt: Checkpoint, notes: list[str]):
        self.ckpt, self.notes = ckpt, notes

    def resume(self, k: int) -> Selection | None:
        resume = self.ckpt.load()
        if resume is not None:
            if len(resume.selected) > k:
                raise InputError(f"the checkpoint in {self.ckpt.path} has more steps than "
                                 "this run selects")
            self.notes.append(f"resumed from the checkpoint after step {len(resume.selected)}")
        return resume

    def saving(self, on_step: Callable[[Selection], None] | None
               ) -> Callable[[Selection], None]:
        def save_then_call(sel: Selection) -> None:
            self.ckpt.save(sel)
            if on_step is not None:
                on_step(sel)
        return save_then_call

    def refused(self, exc: ResumeMismatch) -> Exception:
        return InputError(f"the checkpoint in {self.ckpt.path} does not replay: {exc}; it was "
                          "edited, or written by another version: remove it to start over")


@contextmanager
def held(settings: Settings, plan_json: str, num_features: int,
         counts: Callable[[], np.ndarray], notes: list[str]) -> Iterator[Checkpointed]:
    """The checkpoint of this input (``plan_json``, the plan of ``num_features``
    features; ``counts()``, their (D, A, L) count tables, asked once the directory is
    held) and these parameters in
    ``settings.checkpoint_dir``, held (one run at a time in the directory) while the
    steps run: every Spark front end's, the wide sparse vectors' too."""
    checkpoint_dir = settings.checkpoint_dir
    assert checkpoint_dir is not None
    with checkpoint_held(checkpoint_dir):
        report_candidates = settings.report_candidates
        yield Checkpointed(Checkpoint(checkpoint_dir, fingerprint(
            plan_json, counts(), {**settings.result(), "report_candidates": report_candidates}),
            num_features=num_features, method=settings.method,
            report_candidates=report_candidates), notes)
