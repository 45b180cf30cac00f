"""Resident execution: long-running barrier tasks that the driver talks to over TCP.

The selections must equal the in-memory core (and the pass-based backend) bit for bit;
the message format must refuse what it does not know; a connection without the run's
secret is never served; lost tasks are restarted by Spark (or the selection goes on
with passes), with the same answer.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers import (
    GATED_JOB,
    codes_of,
    gate_env,
    lung,
    lung_frame,
    random_discrete,
    resume,
    wait_until_paused,
)
from vmi_spark.core.greedy import select_classic, select_vmi
from vmi_spark.core.inmemory import InMemoryBackend
from vmi_spark.errors import InputError
from vmi_spark.params import Settings
from vmi_spark.spark.executions import resident as R
from vmi_spark.spark.executions import wire
from vmi_spark.spark.executions.resident_server import ResidentTasks
from vmi_spark.spark.select import run_selection
from vmi_spark.spark.session import task_slots, unavailable_reason

ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- wire


def test_wire_round_trip_of_every_array_type():
    a, b = socket.socketpair()
    try:
        arrays = [np.arange(-3, 3, dtype=np.int64), np.linspace(0, 1, 7).reshape(7, 1),
                  np.array([[1, 2], [3, 255]], dtype=np.uint8), np.array([True, False]),
                  np.array([65535, 0], dtype=np.uint16), np.zeros((0, 4)), np.array(2.5)]
        wire.send(a, {"op": "x", "k": [1, 2]}, arrays)
        header, got = wire.recv(b)
        assert header == {"op": "x", "k": [1, 2]}
        assert len(got) == len(arrays)
        for x, y in zip(arrays, got):
            assert x.dtype == y.dtype and x.shape == y.shape
            np.testing.assert_array_equal(x, y)
        # a non-contiguous big-endian array arrives as the same numbers
        wire.send(a, {}, [np.arange(10, dtype=">i8")[::2]])
        _, (z,) = wire.recv(b)
        np.testing.assert_array_equal(z, [0, 2, 4, 6, 8])
    finally:
        a.close()
        b.close()


def test_wire_refuses_unknown_types_oversize_and_garbage():
    with pytest.raises(TypeError):
        wire.send(socket.socket(), {}, [np.zeros(3, dtype=np.float32)])
    with pytest.raises(TypeError):
        wire.send(socket.socket(), {}, [np.array(["a"], dtype=object)])
    a, b = socket.socketpair()
    try:
        wire.send(a, {}, [np.zeros(1000)])
        with pytest.raises(wire.WireError, match="refused"):
            wire.recv(b, max_bytes=100)
    finally:
        a.close()
        b.close()
    for raw in (b"\x05\x00\x00\x00notjs", b'\x0b\x00\x00\x00{"a":1}xxxx',
                b'\x20\x00\x00\x00{"arrays":[["|O",[1]]]}         ',
                b'\x1d\x00\x00\x00{"arrays":[["<i8",[-1]]]}    ',
                b"\xff\xff\xff\x7f"):
        a, b = socket.socketpair()
        try:
            a.sendall(raw)
            a.shutdown(socket.SHUT_WR)
            with pytest.raises(wire.WireError):
                wire.recv(b)
        finally:
            a.close()
            b.close()
    a, b = socket.socketpair()
    a.close()
    with pytest.raises(wire.WireError, match="closed"):
        wire.recv(b)
    b.close()


# ----------------------------------------------------------------------------- selections


def _lung_core(method: str, k: int, tol: float = 0.0):
    x, labels = lung()
    y = np.unique(labels, return_inverse=True)[1]
    be = InMemoryBackend(codes_of(x), y)
    if method in ("vmi_naive", "vmi_pairwise"):
        return select_vmi(be, method, k, tol)
    return select_classic(be, method, k)


@pytest.mark.parametrize("method", ["vmi_naive", "vmi_pairwise", "mrmr", "spec_cmi"])
def test_resident_selection_on_lung_equals_the_core(spark, method):
    """Lung: 7 classes, 325 columns, restarts for pairwise (tolerance 0.01)."""
    tol = 0.01 if method == "vmi_pairwise" else 0.0
    expected = _lung_core(method, 12, tol)
    if method == "vmi_pairwise":
        assert expected.restarts >= 1
    run = run_selection(spark.createDataFrame(lung_frame()).repartition(3), "label",
                        bias_correction="none", method=method, num_features=12, restart_tolerance=tol,
                        execution="resident")
    assert run.execution == "resident"
    assert run.report()["execution"] == "resident"
    assert run.selection.selected == expected.selected
    assert run.selection.scores == expected.scores
    assert run.selection.blocks == expected.blocks


def test_resident_and_passes_reports_are_identical(spark):
    """KDE relevance pass, report candidates, a vector-free continuous input."""
    rng = np.random.default_rng(5)
    n = 3000
    y = rng.integers(0, 2, n)
    pdf = pd.DataFrame({f"c{j}": rng.normal(size=n) + (0.3 + 0.1 * j) * y for j in range(6)})
    pdf["d"] = (y + rng.integers(0, 2, n)) % 3
    pdf["y"] = y
    df = spark.createDataFrame(pdf).repartition(3)
    for kwargs in ({"estimator": "kde"}, {"report_candidates": 3, "method": "vmi_pairwise"},
                   {"report_candidates": 2, "method": "cmim"}):
        reports = [run_selection(df, "y", num_features=5, execution=e, **kwargs).report()
                   for e in ("resident", "passes")]
        assert [r["execution"] for r in reports] == ["resident", "passes"]
        for key in ("selected", "scores", "gains", "blocks", "restarts", "candidates",
                    "columns", "num_rows"):
            assert reports[0].get(key) == reports[1].get(key), (kwargs, key)


def _encoded(spark, pdf, chunk_rows=64):
    from vmi_spark.spark.plan import plan_from_schema
    from vmi_spark.spark.sources.spark_source import SparkSource

    features = [c for c in pdf.columns if c != "y"]
    df = spark.createDataFrame(pdf).repartition(3)
    source = SparkSource(df)
    planned = plan_from_schema(df, "y", features, Settings.of(), source)
    plan, skip_cols = planned.plan, planned.skip_cols
    chunks = (source.encode_chunks(plan, chunk_rows, skip_cols)
              .repartitionByRange(task_slots(spark), "chunk_id").persist())
    chunks.count()
    return chunks, plan, features


def test_a_connection_without_the_secret_is_never_served(spark):
    pdf = random_discrete(11, n=400, d=6)
    chunks, plan, features = _encoded(spark, pdf)
    expected = select_vmi(InMemoryBackend(codes_of(pdf[features].to_numpy()),
                                          pdf["y"].to_numpy()), "vmi_naive", 4)
    be = R.ResidentBackend(chunks, len(features), plan.arity, len(plan.classes), "vmi_naive")
    try:
        address = be.tasks.address
        intruders = []
        for hello in ({"op": "hello", "secret": "0" * 32, "partition": 0, "tasks": 2,
                       "attempt": 10 ** 9, "chunks": [], "rows": 0}, {"op": "counts"}):
            s = socket.create_connection(address)
            wire.send(s, hello)
            intruders.append(s)
        garbage = socket.create_connection(address)
        garbage.sendall(b"GET / HTTP/1.0\r\n\r\n")
        intruders.append(garbage)
        sel = select_vmi(be, "vmi_naive", 4)
        assert sel.selected == expected.selected and sel.scores == expected.scores
        tasks = be.tasks
        assert sorted(tasks.peers) == list(range(tasks.num_tasks))
        # every request was answered by every task, each timing its own work
        assert len(tasks.task_seconds) == tasks.requests
        assert all(len(t) == tasks.num_tasks and min(t) >= 0 for t in tasks.task_seconds)
        assert all(p.attempt < 10 ** 9 for p in tasks.peers.values())
        for s in intruders:  # refused: closed without a word (reset if it sent more)
            s.settimeout(10)
            try:
                assert s.recv(1) == b""
            except ConnectionResetError:
                pass
            s.close()
        # a task's error comes back as one line; the tasks keep serving
        with pytest.raises(RuntimeError, match="unknown request 'nonsense'"):
            tasks.request(lambda p: ({"op": "nonsense"}, []))
        np.testing.assert_array_equal(be.feature_counts().sum(axis=(1, 2)), [400] * 6)
    finally:
        be.close()
        chunks.unpersist()
    rows = be.tasks.task_rows
    assert sum(r["rows"] for r in rows) == 400 and all(r["requests"] >= 4 for r in rows)


def test_one_backend_serves_selections_with_different_tables(spark):
    """The tasks keep the tables between steps; new tables (another conditional) are sent
    again, so a second selection on the same tasks is right too."""
    pdf = random_discrete(12, n=500, d=7, states=4)
    chunks, plan, features = _encoded(spark, pdf)
    codes = codes_of(pdf[features].to_numpy())

    def smoothed(counts):  # add-one smoothing of p(x_i | y): a different table
        c = counts.astype(np.float64) + 1.0
        return c / c.sum(axis=1, keepdims=True)

    mem = InMemoryBackend(codes, pdf["y"].to_numpy())
    expected = [select_vmi(mem, "vmi_naive", 4), select_vmi(mem, "vmi_naive", 4,
                                                             conditional_fn=smoothed)]
    assert expected[0].scores != expected[1].scores
    be = R.ResidentBackend(chunks, len(features), plan.arity, len(plan.classes), "vmi_naive")
    try:
        got = [select_vmi(be, "vmi_naive", 4), select_vmi(be, "vmi_naive", 4,
                                                          conditional_fn=smoothed)]
        got.append(select_vmi(be, "vmi_naive", 4))  # and back
    finally:
        be.close()
        chunks.unpersist()
    for g, e in zip(got, expected + expected[:1]):
        assert g.selected == e.selected and g.scores == e.scores


def _lost_at(n: int, calls: dict):
    """``ResidentTasks.request`` that counts its calls in ``calls["n"]`` and loses the
    tasks for good at the ``n``-th."""
    original = ResidentTasks.request

    def request(self, make):
        calls["n"] += 1
        if calls["n"] == n:
            raise R.ResidentLost("only 1 task slots left for 2 resident tasks")
        return original(self, make)
    return request


def _broken_task_fn(*args, **kwargs):
    """A resident task function whose tasks fail before they connect."""
    def fn(batches):
        raise RuntimeError("no route to the driver")
        yield  # pragma: no cover
    return fn


def test_lost_tasks_mid_selection_hand_over_to_passes(set_limits, spark, monkeypatch):
    """If the resident tasks are gone for good, the selection goes on with passes."""
    expected = _lung_core("vmi_pairwise", 8, 0.01)
    calls = {"n": 0}
    # counts, then pairs and steps in turn: lost at the fifth request
    monkeypatch.setattr(ResidentTasks, "request", _lost_at(5, calls))
    set_limits(probe_cells=1)  # not in the driver: a small table
    run = run_selection(spark.createDataFrame(lung_frame()).repartition(3), "label",
                        bias_correction="none", method="vmi_pairwise", num_features=8, restart_tolerance=0.01)
    assert calls["n"] == 5  # nothing more ran on the resident tasks
    assert run.execution == "resident"
    assert any("went on with one Spark job per pass" in w for w in run.warnings)
    assert run.selection.selected == expected.selected
    assert run.selection.scores == expected.scores


def test_tasks_that_cannot_start_fall_back_or_fail_clearly(set_limits, spark, monkeypatch):
    monkeypatch.setattr(R.ResidentBackend, "task_fn", staticmethod(_broken_task_fn))
    set_limits(probe_cells=1)  # not in the driver: a small table
    df = spark.createDataFrame(random_discrete(2))
    with pytest.warns(UserWarning, match="resident tasks could not start"):
        run = run_selection(df, "y", num_features=3)
    assert run.execution == "passes"
    assert any("no route to the driver" in w for w in run.warnings)
    with pytest.raises(InputError, match="resident execution failed to start"):
        run_selection(df, "y", num_features=3, execution="resident")
    with pytest.raises(InputError, match="unknown execution"):
        run_selection(df, "y", num_features=3, execution="fast")


def _persisted(spark) -> set[int]:
    """The ids of the RDDs the session has persisted now."""
    return {int(k) for k in spark.sparkContext._jsc.getPersistentRDDs().keys()}


def _lung_parquet(tmp_path) -> str:
    path = str(tmp_path / "lung.parquet")
    lung_frame().to_parquet(path, index=False, row_group_size=25)  # 73 rows: 3 row groups
    return path


def test_resident_tasks_encode_their_own_parquet_rows(spark, tmp_path):
    """Parquet read by pyarrow, chunk storage auto: the resident tasks encode the rows they
    hold (nothing cached, ``storage`` "in_tasks"), with the answer of the cached chunks
    and of the core; asked for the cache, the chunks are cached as before."""
    expected = _lung_core("vmi_pairwise", 8, 0.01)
    df = spark.read.parquet(_lung_parquet(tmp_path))
    before = _persisted(spark)  # what other tests of the session left
    runs = {storage: run_selection(df, "label", bias_correction="none", method="vmi_pairwise",
                                   num_features=8, restart_tolerance=0.01,
                                   chunk_storage=storage)
            for storage in ("auto", "cache")}
    assert {k: (r.execution, r.reader, r.storage) for k, r in runs.items()} == {
        "auto": ("resident", "pyarrow", "in_tasks"), "cache": ("resident", "pyarrow", "cache")}
    for run in runs.values():
        assert run.selection.selected == expected.selected
        assert run.selection.scores == expected.scores
    assert not any("cached" in w or "recomput" in w for w in runs["auto"].warnings)
    assert _persisted(spark) == before  # nothing of these runs left cached


def test_tasks_that_encode_their_rows_hand_over_to_cached_passes(spark, tmp_path, monkeypatch):
    """Lost mid-selection or unable to start, resident tasks that encoded their own rows
    leave the steps to passes over a cached copy (``storage`` "cache"): the same answer."""
    expected = _lung_core("vmi_naive", 8)
    df = spark.read.parquet(_lung_parquet(tmp_path))
    before = _persisted(spark)
    calls = {"n": 0}
    with monkeypatch.context() as m:
        m.setattr(ResidentTasks, "request", _lost_at(4, calls))
        lost = run_selection(df, "label", bias_correction="none", num_features=8)
    assert calls["n"] == 4 and (lost.execution, lost.storage) == ("resident", "cache")
    assert any("went on with one Spark job per pass" in w for w in lost.warnings)

    monkeypatch.setattr(R.ResidentBackend, "task_fn", staticmethod(_broken_task_fn))
    with pytest.warns(UserWarning, match="resident tasks could not start"):
        unstarted = run_selection(df, "label", bias_correction="none", num_features=8)
    assert (unstarted.execution, unstarted.storage) == ("passes", "cache")
    for run in (lost, unstarted):
        assert run.selection.selected == expected.selected
        assert run.selection.scores == expected.scores
    assert _persisted(spark) == before  # the copy kept for the passes released


def test_dynamic_allocation_means_passes(spark):
    from types import SimpleNamespace

    from pyspark import SparkConf

    assert unavailable_reason(spark) is None
    conf = SparkConf(loadDefaults=False).set("spark.dynamicAllocation.enabled", "true")
    fake = SimpleNamespace(sparkContext=SimpleNamespace(getConf=lambda: conf))
    assert "dynamic allocation" in unavailable_reason(fake)


# ----------------------------------------------------------------------------- real task loss


def _python_workers(root: int) -> list[int]:
    """Python workers forked by a pyspark daemon under process ``root`` (not the daemon)."""
    parent, cmd = {}, {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                stat = Path(f"/proc/{p}/stat").read_text()
                cmd[int(p)] = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            parent[int(p)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, todo = set(), [root]
    while todo:
        kids = [p for p, pp in parent.items() if pp == todo[-1]]
        todo.pop()
        tree.update(kids)
        todo += kids
    return [p for p in tree if b"pyspark.daemon" in cmd[p]
            and b"pyspark.daemon" in cmd.get(parent[p], b"")]


@pytest.mark.skipif(not Path("/proc").exists(), reason="needs /proc to find the Python workers")
def test_killed_python_workers_are_restarted_with_the_same_answer(tmp_path):
    """SIGKILL the resident tasks' Python workers mid-selection: Spark retries the barrier
    stage, the new tasks connect, the step in flight is sent again, the report is the same."""
    rng = np.random.default_rng(8)
    n = 60_000
    y = rng.integers(0, 2, n)
    data = {f"x{i}": (rng.integers(0, 4, n) + (rng.random(n) < 0.1 + 0.01 * i) * y) % 4
            for i in range(30)}
    data["y"] = y
    table = tmp_path / "t.parquet"
    pd.DataFrame(data).to_parquet(table, index=False)
    submit = Path(sys.executable).parent / "spark-submit"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=str(ROOT))

    def cmd(out, master, *extra, job=ROOT / "jobs" / "select_features.py"):
        # local[2,4]: up to 4 task failures, so the barrier stage can be retried
        return [str(submit), "--master", master, "--conf", "spark.ui.enabled=false",
                str(job), "--input", str(table), "--label",
                "y", "--method", "vmi_pairwise", "--num-features", "20", "--output", str(out),
                *extra]

    gate = tmp_path / "gate"
    # --execution resident: auto would select this small table in the driver; the gated
    # job pauses after the checkpoint of step 2 until the workers are killed
    proc = subprocess.Popen(cmd(tmp_path / "a", "local[2,4]", "--checkpoint-dir",
                                str(tmp_path / "ck"), "--execution", "resident", job=GATED_JOB),
                            env=gate_env(env, gate, 2), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    killed: list[int] = []
    if wait_until_paused(proc, gate):
        killed = _python_workers(proc.pid)
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
    resume(gate)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-6000:]
    assert killed, "the run was not caught mid-selection"
    got = json.loads((tmp_path / "a" / "selection.json").read_text())
    assert got["execution"] == "resident"
    assert any("resident tasks were lost" in w for w in got["warnings"]), got["warnings"]
    done = subprocess.run(cmd(tmp_path / "b", "local[2]", "--execution", "passes", "--quiet"),
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    ref = json.loads((tmp_path / "b" / "selection.json").read_text())
    assert ref["execution"] == "passes"
    for key in ("selected", "blocks", "restarts", "scores", "gains"):
        assert got[key] == ref[key], key
