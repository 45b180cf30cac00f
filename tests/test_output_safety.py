"""Output safety and reader options of the job (issue 17 items 1 and 6, issue 20 item 8).

Every refused case asserts exit 2, one error line naming the flag, no traceback and the
same file tree before and after. Cases decided from the arguments alone run with a
spark object that fails on any use, which shows that Spark never ran.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import random_discrete
from vmi_spark import files, job, outputs
from vmi_spark.errors import InputError
from vmi_spark.job import main

ERR = "select_features: error:"


class NoSpark:
    """A stand-in session that fails the test if the job touches it."""

    def __getattr__(self, name):
        raise AssertionError(f"Spark was used ({name}) before the arguments were checked")


def tree(root: Path) -> dict[str, str]:
    """Every entry under ``root``: relative path -> 'dir', 'link ...' or the file's SHA-1."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = f"link {os.readlink(p)}"
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha1(p.read_bytes()).hexdigest()
    return out


def refused(capsys, argv, needle, spark=None):
    """Run the job; assert exit 2 with one error line holding ``needle``."""
    rc = main([str(a) for a in argv], spark=spark if spark is not None else NoSpark())
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip() and " INFO vmi_spark: " not in ln]
    assert rc == 2, err
    assert len(lines) == 1 and lines[0].startswith(ERR), err
    assert needle in lines[0], lines[0]
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def base(tmp_path):
    """tmp_path/data/t.parquet: a small labelled table (written with pyarrow, no Spark)."""
    (tmp_path / "data").mkdir()
    pq.write_table(pa.Table.from_pandas(random_discrete(5, n=120, d=5, classes=2),
                                        preserve_index=False),
                   tmp_path / "data" / "t.parquet")
    return tmp_path


def _args(base: Path, *rest) -> list:
    return ["--input", base / "data", "--label", "y", "--num-features", "2", *rest]


@pytest.mark.parametrize("case", [
    "output is input", "output is parent of input", "output is cwd", "output via dotdot",
    "output is symlink to input", "write-selected is input", "write-selected is parent",
    "output is write-selected", "checkpoint is output", "checkpoint inside output",
    "output inside checkpoint", "output is a glob input match", "staging-dir is input"])
def test_overlapping_paths_refused_before_spark(base, capsys, monkeypatch, case):
    data = base / "data"
    os.symlink(data, base / "link")
    monkeypatch.chdir(base)
    argv, needle = {
        "output is input": (_args(base, "--output", data, "--overwrite"),
                            f"--output '{data}' is the --input"),
        "output is parent of input": (_args(base, "--output", base, "--overwrite"),
                                      f"--output '{base}' contains the --input"),
        "output is cwd": (_args(base, "--output", ".", "--overwrite"),
                          f"--output '.' (resolves to '{base}') contains the --input"),
        "output via dotdot": (_args(base, "--output", "data/x/../../data/sub", "--overwrite"),
                              "lies inside the --input"),
        "output is symlink to input": (_args(base, "--output", "link", "--overwrite"),
                                       f"--output 'link' (resolves to '{data}') is the --input"),
        "write-selected is input": (_args(base, "--output", base / "o", "--write-selected",
                                          data, "--overwrite"), "--write-selected"),
        "write-selected is parent": (_args(base, "--output", "o", "--write-selected", base),
                                     "contains the --input"),
        "output is write-selected": (_args(base, "--output", "o", "--write-selected", "o"),
                                     "--write-selected 'o' (resolves to '%s') is the --output"
                                     % (base / "o")),
        "checkpoint is output": (_args(base, "--checkpoint-dir", "o", "--output", "o"),
                                 "--checkpoint-dir 'o' (resolves to '%s') is the --output"
                                 % (base / "o")),
        "checkpoint inside output": (_args(base, "--checkpoint-dir", "o/ck", "--output", "o"),
                                     "lies inside the --output"),
        "output inside checkpoint": (_args(base, "--checkpoint-dir", "ck", "--output", "ck/o"),
                                     "contains the --output"),
        "output is a glob input match": (["--input", base / "d*", "--label", "y",
                                          "--output", base / "dx"],
                                         "is the --input"),
        "staging-dir is input": (_args(base, "--output", "o", "--staging-dir", "data"),
                                 f"--staging-dir 'data' (resolves to '{data}/vmi-chunks-*') "
                                 "lies inside the --input"),
    }[case]
    before = tree(base)
    refused(capsys, argv, needle)
    assert tree(base) == before


def test_existing_outputs_refused_unless_previous_output(base, capsys):
    """A file, a foreign directory (even with --overwrite), or a previous output without
    --overwrite is refused from the arguments alone; the directory stays as it was."""
    (base / "afile").write_text("x")
    foreign = base / "foreign"
    foreign.mkdir()
    (foreign / "selection.json").write_text("{}")
    (foreign / "notes.txt").write_text("mine")
    prev = base / "prev"
    prev.mkdir()
    (prev / "selection.json").write_text("{}")
    (prev / "report.md").write_text("#")
    before = tree(base)
    refused(capsys, _args(base, "--output", base / "afile", "--overwrite"),
            "is not a directory")
    refused(capsys, _args(base, "--output", foreign, "--overwrite"),
            f"--output directory '{foreign}' is not a previous output of this job "
            "(it holds 'notes.txt'")
    refused(capsys, _args(base, "--output", prev), "exists and is not empty (use --overwrite")
    refused(capsys, _args(base, "--checkpoint-dir", base / "afile", "--output", base / "o"),
            "--checkpoint-dir")
    refused(capsys, _args(base, "--output", "dbfs:/x"), "--output is a directory on the "
            "driver's file system")
    refused(capsys, _args(base, "--output", base / "o", "--read-option", "multiLine"),
            "argument --read-option: expected KEY=VALUE, got 'multiLine'")
    assert tree(base) == before


@pytest.fixture
def immutable(tmp_path):
    """A directory even root cannot create entries in (chattr +i); skipped where unsupported."""
    d = tmp_path / "ro"
    d.mkdir()
    if shutil.which("chattr") is None or subprocess.run(
            ["chattr", "+i", str(d)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i not available")
    try:
        yield d
    finally:
        subprocess.run(["chattr", "-i", str(d)], check=False)


def test_unwritable_output_found_before_the_session(base, immutable, capsys, monkeypatch):
    SparkSession = pytest.importorskip("pyspark.sql").SparkSession

    monkeypatch.setattr(SparkSession, "builder", NoSpark())  # no session may be created
    before = tree(base)
    for flag, rest in (("--output", []), ("--checkpoint-dir", ["--output", base / "o"])):
        line = refused(capsys, _args(base, *rest, flag, immutable / "deep" / "out"),
                       f"{flag} '{immutable}/deep/out': cannot write in '{immutable}'")
        assert "Operation not permitted" in line or "ermission denied" in line
        assert main([str(a) for a in _args(base, *rest, flag, immutable / "x")]) == 2
        capsys.readouterr()
    (base / "afile").write_text("x")
    refused(capsys, _args(base, "--output", base / "afile" / "out"),
            f"'{base / 'afile'}' is not a directory")
    assert os.listdir(immutable) == []
    assert tree(base) == {**before, "afile": tree(base)["afile"]}


def test_claims_race_one_winner(tmp_path):
    """Eight threads claim the same output at once: exactly one wins; the others leave
    nothing; releasing removes the claim and the parents the winner created."""
    target = tmp_path / "a" / "b" / "out"
    go = threading.Barrier(8)
    results: list[str] = []

    def attempt():
        t = outputs.Target("--output", str(target), files.LocalFS(),
                           outputs.previous_output, False)
        go.wait()
        try:
            with outputs.Claims([t]):
                results.append("won")
                go_release.wait()
        except Exception as exc:  # noqa: BLE001 - the losers' one-line errors
            results.append(str(exc))
            go_release.wait()

    go_release = threading.Barrier(8)
    threads = [threading.Thread(target=attempt) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results.count("won") == 1, results
    assert all("is being written by another run" in r for r in results if r != "won")
    # no file and no staging directory; only parents a loser created and the winner then
    # used may remain (each run removes only the empty directories it made itself)
    left = tree(tmp_path)
    assert set(left) <= {"a", "a/b"} and set(left.values()) <= {"dir"}, left
    shutil.rmtree(tmp_path / "a", ignore_errors=True)
    # what a killed run left (its marker, no live lock) is taken over, emptied, and
    # removed at the end
    stale = _killed_claim(tmp_path / "out")
    (stale / "new").mkdir()
    (stale / "new" / "selection.json").write_text("{}")
    t = outputs.Target("--output", str(tmp_path / "out"), files.LocalFS(),
                       outputs.previous_output, False)
    with outputs.Claims([t]):
        assert os.listdir(stale) == [files.STAGING_MARKER]
    assert os.listdir(tmp_path) == []


def _killed_claim(target: Path) -> Path:
    """The staging directory a run killed with kill -9 leaves: claimed (marker written),
    its lock gone with the process, never released."""
    t = outputs.Target("--output", str(target), files.LocalFS(), outputs.previous_output,
                       False)
    t.claim()
    os.close(t._handle)  # the process died: its descriptor, and so its lock, is gone
    return Path(t.staging)


def test_concurrent_loser_writes_nothing(spark, base, capsys, monkeypatch):
    """Run A claims its outputs and is held before reading; run B with the same --output and
    --write-selected is refused and writes nothing; A then completes."""
    out, sel = base / "o", base / "sel"
    held, resume = threading.Event(), threading.Event()
    real_read = job.read_input

    def slow_read(spark_, args):
        held.set()
        assert resume.wait(120)
        return real_read(spark_, args)

    monkeypatch.setattr(job, "read_input", slow_read)
    rc_a: list[int] = []
    a = threading.Thread(target=lambda: rc_a.append(main([str(x) for x in _args(
        base, "--output", out, "--write-selected", sel)], spark=spark)))
    a.start()
    try:
        assert held.wait(120)
        before = tree(base)
        assert set(before) == {"data", "data/t.parquet", ".vmi-tmp-o", ".vmi-tmp-sel",
                               f".vmi-tmp-o/{files.STAGING_MARKER}",
                               f".vmi-tmp-sel/{files.STAGING_MARKER}"}
        refused(capsys, _args(base, "--output", out, "--write-selected", sel, "--overwrite"),
                "is being written by another run")
        assert tree(base) == before
    finally:
        resume.set()
        a.join(300)
    assert rc_a == [0]
    assert sorted(os.listdir(base)) == ["data", "o", "sel"]
    written = ["report.md", "selection.json", "steps.csv"]
    assert sorted(os.listdir(out)) in (["bounds.png", *written], written)
    assert outputs.SELECTED_MARKER in os.listdir(sel)


def test_failed_run_leaves_the_tree_as_it_was(spark, base, capsys):
    """A failure after the claims (a missing label column) removes the staging directories
    and the parents the run created."""
    before = tree(base)
    refused(capsys, ["--input", base / "data", "--label", "nolabel",
                     "--output", base / "new" / "deep" / "o",
                     "--write-selected", base / "new2" / "sel"],
            "label column 'nolabel' not found", spark=spark)
    assert tree(base) == before
    # a --write-selected directory the job did not write, after the session started
    (base / "foreign").mkdir()
    (base / "foreign" / "part-0.parquet").write_bytes(b"x")
    before = tree(base)
    refused(capsys, _args(base, "--output", base / "o", "--write-selected", base / "foreign",
                          "--overwrite"),
            f"--write-selected directory '{base / 'foreign'}' is not a previous output of this "
            f"job (it has no valid {outputs.SELECTED_MARKER} marker", spark=spark)
    assert tree(base) == before


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_overwrite_replaces_previous_outputs_with_umask_modes(spark, base, capsys):
    """Under umask 027 every directory the job creates is 0750 and every file it writes
    0640; a rerun with --overwrite replaces both previous outputs (recognised by their
    files and marker) and keeps the --output directory itself."""
    out, sel = base / "res" / "o", base / "sel"
    old = os.umask(0o027)
    try:
        assert main([str(a) for a in _args(base, "--output", out, "--write-selected", sel)],
                    spark=spark) == 0
        capsys.readouterr()
        rep = json.loads((out / "selection.json").read_text())
        assert _mode(base / "res") == _mode(out) == 0o750
        for name in os.listdir(out):
            assert _mode(out / name) == 0o640, name
        assert _mode(sel / outputs.SELECTED_MARKER) == 0o640
        marker = json.loads((sel / outputs.SELECTED_MARKER).read_text())
        assert marker["selected"] == rep["selected"] and marker["writer"] == "vmi_spark"
        inode = out.stat().st_ino
        argv = _args(base, "--output", out, "--write-selected", sel, "--overwrite")
        argv[argv.index("--num-features") + 1] = "3"
        assert main([str(a) for a in argv], spark=spark) == 0
    finally:
        os.umask(old)
    rep3 = json.loads((out / "selection.json").read_text())
    assert len(rep3["selected"]) == 3 and rep3["selected"][:2] == rep["selected"]
    assert out.stat().st_ino == inode
    assert sorted(spark.read.parquet(str(sel)).columns) == sorted([*rep3["selected"], "y"])
    assert sorted(os.listdir(base)) == ["data", "res", "sel"]


def test_file_uris_go_through_hadoop_only_inside_the_seam(tmp_path):
    class Session:  # a session's Hadoop file system: it qualifies paths, nothing more here
        def qualify(self, path):
            return path

    hfs, uri = Session(), f"file://{tmp_path}/sel"
    with outputs.file_uris_through_hadoop():
        assert outputs._on_session(hfs, "--write-selected", uri) == (hfs, uri)
    fs, path = outputs._on_session(hfs, "--write-selected", uri)
    assert isinstance(fs, outputs.LocalFS) and path == os.path.realpath(tmp_path / "sel")


def test_write_selected_through_hadoop_file_system(spark, base, capsys):
    """The Hadoop code path (used for hdfs://, s3a://, ...) on file: URIs: claim, marker,
    commit and --overwrite of a previous output."""
    sel = base / "sel"
    for extra in ([], ["--overwrite"]):
        with outputs.file_uris_through_hadoop():
            assert main([str(a) for a in _args(base, "--output", base / f"o{len(extra)}",
                                               "--write-selected", f"file://{sel}", *extra)],
                        spark=spark) == 0, capsys.readouterr().err
    assert outputs.SELECTED_MARKER in os.listdir(sel)
    assert not [n for n in os.listdir(base) if n.startswith(".vmi-tmp-")]
    assert spark.read.parquet(str(sel)).count() == 120


def test_csv_with_quoted_newlines_needs_multiline(spark, tmp_path, capsys):
    """200 records, 40 of them with a line break inside a quoted field: Spark's default CSV
    reader sees 240 rows; --read-option multiLine=true gives 200."""
    pdf = random_discrete(3, n=200, d=4, classes=2)
    pdf["note"] = ["line one\nline two" if i % 5 == 0 else "plain" for i in range(200)]
    pdf.to_csv(tmp_path / "t.csv", index=False)
    assert spark.read.option("header", "true").csv(str(tmp_path / "t.csv")).count() == 240
    rc = main(["--input", str(tmp_path / "t.csv"), "--format", "csv", "--label", "y",
               "--features", "c0,c1,c2,c3,note", "--num-features", "2",
               "--read-option", "multiLine=true", "--read-option", "escape=\"",
               "--output", str(tmp_path / "o")], spark=spark)
    assert rc == 0, capsys.readouterr().err
    rep = json.loads((tmp_path / "o" / "selection.json").read_text())
    assert rep["num_rows"] == 200 and rep["rows_dropped"] == 0
    assert rep["read_options"] == {"multiLine": "true", "escape": '"'}


def test_write_selected_into_the_input_tables_location_refused(spark, tmp_path, capsys):
    """--table: the table's storage location counts as the input."""
    import uuid

    db = f"vmi_safety_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {db} LOCATION '{tmp_path / 'wh'}'")
    try:
        spark.createDataFrame(random_discrete(2, n=40, d=3, classes=2)) \
            .write.saveAsTable(f"{db}.src")
        before = tree(tmp_path)
        refused(capsys, ["--table", f"{db}.src", "--label", "y", "--output", tmp_path / "o",
                         "--write-selected", tmp_path / "wh", "--overwrite"],
                f"--write-selected '{tmp_path / 'wh'}' contains the --table '{db}.src' "
                f"(resolves to '{tmp_path / 'wh' / 'src'}')", spark=spark)
        assert tree(tmp_path) == before
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


def test_checkpoint_file_follows_the_umask(tmp_path):
    from vmi_spark.checkpoint import Checkpoint
    from vmi_spark.core.greedy import Selection

    old = os.umask(0o027)
    try:
        ck = Checkpoint(str(tmp_path / "ck"), "f" * 64, num_features=4, method="vmi_naive")
        ck.save(Selection(method="vmi_naive", selected=[1], scores=[0.5], gains=[0.5],
                          blocks=[0], step_seconds=[0.1], candidates=[]))
    finally:
        os.umask(old)
    assert _mode(tmp_path / "ck") == 0o750
    assert _mode(Path(ck.file)) == 0o640  # mkstemp alone would give 0600
    assert ck.load().selected == [1]


def test_staging_dir_counts_by_the_directory_a_run_writes_in_it(tmp_path):
    """A --staging-dir (where the parser has one) may hold the outputs and sit next to the
    input, since a run writes only a fresh vmi-chunks-* in it; inside the input it is refused."""
    import argparse

    from vmi_spark.errors import InputError

    v = tmp_path / "vol"
    ns = argparse.Namespace(output=str(v / "results"), write_selected=None,
                            checkpoint_dir=None, staging_dir=str(v))
    outs = outputs.output_locations(ns)
    files.check_overlaps(outs, [files.resolve(str(v / "t.parquet"), "--input",
                                                  pattern=True)])
    ns.output = str(tmp_path / "results")
    with pytest.raises(InputError, match=r"--staging-dir .* lies inside the --input"):
        files.check_overlaps(outputs.output_locations(ns),
                               [files.resolve(str(v), "--input", pattern=True)])


# ----------------------------------------------------------------------------- issue 33


@pytest.fixture
def thesis(tmp_path):
    """A user's directory with work in it (what a link at one of the job's names may name)."""
    d = tmp_path / "thesis"
    (d / "ch1").mkdir(parents=True)
    (d / "ch1" / "intro.tex").write_text("years of work")
    (d / "notes.txt").write_text("more")
    return d


@pytest.mark.parametrize("kind", ["link to a directory", "link to a file", "dangling link"])
def test_a_link_at_the_output_staging_name_is_refused_and_its_target_kept(base, thesis, capsys,
                                                                         kind):
    """`ln -s ~/thesis W/.vmi-tmp-out; vmi-select ... --output W/out` emptied ~/thesis and
    exited 0: now a one-line error naming --output and the link, before Spark, and the
    link and what it names are untouched."""
    work = base / "W"
    work.mkdir()
    target = {"link to a directory": thesis, "link to a file": thesis / "notes.txt",
              "dangling link": base / "nowhere"}[kind]
    os.symlink(target, work / ".vmi-tmp-out")
    before, mine = tree(base), tree(thesis)
    line = refused(capsys, _args(base, "--output", work / "out"),
                   f"--output '{work / 'out'}': '{work / '.vmi-tmp-out'}' is a symbolic link")
    assert "never removes what it did not create" in line
    assert tree(base) == before and tree(thesis) == mine


def test_a_link_at_the_staging_name_is_refused_by_the_claim_itself(tmp_path, thesis):
    """The claim opens its staging directory without following a link, also when the link
    appears after the checks (between check and claim)."""
    os.symlink(thesis, tmp_path / ".vmi-tmp-out")
    mine = tree(thesis)
    t = outputs.Target("--output", str(tmp_path / "out"), files.LocalFS(),
                       outputs.previous_output, False)
    with pytest.raises(InputError, match="is a symbolic link"):
        t.claim()
    assert tree(thesis) == mine and (tmp_path / ".vmi-tmp-out").is_symlink()
    assert sorted(os.listdir(tmp_path)) == [".vmi-tmp-out", "thesis"]


@pytest.mark.parametrize("content", ["user file", "user file beside the marker",
                                     "forged entries only"])
def test_a_foreign_directory_at_the_staging_name_is_refused_not_emptied(base, capsys, content):
    """A directory at .vmi-tmp-NAME that is not a staging directory the job left (no marker,
    or entries the job never puts there) is refused and kept."""
    stale = base / ".vmi-tmp-o"
    stale.mkdir()
    if content == "user file":
        (stale / "draft.txt").write_text("mine")
    elif content == "user file beside the marker":
        (stale / files.STAGING_MARKER).write_text(json.dumps(
            {"writer": "vmi_spark", "kind": "staging", "version": 1}))
        (stale / "draft.txt").write_text("mine")
    else:  # the job's entry names, but no marker: not provably the job's
        (stale / "new").mkdir()
        (stale / "new" / "draft.txt").write_text("mine")
    before = tree(base)
    refused(capsys, _args(base, "--output", base / "o"), f"'{stale}' ")
    assert tree(base) == before


def test_a_killed_runs_staging_directory_is_emptied_without_following_links(tmp_path, thesis):
    """Taking over a killed run's staging directory removes what is in it, links included,
    never what a link inside names."""
    stale = _killed_claim(tmp_path / "out")
    (stale / "new").mkdir()
    os.symlink(thesis, stale / "new" / "report.md")
    os.symlink(thesis, stale / "old")
    mine = tree(thesis)
    t = outputs.Target("--output", str(tmp_path / "out"), files.LocalFS(),
                       outputs.previous_output, False)
    with outputs.Claims([t]):
        assert os.listdir(stale) == [files.STAGING_MARKER]
    assert tree(thesis) == mine
    assert sorted(os.listdir(tmp_path)) == ["thesis"]


def test_a_link_in_a_previous_output_is_not_replaced(base, thesis, capsys):
    """--overwrite replaces only the job's own regular files: a report.md that is a link
    (to the user's file) makes the directory foreign."""
    prev = base / "prev"
    prev.mkdir()
    (prev / "selection.json").write_text("{}")
    os.symlink(thesis / "notes.txt", prev / "report.md")
    before = tree(base)
    refused(capsys, _args(base, "--output", prev, "--overwrite"),
            "is not a previous output of this job (it holds 'report.md'")
    assert tree(base) == before


@pytest.mark.parametrize("kind", ["link", "directory"])
def test_a_checkpoint_file_that_is_not_a_regular_file_is_refused_before_spark(base, thesis,
                                                                             capsys, kind):
    from vmi_spark.checkpoint import FILE_NAME

    ck = base / "ck"
    ck.mkdir()
    if kind == "link":
        os.symlink(thesis / "notes.txt", ck / FILE_NAME)
    else:
        (ck / FILE_NAME).mkdir()
    before, mine = tree(base), tree(thesis)
    refused(capsys, _args(base, "--output", base / "o", "--checkpoint-dir", ck),
            f"--checkpoint-dir '{ck}': '{ck / FILE_NAME}' is "
            + ("a symbolic link" if kind == "link" else "not a regular file"))
    assert tree(base) == before and tree(thesis) == mine


def test_a_checkpoint_directory_another_run_holds_is_refused_before_spark(base, capsys):
    """Another process holds the directory (flock, as a running job does): the job stops
    with one line naming --checkpoint-dir and the directory, before Spark, writing
    nothing."""
    import fcntl

    ck = base / "ck"
    ck.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
         f"fd = os.open({str(ck)!r}, os.O_RDONLY | os.O_DIRECTORY)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(120)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = tree(base)
        refused(capsys, _args(base, "--output", base / "o", "--checkpoint-dir", ck),
                f"another run is using the --checkpoint-dir {ck}")
        assert tree(base) == before
    finally:
        holder.kill()
        holder.wait()
    fd = os.open(ck, os.O_RDONLY | os.O_DIRECTORY)  # the probe held nothing after itself
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


def test_a_linked_checkpoint_file_is_not_read(tmp_path, thesis):
    """run_selection and the estimator do not go through the job's checks: the checkpoint
    loader itself refuses a link."""
    from vmi_spark.checkpoint import FILE_NAME, Checkpoint

    ck = tmp_path / "ck"
    ck.mkdir()
    os.symlink(thesis / "notes.txt", ck / FILE_NAME)
    with pytest.raises(InputError, match="not a regular file"):
        Checkpoint(str(ck), "f" * 64, num_features=3, method="vmi_naive").load()
    assert (thesis / "notes.txt").read_text() == "more"


@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_staging_dir_problems_before_spark(base, capsys, where):
    """A file: --staging-dir that cannot be a directory is refused from the arguments alone,
    naming the flag."""
    (base / "afile").write_text("x")
    staging = base / "afile" if where == "a file" else base / "afile" / "sub"
    before = tree(base)
    refused(capsys, _args(base, "--output", base / "o", "--staging-dir", f"file://{staging}"),
            f"--staging-dir '{staging}': '{base / 'afile'}' is not a directory")
    assert tree(base) == before


def test_a_link_at_the_write_selected_staging_name_is_refused(spark, base, thesis, capsys):
    """The same through --write-selected W/sel (a Spark path: checked once the session
    exists, before anything is read)."""
    work = base / "W"
    work.mkdir()
    os.symlink(thesis, work / ".vmi-tmp-sel")
    before, mine = tree(base), tree(thesis)
    refused(capsys, _args(base, "--output", base / "o", "--write-selected", work / "sel"),
            f"--write-selected '{work / 'sel'}': '{work / '.vmi-tmp-sel'}' is a symbolic link",
            spark=spark)
    assert tree(base) == before and tree(thesis) == mine


def test_overwrite_keeps_a_file_the_user_added_to_write_selected(spark, base, capsys):
    """`--write-selected S --overwrite` deleted a file the user had added to S: S is now
    refused unless it holds only what the job wrote there (listed in its marker)."""
    sel = base / "sel"
    assert main([str(a) for a in _args(base, "--output", base / "o", "--write-selected", sel)],
                spark=spark) == 0
    capsys.readouterr()
    marker = json.loads((sel / outputs.SELECTED_MARKER).read_text())
    written = sorted(str(p.relative_to(sel)) for p in sel.rglob("*")
                     if p.is_file() and not p.name.endswith(outputs.SELECTED_MARKER + ".crc")
                     and p.name != outputs.SELECTED_MARKER)
    assert marker["files"] == written and any(f.startswith("part-") for f in written)
    for added, what in (("notes.txt", "file"), ("part-99999-mine.parquet", "file"),
                        ("sub", "directory")):
        if what == "directory":
            (sel / added).mkdir()
        else:
            (sel / added).write_text("mine")
        before = tree(base)
        refused(capsys, _args(base, "--output", base / "o", "--write-selected", sel,
                              "--overwrite"),
                f"--write-selected directory '{sel}' is not a previous output of this job (it "
                f"holds the {what} '{added}', which the job did not write there)", spark=spark)
        assert tree(base) == before
        (sel / added).rmdir() if what == "directory" else (sel / added).unlink()
    # without the additions it is the job's own again: replaced
    assert main([str(a) for a in _args(base, "--output", base / "o", "--write-selected", sel,
                                       "--overwrite")], spark=spark) == 0


def test_previous_selected_of_a_version_1_marker(tmp_path):
    """A marker written before the file list (version 1): only the names Spark's writers
    give, in k=v directories, are the job's."""
    sel = tmp_path / "sel"
    (sel / "k=1").mkdir(parents=True)
    (sel / outputs.SELECTED_MARKER).write_text(json.dumps(
        {"writer": "vmi_spark", "kind": "write-selected", "version": 1}))
    for name in ("_SUCCESS", "._SUCCESS.crc", "k=1/part-00000-x.parquet",
                 "k=1/.part-00000-x.parquet.crc"):
        (sel / name).write_text("")
    fs = files.LocalFS()
    assert outputs.previous_selected(fs, str(sel)) is None
    (sel / "k=1" / "mine.csv").write_text("x")
    assert outputs.previous_selected(fs, str(sel)) == (
        "it holds the file 'k=1/mine.csv', which the job did not write there")


@pytest.fixture
def no_read(monkeypatch):
    """The job must not read its input (an output problem found first)."""
    def fail(*_a, **_k):
        raise AssertionError("the input was read before the outputs were checked")
    monkeypatch.setattr(job, "read_input", fail)


def test_staging_dir_problems_found_before_reading(spark, base, capsys, no_read):
    """A --staging-dir under a file (a Spark path: checked once the session exists) is a
    one-line error naming the flag before the input is read (it was 'Parent path is not a
    directory' after reading and encoding)."""
    (base / "afile").write_text("x")
    before = tree(base)
    refused(capsys, _args(base, "--output", base / "o", "--staging-dir",
                          base / "afile" / "sub"),
            f"--staging-dir '{base / 'afile' / 'sub'}': '{base / 'afile'}' is not a directory",
            spark=spark)
    assert tree(base) == before


def test_unreachable_staging_dir_found_before_reading(spark, base, capsys, no_read):
    """An HDFS --staging-dir nobody answers for: one line naming the flag, before reading
    (it was a 'Connection refused' trace after reading and encoding)."""
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    old = conf.get("ipc.client.connect.max.retries")
    conf.set("ipc.client.connect.max.retries", "0")  # the test's own patience, not the job's
    try:
        line = refused(capsys, _args(base, "--output", base / "o", "--staging-dir",
                                     "hdfs://127.0.0.1:9/vmi"),
                       "--staging-dir 'hdfs://127.0.0.1:9/vmi': cannot write there (",
                       spark=spark)
    finally:
        conf.set("ipc.client.connect.max.retries", old or "10")
    assert "Connection refused" in line or "Call From" in line, line


def _csv_warnings(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if "WARNING" in ln and "multiLine=true" in ln]


def test_csv_with_quoted_newlines_is_warned_about(spark, tmp_path, capsys):
    """Still open from round 1: read line by line, 200 records with 40 quoted line breaks
    are 240 rows, silently. The result is unchanged, but a warning (logged and in the
    report) names --read-option multiLine=true; with it, or for a CSV whose quotes all
    close on their line, there is none."""
    pdf = random_discrete(3, n=200, d=4, classes=2)
    pdf["note"] = ["line one\nline two" if i % 5 == 0 else 'say "hi", ok' for i in range(200)]
    pdf.to_csv(tmp_path / "t.csv", index=False)
    clean = pdf.assign(note=['say "hi", ok'] * 200)
    (tmp_path / "clean").mkdir()
    clean.to_csv(tmp_path / "clean" / "t.csv", index=False)
    argv = ["--format", "csv", "--label", "y", "--features", "c0,c1,c2,c3",
            "--num-features", "2", "--quiet"]
    assert main(["--input", str(tmp_path / "t.csv"), *argv, "--output", str(tmp_path / "o")],
                spark=spark) == 0
    (line,) = _csv_warnings(capsys.readouterr().err)
    assert "80 of 241 lines" in line and "--read-option multiLine=true" in line
    rep = json.loads((tmp_path / "o" / "selection.json").read_text())
    # what Spark reads, never changed by the warning: 240 rows, the 40 split-off ones
    # without a label
    assert (rep["num_rows"], rep["rows_dropped"]) == (200, 40)
    assert any("multiLine=true" in w for w in rep["warnings"])
    for inp, extra, out in ((tmp_path / "t.csv", ["--read-option", "multiLine=true",
                                                  "--read-option", 'escape="'], "o2"),
                            (tmp_path / "clean", [], "o3")):
        assert main(["--input", str(inp), *argv, *extra, "--output", str(tmp_path / out)],
                    spark=spark) == 0
        assert _csv_warnings(capsys.readouterr().err) == []
        rep = json.loads((tmp_path / out / "selection.json").read_text())
        assert (rep["num_rows"], rep["rows_dropped"]) == (200, 0)
        assert not any("multiLine" in w for w in rep["warnings"])


def test_csv_header_names_spark_renamed_are_warned_about(spark, tmp_path, capsys):
    """A header with A and a (the same name to Spark, which compares without case) and an
    empty name: Spark reads A0, a1 and _c3, which the selection then uses. A warning
    (logged and in the report) names each renaming; a header Spark keeps gives none."""
    rng = np.random.default_rng(8)
    y = rng.integers(0, 2, 300)
    cols = {"A": rng.normal(size=300) + y, "a": rng.normal(size=300), "q": rng.normal(size=300)}
    pd.DataFrame({**cols, "": rng.normal(size=300), "y": y}).to_csv(tmp_path / "d.csv",
                                                                  index=False)
    pd.DataFrame({**cols, "y": y}).rename(columns={"a": "b"}).to_csv(tmp_path / "k.csv",
                                                                     index=False)
    argv = ["--format", "csv", "--label", "y", "--num-features", "2", "--quiet"]
    assert main(["--input", str(tmp_path / "d.csv"), *argv, "--output", str(tmp_path / "o")],
                spark=spark) == 0
    want = ("Spark renamed columns of the CSV header (a repeated name, compared without case, "
            "gets its column index; an empty one _c<index>): 'A' to 'A0', 'a' to 'a1', '' to "
            "'_c3'; the selection and its outputs use the new names")
    assert [ln for ln in capsys.readouterr().err.splitlines() if "renamed" in ln][0].endswith(
        want)
    rep = json.loads((tmp_path / "o" / "selection.json").read_text())
    assert want in rep["warnings"] and "A0" in rep["features"]
    assert main(["--input", str(tmp_path / "k.csv"), *argv, "--output", str(tmp_path / "o2")],
                spark=spark) == 0
    assert "renamed" not in capsys.readouterr().err


def test_output_request_names_every_location_the_job_writes(tmp_path):
    """output_locations of an OutputRequest (what job.output_request builds from the parsed
    flags): the flags in order, each staging directory next to its output, the run's own
    vmi-chunks-* under --staging-dir, hand-listed."""
    from vmi_spark.job import build_parser, check_args, output_request

    t = os.path.realpath(tmp_path)
    args = check_args(build_parser().parse_args(
        ["--input", f"{t}/in.parquet", "--label", "y", "--output", f"{t}/o/../res",
         "--write-selected", f"{t}/sel", "--checkpoint-dir", f"{t}/ck",
         "--staging-dir", f"{t}/st", "--overwrite"])).args
    req = output_request(args)
    assert req == outputs.OutputRequest(output=f"{t}/o/../res", write_selected=f"{t}/sel",
                                        checkpoint_dir=f"{t}/ck", staging_dir=f"{t}/st",
                                        overwrite=True, input=f"{t}/in.parquet", table=None)
    got = [(loc.flag, loc.text) for loc in outputs.output_locations(req)]
    assert got == [("--output", f"{t}/res"),
                   ("--output staging directory", f"{t}/.vmi-tmp-res"),
                   ("--write-selected", f"{t}/sel"),
                   ("--write-selected staging directory", f"{t}/.vmi-tmp-sel"),
                   ("--checkpoint-dir", f"{t}/ck"),
                   ("--staging-dir", f"{t}/st/vmi-chunks-*")]
