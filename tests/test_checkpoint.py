"""Resumable runs (--checkpoint-dir): a killed run resumes to the uninterrupted result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import GATED_JOB, gate_env, random_discrete, wait_until_paused
from vmi_spark.checkpoint import FILE_NAME
from vmi_spark.errors import InputError
from vmi_spark.spark.select import run_selection

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def frame(spark):
    pdf = random_discrete(5, n=600, d=14, states=4, classes=3)
    pdf["noise"] = np.random.default_rng(1).normal(size=len(pdf))
    return spark.createDataFrame(pdf).repartition(3)


class Killed(Exception):
    pass


def _kill_after(k):
    def on_step(sel):
        if len(sel.selected) == k:
            raise Killed
    return on_step


@pytest.mark.parametrize("method", ["vmi_naive", "vmi_pairwise", "mrmr"])
def test_resumed_run_equals_uninterrupted_run(frame, tmp_path, method):
    full = run_selection(frame, "y", method=method, num_features=8).selection
    ckpt = tmp_path / "ck"
    with pytest.raises(Killed):
        run_selection(frame, "y", method=method, num_features=8, checkpoint_dir=str(ckpt),
                      on_step=_kill_after(4))
    saved = json.loads((ckpt / FILE_NAME).read_text())
    assert saved["selected"] == full.selected[:4]
    steps = []
    run = run_selection(frame, "y", method=method, num_features=8, checkpoint_dir=str(ckpt),
                        on_step=lambda sel: steps.append(len(sel.selected)))
    assert steps == [5, 6, 7, 8]  # only the missing steps ran
    got = run.selection
    assert (got.selected, got.scores, got.gains, got.blocks, got.restarts) == (
        full.selected, full.scores, full.gains, full.blocks, full.restarts)
    assert any("resumed from the checkpoint after step 4" in w for w in run.warnings)


def test_checkpoint_of_another_run_is_refused(frame, spark, tmp_path):
    ckpt = str(tmp_path / "ck")
    run_selection(frame, "y", num_features=3, checkpoint_dir=ckpt)
    with pytest.raises(InputError, match="different input or different parameters"):
        run_selection(frame, "y", num_features=3, num_bins=4, checkpoint_dir=ckpt)
    with pytest.raises(InputError, match="different input or different parameters"):
        run_selection(frame, "y", num_features=3, method="vmi_pairwise", checkpoint_dir=ckpt)
    other = frame.limit(500)
    with pytest.raises(InputError, match="different input or different parameters"):
        run_selection(other, "y", num_features=3, checkpoint_dir=ckpt)


def test_corrupt_checkpoint_is_a_clear_error_not_code(frame, tmp_path):
    ckpt = tmp_path / "ck"
    ckpt.mkdir()
    # a pickle payload: must be rejected as unreadable JSON, never executed
    (ckpt / FILE_NAME).write_bytes(b"cos\nsystem\n(S'touch " + str(tmp_path / "pwned").encode()
                                   + b"'\ntR.")
    with pytest.raises(InputError, match="cannot read the checkpoint"):
        run_selection(frame, "y", num_features=3, checkpoint_dir=str(ckpt))
    assert not (tmp_path / "pwned").exists()


def test_kill_9_of_spark_submit_then_rerun_resumes(spark, tmp_path):
    """kill -9 of the driver mid-selection; the same command again ends with the same report."""
    spark_submit = Path(sys.executable).parent / "spark-submit"
    if not spark_submit.exists():
        pytest.skip("spark-submit not on the virtual environment's path")
    pdf = random_discrete(7, n=3000, d=24, states=4, classes=2)
    data = tmp_path / "t.parquet"
    pdf.to_parquet(data)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=str(ROOT))
    ckpt, out = tmp_path / "ck", tmp_path / "out"
    args = ["--input", str(data), "--label", "y",
            "--method", "vmi_pairwise", "--num-features", "12", "--output", str(out),
            "--checkpoint-dir", str(ckpt), "--quiet",
            "--execution", "resident"]  # the path with the most state (auto: the driver)
    submit = [str(spark_submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false"]
    cmd = [*submit, str(ROOT / "jobs" / "select_features.py"), *args]
    gate = tmp_path / "gate"  # the gated job pauses after the checkpoint of step 2
    proc = subprocess.Popen([*submit, str(GATED_JOB), *args], env=gate_env(env, gate, 2),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        paused = wait_until_paused(proc, gate, timeout=400)
        done_before = len(json.loads((ckpt / FILE_NAME).read_text())["selected"]) if paused else 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the driver and its Python child, no cleanup
        proc.wait()
    assert paused and done_before == 2, "the run was not caught mid-selection"
    assert not (out / "selection.json").exists()  # nothing written by the killed run
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
    assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
    rep = json.loads((out / "selection.json").read_text())
    full = run_selection(spark.createDataFrame(pdf), "y", method="vmi_pairwise",
                         num_features=12).report()
    assert rep["selected"] == full["selected"]
    assert rep["blocks"] == full["blocks"]
    assert rep["scores"] == full["scores"]
    assert any("resumed from the checkpoint" in w for w in rep["warnings"])


# ----------------------------------------------------------------------------- edited checkpoints


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


#: edits of a valid checkpoint (fingerprint kept) and what the one-line error says
CORRUPTIONS = {
    "index -1": (lambda c: {**c, "selected": [-1, *c["selected"][1:]]}, "not a feature index"),
    "duplicate index": (lambda c: {**c, "selected": [c["selected"][0]] * len(c["selected"])},
                        "twice"),
    "out-of-range index": (lambda c: {**c, "selected": [*c["selected"][:-1], 99]},
                           "not a feature index"),
    "string as list": (lambda c: {**c, "selected": "0123"}, "not a list of ints"),
    "bool as int": (lambda c: {**c, "selected": [True, *c["selected"][1:]]},
                    "not a list of ints"),
    "float index": (lambda c: {**c, "selected": [float(c["selected"][0]), *c["selected"][1:]]},
                    "not a list of ints"),
    "NaN score": (lambda c: {**c, "scores": [float("nan"), *c["scores"][1:]]},
                  "non-finite number NaN"),
    "infinite gain": (lambda c: {**c, "gains": [*c["gains"][:-1], float("inf")]},
                      "non-finite number Infinity"),
    "short gains": (lambda c: {**c, "gains": c["gains"][:-1]}, "gains for 4 selected"),
    "negative block": (lambda c: {**c, "blocks": [-1] * len(c["blocks"])}, "restarted blocks"),
    "decreasing blocks": (lambda c: {**c, "blocks": [0, 1, 0, 0], "restarts": 1},
                          "restarted blocks"),
    "restarts disagree": (lambda c: {**c, "restarts": 3}, "restarted blocks"),
    "other method": (lambda c: {**c, "method": "mrmr"}, "not this run's"),
    "deep nesting in a field": (lambda c: {**c, "candidates": json.loads(_deep(500))},
                                "candidate"),
    "bad candidate": (lambda c: {**c, "candidates": [[[3, "x"]]] * len(c["selected"])},
                      "not an \\[index, score\\] pair"),
    "huge integer": (lambda c: {**c, "restarts": 10 ** 400}, "restarted blocks"),
}
#: raw file contents (not JSON objects of the right shape)
RAW_CORRUPTIONS = {
    "deep nesting 100k levels": (lambda fp: _deep(100_000), "recursion"),
    "deep object nesting": (lambda fp: '{"a":' * 100_000 + "1" + "}" * 100_000, "recursion"),
    "huge file": (lambda fp: json.dumps({"version": 1, "fingerprint": fp,
                                         "pad": "x" * (64 << 20)}), "larger than"),
    "not an object": (lambda fp: "[1, 2, 3]", "not a JSON object"),
    "not UTF-8": (lambda fp: b"\xff\xfe{}", "codec"),
}


@pytest.fixture(scope="module")
def saved_checkpoint(frame, tmp_path_factory):
    """A real checkpoint after 4 of 6 steps (pairwise, with candidates) and the full run."""
    kwargs = {"method": "vmi_pairwise", "num_features": 6, "report_candidates": 3}
    full = run_selection(frame, "y", **kwargs)
    ckpt = tmp_path_factory.mktemp("ck")
    with pytest.raises(Killed):
        run_selection(frame, "y", checkpoint_dir=str(ckpt), on_step=_kill_after(4), **kwargs)
    text = (ckpt / FILE_NAME).read_text()
    return text, kwargs, full, len(full.report()["features"])


def _checkpoint(path, content, saved_text, d):
    from vmi_spark.checkpoint import Checkpoint

    path.mkdir(exist_ok=True)
    raw = content if isinstance(content, bytes) else content.encode()
    (path / FILE_NAME).write_bytes(raw)
    return Checkpoint(str(path), json.loads(saved_text)["fingerprint"], num_features=d,
                      method="vmi_pairwise", report_candidates=3)


def _assert_one_line(exc_info, path):
    msg = str(exc_info.value)
    assert "\n" not in msg and len(msg) < 400, msg
    assert str(path / FILE_NAME) in msg
    assert exc_info.value.__cause__ is None and exc_info.value.__suppress_context__


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_edited_checkpoint_is_a_one_line_error(saved_checkpoint, tmp_path, name):
    text, _, _, d = saved_checkpoint
    edit, match = CORRUPTIONS[name]
    content = json.dumps(edit(json.loads(text)))
    # the unedited file loads; the edited one (same fingerprint) does not
    assert _checkpoint(tmp_path / "ok", text, text, d).load().selected == \
        json.loads(text)["selected"]
    with pytest.raises(InputError, match=match) as info:
        _checkpoint(tmp_path / "ck", content, text, d).load()
    _assert_one_line(info, tmp_path / "ck")


@pytest.mark.parametrize("name", sorted(RAW_CORRUPTIONS))
def test_unparseable_checkpoint_is_a_one_line_error(saved_checkpoint, tmp_path, name):
    text, _, _, d = saved_checkpoint
    make, match = RAW_CORRUPTIONS[name]
    with pytest.raises(InputError, match=match) as info:
        _checkpoint(tmp_path, make(json.loads(text)["fingerprint"]), text, d).load()
    _assert_one_line(info, tmp_path)


def test_a_fifo_is_not_read(saved_checkpoint, tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    text, _, _, d = saved_checkpoint
    ck = _checkpoint(tmp_path, text, text, d)
    os.unlink(ck.file)
    os.mkfifo(ck.file)
    with pytest.raises(InputError, match="not a regular file"):
        ck.load()


@pytest.mark.parametrize("name", ["index -1", "string as list", "NaN score",
                                  "deep nesting 100k levels", "out-of-range index"])
def test_run_with_an_edited_checkpoint_fails_before_selecting(saved_checkpoint, frame,
                                                               tmp_path, name):
    text, kwargs, full, _ = saved_checkpoint
    if name in CORRUPTIONS:
        content = json.dumps(CORRUPTIONS[name][0](json.loads(text)))
    else:
        content = RAW_CORRUPTIONS[name][0](json.loads(text)["fingerprint"])
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / FILE_NAME).write_text(content)
    steps = []
    with pytest.raises(InputError, match="checkpoint") as info:
        run_selection(frame, "y", checkpoint_dir=str(ck), on_step=lambda s: steps.append(1),
                      **kwargs)
    _assert_one_line(info, ck)
    assert steps == []  # nothing was selected
    assert (ck / FILE_NAME).read_text() == content  # nor overwritten
    # the valid checkpoint still resumes to the uninterrupted result
    (ck / FILE_NAME).write_text(text)
    got = run_selection(frame, "y", checkpoint_dir=str(ck), on_step=lambda s: steps.append(1),
                        **kwargs).selection
    assert steps == [1, 1]
    assert (got.selected, got.scores, got.gains, got.blocks, got.restarts, got.candidates) == (
        full.selection.selected, full.selection.scores, full.selection.gains,
        full.selection.blocks, full.selection.restarts, full.selection.candidates)


# ----------------------------------------------------------------- issue 33 item 5: replayed


def _saved_steps(full, n):
    from vmi_spark.core.greedy import Selection

    return Selection(method=full.method, selected=full.selected[:n], scores=full.scores[:n],
                     gains=full.gains[:n], blocks=full.blocks[:n],
                     step_seconds=[0.5] * n, candidates=full.candidates[:n],
                     restarts=full.blocks[n - 1])


@pytest.mark.parametrize("method", ["vmi_naive", "vmi_pairwise", "mim", "mrmr", "jmi", "cmim",
                                    "cife", "spec_cmi"])
def test_a_resumed_selection_is_replayed_not_trusted(method):
    """The core replays the saved steps through the greedy rule: a true prefix resumes to
    the uninterrupted result (on_step only for the new steps, the saved step times kept);
    a changed feature, score, gain, block or candidate list is a ResumeMismatch, also a
    forgery that is consistent in itself (a non-greedy first feature with its true score)."""
    from dataclasses import replace

    from helpers import codes_of
    from vmi_spark.core import greedy
    from vmi_spark.core.criteria import criterion, label_mutual_information
    from vmi_spark.core.greedy import ResumeMismatch
    from vmi_spark.core.inmemory import InMemoryBackend

    pdf = random_discrete(11, n=300, d=10, states=3, classes=3)
    codes, y = codes_of(pdf.drop(columns="y").to_numpy()), pdf["y"].to_numpy()
    tolerance = 0.01 if criterion(method).vmi else 0.0

    def select(resume=None, on_step=None):
        return greedy.select(InMemoryBackend(codes, y), method, 6, restart_tolerance=tolerance,
                             report_candidates=3, on_step=on_step, resume=resume)

    full = select()
    saved = _saved_steps(full, 4)
    steps = []
    got = select(saved, lambda s: steps.append(len(s.selected)))
    assert steps == [5, 6]
    assert (got.selected, got.scores, got.gains, got.blocks, got.restarts, got.candidates) == (
        full.selected, full.scores, full.gains, full.blocks, full.restarts, full.candidates)
    assert got.step_seconds[:4] == [0.5] * 4
    other = next(j for j in range(10) if j not in full.selected)
    mi = label_mutual_information(InMemoryBackend(codes, y).feature_counts())
    forgeries = {
        "feature": replace(saved, selected=[*saved.selected[:2], other, saved.selected[3]]),
        "score": replace(saved, scores=[*saved.scores[:3], saved.scores[3] + 2 ** -40]),
        "gain": replace(saved, gains=[saved.gains[0] * 2, *saved.gains[1:]]),
        "block": replace(saved, blocks=[0, 0, 1, 1], restarts=1)
        if saved.blocks != [0, 0, 1, 1] else replace(saved, blocks=[0, 0, 0, 0], restarts=0),
        "candidates": replace(saved, candidates=[list(reversed(c)) for c in saved.candidates]),
        "restarts": replace(saved, restarts=saved.restarts + 1),
        "consistent first step": replace(
            _saved_steps(full, 1), selected=[other], scores=[float(mi[other])],
            gains=[float(mi[other])], candidates=[[(other, float(mi[other]))]]),
    }
    for name, forged in forgeries.items():
        steps.clear()
        with pytest.raises(ResumeMismatch, match="step|steps"):
            select(forged, lambda s: steps.append(1))
        assert steps == [], name
    # the true steps, but more of them than this selection takes
    with pytest.raises(ResumeMismatch, match="it has 4 steps; the selection stops after 3"):
        greedy.select(InMemoryBackend(codes, y), method, 3, restart_tolerance=tolerance,
                      report_candidates=3, resume=saved)


def test_the_issue_case_an_edited_checkpoint_does_not_resume(saved_checkpoint, frame, tmp_path):
    """Cut vmi_checkpoint.json to 2 steps with two other valid feature indices: the run
    resumed with those features and their forged bounds; now it is a one-line error before
    any step, and the file is left as it is."""
    text, kwargs, full, d = saved_checkpoint
    data = json.loads(text)
    others = [j for j in range(d) if j not in data["selected"][:2]][:2]
    edited = {**data, "selected": others, "scores": data["scores"][:2],
              "gains": data["gains"][:2], "blocks": data["blocks"][:2],
              "step_seconds": data["step_seconds"][:2], "candidates": data["candidates"][:2],
              "restarts": data["blocks"][1]}
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / FILE_NAME).write_text(json.dumps(edited))
    steps = []
    with pytest.raises(InputError, match=f"the checkpoint in {ck} does not replay: step 1 "
                                         f"selects feature {full.selection.selected[0]} ") as info:
        run_selection(frame, "y", checkpoint_dir=str(ck), on_step=lambda s: steps.append(1),
                      **kwargs)
    assert "\n" not in str(info.value) and steps == []
    assert json.loads((ck / FILE_NAME).read_text()) == edited


def test_a_consistent_forgery_of_a_classic_checkpoint_is_refused(frame, tmp_path):
    """mRMR, whose resume replays its running sums from one bulk count pass: a checkpoint
    that selects a non-greedy first feature with its true criterion value is refused."""
    full = run_selection(frame, "y", method="mrmr", num_features=3)
    names = full.report()["features"]
    other = next(j for j, c in enumerate(names) if j not in full.selection.selected
                 and c != "noise")
    true_mi = run_selection(frame, "y", method="mim", num_features=1,
                            features=[names[other]]).selection.scores[0]
    ck = tmp_path / "ck"
    with pytest.raises(Killed):
        run_selection(frame, "y", method="mrmr", num_features=3, checkpoint_dir=str(ck),
                      on_step=_kill_after(1))
    data = json.loads((ck / FILE_NAME).read_text())
    (ck / FILE_NAME).write_text(json.dumps({**data, "selected": [other], "scores": [true_mi],
                                            "gains": [true_mi]}))
    with pytest.raises(InputError, match=f"step 1 selects feature "
                                         f"{full.selection.selected[0]} .* the checkpoint says "
                                         f"feature {other} "):
        run_selection(frame, "y", method="mrmr", num_features=3, checkpoint_dir=str(ck))


def test_a_checkpoint_directory_another_run_holds_is_refused_before_it_is_read(frame, tmp_path):
    """Two runs never share a checkpoint directory at once: while another holds it (an
    flock of the directory, here from another open file description, as another process
    would), a run stops with one line naming the parameter and the directory, and has
    written nothing there; once it is free the run goes on and releases it."""
    import fcntl

    from vmi_spark.errors import ParameterError

    ckpt = tmp_path / "ck"
    ckpt.mkdir()
    fd = os.open(ckpt, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ParameterError) as err:
            run_selection(frame, "y", num_features=3, checkpoint_dir=str(ckpt))
        assert "another run is using the checkpoint_dir" in str(err.value)  # the kwarg
        assert str(ckpt) in str(err.value) and "\n" not in str(err.value)
        assert "using the --checkpoint-dir " in err.value.phrase("cli")  # the job's flag
        assert list(ckpt.iterdir()) == []
    finally:
        os.close(fd)
    run_selection(frame, "y", num_features=3, checkpoint_dir=str(ckpt))
    assert (ckpt / FILE_NAME).exists()
    fd = os.open(ckpt, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released by the finished run
    finally:
        os.close(fd)
