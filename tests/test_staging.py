"""Staging copies of the encoded rows under a staging directory (issue 33 items 4 and 7),
in a classic session with ``chunk_storage="staging"`` (what a serverless session does by
itself): never inside the input, with every front end; a copy holds the run's marker and
lock while it lives, is removed afterwards, and a copy a killed run left is removed by the
next run, and nothing else there is."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers import random_discrete
from vmi_spark import VMISelector
from vmi_spark.errors import InputError
from vmi_spark.spark.chunks import storage
from vmi_spark.spark.select import run_selection


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory):
    """A Parquet directory (two partitions k=0, k=1) and the frames read from it."""
    base = tmp_path_factory.mktemp("staging")
    pdf = random_discrete(4, n=400, d=5, classes=2)
    pdf["k"] = [i % 2 for i in range(len(pdf))]
    spark.createDataFrame(pdf).write.partitionBy("k").parquet(str(base / "in"))
    return base, spark.read.parquet(str(base / "in"))


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("where", ["the input", "a partition of it"])
def test_run_selection_refuses_to_stage_inside_its_input(table, where):
    """run_selection and VMISelector.setStagingDir wrote a vmi-chunks-* copy into the input
    directory while the selection ran; now they refuse before reading, as the job does."""
    base, df = table
    staging = base / "in" if where == "the input" else base / "in" / "k=1"
    before = _listing(base / "in")
    # run_selection names its keywords, VMISelector its Params
    with pytest.raises(InputError, match=r"staging_dir '.*' \(resolves to '.*vmi-chunks-\*'\) "
                                         r"lies inside the input") as info:
        run_selection(df, "y", num_features=2, chunk_storage="staging", staging_dir=str(staging))
    assert "\n" not in str(info.value)
    selector = VMISelector(inputCols=[f"c{j}" for j in range(5)], labelCol="y",
                           numTopFeatures=2, chunkStorage="staging").setStagingDir(str(staging))
    with pytest.raises(InputError, match="stagingDir .* lies inside the input"):
        selector.fit(df)
    assert _listing(base / "in") == before


def test_a_staging_copy_holds_its_marker_and_lock_and_goes_away(table, tmp_path):
    """While the selection runs the copy is vmi-chunks-<hex>/{_VMI_SPARK_CHUNKS, data} and
    locked; afterwards nothing the run created is left (the staging directory it created
    included), and the selection is the cached one's."""
    _, df = table
    staging = tmp_path / "vol" / "tmp"
    seen: list[tuple[list[str], dict, bool]] = []

    def on_step(sel):
        (copy,) = list(staging.iterdir())
        marker = json.loads((copy / storage.CHUNKS_MARKER).read_text())
        seen.append((sorted(os.listdir(copy)), marker, storage.sweep(str(staging)) == []))

    run = run_selection(df, "y", num_features=2, chunk_storage="staging",
                        staging_dir=str(staging), on_step=on_step, execution="passes")
    assert run.storage == "staging"
    names, marker, kept = seen[0]
    assert names == [storage.CHUNKS_MARKER, storage.CHUNKS_DATA] and kept
    assert marker["writer"] == "vmi_spark" and marker["kind"] == "chunks"
    assert not (tmp_path / "vol").exists()
    cached = run_selection(df, "y", num_features=2).selection
    assert run.selection.selected == cached.selected and run.selection.scores == cached.scores


def _killed_copy(df, staging: Path) -> Path:
    """A staging copy whose run was killed with kill -9: written, its lock gone with the
    process (the descriptor closed), never released."""
    kept = storage.keep(df.select("y"), None, "staging", str(staging))
    os.close(kept.lock)
    return Path(kept.local)


def test_a_copy_a_killed_run_left_is_removed_by_the_next_run(table, tmp_path):
    _, df = table
    staging = tmp_path / "st"
    staging.mkdir()
    live = storage.keep(df.select("y"), None, "staging", str(staging))  # a run still going
    left = _killed_copy(df, staging)
    assert sorted(os.listdir(left)) == [storage.CHUNKS_MARKER, storage.CHUNKS_DATA]
    # what the next run must leave alone: the user's, a copy without the marker, a copy
    # with a marker naming another copy, a link with a copy's name, a copy a live run holds
    (staging / "notes.txt").write_text("mine")
    plain = staging / "vmi-chunks-0123456789abcdef"
    (plain / "data").mkdir(parents=True)
    forged = staging / "vmi-chunks-fedcba9876543210"
    forged.mkdir()
    (forged / storage.CHUNKS_MARKER).write_text(json.dumps(
        {"writer": "vmi_spark", "kind": "chunks", "name": "vmi-chunks-0000000000000000"}))
    target = tmp_path / "target"
    target.mkdir()
    (target / "x").write_text("x")
    os.symlink(target, staging / "vmi-chunks-aaaaaaaaaaaaaaaa")
    others = sorted(set(os.listdir(staging)) - {left.name})
    with pytest.warns(UserWarning, match=f"removed the staging copy {left} that an "
                                         "interrupted run left"):
        run_selection(df, "y", num_features=2, chunk_storage="staging",
                      staging_dir=str(staging), execution="passes")
    assert sorted(os.listdir(staging)) == others
    assert os.listdir(target) == ["x"] and sorted(os.listdir(plain)) == ["data"]
    live.release()
    assert not Path(live.local).exists()


def test_the_paths_a_connect_plan_reads():
    """Under Spark Connect the input's roots come from the client's plan (protobuf): every
    data source's paths, through any relation above them."""
    relations_pb2 = pytest.importorskip("pyspark.sql.connect.proto.relations_pb2")
    r = relations_pb2.Relation()
    r.join.left.project.input.read.data_source.paths.extend(["/a/b.parquet", "/c"])
    r.join.right.filter.input.read.data_source.paths.append("hdfs://nn/d")
    r.join.right.filter.input.read.data_source.options["k"] = "v"
    assert sorted(storage._read_paths(r)) == ["/a/b.parquet", "/c", "hdfs://nn/d"]


def test_run_selection_refuses_a_checkpoint_inside_its_input(table):
    """The job refuses --checkpoint-dir in the input; run_selection wrote
    vmi_checkpoint.json there."""
    base, df = table
    before = _listing(base / "in")
    for where in (base / "in", base / "in" / "k=0" / "ck"):
        with pytest.raises(InputError, match=f"checkpoint_dir '{where}' (is|lies inside) the "
                                             "input"):
            run_selection(df, "y", num_features=2, checkpoint_dir=str(where))
    assert _listing(base / "in") == before
